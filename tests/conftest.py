"""Shared test fixtures."""
import pytest
import torch


@pytest.fixture
def one_thread():
    """One torch thread for tiny models: on a busy 2-core machine OpenMP barriers cost more than they save."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


# the real-Moses tests say in the summary which Moses they used, or why they were skipped
from _real_moses import pytest_terminal_summary  # noqa: E402,F401

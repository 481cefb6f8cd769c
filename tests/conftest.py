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

"""Shared test fixtures."""
import threading

import pytest
import torch
from tqdm import tqdm

# tqdm's default lock holds a multiprocessing semaphore that forked children share with this process: a child
# the tests SIGKILL inside a bar would leave it taken, and every later bar here would wait for it forever.
# One thread lock per process instead, and no monitor thread that could hold it at a fork.
tqdm.set_lock(threading.RLock())
tqdm.monitor_interval = 0


@pytest.fixture
def one_thread():
    """One torch thread for tiny models: on a busy 2-core machine OpenMP barriers cost more than they save."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


# the real-Moses tests say in the summary which Moses they used, or why they were skipped; tiny_system is
# the small system they share, built once per session
from _real_moses import pytest_terminal_summary, tiny_system  # noqa: E402,F401


@pytest.fixture
def many_cores(monkeypatch):
    """A machine of 64 cores, for the tests of how a count of threads reaches a program: a count above the
    cores is capped at them (``core.config.cap_to_cores``), which on a small machine would hide what is passed."""
    from phrase_rescore.core import config

    monkeypatch.setattr(config, "machine_cores", lambda: 64)

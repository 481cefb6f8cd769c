"""The cores this process may use: the default of every ``threads`` setting (``[common] threads``).

A ``threads`` setting left unset (None) means every core the process may run on: the CPU affinity mask
(``os.sched_getaffinity``, which a container's or Slurm's CPU set narrows), else ``os.cpu_count()``.
The value stays None in a workflow's manifests, so a workdir moved to another machine is not rerun for it.
"""
from __future__ import annotations

import os

#: how the documentation and ``--help`` name the default of a ``threads`` setting
DEFAULT_WORDS = "the cores this process may use"


def available_cores() -> int:
    """The cores this process may run on, at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


def threads_or_cores(threads: int | None) -> int:
    """``threads`` when it is set, else :func:`available_cores`."""
    return int(threads) if threads else available_cores()

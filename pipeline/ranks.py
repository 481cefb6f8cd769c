"""Which process of a ``torchrun`` job this is, read from the environment torchrun sets, without torch.

The command line and the API ask it before a job-wide side effect (claiming an output folder, holding its
lock, reporting, drawing): rank 0 does it for all ranks. :mod:`phrase_rescore.pipeline.distributed` joins the
ranks themselves.
"""
from __future__ import annotations

import os


def is_rank_zero() -> bool:
    """This process is rank 0 of a torchrun job (``RANK`` is ``0``), or runs alone (no ``RANK``)."""
    return os.environ.get("RANK", "0") == "0"

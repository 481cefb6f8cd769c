"""Stamps: the one home of "is this output current". A stamp is a small JSON file beside an output that
records what the output was made from (the hashes of its inputs, the settings that shape it); a rerun
reuses the output when the stamp it would write equals the one on disk and the outputs are all there.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable

from .atomic_write import atomic_open


def is_current(stamp_path: str | os.PathLike, stamp: dict, outputs: Iterable[str | os.PathLike]) -> bool:
    """True when every one of ``outputs`` is a file and ``stamp_path`` holds ``stamp``; an unreadable or
    damaged stamp counts as a different one."""
    if not all(Path(o).is_file() for o in outputs):
        return False
    try:
        return json.loads(Path(stamp_path).read_text(encoding="utf-8")) == stamp
    except (OSError, ValueError):
        return False


def write_stamp(stamp_path: str | os.PathLike, stamp: dict) -> None:
    """Write ``stamp`` to ``stamp_path`` atomically, after the outputs it vouches for are complete."""
    with atomic_open(stamp_path, "wb") as f:
        f.write(json.dumps(stamp, indent=1).encode())

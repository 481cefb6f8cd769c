"""Progress bars for long stages (tqdm, with a rate), silenced by ``--quiet``."""
from __future__ import annotations

import os
import sys

from tqdm.auto import tqdm

_QUIET = bool(os.environ.get("PHRASE_RESCORE_QUIET"))


class _Bar(tqdm):
    """tqdm without its monitor thread. A signal sent to the command (SIGINT, SIGTERM) goes to any one of
    its threads; when it lands on tqdm's monitor, the main thread, blocked reading a helper program's
    output, is not woken to run Python's handler, and the command hangs instead of stopping."""

    monitor_interval = 0


def set_quiet(quiet: bool) -> None:
    global _QUIET
    _QUIET = quiet or bool(os.environ.get("PHRASE_RESCORE_QUIET"))


def bar(total=None, desc: str = "", unit: str = "it", **kw) -> tqdm:
    """A tqdm bar on stderr that shows ``unit``/s; disabled by ``--quiet`` or PHRASE_RESCORE_QUIET=1.

    ``total`` is a number, or an iterable to wrap (its length becomes the total when it has one).
    """
    iterable = None
    if total is not None and not isinstance(total, (int, float)):
        iterable, total = total, kw.pop("total", None)
    return _Bar(iterable, total=total, desc=desc, unit=unit, unit_scale=True, dynamic_ncols=True,
                disable=_QUIET, file=sys.stderr, mininterval=0.5, **kw)

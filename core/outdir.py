"""Output folders the tool may write into: a folder is ours when it was new, empty, or carries our marker.

Commands that write fixed file names into a folder they are given (``prepare --out``, ``train --out``,
``build-smt --out``, ``tune --workdir``, ...) first :func:`claim_output_dir` it. A folder that does not
exist, or exists and is empty, gets the marker file :data:`MARKER` and is ours from then on: later runs
may replace the files they write there. A folder that already holds anything without the marker is the
user's, and the command stops before writing a byte, naming the folder and what is in it; so a file of
the user's that happens to have the name of one of our outputs is never overwritten.

A command that fails before writing anything removes the folders it created (:func:`release_unused`).
The marker's content is constant, so a folder's hash (a workflow output) does not depend on when it was
claimed.
"""
from __future__ import annotations

import os
from pathlib import Path

from .errors import PhraseRescoreError

MARKER = ".phrase-rescore-output"
_created: list[Path] = []  # folders this process created by claiming, outermost first

MARKER_TEXT = ("This folder was created by phrase-rescore, which may replace the files it wrote here.\n"
               "Files it did not write are never deleted or overwritten.\n")


def is_claimed(path: str | os.PathLike) -> bool:
    """True when ``path`` is a folder carrying the marker."""
    return (Path(path) / MARKER).is_file()


def check_claimable(path: str | os.PathLike, option: str = "--out") -> None:
    """Refuse ``path`` as an output folder unless it is absent, empty or marked; writes nothing.

    :param option: the command-line option that named the folder, for the message.
    :raises PhraseRescoreError: ``path`` is a file, or a folder with contents and no marker.
    """
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise PhraseRescoreError(f"{option}: expected a folder to write into, found a file", p)
    if p.is_dir() and not is_claimed(p):
        entries = sorted(e.name for e in p.iterdir())
        if entries:
            shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
            raise PhraseRescoreError(
                f"{option}: this folder already holds files phrase-rescore did not write ({shown}); "
                f"give a new or empty folder (an output folder of phrase-rescore carries {MARKER})", p)


def claim_output_dir(path: str | os.PathLike, option: str = "--out") -> Path:
    """Make ``path`` an output folder of ours (created and marked), or refuse it as :func:`check_claimable` does.

    :returns: ``path`` as a Path; the folder exists and carries the marker.
    """
    check_claimable(path, option)
    p = Path(path)
    missing = [q for q in (p, *p.parents) if not q.exists()]
    p.mkdir(parents=True, exist_ok=True)
    _created.extend(reversed(missing))
    marker = p / MARKER
    if not marker.is_file():
        tmp = p / f".{MARKER}.{os.getpid()}.tmp"
        tmp.write_text(MARKER_TEXT, encoding="utf-8")
        os.replace(tmp, marker)
    return p


def release_unused() -> None:
    """Remove the folders this process created by claiming that still hold nothing but the marker.

    Called when a command fails before writing anything, so a refused input leaves no trace.
    """
    while _created:
        q = _created.pop()
        try:
            if [e.name for e in q.iterdir()] == [MARKER]:
                (q / MARKER).unlink()
            q.rmdir()
        except OSError:  # not empty (it holds outputs, or a folder we keep), or already gone
            pass

"""Output folders the tool may write into: a folder is ours when it was new, empty, or carries our marker.

Commands that write fixed file names into a folder they are given (``prepare --out``, ``train --out``,
``build-smt --out``, ``tune --workdir``, ...) first :func:`claim_output_dir` it. A folder that does not
exist, or exists and is empty, gets the marker file :data:`MARKER`, naming the command, and is that
command's from then on: its later runs may replace the files they write there, and another command may
not write there (``build-smt --out`` into a ``tune --workdir`` would replace the tuned moses.ini). A folder that already holds anything without the marker is the
user's, and the command stops before writing a byte, naming the folder and what is in it; so a file of
the user's that happens to have the name of one of our outputs is never overwritten.

A command that fails removes the folders it created that hold nothing of its outputs (:func:`release_unused`):
the marker, and the lock files of :mod:`.locks` it holds there, go with them.
The marker's content depends on the command only, so a folder's hash (a workflow output) does not depend on when it was
claimed.
"""
from __future__ import annotations

import os
from pathlib import Path

from . import locks
from .errors import PhraseRescoreError

MARKER = ".phrase-rescore-output"
_created: list[Path] = []  # folders this process created by claiming, outermost first

MARKER_TEXT = ("phrase-rescore {command}\n"
               "This folder is an output of `phrase-rescore {command}`, which may replace the files it wrote here.\n"
               "Files it did not write are never deleted or overwritten.\n")


def _owner(path: Path) -> str | None:
    """The command named in ``path``'s marker ("" when it names none), or None without a marker."""
    try:
        first = (path / MARKER).read_text(encoding="utf-8").split("\n", 1)[0]
    except (OSError, UnicodeDecodeError):
        return None
    return first.removeprefix("phrase-rescore").strip()


def is_claimed(path: str | os.PathLike, command: str | None = None) -> bool:
    """True when ``path`` is a folder carrying the marker (of ``command``, when given)."""
    owner = _owner(Path(path))
    return owner is not None and (command is None or owner == command)


def check_claimable(path: str | os.PathLike, option: str = "--out", command: str = "") -> None:
    """Refuse ``path`` as an output folder of ``command`` unless it is absent, empty or marked as
    ``command``'s; writes nothing.

    :param option: the command-line option that named the folder, for the message.
    :raises PhraseRescoreError: ``path`` is a file, a folder with contents and no marker, or the
        output folder of another command (whose files this one could replace).
    """
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise PhraseRescoreError(f"{option}: expected a folder to write into, found a file", p)
    if not p.is_dir():
        return
    owner = _owner(p)
    if owner is None:
        entries = sorted(e.name for e in p.iterdir())
        if entries:
            shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
            raise PhraseRescoreError(
                f"{option}: this folder already holds files phrase-rescore did not write ({shown}); "
                f"give a new or empty folder (an output folder of phrase-rescore carries {MARKER})", p)
    elif owner and owner != command:
        raise PhraseRescoreError(f"{option}: this folder holds the output of `phrase-rescore {owner}`, which "
                                 f"`{command}` could overwrite; give a new or empty folder", p)


def claim_output_dir(path: str | os.PathLike, option: str = "--out", command: str = "") -> Path:
    """Make ``path`` an output folder of ours (created and marked), or refuse it as :func:`check_claimable` does.

    :returns: ``path`` as a Path; the folder exists and carries the marker.
    """
    check_claimable(path, option, command)
    p = Path(path)
    missing = [q for q in (p, *p.parents) if not q.exists()]
    p.mkdir(parents=True, exist_ok=True)
    _created.extend(reversed(missing))
    marker = p / MARKER
    if not marker.is_file():
        tmp = p / f".{MARKER}.{os.getpid()}.tmp"
        tmp.write_text(MARKER_TEXT.format(command=command), encoding="utf-8")
        os.replace(tmp, marker)
    return p


def note_created(folders: list[Path]) -> None:
    """Remember folders this process created for an output (outermost first), for :func:`release_unused`."""
    _created.extend(folders)


def forget_created() -> None:
    """A command succeeded: the folders it created are its outputs' and stay."""
    _created.clear()


def lock_output(path: str | os.PathLike, option: str = "--out", command: str = "") -> None:
    """Hold the lock of the output ``path`` until the command ends (:func:`.locks.acquire`); the folders
    made for its lock file are removed by :func:`release_unused` if the command fails."""
    note_created(locks.acquire(path, option, command))


def release_unused() -> None:
    """Remove the folders this process created, by claiming or locking, that still hold nothing but the
    marker and lock files this process holds (released here).

    Called when a command fails, so a refused input, or a run that failed before it wrote an output,
    leaves no trace.
    """
    while _created:
        q = _created.pop()
        try:
            mine = {lock.name: out for out, lock in locks.held_in(q)}
            names = {e.name for e in q.iterdir()}
            if names and names <= {MARKER, *mine}:
                for name in names & set(mine):
                    locks.release(mine[name], all_holds=True)
                if MARKER in names:
                    (q / MARKER).unlink()
            q.rmdir()
        except OSError:  # not empty (it holds outputs, or a folder we keep), or already gone
            pass

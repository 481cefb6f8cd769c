"""Temporary files and folders beside an output, marked with their writer: the one home of that ownership
mark and of removing what killed writers left.

A temporary is named ``.{name}.{host}-{pid}.{random}.tmp`` (:func:`temp_prefix`): ``host`` is a short hash
of the machine's name (:data:`HOST_TAG`) and ``pid`` the writing process. The next write of the same target
removes the temporaries of processes of this machine that are gone (a killed run's,
:func:`remove_stale_temps`); those of live processes, or of other machines sharing the folder, are left
alone (a file whose process id was reused by a live process stays until a later write finds that process
gone); :func:`writer_gone` is that test, for every temporary the tool names after its process.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Iterator

#: A short hash of this machine's name: temporary names carry it with the writing process's id, so that
#: a later run can tell its own machine's leftovers (see :func:`writer_gone`).
HOST_TAG = hashlib.sha256(os.uname().nodename.encode("utf-8", "replace")).hexdigest()[:8]
_TEMP_DIR_MARKER = ".phrase-rescore-temporary"


def temp_prefix(path: Path) -> str:
    """The start of the name of a temporary of this process for ``path`` (a random part and ``.tmp`` follow)."""
    return f".{path.name}.{HOST_TAG}-{os.getpid()}."


def _temp_pattern(name: str) -> re.Pattern:
    """Temporary names of atomic writes to ``name``: groups host hash and pid."""
    return re.compile(rf"\.{re.escape(name)}\.([0-9a-f]{{8}})-([0-9]+)\.[A-Za-z0-9_]+\.tmp")


def writer_gone(host: str, pid: int) -> bool:
    """True when the process ``pid`` of machine ``host`` (a :data:`HOST_TAG`), which named a temporary
    file or folder, no longer runs, so that what it left may be removed.

    False for another machine (its processes cannot be seen from here), for this process, for a pid
    that is no process id (<= 0) and for a live process, someone else's too (EPERM).
    """
    if host != HOST_TAG or pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # EPERM: it exists, run by someone else
        return False
    return False


def _remove_temp(p: Path) -> bool:
    """Remove ``p``, a regular file or a folder carrying the marker of :func:`temp_dir_beside`; False
    for anything else, or when it cannot be removed."""
    with contextlib.suppress(OSError):
        mode = os.lstat(p).st_mode
        if stat.S_ISREG(mode):
            os.unlink(p)
            return True
        if stat.S_ISDIR(mode) and (p / _TEMP_DIR_MARKER).is_file():
            shutil.rmtree(p)
            return True
    return False


def remove_stale_temps(path: str | os.PathLike) -> list[Path]:
    """Remove the temporary files that killed processes of this machine left beside ``path``.

    Only regular files named as :func:`~.atomic_write.atomic_path` names its temporaries for ``path`` are
    touched (and folders named as :func:`temp_dir_beside` names them, with what is in them), and only when
    their process is gone. :returns: the files and folders removed.
    """
    path = Path(path)
    pattern = _temp_pattern(path.name)
    removed = []
    try:
        names = os.listdir(path.parent)
    except OSError:
        return removed
    for name in names:
        m = pattern.fullmatch(name)
        if m is None or not writer_gone(m.group(1), int(m.group(2))):
            continue
        p = path.parent / name
        if _remove_temp(p):
            removed.append(p)
    return removed


@contextlib.contextmanager
def temp_dir_beside(path: str | os.PathLike) -> Iterator[Path]:
    """A new folder beside ``path``, named as :func:`~.atomic_write.atomic_path` names its temporary files of
    ``path`` (and carrying a marker file), for a program that writes ``path`` under a name of its own
    choosing: what it wrote is renamed into place only when complete. The folder is removed, with what is
    in it, when the ``with`` block ends; those of killed runs are removed by the next write of ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path)
    tmp = Path(tempfile.mkdtemp(prefix=temp_prefix(path), suffix=".tmp", dir=path.parent))
    try:
        (tmp / _TEMP_DIR_MARKER).write_bytes(b"")
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

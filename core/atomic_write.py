"""Atomic, durable writes: the one home of writing an output so that it appears under its name only whole.

Every stage writes through :func:`atomic_path` / :func:`atomic_open` so a crash never leaves a
half-written output under the final name: the data is written to a temporary file beside the
target (named as :mod:`.temp_names` names it), fsync'ed, renamed over the target, and the folder is
fsync'ed so the rename survives a power loss too. The temporary gets the mode a plain ``open()`` would
give the output, from the process's umask, read without being set (:func:`process_umask`). gzip outputs
are deterministic (:mod:`.gzip_writing`).
"""
from __future__ import annotations

import contextlib
import errno
import io
import os
import tempfile
from pathlib import Path
from typing import IO, Iterator

from .file_errors import name_os_error
from .gzip_writing import gzip_writer, wants_gzip
from .temp_names import remove_stale_temps, temp_prefix


def process_umask() -> int:
    """The process's umask, read without changing it (Linux's ``/proc/self/status``): setting and restoring it
    with ``os.umask`` would race with any other thread creating files. Elsewhere, set and restored."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0)
    os.umask(mask)
    return mask


def fsync_dir(folder: str | os.PathLike) -> None:
    """fsync a folder so a rename in it is durable; some file systems refuse, which is tolerated."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def fsync_file(path: str | os.PathLike) -> None:
    """fsync a file's data to disk; a file system without fsync (EINVAL, ENOTSUP) is tolerated."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.ENOTSUP):  # a file system without fsync
            raise
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success fsync it, rename it over ``path`` and
    fsync the folder.

    On an exception the temporary file is removed and ``path`` is left as it was; an ``OSError`` that names
    no file (a full disk: ENOSPC, EDQUOT, EFBIG; any failed write) is reported against ``path``
    (:func:`~.file_errors.name_os_error`). Temporary files that killed runs left for ``path`` are removed
    first (:func:`~.temp_names.remove_stale_temps`).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path)
    fd, tmp = tempfile.mkstemp(prefix=temp_prefix(path), suffix=".tmp", dir=path.parent)
    os.fchmod(fd, 0o666 & ~process_umask())  # mkstemp makes 0600; give outputs the mode a plain open() would
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        fsync_file(tmp_path)
        os.replace(tmp_path, path)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        name_os_error(e, path)
        raise
    fsync_dir(path.parent)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "wb", compresslevel: int = 6) -> Iterator[IO]:
    """Open ``path`` for writing through a temporary file renamed into place on success.

    gzip-compresses (deterministically, see :func:`~.gzip_writing.gzip_writer`) when ``path`` ends in .gz.
    ``mode`` is "wb" or "w" (UTF-8 text, "\\n" newlines).
    """
    assert mode in ("wb", "w"), mode
    with atomic_path(path) as tmp, open(tmp, "wb", buffering=1 << 20) as f, \
            (gzip_writer(f, compresslevel) if wants_gzip(path) else contextlib.nullcontext(f)) as raw:
        if mode == "w":
            text = io.TextIOWrapper(raw, encoding="utf-8", newline="\n")
            yield text
            text.flush()
            text.detach()  # ``raw`` is closed by its own ``with``
        else:
            yield raw

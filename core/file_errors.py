"""What an error reading or writing a user's file says: the one home of naming the file (and line) in
such a message, of a full disk in the system's words, and of what broken gzip data says.

A decoding error (invalid UTF-8, a truncated or corrupt gzip stream) raised while a reader of
:mod:`.reading` is open carries that file's path (:func:`note_read_path`); an ``OSError`` of a write to an
open file (a full disk: ENOSPC, EDQUOT, EFBIG; an I/O error) is given the output's path
(:func:`name_os_error`, :func:`naming`); :func:`describe_file_error` turns either into one line.
"""
from __future__ import annotations

import contextlib
import errno
import gzip
import os
import zlib
from typing import Iterator

from .errors import PhraseRescoreError

# the attribute naming the file an exception was raised while reading (see :func:`describe_file_error`)
READ_PATH_ATTR = "phrase_rescore_path"
#: what decoding a broken gzip stream raises
GZIP_READ_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile)
_READ_ERRORS = (UnicodeDecodeError,) + GZIP_READ_ERRORS
#: the errors of a write to a full disk (or past a quota, or past the size a process may write)
FULL_DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def note_read_path(exc: BaseException | None, path) -> None:
    """Remember on a decoding error which file was being read, unless an inner reader already did."""
    if isinstance(exc, _READ_ERRORS) and getattr(exc, READ_PATH_ATTR, None) is None:
        setattr(exc, READ_PATH_ATTR, os.fspath(path))


def _gzip_problem(exc: BaseException) -> str:
    """What a gzip decoding error says about the file."""
    if isinstance(exc, gzip.BadGzipFile):
        return "not a valid gzip file"
    if isinstance(exc, EOFError):
        return "the file ends too early, truncated?"
    return "corrupt compressed data"


def gzip_read_error(exc: BaseException, path: str | os.PathLike, lines_read: int) -> PhraseRescoreError:
    """The error for gzip data of ``path`` that breaks after ``lines_read`` good lines (one of
    :data:`GZIP_READ_ERRORS`), naming the line it breaks in."""
    after = f"after line {lines_read}: " if lines_read else ""
    return PhraseRescoreError(f"{_gzip_problem(exc)} ({after}{exc})", path, lines_read + 1)


def _describe_os_error(exc: OSError) -> str:
    """An ``OSError`` in one line: its file (or both, for a rename) and the system's words."""
    what = exc.strerror or str(exc) or type(exc).__name__
    if exc.errno in FULL_DISK_ERRNOS:     # the system's words, not a library's ("Error writing bytes...")
        what = os.strerror(exc.errno)
    if exc.filename is not None and exc.filename2 is not None:
        return f"{exc.filename} -> {exc.filename2}: {what}"
    return f"{exc.filename}: {what}" if exc.filename is not None else what


def describe_file_error(exc: BaseException) -> str:
    """A one-line account of an error reading or writing a user's file, naming the file when known."""
    path = getattr(exc, READ_PATH_ATTR, None)
    where = f"{path}: " if path else ""
    if isinstance(exc, GZIP_READ_ERRORS):
        return f"{where}{_gzip_problem(exc)} ({exc})"
    if isinstance(exc, UnicodeDecodeError):
        return f"{where}not valid UTF-8 text (byte {exc.object[exc.start:exc.start + 1]!r}: {exc.reason})"
    if isinstance(exc, OSError):
        return _describe_os_error(exc)
    return f"{where}{exc}"


def name_os_error(exc: BaseException, path: str | os.PathLike) -> None:
    """Give ``path`` to an ``OSError`` that names no file (a write to an open file: a full disk, an I/O
    error), so that its message says which file failed; a gzip stream's own errors carry no errno and
    are left as they are."""
    if isinstance(exc, OSError) and exc.filename is None and exc.errno is not None:
        exc.filename = os.fspath(path)


@contextlib.contextmanager
def naming(path: str | os.PathLike) -> Iterator[None]:
    """An ``OSError`` raised in the ``with`` block without a file name names ``path``
    (:func:`name_os_error`)."""
    try:
        yield
    except OSError as e:
        name_os_error(e, path)
        raise

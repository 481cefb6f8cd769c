"""Opening plain or gzip files by content, atomic writes and file hashes.

Every stage writes through :func:`atomic_path` / :func:`atomic_open` so a crash never leaves a
half-written output under the final name.
"""
from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import os
import tempfile
from pathlib import Path
from typing import IO, Iterator

from .errors import PhraseRescoreError

GZIP_MAGIC = b"\x1f\x8b"

_UMASK = os.umask(0)
os.umask(_UMASK)


def is_gzip(path: str | os.PathLike) -> bool:
    """True when the file starts with the gzip magic bytes (the suffix is not trusted)."""
    try:
        with open(path, "rb") as f:
            return f.read(2) == GZIP_MAGIC
    except FileNotFoundError:
        raise PhraseRescoreError("file not found", path) from None
    except IsADirectoryError:
        raise PhraseRescoreError("expected a file, found a directory", path) from None


def open_binary_read(path: str | os.PathLike) -> IO[bytes]:
    """Open for reading bytes, decompressing gzip when the content is gzip."""
    if is_gzip(path):
        return gzip.open(path, "rb")
    return open(path, "rb", buffering=1 << 20)


def open_text_read(path: str | os.PathLike) -> IO[str]:
    """Open for reading UTF-8 text (gzip by content), newline handling left to the caller."""
    return io.TextIOWrapper(open_binary_read(path), encoding="utf-8", newline="")


def wants_gzip(path: str | os.PathLike) -> bool:
    """An output is gzip-compressed when its name ends in .gz."""
    return os.fspath(path).endswith(".gz")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success rename it over ``path``.

    On an exception the temporary file is removed and ``path`` is left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; give outputs the mode a plain open() would
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        raise


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "wb", compresslevel: int = 6) -> Iterator[IO]:
    """Open ``path`` for writing through a temporary file renamed into place on success.

    gzip-compresses when ``path`` ends in .gz. ``mode`` is "wb" or "w" (UTF-8 text, "\\n" newlines).
    """
    assert mode in ("wb", "w"), mode
    with atomic_path(path) as tmp:
        if wants_gzip(path):
            raw: IO[bytes] = gzip.open(tmp, "wb", compresslevel=compresslevel)
        else:
            raw = open(tmp, "wb", buffering=1 << 20)
        with raw:
            if mode == "w":
                text = io.TextIOWrapper(raw, encoding="utf-8", newline="\n")
                yield text
                text.flush()
                text.detach()  # ``raw`` is closed by its own ``with``
            else:
                yield raw


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file's bytes (as stored, compressed or not)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            h.update(block)
    return h.hexdigest()

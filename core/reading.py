"""Reading a user's files: the one home of opening plain or gzip files by content and of splitting lines.

Every text a user gives is read through :func:`read_lines` (or :func:`read_text_lines`,
:func:`read_sentences`): lines end at ``\n`` only, so every command counts a file's lines alike, and
invalid UTF-8 or broken gzip data is an error naming the file and the line (:mod:`.file_errors`). A
byte-order mark starting a file is dropped or refused as :mod:`.bom` rules for the kind of file.
"""
from __future__ import annotations

import gzip
import io
import os
from typing import IO, Iterator

from .bom import BOM_CHOICES, bom_error, drop_bom, starts_with_bom
from .errors import PhraseRescoreError
from .file_errors import GZIP_READ_ERRORS, gzip_read_error, note_read_path
from .words import words

GZIP_MAGIC = b"\x1f\x8b"


class _GzipReader(gzip.GzipFile):
    """A gzip reader whose ``with`` block names the file in a decoding error raised inside it."""

    def __exit__(self, exc_type, exc, tb):
        note_read_path(exc, self.name)
        return super().__exit__(exc_type, exc, tb)


class _PlainReader(io.BufferedReader):
    """A buffered reader whose ``with`` block names the file in a decoding error raised inside it."""

    def __exit__(self, exc_type, exc, tb):
        note_read_path(exc, self.raw.name)
        return super().__exit__(exc_type, exc, tb)


class _TextReader(io.TextIOWrapper):
    """UTF-8 text whose ``with`` block names the file in a decoding error raised inside it."""

    def __exit__(self, exc_type, exc, tb):
        note_read_path(exc, self._path)
        return super().__exit__(exc_type, exc, tb)


def is_gzip(path: str | os.PathLike) -> bool:
    """True when the file starts with the gzip magic bytes (the suffix is not trusted)."""
    try:
        with open(path, "rb") as f:
            return f.read(2) == GZIP_MAGIC
    except FileNotFoundError:
        raise PhraseRescoreError("file not found", path) from None
    except IsADirectoryError:
        raise PhraseRescoreError("expected a file, found a directory", path) from None


def _open_binary(path: str | os.PathLike) -> IO[bytes]:
    """The file's bytes, decompressed when its content is gzip."""
    if is_gzip(path):
        return _GzipReader(os.fspath(path), "rb")
    return _PlainReader(io.FileIO(os.fspath(path), "rb"), buffer_size=1 << 20)


def open_binary_read(path: str | os.PathLike, bom: str = "refuse") -> IO[bytes]:
    """Open for reading bytes, decompressing gzip when the content is gzip.

    A truncated or corrupt gzip stream, or (through :func:`open_text_read`) invalid UTF-8, raised
    inside the file's ``with`` block carries the path for :func:`~.file_errors.describe_file_error`.

    :param bom: ``"refuse"``: a file starting with :data:`~.bom.BOM` is an error (:func:`~.bom.bom_error`),
        for the files whose lines are copied through (see :mod:`.bom`); ``"keep"``: the bytes as
        stored, for a caller that deals with the mark itself.
    :raises PhraseRescoreError: the file is missing, a directory, or (``"refuse"``) starts with the mark.
    """
    assert bom in ("refuse", "keep"), bom
    f = _open_binary(path)
    if bom == "refuse":
        starts = starts_with_bom(f, lambda: _open_binary(path))
        if starts is None:       # broken gzip: a fresh reader meets it where the caller's reads expect it
            f.close()
            return _open_binary(path)
        if starts:
            f.close()
            raise bom_error(path)
    return f


def open_text_read(path: str | os.PathLike, bom: str = "refuse") -> IO[str]:
    """Open for reading UTF-8 text (gzip by content), newline handling left to the caller; ``bom`` as
    for :func:`open_binary_read`."""
    f = _TextReader(open_binary_read(path, bom), encoding="utf-8", newline="")
    f._path = os.fspath(path)
    return f


def read_lines(path: str | os.PathLike, bom: str = "strip") -> Iterator[tuple[int, str, str]]:
    """``(line number, text, line ending)`` of every line of ``path`` (plain or gzip by content).

    Lines end at ``\n`` only (a ``\r`` elsewhere is part of the line); the ending is ``"\n"``, ``"\r\n"``
    or ``""`` (a last line without one), so that ``text + ending`` is the line's exact bytes (less a
    dropped byte-order mark). Invalid UTF-8 and truncated gzip data are errors naming the file and the
    line they are in.

    :param bom: what a :data:`~.bom.BOM` starting the file does (:func:`~.bom.drop_bom`): ``"strip"`` drops
        it (text read for its words: the lines are those of the file without the mark), ``"refuse"`` raises
        :func:`~.bom.bom_error` (a file whose lines are copied through), ``"keep"`` leaves it in line 1.
    """
    assert bom in BOM_CHOICES, bom
    line_no = 0
    with open_binary_read(path, "keep") as f:
        try:
            for raw in f:
                line_no += 1
                if line_no == 1:
                    raw = drop_bom(raw, bom, path)
                ending = b"\r\n" if raw.endswith(b"\r\n") else b"\n" if raw.endswith(b"\n") else b""
                body = raw[:len(raw) - len(ending)]
                try:
                    text = body.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise PhraseRescoreError(f"invalid UTF-8 at byte {e.start} ({e.reason}): expected UTF-8 text",
                                             path, line_no) from None
                yield line_no, text, ending.decode("ascii")
        except GZIP_READ_ERRORS as e:
            raise gzip_read_error(e, path, line_no) from None


def read_text_lines(path: str | os.PathLike) -> list[str]:
    """Every line of ``path`` without its ending, split as :func:`read_lines` splits (``\\n`` only)."""
    return [text for _, text, _ in read_lines(path)]


def read_sentences(path: str | os.PathLike) -> list[list[str]]:
    """The words of every line of ``path`` (plain or gzip), split as Moses splits them
    (:func:`~phrase_rescore.core.words.words`); empty lines stay."""
    return [words(text) for _, text, _ in read_lines(path)]

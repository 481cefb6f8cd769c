"""Sentence-level corpora: tokenized text, one sentence per line, parallel files line by line.

Used by the sentence-level model (Seq2Seq): its training pairs, the sources to translate and the
sources of an n-best list. Like Sockeye's ``parallel_iterate``, reading two files that differ in
length fails loudly, naming both.
"""
from __future__ import annotations

import gzip
import os
import zlib
from typing import Iterator

import numpy as np

from .errors import PhraseRescoreError
from .fileio import open_binary_read
from .vocab import EOS_ID, Vocab


def read_lines(path: str | os.PathLike) -> Iterator[tuple[int, str, str]]:
    """``(line number, text, line ending)`` of every line of ``path`` (plain or gzip by content).

    Lines end at ``\n`` only (a ``\r`` elsewhere is part of the line); the ending is ``"\n"``, ``"\r\n"``
    or ``""`` (a last line without one), so that ``text + ending`` is the line's exact bytes. Invalid
    UTF-8 and truncated gzip data are errors naming the file and the line they are in.
    """
    line_no = 0
    with open_binary_read(path) as f:
        try:
            for raw in f:
                line_no += 1
                ending = b"\r\n" if raw.endswith(b"\r\n") else b"\n" if raw.endswith(b"\n") else b""
                body = raw[:len(raw) - len(ending)]
                try:
                    text = body.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise PhraseRescoreError(f"invalid UTF-8 at byte {e.start} ({e.reason}): expected UTF-8 text",
                                             path, line_no) from None
                yield line_no, text, ending.decode("ascii")
        except (EOFError, zlib.error, gzip.BadGzipFile) as e:
            raise PhraseRescoreError(f"corrupt or truncated gzip data after line {line_no} ({e}); the file is "
                                     "incomplete", path, line_no + 1) from None


def read_sentences(path: str | os.PathLike) -> list[list[str]]:
    """The whitespace-separated tokens of every line of ``path`` (plain or gzip); empty lines stay."""
    return [text.split() for _, text, _ in read_lines(path)]


def read_parallel(src_path: str | os.PathLike, tgt_path: str | os.PathLike) -> tuple[list[list[str]], list[list[str]]]:
    """Both sides of a parallel corpus; raises when they differ in their number of lines."""
    src, tgt = read_sentences(src_path), read_sentences(tgt_path)
    if len(src) != len(tgt):
        raise PhraseRescoreError(f"parallel files differ in length: {os.fspath(src_path)} has {len(src)} lines, "
                                 f"{os.fspath(tgt_path)} has {len(tgt)}; expected one target line per source line",
                                 tgt_path, min(len(src), len(tgt)) + 1)
    return src, tgt


def encode_eos(vocab: Vocab, tokens: list[str]) -> np.ndarray:
    """Ids of ``tokens`` followed by ``<eos>`` (int64), the form every model input takes."""
    return np.asarray(vocab.encode(tokens) + [EOS_ID], dtype=np.int64)

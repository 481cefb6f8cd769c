"""Sentence-level corpora: tokenized text, one sentence per line, parallel files line by line.

Used by the sentence-level model (Seq2Seq): its training pairs, the sources to translate and the
sources of an n-best list. Like Sockeye's ``parallel_iterate``, reading two files that differ in
length fails loudly, naming both.
"""
from __future__ import annotations

import os
from typing import Iterator

import numpy as np

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.reading import read_lines, read_sentences
from phrase_rescore.core.words import words

from .vocab import EOS_ID, Vocab


def read_parallel(src_path: str | os.PathLike, tgt_path: str | os.PathLike) -> tuple[list[list[str]], list[list[str]]]:
    """Both sides of a parallel corpus; raises when they differ in their number of lines."""
    src, tgt = read_sentences(src_path), read_sentences(tgt_path)
    if len(src) != len(tgt):
        raise _differ_in_length(src_path, len(src), tgt_path, len(tgt))
    return src, tgt


def _differ_in_length(src_path, n_src: int, tgt_path, n_tgt: int) -> PhraseRescoreError:
    return PhraseRescoreError(f"parallel files differ in length: {os.fspath(src_path)} has {n_src} lines, "
                              f"{os.fspath(tgt_path)} has {n_tgt}; expected one target line per source line",
                              tgt_path, min(n_src, n_tgt) + 1)


def encode_eos(vocab: Vocab, tokens: list[str]) -> np.ndarray:
    """Ids of ``tokens`` followed by ``<eos>`` (int64), the form every model input takes."""
    return np.asarray(vocab.encode(tokens) + [EOS_ID], dtype=np.int64)


def iter_sentences(path: str | os.PathLike) -> Iterator[list[str]]:
    """The words of every line of ``path``, one line at a time (what :func:`read_sentences` returns, without
    holding the file)."""
    for _, text, _ in read_lines(path):
        yield words(text)


def count_lines(path: str | os.PathLike) -> int:
    """The number of lines :func:`iter_sentences` yields."""
    return sum(1 for _ in read_lines(path))


def held_out_lines(n_lines: int, valid_size: int, seed: int) -> set[int]:
    """The line numbers (from 0) held out for validation when no validation text is given: the first
    ``min(valid_size, n_lines // 10)`` of ``Generator.permutation(n_lines)`` drawn from ``(seed, 10**6)``,
    shuffled in 4-byte items while ``n_lines`` allows (the same permutation in half the memory)."""
    perm = np.arange(n_lines, dtype=np.int32 if n_lines < 2 ** 31 else np.int64)
    np.random.default_rng([seed, 10 ** 6]).shuffle(perm)
    return set(perm[:min(valid_size, n_lines // 10)].tolist())


def check_same_length(src_path: str | os.PathLike, tgt_path: str | os.PathLike) -> int:
    """The number of lines of a parallel corpus; raises when its two files differ in it."""
    n_src, n_tgt = count_lines(src_path), count_lines(tgt_path)
    if n_src != n_tgt:
        raise _differ_in_length(src_path, n_src, tgt_path, n_tgt)
    return n_src

"""Sentence-level corpora: tokenized text, one sentence per line, parallel files line by line.

Used by the sentence-level model (Seq2Seq): its training pairs, the sources to translate and the
sources of an n-best list. Like Sockeye's ``parallel_iterate``, reading two files that differ in
length fails loudly, naming both.
"""
from __future__ import annotations

import os

import numpy as np

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.fileio import read_sentences

from .vocab import EOS_ID, Vocab


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

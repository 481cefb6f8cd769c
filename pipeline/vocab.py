"""The networks' shortlists: the K most frequent words of each side, plus ``<eos>`` and ``<unk>``.

Id 0 is ``<eos>`` (it ends every source and target sequence, and pads batches under a mask), id 1 is
``<unk>`` (every word outside the shortlist, as in the paper's section 4.1), then the words by decreasing
count, ties broken by byte order so a vocabulary is reproducible.

Where the counts come from (see :func:`phrase_rescore.pipeline.prepare.prepare`): a tokenized corpus when the user gives
one, which ranks words by corpus frequency, as the paper does; otherwise the phrase table's unique pairs,
each side of each pair counted once. The second ranks words by how often the network sees them under
uniform sampling of unique pairs, which is what its training data is, but it is biased towards words that
sit in many different phrases (long phrases, words with many translations) relative to corpus frequency.

A vocabulary file is JSON with a format name and version so that it can travel with a model.
"""
from __future__ import annotations

import collections
import functools
import json
import os
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.words import SEPARATOR_PATTERN, SEPARATORS, words

EOS = "<eos>"
UNK = "<unk>"
EOS_ID = 0
UNK_ID = 1
SPECIALS = (EOS, UNK)

FORMAT = "phrase-rescore-vocab"
VERSION = 1


class Vocab:
    """One side's shortlist: word <-> id, unknown words mapping to :data:`UNK_ID`."""

    def __init__(self, words: Sequence[str]):
        words = list(words)
        if words[:2] != list(SPECIALS):
            raise PhraseRescoreError(f"a vocabulary must start with {EOS} and {UNK}, found {words[:2]}")
        self.words = words
        self.index = {w: i for i, w in enumerate(words)}
        if len(self.index) != len(words):
            dup = next(w for w, n in collections.Counter(words).items() if n > 1)
            raise PhraseRescoreError(f"duplicate word {dup!r} in vocabulary")

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self.index

    def __eq__(self, other) -> bool:
        return isinstance(other, Vocab) and self.words == other.words

    @functools.cached_property
    def arrow(self) -> pa.Array:
        """The words as a pyarrow string array (the value set of :func:`encode_phrases`)."""
        return pa.array(self.words, pa.string())

    def encode(self, tokens: Iterable[str]) -> list[int]:
        """Ids of ``tokens``; words outside the shortlist become :data:`UNK_ID`. No ``<eos>`` is added."""
        get = self.index.get
        return [get(t, UNK_ID) for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Words of ``ids``, stopping before the first ``<eos>``."""
        out = []
        for i in ids:
            i = int(i)
            if i == EOS_ID:
                break
            out.append(self.words[i])
        return out

    def unk_count(self, tokens: Iterable[str]) -> int:
        """How many of ``tokens`` are outside the shortlist (the paper's unknown-word penalty)."""
        index = self.index
        return sum(1 for t in tokens if t not in index)


def build_vocab(counter: collections.Counter, size: int) -> Vocab:
    """The ``size`` most frequent words of ``counter`` (ties in byte order) after the two specials."""
    if size < 1:
        raise PhraseRescoreError(f"vocabulary size must be at least 1, got {size}")
    items = [(w, n) for w, n in counter.items() if w not in SPECIALS]
    items.sort(key=lambda wn: (-wn[1], wn[0].encode("utf-8")))
    return Vocab(list(SPECIALS) + [w for w, _ in items[:size]])


#: a phrase that splitting at single spaces would not split as Moses does (see :mod:`~phrase_rescore.core.words`)
_NOT_PLAIN = "\t|  |^ | $|^$"


def split_words(phrases: pa.ChunkedArray | pa.Array) -> tuple[pa.Array, np.ndarray]:
    """The words of many phrases, split as Moses splits them (at runs of spaces and tabs, not at other
    Unicode spaces): one flat string array and the (n + 1,) int64 offsets of each phrase's words in it.

    Phrases whose words are one space apart (a Moses phrase table's) are split at single spaces; any
    other run of separators, or a phrase with none, takes the slower general split.
    """
    plain = not pc.any(pc.match_substring_regex(phrases, _NOT_PLAIN)).as_py()
    if plain:
        split = pc.split_pattern(phrases, " ")
    else:
        trimmed = pc.utf8_trim(phrases, characters=SEPARATORS)
        split = pc.split_pattern_regex(trimmed, SEPARATOR_PATTERN)
    if isinstance(split, pa.ChunkedArray):
        split = split.combine_chunks()
    offsets = split.offsets.to_numpy().astype(np.int64)
    flat = split.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    offsets = offsets - offsets[0]
    if not plain:   # a phrase of separators only splits into one empty string: it has no words
        lengths = np.diff(offsets)
        blank = np.flatnonzero(pc.equal(trimmed, "").to_numpy(zero_copy_only=False))
        if len(blank):
            keep = np.ones(len(flat), dtype=bool)
            keep[offsets[blank]] = False
            flat = flat.filter(pa.array(keep))
            lengths[blank] = 0
            offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return flat, offsets


def encode_phrases(phrases: pa.ChunkedArray | pa.Array, vocab: Vocab) -> tuple[pa.ListArray, np.ndarray]:
    """Word ids of many phrases at once, ``<eos>`` appended, and the number of ``<unk>`` ids per phrase.

    Vectorised with pyarrow (no Python per word), for ``prepare`` and ``score`` alike, so that both see
    the same ids: words are split as Moses splits them (:func:`split_words`), and a literal ``<eos>`` token in the data is
    an unknown word, not the end of the sequence.
    """
    flat, offsets = split_words(phrases)
    ids = pc.fill_null(pc.index_in(flat, value_set=vocab.arrow), UNK_ID).to_numpy(zero_copy_only=False)
    ids = ids.astype(np.int32)
    ids[ids == EOS_ID] = UNK_ID  # a literal "<eos>" token in the data is not the end of the sequence
    n = len(offsets) - 1
    lengths = np.diff(offsets)
    row = np.repeat(np.arange(n), lengths)
    new_offsets = np.concatenate([[0], np.cumsum(lengths + 1)]).astype(np.int32)
    values = np.full(int(new_offsets[-1]), EOS_ID, dtype=np.int32)
    values[np.arange(len(ids)) + row] = ids  # row i's tokens shift by the i <eos> ids before it
    n_unk = np.bincount(row[ids == UNK_ID], minlength=n) if n else np.zeros(0, np.int64)
    return pa.ListArray.from_arrays(pa.array(new_offsets), pa.array(values)), n_unk


@dataclass
class Vocabularies:
    """The source and target shortlists of one model."""

    source: Vocab
    target: Vocab

    def to_json(self) -> str:
        return json.dumps({"format": FORMAT, "version": VERSION,
                           "source": self.source.words, "target": self.target.words},
                          ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str, origin: str = "<vocabulary>") -> "Vocabularies":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise PhraseRescoreError(f"not a JSON vocabulary file ({e.msg})", origin, e.lineno) from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise PhraseRescoreError(f"not a {FORMAT} file: expected \"format\": \"{FORMAT}\"", origin)
        if data.get("version") != VERSION:
            raise PhraseRescoreError(f"vocabulary format version {data.get('version')} is not supported "
                                     f"(expected {VERSION})", origin)
        return cls(Vocab(data["source"]), Vocab(data["target"]))

    def save(self, path: str | os.PathLike) -> None:
        """Write as JSON, atomically."""
        from phrase_rescore.core.atomic_write import atomic_open

        with atomic_open(path, "w") as f:
            f.write(self.to_json() + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Vocabularies":
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            raise PhraseRescoreError("vocabulary file not found", path) from None
        except UnicodeDecodeError as e:
            raise PhraseRescoreError(f"invalid UTF-8 ({e.reason}): expected UTF-8 JSON", path) from None
        return cls.from_json(text, os.fspath(path))


def count_corpus(path: str | os.PathLike, counter: collections.Counter | None = None) -> collections.Counter:
    """Count the words of a tokenized corpus (plain or gzip), split as Moses splits them."""
    from phrase_rescore.core.reading import read_lines

    counter = collections.Counter() if counter is None else counter
    for _, line, _ in read_lines(path):
        counter.update(words(line))
    return counter

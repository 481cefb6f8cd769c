"""Words outside the shortlist scored as single words, not as the whole out-of-shortlist class.

The networks map every word outside the shortlist to ``<unk>`` (the paper's section 4.1), so the
probability a model gives such a word is that of the whole out-of-shortlist set: any single rare word is
credited with the probability of all of them, and a translation full of rare words is overrated. The
paper's remedy is the WP column, a count of those words for MERT to weigh. This module offers the other
one, used by shortlist language models since Schwenk's CSLM: share ``<unk>``'s probability out among the
out-of-shortlist words by their counts in a tokenized corpus of the scored side,

    log p(w | ...) = log p(<unk> | ...) + log s(w),    s(w) = (c(w) + 1) / (N + T + 1)

with c(w) the word's corpus count, N the count of all out-of-shortlist tokens of the corpus and T their
number of types. The add-one gives a word the corpus lacks the share of one seen once (the +1 in the
denominator is that unseen class), so the shares of the seen words and of the unseen class sum to 1.
``score --rare-words unigram`` adds the log shares of a pair's target words to its log p; a word the
vocabulary encodes as ``<unk>`` (outside the shortlist, or a literal ``<eos>``/``<unk>`` token, as
:func:`~phrase_rescore.pipeline.vocab.encode_phrases` encodes them) is the word whose share is added.
"""
from __future__ import annotations

import collections
import hashlib
import math
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from phrase_rescore.core.errors import PhraseRescoreError

from .vocab import SPECIALS, UNK_ID, Vocab, count_corpus, encode_phrases, split_words


class RareWordShares:
    """The log shares s(w) of the words outside one side's shortlist, counted from a corpus."""

    def __init__(self, vocab: Vocab, counter: collections.Counter):
        rare = sorted(((w, n) for w, n in counter.items() if w not in vocab.index or w in SPECIALS),
                      key=lambda wn: wn[0].encode("utf-8"))
        self.vocab = vocab
        self.tokens = sum(n for _, n in rare)       # N
        self.types = len(rare)                      # T
        total = self.tokens + self.types + 1
        self.words = pa.array([w for w, _ in rare], pa.string())
        self.log_shares = np.array([math.log((n + 1) / total) for _, n in rare], dtype=np.float64)
        self.unseen_log_share = math.log(1 / total)

    @classmethod
    def from_corpus(cls, path: str | os.PathLike, vocab: Vocab) -> "RareWordShares":
        """Count the tokenized corpus ``path`` (plain or gzip); a corpus with no words is an error."""
        if not os.path.exists(path):
            raise PhraseRescoreError("corpus for the rare words' shares not found (expected a tokenized corpus "
                                     "of the scored side)", path)
        counter = count_corpus(path)
        if not counter:
            raise PhraseRescoreError("the corpus has no words: expected the tokenized corpus of the scored side",
                                     path)
        return cls(vocab, counter)

    def digest(self) -> str:
        """sha256 of the shares (words and counts): a resumed scoring run must use the same ones."""
        h = hashlib.sha256()
        for w, s in zip(self.words.to_pylist(), self.log_shares.tolist()):
            h.update(w.encode("utf-8") + b"\0" + repr(s).encode("ascii") + b"\n")
        h.update(repr(self.unseen_log_share).encode("ascii"))
        return h.hexdigest()

    def phrase_log_shares(self, phrases: pa.Array, ids: pa.ListArray | None = None) -> np.ndarray:
        """(n,) float64: per phrase, the sum of log s(w) over its words encoded as ``<unk>``; ``ids``:
        the phrases as :func:`~phrase_rescore.pipeline.vocab.encode_phrases` encoded them with this
        vocabulary, when the caller has them [encoded here]."""
        if ids is None:
            ids, _ = encode_phrases(phrases, self.vocab)
        n = len(ids)
        if n == 0:
            return np.zeros(0, dtype=np.float64)
        flat, offsets = split_words(phrases)
        row = np.repeat(np.arange(n), np.diff(offsets))
        # encode_phrases's ids without each phrase's final <eos>: one per word, in order
        values = ids.values.to_numpy()
        ends = ids.offsets.to_numpy()[1:] - 1
        keep = np.ones(len(values), dtype=bool)
        keep[ends] = False
        unk = values[keep] == UNK_ID
        if not unk.any():
            return np.zeros(n, dtype=np.float64)
        at = pc.fill_null(pc.index_in(flat.filter(pa.array(unk)), value_set=self.words), -1).to_numpy()
        found = at >= 0
        shares = np.full(len(at), self.unseen_log_share, dtype=np.float64)
        shares[found] = self.log_shares[at[found]]
        return np.bincount(row[unk], weights=shares, minlength=n)

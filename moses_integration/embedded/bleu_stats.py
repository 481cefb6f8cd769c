"""BLEU sufficient statistics per hypothesis, and corpus BLEU from their sums.

The layout is Moses's ``mert/BleuScorer``: ``[m1, t1, m2, t2, m3, t3, m4, t4, ref_len]`` with ``m_n`` the
clipped n-gram matches, ``t_n`` the hypothesis n-grams (so ``t1`` is the hypothesis length) and
``ref_len`` the reference length (with several references, the closest to the hypothesis length, the
shorter on a tie: Moses's default ``reflen=closest``, which is also sacrebleu's rule). Corpus BLEU is
computed from summed statistics exactly as ``BleuScorer::calculateScore``: the geometric mean of the
n-gram precisions (0 when any order has no match) times the brevity penalty ``exp(min(0, 1 - r/c))``,
which equals sacrebleu's corpus BLEU with ``tokenize="none", smooth_method="none"`` (as a fraction).

Sentences are compared as whitespace-separated tokens: the decoder's output and the references are
already tokenized the same way.
"""
from __future__ import annotations

from collections import Counter
from typing import Sequence

import numpy as np

MAX_ORDER = 4
NUM_STATS = 2 * MAX_ORDER + 1
REF_LEN = 2 * MAX_ORDER


def _ngrams(tokens: Sequence[str], n: int) -> Counter:
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


class Reference:
    """The references of one sentence, preprocessed: max n-gram counts and lengths."""

    __slots__ = ("counts", "lengths")

    def __init__(self, refs: Sequence[str] | str):
        if isinstance(refs, str):
            refs = [refs]
        self.counts: list[Counter] = [Counter() for _ in range(MAX_ORDER)]
        self.lengths = []
        for r in refs:
            toks = r.split()
            self.lengths.append(len(toks))
            for n in range(1, MAX_ORDER + 1):
                for g, c in _ngrams(toks, n).items():
                    if c > self.counts[n - 1][g]:
                        self.counts[n - 1][g] = c

    def closest_length(self, hyp_len: int) -> int:
        """The reference length closest to ``hyp_len`` (the shorter one on a tie)."""
        return min(self.lengths, key=lambda r: (abs(r - hyp_len), r))


def sentence_stats(hyp: str | Sequence[str], ref: Reference | Sequence[str] | str) -> np.ndarray:
    """The 9 BLEU statistics of one hypothesis against its reference(s); (9,) float64 of integers."""
    toks = hyp.split() if isinstance(hyp, str) else list(hyp)
    if not isinstance(ref, Reference):
        ref = Reference(ref)
    out = np.zeros(NUM_STATS)
    for n in range(1, MAX_ORDER + 1):
        hc = _ngrams(toks, n)
        rc = ref.counts[n - 1]
        out[2 * (n - 1)] = sum(min(c, rc[g]) for g, c in hc.items() if g in rc)
        out[2 * (n - 1) + 1] = max(len(toks) - n + 1, 0)
    out[REF_LEN] = ref.closest_length(len(toks))
    return out


def bleu(stats: np.ndarray) -> np.ndarray | float:
    """Corpus BLEU (a fraction in [0, 1]) from summed statistics; ``stats`` is (..., 9), vectorized."""
    s = np.asarray(stats, dtype=np.float64)
    m = s[..., 0:2 * MAX_ORDER:2]
    t = s[..., 1:2 * MAX_ORDER:2]
    with np.errstate(divide="ignore", invalid="ignore"):
        logp = np.where(m > 0, np.log(np.where(m > 0, m, 1.0)) - np.log(np.where(t > 0, t, 1.0)), -np.inf)
        logbleu = logp.sum(axis=-1) / MAX_ORDER
        c = s[..., 1]
        bp = np.where(c > 0, np.minimum(0.0, 1.0 - s[..., REF_LEN] / np.where(c > 0, c, 1.0)), 0.0)
        out = np.where(np.all(m > 0, axis=-1), np.exp(logbleu + bp), 0.0)
    return float(out) if out.ndim == 0 else out


def corpus_bleu(hyps: Sequence[str], refs: Sequence[Reference | str]) -> float:
    """Corpus BLEU of tokenized hypotheses against one reference (or :class:`Reference`) each."""
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    total = np.zeros(NUM_STATS)
    for h, r in zip(hyps, refs):
        total += sentence_stats(h, r)
    return bleu(total)

"""Interpolated modified Kneser-Ney n-gram language model, estimated as KenLM's ``lmplz`` does, written as ARPA.

Estimation (Chen & Goodman 1998; Heafield et al. 2013), on sentences padded ``<s> w1 .. wk </s>``:

- adjusted counts ``a``: raw counts for the highest order and for n-grams starting with ``<s>``;
  otherwise the number of distinct words seen to the left (continuation counts);
- discounts per order from the counts-of-adjusted-counts ``t1..t4``: ``Y = t1 / (t1 + 2 t2)``,
  ``D_k = k - (k + 1) Y t_{k+1} / t_k`` for k = 1, 2, 3+. When one of ``t1..t3`` is zero or a discount
  falls outside ``[0, k]`` (small data), the order uses the fallback discounts (0.5, 1, 1.5), as
  ``lmplz --discount_fallback``; the stats say which orders did. (lmplz computes these in float32 and
  also counts the ``<s>`` unigram in the unigram statistics; both differences vanish on real data);
- ``p(w|h) = (a(hw) - D(a(hw))) / sum_x a(hx) + gamma(h) p(w|h')``, with
  ``gamma(h) = (D_1 N_1(h.) + D_2 N_2(h.) + D_3 N_3+(h.)) / sum_x a(hx)``; unigrams interpolate with
  the uniform distribution over the vocabulary without ``<s>`` (``<unk>`` and ``</s>`` included), so
  ``<unk>`` gets exactly the interpolated uniform mass;
- the ARPA file stores the interpolated ``log10 p(w|h)`` and backoff ``log10 gamma(h)`` for every
  n-gram that is a context; ``<s>`` has probability ``-99`` as in KenLM's output.

Every context's distribution sums to one over the vocabulary (incl. ``</s>``, excl. ``<s>``); the
tests check this through the ``kenlm`` module, and check held-out log-probabilities against a direct
dictionary-based evaluation of the formulas above.

Counting is vectorized: an n-gram is identified by (id of its (n-1)-gram prefix) * V + last word, so
each order is one ``np.unique`` over int64 keys.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import asdict, dataclass, field
from typing import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from phrase_rescore.core import children, progress
from phrase_rescore.core.atomic_write import atomic_open, atomic_path
from phrase_rescore.core.errors import PhraseRescoreError

UNK, BOS, EOS = "<unk>", "<s>", "</s>"
FALLBACK_DISCOUNTS = (0.5, 1.0, 1.5)


@dataclass
class LMConfig:
    """``lmplz`` settings we support."""

    order: int = 5
    discount_fallback: tuple[float, float, float] = FALLBACK_DISCOUNTS

    def __post_init__(self):
        if self.order < 1:
            raise PhraseRescoreError(f"LM order must be at least 1, got {self.order}")


@dataclass
class LMStats:
    """What was estimated: n-gram counts per order, discounts, and which orders used the fallback."""

    order: int
    ngrams: list[int]
    discounts: list[list[float]]
    fallback_orders: list[int] = field(default_factory=list)
    vocab_size: int = 0
    tokens: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class _Order:
    keys: np.ndarray      # (G,) int64 sorted: prefix_id * V + last word (order 1: word id)
    counts: np.ndarray    # (G,) raw counts
    prefix: np.ndarray    # (G,) id of the (n-1)-gram prefix (order 1: unused)
    last: np.ndarray      # (G,) last word id
    first: np.ndarray     # (G,) first word id
    suffix: np.ndarray    # (G,) id of the (n-1)-gram suffix (order 1: unused)


def _discounts(adjusted: np.ndarray, fallback) -> tuple[list[float], bool]:
    t = [int(np.count_nonzero(adjusted == k)) for k in (1, 2, 3, 4)]
    if min(t[:3]) == 0:  # as lmplz: t1..t3 are divided by; t4 = 0 just makes D3+ = 3
        return list(fallback), True
    y = t[0] / (t[0] + 2 * t[1])
    d = [k - (k + 1) * y * t[k] / t[k - 1] for k in (1, 2, 3)]
    if any(not (0.0 <= d[k - 1] <= k) for k in (1, 2, 3)):
        return list(fallback), True
    return d, False


def _discount_of(a: np.ndarray, d: Sequence[float]) -> np.ndarray:
    out = np.zeros(a.shape, dtype=np.float64)
    out[a == 1] = d[0]
    out[a == 2] = d[1]
    out[a >= 3] = d[2]
    return out


def train_lm(sentences: Sequence[Sequence[str]], arpa_path: str | os.PathLike,
             config: LMConfig | None = None) -> LMStats:
    """Estimate an interpolated modified Kneser-Ney LM from tokenized sentences and write it as ARPA.

    :param sentences: tokenized sentences (the target side of the training corpus).
    :param arpa_path: where to write the ARPA file (atomically).
    :returns: counts, discounts and fallbacks per order.
    """
    config = config if config is not None else LMConfig()
    vocab, words, n_tokens = _word_ids(sentences)
    orders = _count_orders(words, len(vocab), config.order)
    adjusted = _adjusted_counts(orders)
    stats = LMStats(order=len(orders), ngrams=[int(len(o.keys)) for o in orders], discounts=[],
                    vocab_size=len(vocab), tokens=n_tokens)
    probs, backoffs = _interpolate(orders, adjusted, len(vocab), config.discount_fallback, stats)
    _write_arpa(arpa_path, vocab, orders, probs, backoffs)
    return stats


def _word_ids(sentences: Sequence[Sequence[str]]) -> tuple[dict[str, int], np.ndarray, int]:
    """``(vocabulary, the padded corpus as word ids, tokens)``: ``<unk>``=0, ``<s>``=1, ``</s>``=2, then
    words in first-seen order; tokens count each sentence's words and its ``</s>``."""
    vocab: dict[str, int] = {UNK: 0, BOS: 1, EOS: 2}
    flat: list[int] = []
    n_tokens = 0
    for line_no, sent in enumerate(sentences, start=1):
        flat.append(1)
        for w in sent:
            if w == BOS or w == EOS:
                raise PhraseRescoreError(f"the LM training text contains the reserved token '{w}'", line=line_no)
            flat.append(vocab.setdefault(w, len(vocab)))
        flat.append(2)
        n_tokens += len(sent) + 1
    return vocab, np.array(flat, dtype=np.int64), n_tokens


def _count_orders(words: np.ndarray, V: int, max_order: int) -> list[_Order]:
    """The n-gram tables of the padded corpus ``words`` (P,), order by order up to ``max_order``, or up to
    the longest padded sentence when it is shorter."""
    starts = words == 1
    sent_start = np.maximum.accumulate(np.where(starts, np.arange(len(words)), 0))
    pos_in_sent = np.arange(len(words)) - sent_start             # (P,) position within "<s> ... </s>"
    orders: list[_Order] = []
    unigram_counts = np.bincount(words, minlength=V).astype(np.int64)
    ids_prev = words.copy()                                      # (P,) id of the n-gram ending at each position
    orders.append(_Order(keys=np.arange(V, dtype=np.int64), counts=unigram_counts,
                         prefix=np.zeros(V, np.int64), last=np.arange(V, dtype=np.int64),
                         first=np.arange(V, dtype=np.int64), suffix=np.zeros(V, np.int64)))
    for n in range(2, max_order + 1):
        valid = np.flatnonzero(pos_in_sent >= n - 1)
        if len(valid) == 0:
            break  # no sentence is long enough for this order: the model's order is n - 1
        keys = ids_prev[valid - 1] * V + words[valid]
        uniq, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
        prev = orders[-1]
        prefix = uniq // V
        last = uniq % V
        if n == 2:
            suffix = last
        else:
            skeys = prev.suffix[prefix] * V + last
            suffix = np.searchsorted(prev.keys, skeys)
            assert np.array_equal(prev.keys[suffix], skeys), "n-gram suffix missing from the lower order"
        orders.append(_Order(keys=uniq, counts=counts.astype(np.int64), prefix=prefix, last=last,
                             first=prev.first[prefix], suffix=suffix))
        ids_next = np.full(len(words), -1, dtype=np.int64)
        ids_next[valid] = inverse
        ids_prev = ids_next
    return orders


def _adjusted_counts(orders: list[_Order]) -> list[np.ndarray]:
    """Kneser-Ney adjusted counts per order: raw counts for the highest order and n-grams starting with
    ``<s>``, continuation counts otherwise."""
    N = len(orders)
    adjusted: list[np.ndarray] = []
    for n in range(1, N + 1):
        o = orders[n - 1]
        if n == N:
            a = o.counts.copy()
        else:
            cont = np.bincount(orders[n].suffix, minlength=len(o.keys)).astype(np.int64)
            a = np.where(o.first == 1, o.counts, cont)
        adjusted.append(a)
    adjusted[0][1] = 0  # <s> is never predicted (<unk> has 0 unless the text contains the token "<unk>")
    return adjusted


def _interpolate(orders: list[_Order], adjusted: list[np.ndarray], V: int, fallback, stats: LMStats,
                 ) -> tuple[list[np.ndarray], list[np.ndarray | None]]:
    """Discounts (recorded in ``stats``) and interpolated probabilities and backoffs per order, lowest
    order first."""
    probs: list[np.ndarray] = []
    backoffs: list[np.ndarray | None] = []
    for n in range(1, len(orders) + 1):
        o, a = orders[n - 1], adjusted[n - 1]
        d, fell_back = _discounts(a, fallback)
        stats.discounts.append([float(x) for x in d])
        if fell_back:
            stats.fallback_orders.append(n)
        disc = _discount_of(a, d)
        if n == 1:
            mask = np.arange(V) != 1
            total = float(a[mask].sum())
            gamma0 = float(disc[mask].sum()) / total
            p = np.where(mask, (a - disc) / total + gamma0 / (V - 1), 0.0)
        else:
            n_ctx = len(orders[n - 2].keys)
            total = np.bincount(o.prefix, weights=a.astype(np.float64), minlength=n_ctx)   # (C,)
            gamma = np.bincount(o.prefix, weights=disc, minlength=n_ctx) / np.maximum(total, 1e-300)
            p = (a - disc) / total[o.prefix] + gamma[o.prefix] * probs[n - 2][o.suffix]
            backoffs[n - 2] = np.where(total > 0, gamma, 1.0)
        probs.append(p)
        backoffs.append(None)
    return probs, backoffs


def _format_logs(x: np.ndarray) -> list[str]:
    return [f"{v:.7g}" for v in x.tolist()]


def _write_arpa(path, vocab: dict[str, int], orders: list[_Order], probs, backoffs) -> None:
    words = pa.array(list(vocab), type=pa.string())
    N = len(orders)
    with atomic_open(path, "w") as f, progress.bar(total=sum(len(o.keys) for o in orders), desc="lm arpa",
                                                    unit="ngram") as bar:
        f.write("\n\\data\\\n")
        for n, o in enumerate(orders, start=1):
            f.write(f"ngram {n}={len(o.keys)}\n")
        strings = words
        for n, o in enumerate(orders, start=1):
            f.write(f"\n\\{n}-grams:\n")
            if n > 1:
                strings = pc.binary_join_element_wise(strings.take(pa.array(o.prefix)),
                                                      words.take(pa.array(o.last)), " ")
            with np.errstate(divide="ignore"):
                logp = np.log10(probs[n - 1])
            if n == 1:
                logp[1] = -99.0  # <s>
            lp = _format_logs(logp)
            text = strings.to_pylist()
            if n < N:
                lb = _format_logs(np.log10(backoffs[n - 1]))
                f.writelines(f"{p}\t{s}\t{b}\n" for p, s, b in zip(lp, text, lb))
            else:
                f.writelines(f"{p}\t{s}\n" for p, s in zip(lp, text))
            bar.update(len(o.keys))
        f.write("\n\\end\\\n")


def load_lm(path: str | os.PathLike):
    """Load an ARPA (or KenLM binary) file with the ``kenlm`` module, without its advice to build a binary."""
    from .translation_options import open_kenlm

    if not os.path.exists(path):
        raise PhraseRescoreError("language model not found", path)
    return open_kenlm(os.fspath(path))


def perplexity(model, sentences: Iterable[Sequence[str]]) -> float:
    """Per-token perplexity (``</s>`` counted, as KenLM's query does) of tokenized sentences."""
    total = 0.0
    n = 0
    for s in sentences:
        total += model.score(" ".join(s), bos=True, eos=True)
        n += len(s) + 1
    return 10 ** (-total / n) if n else float("nan")


def find_build_binary() -> str | None:
    """KenLM's ``build_binary``: on PATH, else in ``$MOSES_HOME/bin`` (a Moses build installs it there)."""
    exe = shutil.which("build_binary")
    if exe is None and os.environ.get("MOSES_HOME"):
        p = os.path.join(os.path.expanduser(os.environ["MOSES_HOME"]), "bin", "build_binary")
        exe = p if os.path.isfile(p) and os.access(p, os.X_OK) else None
    return exe


def build_binary(arpa_path: str | os.PathLike, binary_path: str | os.PathLike) -> str | None:
    """Write KenLM's binary form with ``build_binary`` (see :func:`find_build_binary`) when there is one.

    :returns: None when written, else the reason it was skipped.
    """
    exe = find_build_binary()
    if exe is None:
        return "build_binary (KenLM) not found on PATH or in $MOSES_HOME/bin; only the ARPA file was written"
    with atomic_path(binary_path) as tmp:
        res = children.run([exe, os.fspath(arpa_path), os.fspath(tmp)], capture_output=True, text=True)
        if res.returncode != 0:
            raise PhraseRescoreError(f"build_binary failed ({res.returncode}): {res.stderr.strip()[-500:]}",
                                     arpa_path)
    return None

"""The embedded MERT optimiser as it was first written (``moses_integration/embedded/mert.py`` at commit 68141f1):
Och's line search with the per-sentence envelopes found on the padded ``(N, K)`` arrays, every line
searched from scratch. Kept as the specification the faster optimiser must reproduce bit for bit
(tests/test_mert_speed.py) and as the baseline benchmarks/mert_bench.py times it against.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from phrase_rescore.moses_integration.embedded.bleu_stats import bleu
from phrase_rescore.moses_integration.embedded.mert import NBestPool

MIN_IMPROVEMENT = 1e-4


def one_best_stats(F: np.ndarray, S: np.ndarray, mask: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Summed statistics of each sentence's highest-scoring candidate under ``w`` (first on ties)."""
    scores = np.where(mask, F @ w, -np.inf)
    best = scores.argmax(axis=1)
    return S[np.arange(len(S)), best].sum(axis=0)


def score_at(pool: NBestPool, w: np.ndarray) -> float:
    """Corpus BLEU of the pool's 1-best candidates under weights ``w``."""
    F, S, mask = pool.padded()
    return bleu(one_best_stats(F, S, mask, np.asarray(w, dtype=np.float64)))


def _envelopes(m: np.ndarray, b: np.ndarray, mask: np.ndarray):
    """Upper envelopes of the lines ``b + m x`` of every sentence.

    :return: ``first`` (N,) the best candidate as ``x -> -inf``, and breakpoints ``(x, sent, old, new)``:
        at ``x`` sentence ``sent``'s best candidate changes from ``old`` to ``new``.
    """
    n, k = m.shape
    rows = np.arange(n)
    mv = np.where(mask, m, np.inf)
    mmin = mv.min(axis=1)
    first = np.where(mask & (m == mmin[:, None]), b, -np.inf).argmax(axis=1)   # lowest slope, highest line
    cur = first.copy()
    last_x = np.full(n, -np.inf)
    active = rows
    xs, ss, olds, news = [], [], [], []
    while active.size:
        M, B, V = m[active], b[active], mask[active]
        c = cur[active]
        cm, cb = M[np.arange(active.size), c], B[np.arange(active.size), c]
        steeper = V & (M > cm[:, None])
        with np.errstate(divide="ignore", invalid="ignore"):
            X = np.where(steeper, (cb[:, None] - B) / (M - cm[:, None]), np.inf)
        xmin = X.min(axis=1)
        go = np.isfinite(xmin)
        if not go.any():
            break
        A = active[go]
        X, M, xmin = X[go], M[go], xmin[go]
        # lines meeting the current one at the same point: the steepest takes over (the others touch only)
        tol = 1e-12 * np.maximum(1.0, np.abs(xmin))
        nxt = np.where(X <= (xmin + tol)[:, None], M, -np.inf).argmax(axis=1)
        xmin = np.maximum(xmin, last_x[A])
        xs.append(xmin)
        ss.append(A)
        olds.append(cur[A].copy())
        news.append(nxt)
        cur[A] = nxt
        last_x[A] = xmin
        active = A
    if xs:
        return first, (np.concatenate(xs), np.concatenate(ss), np.concatenate(olds), np.concatenate(news))
    e = np.zeros(0, dtype=np.int64)
    return first, (np.zeros(0), e, e, e)


@dataclass
class LineResult:
    """The best point on a line: ``origin + x * direction`` scores ``score`` (corpus BLEU)."""

    x: float
    score: float
    intervals: int = 0


def line_search(F: np.ndarray, S: np.ndarray, mask: np.ndarray, origin: np.ndarray,
                direction: np.ndarray) -> LineResult:
    """Och's exact line search: the x maximizing corpus BLEU of the 1-best lists along the line."""
    m = F @ direction            # (N, K) slopes
    b = F @ origin               # (N, K) model scores at x = 0
    n = len(F)
    first, (xs, ss, olds, news) = _envelopes(m, b, mask)
    base = S[np.arange(n), first].sum(axis=0)                 # statistics on (-inf, x_1)
    if xs.size == 0:
        return LineResult(0.0, bleu(base), 1)
    order = np.argsort(xs, kind="stable")
    xs, ss, olds, news = xs[order], ss[order], olds[order], news[order]
    delta = S[ss, news] - S[ss, olds]                         # (B, 9)
    cum = base + np.cumsum(delta, axis=0)                     # statistics after each breakpoint
    scores = np.concatenate([[bleu(base)], bleu(cum)])        # interval i: (x_i, x_{i+1}), i = 0 is (-inf, x_1)
    lefts = np.concatenate([[-np.inf], xs])
    rights = np.concatenate([xs, [np.inf]])
    valid = rights > lefts                                    # breakpoints at the same x leave empty intervals
    scores = np.where(valid, scores, -np.inf)
    best = int(np.argmax(scores))
    best_score = float(scores[best])
    # stay where we are when the interval holding x = 0 is as good as the best
    zero = int(np.searchsorted(xs, 0.0, side="right"))
    if valid[zero] and scores[zero] >= best_score and lefts[zero] < 0.0 < rights[zero]:
        return LineResult(0.0, best_score, int(valid.sum()))
    left, right = lefts[best], rights[best]
    if np.isinf(left):
        x = right - 1000.0
    elif np.isinf(right):
        x = left + 0.1
    else:
        x = 0.5 * (left + right)
    return LineResult(float(x), best_score, int(valid.sum()))


def l1_normalize(w: np.ndarray, tuned: np.ndarray) -> np.ndarray:
    """Scale the tuned weights to sum |w| = 1 (mert's output); the others are left alone."""
    w = np.array(w, dtype=np.float64)
    norm = np.abs(w[tuned]).sum()
    if norm > 0:
        w[tuned] /= norm
    return w


@dataclass
class OptimizeResult:
    """MERT's answer: the weights (L1-normalized over the tuned ones) and their n-best corpus BLEU."""

    weights: np.ndarray
    score: float
    start_scores: list[float] = field(default_factory=list)


def _coordinate_ascent(F, S, mask, point, tuned_idx, rng, random_directions, score):
    dim = len(point)
    while True:
        prev = score
        best_point, best_score = point, score
        for d in range(len(tuned_idx) + random_directions):
            direction = np.zeros(dim)
            if d < len(tuned_idx):
                direction[tuned_idx[d]] = 1.0
            else:
                r = rng.standard_normal(len(tuned_idx))
                direction[tuned_idx] = r / np.linalg.norm(r)
            res = line_search(F, S, mask, point, direction)
            if res.score > best_score:
                best_score = res.score
                best_point = point + res.x * direction
        point, score = best_point, best_score
        if not score - prev > MIN_IMPROVEMENT:
            return point, score


def optimize(pool: NBestPool, init: Sequence[float], tuned: Sequence[bool], restarts: int = 20,
             random_directions: int = 0, seed: int = 0) -> OptimizeResult:
    """Find weights maximizing corpus BLEU of the pool's 1-best candidates.

    :param init: the starting weights (full vector); untuned components keep their value.
    :param tuned: which components MERT may change.
    :param restarts: random starting points in addition to ``init``.
    :param random_directions: random directions tried besides the coordinate axes in every pass.
    :param seed: for the random starts and directions (same seed, same result).
    """
    F, S, mask = pool.padded()
    tuned = np.asarray(tuned, dtype=bool)
    tuned_idx = np.flatnonzero(tuned)
    rng = np.random.default_rng(seed)
    init = np.asarray(init, dtype=np.float64)
    starts = [init.copy()]
    for _ in range(restarts):
        p = init.copy()
        p[tuned_idx] = rng.uniform(-1.0, 1.0, len(tuned_idx))
        starts.append(p)
    best_w, best_score, scores = None, -np.inf, []
    for p in starts:
        s0 = bleu(one_best_stats(F, S, mask, p))
        w, s = _coordinate_ascent(F, S, mask, p, tuned_idx, rng, random_directions, s0)
        scores.append(s)
        if s > best_score:
            best_w, best_score = w, s
    return OptimizeResult(l1_normalize(best_w, tuned), float(best_score), scores)


def demo_like_pool(seed: int, sentences: int = 500, nbest: int = 50, iterations: int = 3) -> tuple[NBestPool, np.ndarray]:
    """A pool shaped like the demo's tuning pools: 10 features in the embedded decoder's order (Distortion,
    LM, WordPenalty, PhrasePenalty, 5 TranslationModel scores, then the untuneable UnknownWordPenalty),
    up to ``nbest * iterations`` candidates a sentence, built from a per-sentence table of phrase options so
    that counts tie (integer word, phrase and distortion counts) and sums of the same scores added in
    another order differ in the last bits (nearly parallel lines, as real n-best lists have).

    :return: the pool and the weights a tuning run would start from (Moses's defaults, UnknownWordPenalty 1).
    """
    rng = np.random.default_rng(seed)
    pool = NBestPool(sentences, 10)
    for s in range(sentences):
        src_len = int(rng.integers(6, 20))
        options = [(int(rng.integers(1, 4)), -rng.gamma(2.0, 0.7, size=5), -rng.gamma(3.0, 1.2)) for _ in range(40)]
        ref_len = src_len + int(rng.integers(-2, 3))
        for _ in range(nbest * iterations):
            chosen = [options[i] for i in rng.integers(0, len(options), int(rng.integers(2, 7)))]
            rng.shuffle(chosen)
            tm, lm, words = np.zeros(5), 0.0, 0
            for w, t, l in chosen:
                tm = tm + t
                lm += l
                words += w
            unk = float(rng.random() < 0.05)
            f = np.concatenate([[-2.0 * rng.integers(0, 4), lm, -float(words), -float(len(chosen))], tm, [-100.0 * unk]])
            tot = np.array([max(words - i, 0) for i in range(4)], dtype=float)
            mt = np.minimum.accumulate(np.minimum(tot, rng.integers(0, words + 1, 4)))
            st = np.array([mt[0], tot[0], mt[1], tot[1], mt[2], tot[2], mt[3], tot[3], ref_len], dtype=float)
            pool.add(s, f, st)
    init = np.array([0.3, 0.5, -1.0, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 1.0])
    return pool, init

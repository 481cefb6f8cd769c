"""Minimum error rate training (Och 2003) over accumulated n-best lists, as Moses's ``mert`` does it.

* :class:`NBestPool` accumulates each sentence's candidates over the tuning iterations, dropping
  duplicates (same feature vector and same BLEU statistics: ``Data::removeDuplicates``).
* :func:`line_search` is Och's exact line search: along ``origin + x * direction`` each candidate's model
  score is a line in ``x``; per sentence the upper envelope of these lines says which candidate is the
  1-best on each interval of ``x``; the envelopes' breakpoints are merged across sentences, each carrying
  the change of BLEU statistics, so a sweep gives the exact corpus BLEU of every interval
  (``Optimizer::LineOptimize``). All sentences are processed together with numpy, each envelope
  searched among the few lines near the sentence's dual convex hull (:func:`_envelopes_flat` says why the
  lines left out cannot change a step), and all the lines of one optimizer pass searched at once
  (:func:`_line_searches`). tests/_mert_reference.py keeps the first, plainer implementation; the results
  are the same bits (tests/test_mert_speed.py).
* :func:`optimize` is ``SimpleOptimizer`` ("powell" in mert): from a point, line-search along every
  coordinate and some random directions, move to the best point found, repeat while corpus BLEU improves
  by more than 1e-4; run from the current weights (and any further given points) and from ``restarts``
  random points (uniform in [-1, 1] per weight, as ``mert -n``) and keep the best. The result is
  L1-normalized over the tuned weights as mert prints it.

Where the best interval contains ``x = 0`` (or ties with it) the point does not move; otherwise the new
point is the interval's midpoint, ``left + 0.1`` for the last interval and ``right - 1000`` for the
first, Moses's choices.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .bleu_stats import NUM_STATS, bleu

MIN_IMPROVEMENT = 1e-4      # SimpleOptimizer's kEPS


class NBestPool:
    """Candidates per sentence (features and BLEU statistics), unique, accumulated across iterations."""

    def __init__(self, num_sentences: int, dim: int):
        self.dim = dim
        self.feats: list[list[np.ndarray]] = [[] for _ in range(num_sentences)]
        self.stats: list[list[np.ndarray]] = [[] for _ in range(num_sentences)]
        self._keys: list[set] = [set() for _ in range(num_sentences)]
        self._padded = None

    def __len__(self) -> int:
        return len(self.feats)

    def add(self, sent: int, features: np.ndarray, stats: np.ndarray) -> bool:
        """Add one candidate; False when an identical one is already there."""
        f = np.asarray(features, dtype=np.float64)
        s = np.asarray(stats, dtype=np.float64)
        assert f.shape == (self.dim,) and s.shape == (NUM_STATS,)
        key = (np.round(f, 6).tobytes(), s.tobytes())
        if key in self._keys[sent]:
            return False
        self._keys[sent].add(key)
        self.feats[sent].append(f)
        self.stats[sent].append(s)
        self._padded = None
        return True

    def num_candidates(self) -> int:
        return sum(len(x) for x in self.feats)

    def padded(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(F, S, mask)``: (N, K, D) features, (N, K, 9) statistics, (N, K) validity; K = the largest list."""
        if self._padded is None:
            n = len(self.feats)
            k = max(1, max((len(x) for x in self.feats), default=1))
            F = np.zeros((n, k, self.dim))
            S = np.zeros((n, k, NUM_STATS))
            mask = np.zeros((n, k), dtype=bool)
            for i, (fs, ss) in enumerate(zip(self.feats, self.stats)):
                if fs:
                    F[i, :len(fs)] = fs
                    S[i, :len(ss)] = ss
                    mask[i, :len(fs)] = True
            if not mask.any(axis=1).all():
                raise ValueError("every sentence needs at least one candidate")
            self._padded = (F, S, mask)
        return self._padded


def one_best_stats(F: np.ndarray, S: np.ndarray, mask: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Summed statistics of each sentence's highest-scoring candidate under ``w`` (first on ties)."""
    scores = np.where(mask, F @ w, -np.inf)
    best = scores.argmax(axis=1)
    return S[np.arange(len(S)), best].sum(axis=0)


def score_at(pool: NBestPool, w: np.ndarray) -> float:
    """Corpus BLEU of the pool's 1-best candidates under weights ``w``."""
    F, S, mask = pool.padded()
    return bleu(one_best_stats(F, S, mask, np.asarray(w, dtype=np.float64)))


class _FlatPool:
    """The padded pool ``(F, S, mask)`` with its candidates also in one flat array, sentence after sentence
    and in pool order within a sentence (flat position ``p`` is ``np.nonzero(mask)``'s ``p``-th pair).

    Model scores and slopes are computed on the padded ``F`` exactly as before (``F @ w``) and then
    flattened, so that every number the search sees is the same bit for bit.
    """

    def __init__(self, F: np.ndarray, S: np.ndarray, mask: np.ndarray):
        self.F, self.mask = F, mask
        self.n = len(F)
        self.sent = np.nonzero(mask)[0]                       # (C,) sentence of each flat position
        self.S = S[mask]                                      # (C, 9)
        counts = mask.sum(axis=1)
        self.starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        self.size = int(counts.sum())
        self._flat_index = np.flatnonzero(mask)

    def scores(self, w: np.ndarray) -> np.ndarray:
        """(C,) ``F @ w`` of every candidate."""
        return (self.F @ w).ravel()[self._flat_index]


PRUNE_MARGIN = 1e-8     # a line left out lies this far below the envelope, relative to its sentence's R + B


def _breaks(sent: np.ndarray) -> np.ndarray:
    """Where each run of equal (sorted) sentence numbers starts."""
    return np.flatnonzero(np.concatenate([[True], sent[1:] != sent[:-1]]))


def _best_of(b: np.ndarray, cand: np.ndarray, brk: np.ndarray, size: int) -> np.ndarray:
    """Per run of ``cand`` (flat positions, runs starting at ``brk``): the one of highest ``b``, first on ties."""
    bc = b[cand]
    top = np.repeat(np.maximum.reduceat(bc, brk), np.diff(np.append(brk, len(cand))))
    return np.minimum.reduceat(np.where(bc == top, cand, size), brk)


class _Slopes:
    """The flat slopes ``m = F @ direction`` of one direction and, per sentence, its lines of the lowest and of
    the highest slope (``low``, ``high``: flat positions) and the slope range ``span``."""

    def __init__(self, fp: _FlatPool, m: np.ndarray):
        self.m = m
        mmin, mmax = np.minimum.reduceat(m, fp.starts), np.maximum.reduceat(m, fp.starts)
        self.span = mmax - mmin
        self.low = np.flatnonzero(m == mmin[fp.sent])
        self.high = np.flatnonzero(m == mmax[fp.sent])
        self.low_brk, self.high_brk = _breaks(fp.sent[self.low]), _breaks(fp.sent[self.high])


def _gift_wrap(m: np.ndarray, b: np.ndarray, cp: np.ndarray, fp: _FlatPool):
    """The envelope search itself over the lines at flat positions ``cp`` (increasing; every sentence that has
    one is searched): from each sentence's lowest line at ``x -> -inf`` (the lowest slope, the highest of
    those, the first in pool order), repeatedly: among the lines steeper than the current one, the nearest
    crossing ``x`` is the next breakpoint; of the lines crossing there (within 1e-12 relative) the steepest,
    first in pool order, takes over (the others only touch). Slopes only grow along an envelope, so a line
    not steeper than the current one is dropped for good.

    :return: ``first`` (N,) (-1 for a sentence with no line in ``cp``) and breakpoints ``(x, sent, old, new)``
        in rounds (sentence order within a round).
    """
    return _wrap(m, b, cp, fp.sent[cp], fp.n, fp.size)


def _wrap(m: np.ndarray, b: np.ndarray, cp: np.ndarray, cs: np.ndarray, n: int, size: int):
    """:func:`_gift_wrap` over lines ``cp`` (indices into ``m`` and ``b``, below ``size``, increasing within a
    group) of ``n`` independent groups (``cs``: each line's group, nondecreasing); ties go to the lowest index."""
    brk = _breaks(cs)
    lens = np.diff(np.append(brk, cs.size))
    cm_, cb_ = m[cp], b[cp]
    low = cm_ == np.repeat(np.minimum.reduceat(cm_, brk), lens)
    first = np.full(n, -1, dtype=np.int64)
    first[cs[brk]] = _best_of(b, cp[low], _breaks(cs[low]), size)
    cur = first.copy()
    last_x = np.full(n, -np.inf)
    xs, ss, olds, news = [], [], [], []
    while True:
        cm, cb = m[cur], b[cur]
        cmc = cm[cs]
        idx = np.flatnonzero(cm_ > cmc)
        if not idx.size:
            break
        cm_, cb_, cs, cp, cmc = cm_[idx], cb_[idx], cs[idx], cp[idx], cmc[idx]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            X = (cb[cs] - cb_) / (cm_ - cmc)
        brk = _breaks(cs)
        xmin = np.minimum.reduceat(X, brk)
        go = np.isfinite(xmin)
        if not go.all():
            if not go.any():
                break
            keep = np.repeat(go, np.diff(np.append(brk, cs.size)))
            cm_, cb_, cs, cp, X = cm_[keep], cb_[keep], cs[keep], cp[keep], X[keep]
            brk = _breaks(cs)
            xmin = xmin[go]
        A = cs[brk]
        # lines meeting the current one at the same point: the steepest takes over (the others touch only)
        near = np.flatnonzero(X <= np.repeat(xmin + 1e-12 * np.maximum(1.0, np.abs(xmin)),
                                             np.diff(np.append(brk, cs.size))))
        if near.size == A.size:                     # one line a sentence: it takes over
            nxt = cp[near]
        else:
            hs, hm = cs[near], cm_[near]
            hb = _breaks(hs)
            top = np.repeat(np.maximum.reduceat(hm, hb), np.diff(np.append(hb, hs.size)))
            nxt = np.minimum.reduceat(np.where(hm == top, cp[near], size), hb)
        xmin = np.maximum(xmin, last_x[A])
        xs.append(xmin)
        ss.append(A)
        olds.append(cur[A])
        news.append(nxt)
        cur[A] = nxt
        last_x[A] = xmin
    if xs:
        return first, tuple(np.concatenate(v) for v in (xs, ss, olds, news))
    e = np.zeros(0, dtype=np.int64)
    return first, (np.zeros(0), e, e, e)


def _envelopes_flat(sl: _Slopes, b: np.ndarray, fp: _FlatPool, top: np.ndarray | None = None,
                    scale: np.ndarray | None = None):
    """Upper envelopes of the lines ``b + m x`` of every sentence (``sl.m``, ``b``: (C,) flat): what
    :func:`_gift_wrap` finds over all the lines, bit for bit, found over the few that can take part.

    In the dual picture line ``k`` is the point ``(m_k, b_k)`` and the envelope's lines are the vertices of
    the upper convex hull of the points; ``min_x (E(x) - b_k - m_k x)`` is the point's height ``g_k`` below the
    hull. The polyline through three vertices (the sentence's lowest line ``L``, its highest at ``x = 0``
    ``T``, its steepest ``R``) lies under the hull, so the height below the polyline is a lower bound of
    ``g_k``; a line is left out when it exceeds ``PRUNE_MARGIN * (R + B)`` (``R`` the sentence's slope range,
    ``B`` its largest ``|b|``). Such a line never takes part in the search: at a round with current line
    ``c`` and nearest crossing ``x*`` (with the line ``a``), it crosses ``c`` at least
    ``(g_k - d) / (m_k - m_c)`` after ``x*``, where ``d`` is how far the search's current line can be below
    the true envelope: each round's choice within the tolerance costs at most ``(m_a - m_c) 1e-12 |x*|
    <= 1e-12 (R + 2B)``, since ``|x*| (m_a - m_c) = |b_c - b_a|``. The tolerance ``1e-12 max(1, |x*|)`` is
    smaller than that distance: for ``|x*| <= 1`` because ``m_k - m_c <= R``; otherwise because a line that
    does not cross ``c`` before ``x*`` (or within ``|x*| / 2`` of it) has ``(m_k - m_c) |x*| <= 4B``. The
    margin leaves a factor of 100 over ``1e-12 (R + 4B)`` and the rounding of all these numbers, with tens
    of rounds of ``d``.

    :param top: (N,) flat position of each sentence's highest line at ``x = 0`` (computed when not given).
    :param scale: (N,) each sentence's largest ``|b|`` (computed when not given).
    :return: ``first`` (N,) flat position of the best candidate as ``x -> -inf``, and breakpoints
        ``(x, sent, old, new)``: at ``x`` sentence ``sent``'s best candidate changes from flat position
        ``old`` to ``new``; round by round, in sentence order within a round.
    """
    return _gift_wrap(sl.m, b, _candidates(sl, b, fp, top, scale), fp)


def _candidates(sl: _Slopes, b: np.ndarray, fp: _FlatPool, top: np.ndarray | None = None,
                scale: np.ndarray | None = None) -> np.ndarray:
    """The flat positions of the lines :func:`_envelopes_flat` searches: all but those far below the
    polyline through ``L``, ``T`` and ``R``."""
    m, starts, size = sl.m, fp.starts, fp.size
    counts = np.diff(np.append(starts, size))
    if top is None:
        top = _best_of(b, np.arange(size), starts, size)
    if scale is None:
        scale = np.maximum.reduceat(np.abs(b), starts)
    L = _best_of(b, sl.low, sl.low_brk, size)
    R = _best_of(b, sl.high, sl.high_brk, size)
    mL, mT, mR, bL, bT, bR = m[L], m[top], m[R], b[L], b[top], b[R]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        left = np.where(mT > mL, (bT - bL) / (mT - mL), 0.0)       # the polyline's slopes left and right of T
        right = np.where(mR > mT, (bR - bT) / (mR - mT), 0.0)
        mTr = np.repeat(mT, counts)
        slope = np.where(m > mTr, np.repeat(right, counts), np.repeat(left, counts))
        gap = np.repeat(bT, counts) + slope * (m - mTr) - b          # below the polyline at m
    return np.flatnonzero(~(gap > np.repeat(PRUNE_MARGIN * (sl.span + scale), counts)))


@dataclass
class LineResult:
    """The best point on a line: ``origin + x * direction`` scores ``score`` (corpus BLEU)."""

    x: float
    score: float
    intervals: int = 0


def line_search(F: np.ndarray, S: np.ndarray, mask: np.ndarray, origin: np.ndarray,
                direction: np.ndarray) -> LineResult:
    """Och's exact line search: the x maximizing corpus BLEU of the 1-best lists along the line."""
    fp = _FlatPool(F, S, mask)
    return _line_search_flat(fp, _Slopes(fp, fp.scores(direction)), fp.scores(origin))


def _line_search_flat(fp: _FlatPool, sl: _Slopes, b: np.ndarray, top: np.ndarray | None = None,
                      scale: np.ndarray | None = None) -> LineResult:
    """:func:`line_search` with the slopes ``F @ direction`` (``sl``) and scores ``b = F @ origin`` given flat
    (``top``, ``scale``: see :func:`_envelopes_flat`)."""
    first, (xs, ss, olds, news) = _envelopes_flat(sl, b, fp, top, scale)
    return _line_results(fp, first[None], xs, np.zeros(xs.size, dtype=np.int64), olds, news)[0]


def _line_searches(fp: _FlatPool, slopes: Sequence[_Slopes], b: np.ndarray, top: np.ndarray,
                   scale: np.ndarray) -> list[LineResult]:
    """:func:`_line_search_flat` along several directions from one point, their envelope searches run as one
    (direction ``d``'s sentence ``s`` is group ``d * N + s``), which shares each round's work among them."""
    n = fp.n
    cands = [_candidates(sl, b, fp, top, scale) for sl in slopes]
    pos = np.concatenate(cands)                                     # flat position of each line
    m = np.concatenate([sl.m[c] for sl, c in zip(slopes, cands)])
    group = np.concatenate([d * n + fp.sent[c] for d, c in enumerate(cands)])
    first, (xs, gs, olds, news) = _wrap(m, b[pos], np.arange(pos.size), group, n * len(slopes), pos.size)
    return _line_results(fp, pos[first].reshape(len(slopes), n), xs, gs // n, pos[olds], pos[news])


def _line_results(fp: _FlatPool, firsts: np.ndarray, xs: np.ndarray, which: np.ndarray, olds: np.ndarray,
                  news: np.ndarray) -> list[LineResult]:
    """The best point on each of ``D`` lines from their envelopes (see :func:`_envelopes_flat`): ``firsts``
    (D, N); line ``d``'s breakpoints are those with ``which == d``, in their order. The statistics are
    counts, so their sums are exact in any order and the lines' cumulative sums can share one ``cumsum``."""
    D = len(firsts)
    bases = fp.S[firsts].sum(axis=1)                          # (D, 9) statistics on (-inf, x_1)
    base_scores = bleu(bases)
    order = np.argsort(which.astype(np.int16), kind="stable")   # by line (a radix sort), then by x:
    counts = np.bincount(which, minlength=D)
    ends = np.cumsum(counts)
    for lo, hi in zip(ends - counts, ends):
        if hi - lo > 1:
            part = order[lo:hi]
            order[lo:hi] = part[np.argsort(xs[part], kind="stable")]
    xs, olds, news = xs[order], olds[order], news[order]
    run = np.cumsum(fp.S[news] - fp.S[olds], axis=0)          # (B, 9)
    before = np.concatenate([np.zeros((1, NUM_STATS)), run])[ends - counts]
    cum = np.repeat(bases - before, counts, axis=0) + run     # statistics after each breakpoint of its line
    all_scores = bleu(cum)
    out = []
    for d in range(D):
        lo, hi = ends[d] - counts[d], ends[d]
        if lo == hi:
            out.append(LineResult(0.0, float(base_scores[d]), 1))
            continue
        x = xs[lo:hi]
        scores = np.concatenate([base_scores[d:d + 1], all_scores[lo:hi]])   # interval i: (x_i, x_{i+1})
        lefts = np.concatenate([[-np.inf], x])
        rights = np.concatenate([x, [np.inf]])
        valid = rights > lefts                                # breakpoints at the same x leave empty intervals
        scores = np.where(valid, scores, -np.inf)
        best = int(np.argmax(scores))
        best_score = float(scores[best])
        # stay where we are when the interval holding x = 0 is as good as the best
        zero = int(np.searchsorted(x, 0.0, side="right"))
        if valid[zero] and scores[zero] >= best_score and lefts[zero] < 0.0 < rights[zero]:
            out.append(LineResult(0.0, best_score, int(valid.sum())))
            continue
        left, right = lefts[best], rights[best]
        if np.isinf(left):
            at = right - 1000.0
        elif np.isinf(right):
            at = left + 0.1
        else:
            at = 0.5 * (left + right)
        out.append(LineResult(float(at), best_score, int(valid.sum())))
    return out


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


def _coordinate_ascent(fp: _FlatPool, point, tuned_idx, rng, random_directions, score, axes):
    """``SimpleOptimizer`` from ``point``: ``axes[d]`` is the flat ``F @ e_d`` of tuned coordinate ``d``; the
    scores ``F @ point`` are computed once per pass, since every line of a pass starts at the same point."""
    dim = len(point)
    while True:
        prev = score
        best_point, best_score = point, score
        b = fp.scores(point)
        top = _best_of(b, np.arange(fp.size), fp.starts, fp.size)
        scale = np.maximum.reduceat(np.abs(b), fp.starts)
        directions, slopes = [], []
        for d in range(len(tuned_idx) + random_directions):
            direction = np.zeros(dim)
            if d < len(tuned_idx):
                direction[tuned_idx[d]] = 1.0
                slopes.append(axes[d])
            else:
                r = rng.standard_normal(len(tuned_idx))
                direction[tuned_idx] = r / np.linalg.norm(r)
                slopes.append(_Slopes(fp, fp.scores(direction)))
            directions.append(direction)
        for direction, res in zip(directions, _line_searches(fp, slopes, b, top, scale)):
            if res.score > best_score:
                best_score = res.score
                best_point = point + res.x * direction
        point, score = best_point, best_score
        if not score - prev > MIN_IMPROVEMENT:
            return point, score


def optimize(pool: NBestPool, init: Sequence[float], tuned: Sequence[bool], restarts: int = 20,
             random_directions: int = 0, seed: int = 0,
             more_starts: Sequence[Sequence[float]] = ()) -> OptimizeResult:
    """Find weights maximizing corpus BLEU of the pool's 1-best candidates.

    :param init: the starting weights (full vector); untuned components keep their value.
    :param tuned: which components MERT may change.
    :param more_starts: further starting points (full vectors), run after ``init`` and before the random
        ones: the weights of earlier iterations for Foster & Kuhn's (2009) historic bests (``mert --ifile
        A,B,...``).
    :param restarts: random starting points in addition to ``init`` and ``more_starts``.
    :param random_directions: random directions tried besides the coordinate axes in every pass.
    :param seed: for the random starts and directions (same seed, same result).
    """
    F, S, mask = pool.padded()
    tuned = np.asarray(tuned, dtype=bool)
    tuned_idx = np.flatnonzero(tuned)
    rng = np.random.default_rng(seed)
    init = np.asarray(init, dtype=np.float64)
    starts = [init.copy()] + [np.array(p, dtype=np.float64) for p in more_starts]
    for _ in range(restarts):
        p = init.copy()
        p[tuned_idx] = rng.uniform(-1.0, 1.0, len(tuned_idx))
        starts.append(p)
    fp = _FlatPool(F, S, mask)
    axes = [_Slopes(fp, fp.scores(np.eye(len(init))[i])) for i in tuned_idx]
    best_w, best_score, scores = None, -np.inf, []
    for p in starts:
        s0 = bleu(one_best_stats(F, S, mask, p))
        w, s = _coordinate_ascent(fp, p, tuned_idx, rng, random_directions, s0, axes)
        scores.append(s)
        if s > best_score:
            best_w, best_score = w, s
    return OptimizeResult(l1_normalize(best_w, tuned), float(best_score), scores)

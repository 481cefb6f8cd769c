"""Stack decoding over coverage sets (Moses's ``SearchNormal``) and n-best extraction from its lattice.

Hypotheses with the same number of covered source words share a stack. A stack is pruned lazily as
Moses's ``HypothesisStackNormal`` does: a hypothesis whose total score (score so far + future-cost
estimate of the uncovered spans) is below ``best + ln(beam_threshold)`` or below the score of the
stack's last kept hypothesis after a prune is discarded; once a stack holds ``2 * stack_size`` it is
pruned to ``stack_size``, and again before it is expanded. Two hypotheses with the same coverage, LM
state and last covered source position are recombined: the better one stays, the other becomes an arc
of it (kept for n-best lists, as Moses keeps ``m_arcList``). With a LexicalReordering model the state
also holds the last phrase's source start and, for a forward model, the last pair's forward table
values (``PhraseBasedReorderingState::operator==``).

LexicalReordering scores each new phrase when it is placed: its own backward score for its orientation
after the previous phrase, plus the previous phrase's forward score for the same orientation (see
:mod:`.features`); they are known before the LM is consulted, so they join the option's static score in
the beam bound.

Reordering follows ``SearchNormal::ProcessOneHypothesis``: a phrase may start at most
``distortion_limit`` words away from where the previous one ended, and a phrase that does not start at
the first gap must end close enough for the first gap to be reachable afterwards.

N-best lists are the k best paths through the lattice of kept hypotheses and their arcs (lazy k-best,
Huang & Chiang 2005, Algorithm 3): two paths that recombined share their suffix scores, so a path's
score is its prefix's score plus the increments of the later steps.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .features import LN10
from .translation_options import OptionTable


@dataclass
class SearchParams:
    """Search limits (see :class:`~phrase_rescore.moses_integration.embedded.decoder.DecoderConfig`)."""

    stack_size: int = 200
    beam_threshold: float = 1e-5
    distortion_limit: int = 6
    max_phrase_length: int = 20
    keep_arcs: bool = False


class Hypothesis:
    """A partial translation: the last phrase applied to ``prev``."""

    __slots__ = ("score", "total", "cov", "ncov", "lm_state", "last_end", "prev", "opt", "lm", "dist", "arcs",
                 "kbest", "cand")

    def __init__(self, score, total, cov, ncov, lm_state, last_end, prev, opt, lm, dist):
        self.score = score          # model score so far (weighted sum of the features)
        self.total = score if total is None else total  # score + future-cost estimate
        self.cov = cov              # covered source words, bit i for word i
        self.ncov = ncov
        self.lm_state = lm_state    # the KenLM state after the last word, as a small int (one per distinct state)
        self.last_end = last_end    # last source position of the last phrase (-1: none yet)
        self.prev = prev
        self.opt = opt              # TranslationOption applied (None for the empty hypothesis)
        self.lm = lm                # ln LM score added by this step (incl. </s> at the end)
        self.dist = dist            # distortion distance of this step (>= 0)
        self.arcs = None            # recombined, worse hypotheses with the same state
        self.kbest = None           # lazy k-best: derivations found so far
        self.cand = None            # lazy k-best: candidate heap


class _Stack:
    """A hypothesis stack with Moses's lazy pruning and recombination (``HypothesisStackNormal``)."""

    __slots__ = ("hyps", "best", "worst", "max_size", "beam", "keep_arcs", "lr_state")

    def __init__(self, max_size: int, beam: float, keep_arcs: bool, lr_state: int = 0):
        self.hyps: dict = {}
        self.best = -math.inf
        self.worst = -math.inf
        self.max_size = max_size
        self.beam = beam            # ln(beam_threshold), <= 0
        self.keep_arcs = keep_arcs
        self.lr_state = lr_state    # 0: no LexicalReordering (or the empty hypothesis's stack); 1: backward
                                    # only; 2: with a forward model

    def add_prune(self, h: Hypothesis) -> None:
        if h.total < self.worst:
            return
        if not self.lr_state:
            key = (h.cov, h.lm_state, h.last_end)
        elif self.lr_state == 1:
            key = (h.cov, h.lm_state, h.last_end, h.opt.start)
        else:
            key = (h.cov, h.lm_state, h.last_end, h.opt.start, h.opt.lr.key)
        old = self.hyps.get(key)
        if old is None:
            self._add(key, h)
            return
        if h.total > old.total:
            if self.keep_arcs:
                h.arcs = [old] + (old.arcs or [])
                old.arcs = None
            self._add(key, h)
        elif self.keep_arcs:
            if old.arcs is None:
                old.arcs = [h]
            else:
                old.arcs.append(h)

    def _add(self, key, h: Hypothesis) -> None:
        self.hyps[key] = h
        if h.total > self.best:
            self.best = h.total
            if self.best + self.beam > self.worst:
                self.worst = self.best + self.beam
        if len(self.hyps) > 2 * self.max_size - 1:
            self.prune(self.max_size)

    def prune(self, n: int) -> None:
        if len(self.hyps) <= n:
            return
        items = sorted(self.hyps.items(), key=lambda kv: -kv[1].total)
        limit = self.best + self.beam
        kept = {}
        for key, h in items:
            if len(kept) >= n or not h.total > limit:
                break
            kept[key] = h
            if len(kept) == n:
                self.worst = h.total
        self.hyps = kept

    def sorted(self) -> list[Hypothesis]:
        return sorted(self.hyps.values(), key=lambda h: -h.total)


def _future(fc: np.ndarray, cov: int, n: int, cache: dict) -> float:
    """Future-cost estimate of the uncovered gaps of ``cov`` (sum over maximal gaps)."""
    v = cache.get(cov)
    if v is not None:
        return v
    total = 0.0
    i = 0
    while i < n:
        if cov >> i & 1:
            i += 1
            continue
        j = i
        while j < n and not (cov >> j & 1):
            j += 1
        total += fc[i, j]
        i = j
    cache[cov] = total
    return total


def search(words: Sequence[str], table: OptionTable, params: SearchParams) -> list[Hypothesis]:
    """Decode one tokenized sentence.

    :return: the hypotheses of the last stack (all source words covered), best first. Empty input gives
        the empty hypothesis alone (Moses prints an empty line for it).
    """
    n = len(words)
    lm = table.lm
    model = lm.model
    State = lm.kenlm.State
    opts, fc = table.collect(words, params.max_phrase_length)
    beam = math.log(params.beam_threshold) if params.beam_threshold > 0 else -math.inf
    lrm = table.reordering.model if table.reordering is not None else None
    lr_state = 0 if lrm is None else 2 if lrm.forward else 1
    lr_back = lrm is not None and lrm.backward
    lr_fwd = lrm is not None and lrm.forward
    stacks = [_Stack(params.stack_size, beam, params.keep_arcs, lr_state if i else 0) for i in range(n + 1)]
    # KenLM states are numbered as they appear (equal states, one number), so that recombination keys and
    # the LM cache hash small ints instead of states; options are numbered by their target words
    states = [lm.begin_state()]
    state_id = {states[0]: 0}
    words_id: dict[tuple[str, ...], int] = {}
    for row in opts:
        for lst in row:
            for o in lst:
                o.wid = words_id.setdefault(o.words, len(words_id))
                # the static score plus the backward score of each orientation, as the inner loop adds them
                o.sb = tuple([o.static + b for b in o.lr.backward]) if lr_back else None
    n_words = len(words_id)
    init = Hypothesis(0.0, None, 0, 0, 0, -1, None, None, 0.0, 0)
    if n == 0:
        return [init]
    stacks[0].add_prune(init)
    full = (1 << n) - 1
    maxd = params.distortion_limit
    w_lm_ln = table.w_lm * LN10
    w_lm = table.w_lm
    w_d = table.w_d
    lm_nonneg = w_lm >= 0
    fcache: dict[int, float] = {}
    lm_cache: dict = {}      # state id * n_words + words id -> (log10 sum, new state id)
    end_cache: dict = {}     # state id -> log10 P(</s> | state)
    span_mask = [[((1 << (k + 1)) - 1) << i for k in range(len(opts[i]))] for i in range(n)]

    for stack in stacks[:-1]:
        stack.prune(params.stack_size)
        for h in stack.sorted():
            cov = h.cov
            first_gap = (~cov & (cov + 1)).bit_length() - 1
            prev_end = h.last_end
            prev_opt = h.opt
            hstate = h.lm_state
            for start in range(first_gap, n):
                if cov >> start & 1:
                    continue
                d = start if prev_end < 0 else abs(prev_end - start + 1)
                if maxd >= 0 and d > maxd:
                    continue
                row = opts[start]
                masks = span_mask[start]
                for k in range(len(row)):
                    end = start + k
                    if cov >> end & 1:
                        break
                    lst = row[k]
                    if not lst:
                        continue
                    if maxd >= 0 and start != first_gap and end - first_gap + 1 > maxd:
                        continue
                    newcov = cov | masks[k]
                    done = newcov == full
                    fut = 0.0 if done else _future(fc, newcov, n, fcache)
                    base = h.score + w_d * -d
                    ori = None          # orientation whose backward score each option adds
                    if lrm is not None:
                        if prev_opt is None:
                            o_ = lrm.first_orientation(start)
                        else:
                            o_ = lrm.orientation(prev_opt.start, prev_end, start, end)
                            if lr_fwd:
                                base += prev_opt.lr.forward[o_]
                        if lr_back:
                            ori = o_
                    ncov = h.ncov + k + 1
                    target = stacks[ncov]
                    bound = target.worst - fut - base   # LM log-probs are <= 0: with w_lm >= 0 this is exact
                    for o in lst:
                        st = o.static if ori is None else o.sb[ori]
                        if lm_nonneg and st < bound:
                            continue
                        key = hstate * n_words + o.wid
                        hit = lm_cache.get(key)
                        if hit is None:
                            a = states[hstate]
                            s10 = 0.0
                            for w in o.words:
                                b = State()
                                s10 += model.BaseScore(a, w, b)
                                a = b
                            sid = state_id.get(a)
                            if sid is None:
                                sid = state_id[a] = len(states)
                                states.append(a)
                            hit = (s10, sid)
                            lm_cache[key] = hit
                        s10, nstate = hit
                        if done:
                            e = end_cache.get(nstate)
                            if e is None:
                                e = model.BaseScore(states[nstate], "</s>", State())
                                end_cache[nstate] = e
                            s10 += e
                        score = base + st + w_lm_ln * s10
                        total = score + fut
                        if total < target.worst:
                            continue
                        target.add_prune(Hypothesis(score, total, newcov, ncov, nstate, end, h, o, s10 * LN10, d))
    final = stacks[n]
    final.prune(params.stack_size)
    return final.sorted()


# ---------------------------------------------------------------------------------------------------
# Paths and n-best lists


def path_of(h: Hypothesis) -> list[Hypothesis]:
    """The steps of the path ending in ``h``, first step first (the empty hypothesis left out)."""
    out = []
    while h is not None and h.opt is not None:
        out.append(h)
        h = h.prev
    out.reverse()
    return out


def _derivation(node: Hypothesis, k: int):
    """The k-th best derivation (0-based) of ``node``'s equivalence class, or None.

    A node is a kept hypothesis; its incoming edges are itself and its arcs, each from the edge's own
    ``prev`` node. A derivation is ``(score, edge, j)``: ``edge`` then the j-th derivation of ``edge.prev``.
    """
    if node.kbest is None:
        if node.opt is None:          # the empty hypothesis: one derivation, score 0
            node.kbest = [(0.0, None, 0)]
            node.cand = []
        else:
            node.kbest = []
            node.cand = []
            # ties in score are broken by edge order (not id(), which follows memory addresses)
            for i, e in enumerate([node] + (node.arcs or [])):
                heapq.heappush(node.cand, (-e.score, i, e, 0))
    kb = node.kbest
    while len(kb) <= k and node.cand:
        negs, i, e, j = heapq.heappop(node.cand)
        kb.append((-negs, e, j))
        p = e.prev
        nxt = _derivation(p, j + 1)
        if nxt is not None:
            inc = e.score - p.score   # the step's increment; the same for every derivation of p
            heapq.heappush(node.cand, (-(nxt[0] + inc), i, e, j + 1))
    return kb[k] if k < len(kb) else None


def _unroll(edge: Hypothesis, j: int) -> list[Hypothesis]:
    steps = []
    while edge is not None and edge.opt is not None:
        steps.append(edge)
        d = _derivation(edge.prev, j)
        _, edge, j = d
    steps.reverse()
    return steps


def kbest_paths(final: list[Hypothesis], limit: int):
    """Yield ``(score, steps)`` for paths in decreasing score order, at most ``limit`` of them.

    ``final`` are the kept hypotheses of the last stack (recombination arcs are followed everywhere).
    """
    heap = []
    for i, f in enumerate(final):
        d = _derivation(f, 0)
        if d is not None:
            heapq.heappush(heap, (-d[0], i, f, 0))
    count = 0
    while heap and count < limit:
        negs, i, f, j = heapq.heappop(heap)
        _, edge, jj = f.kbest[j]
        yield -negs, _unroll(edge, jj)
        count += 1
        nxt = _derivation(f, j + 1)
        if nxt is not None:
            heapq.heappush(heap, (-nxt[0], i, f, j + 1))

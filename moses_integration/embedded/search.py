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

The search follows the levels of Moses's ``SearchNormal.cpp`` (:class:`_Search`: a stack, a hypothesis, a
span), with the two innermost levels, a span's options and one option applied, fused for speed (see
:meth:`_Search.expand_span`); ``tests/_decoder_reference.py`` has them apart, as the reference the tests
compare this search with.

N-best lists are the k best paths through the lattice of kept hypotheses and their arcs (lazy k-best,
Huang & Chiang 2005, Algorithm 3): two paths that recombined share their suffix scores, so a path's
score is its prefix's score plus the increments of the later steps.
"""
from __future__ import annotations

import enum
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


class ReorderingState(enum.Enum):
    """What two hypotheses of a stack must share, besides coverage, LM state and last source position, to
    recombine (``PhraseBasedReorderingState::operator==``)."""

    NONE = "none"           # no LexicalReordering model, or the empty hypothesis's stack
    BACKWARD = "backward"   # a backward model only: also the last phrase's source start
    FORWARD = "forward"     # with a forward model: also the last pair's forward table values

    @classmethod
    def of(cls, model) -> "ReorderingState":
        """The state a :class:`~.features.ReorderingModel` (or None) asks for."""
        if model is None:
            return cls.NONE
        return cls.FORWARD if model.forward else cls.BACKWARD


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

    __slots__ = ("hyps", "best", "worst", "max_size", "beam", "keep_arcs", "by_start", "by_forward")

    def __init__(self, max_size: int, beam: float, keep_arcs: bool,
                 reordering: ReorderingState = ReorderingState.NONE):
        self.hyps: dict = {}
        self.best = -math.inf
        self.worst = -math.inf
        self.max_size = max_size
        self.beam = beam            # ln(beam_threshold), <= 0
        self.keep_arcs = keep_arcs
        # the recombination key's parts beyond (coverage, LM state, last position), as two flags that the
        # hot path tests faster than the enum
        self.by_start = reordering is not ReorderingState.NONE
        self.by_forward = reordering is ReorderingState.FORWARD

    def add_prune(self, h: Hypothesis) -> None:
        if h.total < self.worst:
            return
        if not self.by_start:
            key = (h.cov, h.lm_state, h.last_end)
        elif not self.by_forward:
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


class _SentenceLM:
    """The LM as one sentence's search uses it: KenLM states numbered as they appear (equal states, one
    number), so that recombination keys and the caches hash small ints instead of states, and each phrase
    (numbered by its target words: its ``wid``) scored once after each state.

    :meth:`_Search.expand_span` looks the cache up and fills it itself (see there for why).
    """

    def __init__(self, lm, n_phrases: int):
        self.model = lm.model
        self.State = lm.kenlm.State
        self.states = [lm.begin_state()]            # state id -> KenLM state
        self.state_id = {self.states[0]: 0}
        self.n_phrases = n_phrases
        self.phrase: dict = {}      # state id * n_phrases + wid -> (log10 P(words | state), new state id)
        self.end: dict = {}         # state id -> log10 P(</s> | state)

    def finish(self, state: int) -> float:
        """log10 P(</s> | state)."""
        e = self.end.get(state)
        if e is None:
            e = self.end[state] = self.model.BaseScore(self.states[state], "</s>", self.State())
        return e


def _number_options(opts: list, lr_backward: bool) -> tuple[list, int]:
    """``options[start][k]``: ``(option, wid, static + backward score of each orientation)`` for each option of
    span ``[start, start + k]`` (the last None without a backward reordering model), ``wid`` numbering the
    options' target words; and how many numbers there are."""
    wids: dict[tuple[str, ...], int] = {}
    options = [[[(o, wids.setdefault(o.words, len(wids)),
                  tuple([o.static + b for b in o.lr.backward]) if lr_backward else None) for o in lst]
                for lst in row] for row in opts]
    return options, len(wids)


class _Search:
    """One sentence's stack decoding, a method per level of Moses's ``SearchNormal``: :meth:`run` (``Decode``)
    -> :meth:`process_stack` -> :meth:`process_hypothesis` (the spans ``h`` may translate next) ->
    :meth:`expand_span` (the span's options, each a new hypothesis).

    What the search adds to the sentence's options (a number per target phrase for the LM cache, the static
    score plus each orientation's backward score) is kept here, beside them: the options stay as
    :meth:`OptionTable.collect` made them.
    """

    def __init__(self, words: Sequence[str], table: OptionTable, params: SearchParams):
        self.n = n = len(words)
        self.stack_size = params.stack_size
        opts, self.fc = table.collect(words, params.max_phrase_length)
        self.lrm = lrm = table.reordering.model if table.reordering is not None else None
        self.lr_forward = lrm is not None and lrm.forward
        self.lr_backward = lr_backward = lrm is not None and lrm.backward
        self.options, n_phrases = _number_options(opts, lr_backward)
        self.span_mask = [[((1 << (k + 1)) - 1) << i for k in range(len(row))] for i, row in enumerate(opts)]
        self.full = (1 << n) - 1
        self.fcache: dict[int, float] = {}          # coverage -> future cost of its gaps
        self.lm = _SentenceLM(table.lm, n_phrases)
        self.w_lm_ln = table.w_lm * LN10
        self.w_d = table.w_d
        self.lm_nonneg = table.w_lm >= 0
        self.maxd = params.distortion_limit
        beam = math.log(params.beam_threshold) if params.beam_threshold > 0 else -math.inf
        reordering = ReorderingState.of(lrm)
        self.stacks = [_Stack(params.stack_size, beam, params.keep_arcs, reordering if i else ReorderingState.NONE)
                       for i in range(n + 1)]

    def run(self) -> list[Hypothesis]:
        """The hypotheses of the last stack, best first."""
        self.stacks[0].add_prune(_empty_hypothesis())
        for stack in self.stacks[:-1]:
            self.process_stack(stack)
        final = self.stacks[-1]
        final.prune(self.stack_size)
        return final.sorted()

    def process_stack(self, stack: _Stack) -> None:
        """``ProcessOneStack``: prune the stack, then expand its hypotheses, best first."""
        stack.prune(self.stack_size)
        for h in stack.sorted():
            self.process_hypothesis(h)

    def process_hypothesis(self, h: Hypothesis) -> None:
        """``ProcessOneHypothesis``: every uncovered span within the distortion limit of ``h``'s last phrase
        that leaves the first gap reachable."""
        cov, prev_end = h.cov, h.last_end
        n, maxd = self.n, self.maxd
        first_gap = (~cov & (cov + 1)).bit_length() - 1
        for start in range(first_gap, n):
            if cov >> start & 1:
                continue
            d = start if prev_end < 0 else abs(prev_end - start + 1)    # the distortion distance
            if maxd >= 0 and d > maxd:
                continue
            row = self.options[start]
            for k in range(len(row)):
                end = start + k
                if cov >> end & 1:
                    break
                if row[k] and not (maxd >= 0 and start != first_gap and end - first_gap + 1 > maxd):
                    self.expand_span(h, start, k, d)

    def expand_span(self, h: Hypothesis, start: int, k: int, d: int) -> None:
        """``ExpandAllHypotheses`` and ``ExpandHypothesis``: what the options of span ``[start, start + k]``
        after ``h`` share (coverage, future cost, distortion and reordering scores, the target stack), then a
        new hypothesis for each option whose score can enter that stack.

        The two levels are one function, and the LM is scored here rather than by a method of
        :class:`_SentenceLM`, because this loop runs for every option of every span (8 a span on average,
        1.4 million for 15 multi30k sentences): with a method call per option the search took 15-25% more
        CPU time, and with one per LM cache miss alone 7% more (a 3,000-pair multi30k system, 30 sentences,
        stacks 200 and 50, both versions run in turn). ``tests/_decoder_reference.py`` is the search written
        level by level; ``tests/test_search_reference.py`` checks that both keep the same hypotheses.
        """
        end = start + k
        newcov = h.cov | self.span_mask[start][k]
        done = newcov == self.full
        fut = 0.0 if done else _future(self.fc, newcov, self.n, self.fcache)
        base = h.score + self.w_d * -d
        ori = None          # the orientation whose backward score each option adds
        lrm, prev = self.lrm, h.opt
        if lrm is not None:
            if prev is None:
                o_ = lrm.first_orientation(start)
            else:
                o_ = lrm.orientation(prev.start, h.last_end, start, end)
                if self.lr_forward:
                    base += prev.lr.forward[o_]
            if self.lr_backward:
                ori = o_
        ncov = h.ncov + k + 1
        target = self.stacks[ncov]
        bound = target.worst - fut - base   # LM log-probs are <= 0: with w_lm >= 0 this is exact
        lm_nonneg, w_lm_ln, lm = self.lm_nonneg, self.w_lm_ln, self.lm
        hstate = h.lm_state
        cache, key0 = lm.phrase, hstate * lm.n_phrases
        states, state_id, model, State = lm.states, lm.state_id, lm.model, lm.State
        for o, wid, sb in self.options[start][k]:
            st = o.static if ori is None else sb[ori]
            if lm_nonneg and st < bound:
                continue
            hit = cache.get(key0 + wid)
            if hit is None:             # the phrase's words after state hstate, and the state they end in
                a = states[hstate]
                s10 = 0.0
                for w in o.words:
                    b = State()
                    s10 += model.BaseScore(a, w, b)
                    a = b
                nstate = state_id.get(a)
                if nstate is None:
                    nstate = state_id[a] = len(states)
                    states.append(a)
                cache[key0 + wid] = (s10, nstate)
            else:
                s10, nstate = hit
            if done:
                s10 += lm.finish(nstate)
            score = base + st + w_lm_ln * s10
            total = score + fut
            if total < target.worst:
                continue
            target.add_prune(Hypothesis(score, total, newcov, ncov, nstate, end, h, o, s10 * LN10, d))


def _empty_hypothesis() -> Hypothesis:
    """Nothing covered, the LM after ``<s>`` (state 0), no phrase yet."""
    return Hypothesis(0.0, None, 0, 0, 0, -1, None, None, 0.0, 0)


def search(words: Sequence[str], table: OptionTable, params: SearchParams) -> list[Hypothesis]:
    """Decode one tokenized sentence.

    :return: the hypotheses of the last stack (all source words covered), best first. Empty input gives
        the empty hypothesis alone (Moses prints an empty line for it).
    """
    if not words:
        return [_empty_hypothesis()]
    return _Search(words, table, params).run()


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

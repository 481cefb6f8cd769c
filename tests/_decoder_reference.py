"""The embedded decoder's search written level by level, as Moses's ``SearchNormal.cpp`` is: the reference
that ``moses_integration/embedded/search.py`` is checked against (``tests/test_search_reference.py``).

``search.py`` fuses the two innermost levels and scores the LM inline, numbers KenLM states and caches LM
scores and future costs, and skips an option whose score without the LM cannot enter its stack; here each
level is a function, the LM is asked every time and every hypothesis is offered to its stack. Both must
keep the same hypotheses in the same order, with the same scores to the last bit: the sums below are
done in the order ``search.py`` does them.

Levels (Moses's names):

* :func:`search` (``SearchNormal::Decode``): the stacks in order of covered words;
* :func:`process_one_stack`: prune the stack, expand its hypotheses best first;
* :func:`process_one_hypothesis`: the source spans the distortion limit lets the hypothesis translate next;
* :func:`expand_all_hypotheses`: what a span's options share (coverage, future cost, distortion and
  reordering scores);
* :func:`expand_hypothesis`: one option applied: its LM score, a new hypothesis offered to its stack.

:class:`Stack` is ``HypothesisStackNormal``: lazy beam and histogram pruning, recombination of hypotheses
with the same state (the worse one kept as an arc of the better, for n-best lists).
"""
from __future__ import annotations

import math

from phrase_rescore.moses_integration.embedded.features import LN10
from phrase_rescore.moses_integration.embedded.search import Hypothesis, SearchParams
from phrase_rescore.moses_integration.embedded.translation_options import OptionTable, TranslationOption


class Stack:
    """The hypotheses that cover the same number of source words."""

    def __init__(self, max_size: int, beam: float, keep_arcs: bool):
        self.hyps: dict = {}        # recombination key -> the best hypothesis with that state
        self.best = -math.inf
        self.worst = -math.inf      # a hypothesis below this is not added
        self.max_size = max_size
        self.beam = beam
        self.keep_arcs = keep_arcs

    def add(self, h: Hypothesis, key) -> None:
        """``AddPrune``: drop ``h`` below the threshold, recombine it with an equal state, or add it."""
        if h.total < self.worst:
            return
        old = self.hyps.get(key)
        if old is not None and h.total <= old.total:
            if self.keep_arcs:
                old.arcs = (old.arcs or []) + [h]
            return
        if old is not None and self.keep_arcs:
            h.arcs = [old] + (old.arcs or [])
            old.arcs = None
        self.hyps[key] = h          # a better hypothesis takes its state's place in the stack's order
        if h.total > self.best:
            self.best = h.total
            self.worst = max(self.worst, self.best + self.beam)
        if len(self.hyps) >= 2 * self.max_size:
            self.prune(self.max_size)

    def prune(self, n: int) -> None:
        """``PruneToSize``: the ``n`` best within the beam; the n-th's score becomes the threshold."""
        if len(self.hyps) <= n:
            return
        kept = {}
        for key, h in sorted(self.hyps.items(), key=lambda kv: -kv[1].total):
            if len(kept) == n or h.total <= self.best + self.beam:
                break
            kept[key] = h
            if len(kept) == n:
                self.worst = h.total
        self.hyps = kept

    def best_first(self) -> list[Hypothesis]:
        return sorted(self.hyps.values(), key=lambda h: -h.total)


class Sentence:
    """What every level reads: the sentence's options and future costs, the weights, the models."""

    def __init__(self, words, table: OptionTable, params: SearchParams):
        self.n = len(words)
        self.params = params
        self.options, self.fc = table.collect(words, params.max_phrase_length)
        self.lm = table.lm
        self.w_lm, self.w_d = table.w_lm, table.w_d
        self.reordering = None if table.reordering is None else table.reordering.model
        beam = math.log(params.beam_threshold) if params.beam_threshold > 0 else -math.inf
        self.stacks = [Stack(params.stack_size, beam, params.keep_arcs) for _ in range(self.n + 1)]

    def covered(self, cov: int, i: int) -> bool:
        return bool(cov >> i & 1)

    def future_cost(self, cov: int) -> float:
        """The sum of the future-cost estimates of the maximal uncovered gaps, left to right."""
        total, i = 0.0, 0
        while i < self.n:
            if self.covered(cov, i):
                i += 1
                continue
            j = i
            while j < self.n and not self.covered(cov, j):
                j += 1
            total += self.fc[i, j]
            i = j
        return total

    def recombination_key(self, h: Hypothesis, lm_state) -> tuple:
        """Coverage, LM state and last source position; with LexicalReordering (not for the empty
        hypothesis) the last phrase's source start, and with a forward model its pair's forward values."""
        key = (h.cov, lm_state, h.last_end)
        if self.reordering is not None and h.opt is not None:
            key += (h.opt.start,)
            if self.reordering.forward:
                key += (h.opt.lr.key,)
        return key


def search(words, table: OptionTable, params: SearchParams) -> list[Hypothesis]:
    """The hypotheses that cover the whole sentence, best first (the empty one alone for no words).

    ``lm_state`` of each hypothesis is the KenLM state itself (``search.py`` numbers them)."""
    empty = Hypothesis(0.0, None, 0, 0, table.lm.begin_state(), -1, None, None, 0.0, 0)
    if not words:
        return [empty]
    s = Sentence(words, table, params)
    s.stacks[0].add(empty, s.recombination_key(empty, empty.lm_state))
    for stack in s.stacks[:-1]:
        process_one_stack(s, stack)
    final = s.stacks[-1]
    final.prune(params.stack_size)
    return final.best_first()


def process_one_stack(s: Sentence, stack: Stack) -> None:
    stack.prune(s.params.stack_size)
    for h in stack.best_first():
        process_one_hypothesis(s, h)


def process_one_hypothesis(s: Sentence, h: Hypothesis) -> None:
    """Each uncovered span ``[start, end]`` that starts within the distortion limit of the last phrase's
    end, and, when it does not start at the first gap, ends close enough for that gap to be reached."""
    limit = s.params.distortion_limit
    first_gap = next(i for i in range(s.n) if not s.covered(h.cov, i))
    for start in range(s.n):
        if s.covered(h.cov, start):
            continue
        d = start if h.last_end < 0 else abs(h.last_end - start + 1)
        if limit >= 0 and d > limit:
            continue
        for k in range(len(s.options[start])):
            end = start + k
            if s.covered(h.cov, end):
                break
            if limit >= 0 and start != first_gap and end - first_gap + 1 > limit:
                continue
            if s.options[start][k]:
                expand_all_hypotheses(s, h, start, end, d)


def expand_all_hypotheses(s: Sentence, h: Hypothesis, start: int, end: int, d: int) -> None:
    cov = h.cov | ((1 << (end - start + 1)) - 1) << start
    fut = s.future_cost(cov)
    score = h.score + s.w_d * -d
    orientation = None
    model = s.reordering
    if model is not None:
        if h.opt is None:
            orientation = model.first_orientation(start)
        else:
            orientation = model.orientation(h.opt.start, h.last_end, start, end)
            if model.forward:           # the previous pair's forward score for this orientation
                score += h.opt.lr.forward[orientation]
    for o in s.options[start][end - start]:
        expand_hypothesis(s, h, o, cov, score, fut, orientation, d)


def expand_hypothesis(s: Sentence, h: Hypothesis, o: TranslationOption, cov: int, score: float, fut: float,
                      orientation: int | None, d: int) -> None:
    static = o.static
    if s.reordering is not None and s.reordering.backward:     # the option's own backward score
        static = o.static + o.lr.backward[orientation]
    state = h.lm_state
    log10 = 0.0
    for w in o.words:
        after = s.lm.kenlm.State()
        log10 += s.lm.model.BaseScore(state, w, after)
        state = after
    done = cov == (1 << s.n) - 1
    if done:
        log10 += s.lm.model.BaseScore(state, "</s>", s.lm.kenlm.State())
    score = score + static + s.w_lm * LN10 * log10
    total = score + fut
    ncov = h.ncov + o.end - o.start + 1
    new = Hypothesis(score, total, cov, ncov, state, o.end, h, o, log10 * LN10, d)
    s.stacks[ncov].add(new, s.recombination_key(new, state))

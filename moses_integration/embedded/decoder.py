"""The embedded phrase-based decoder: moses.ini in, 1-best and Moses-format n-best lists out.

The model score of every translation is Moses's log-linear score ``w . h`` with ``h`` valued as Moses
values it (see :mod:`.features`), so weights tuned with either decoder work with the other.

Library use::

    dec = Decoder.from_ini("moses.ini", DecoderConfig(stack_size=100), sentences=tokenized)
    result = dec.translate(tokenized[0], nbest=100)
    result.best.text, result.best.features, result.best.total

File use (what ``evaluate --backend embedded`` calls)::

    decode_file("moses.ini", "dev.tok.fr", "dev.out", nbest_path="dev.nbest", nbest_size=100, threads=2)

Known differences from Moses: scores are summed in float64 (Moses: float32, so totals agree to about
1e-5); hypotheses in a stack are expanded best first (Moses: hash order), which only matters when
pruning is tight; ``max-trans-opt-per-coverage`` (default 5000) is not applied since ``table-limit``
(default 20) is always smaller; ties in table-limit pruning are broken by file order.
"""
from __future__ import annotations

import dataclasses
import gc
import multiprocessing
import os
import signal
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from phrase_rescore.core.atomic_write import atomic_open
from phrase_rescore.core.config import cap_to_cores
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.progress import bar
from phrase_rescore.core.reading import read_sentences

from ..moses_values import format_moses_float
from .features import UNKNOWN_SCORE, DecoderSpec, load_decoder_spec
from .search import Hypothesis, SearchParams, kbest_paths, path_of, search
from .translation_options import LanguageModel, OptionTable, PhraseTable, ReorderingTable, source_phrases


@dataclass
class DecoderConfig:
    """Decoder settings; ``None`` means "what the moses.ini says, else Moses's default".

    :ivar stack_size: hypotheses kept per stack (Moses ``-stack``, default 200); smaller is faster and makes
        more search errors.
    :ivar beam_threshold: discard hypotheses worse than ``best * beam_threshold`` in probability
        (Moses ``-beam-threshold``, default 1e-5).
    :ivar distortion_limit: maximum jump in source words (``[distortion-limit]``, default 6; -1: unlimited,
        0: monotone).
    :ivar table_limit: targets kept per source phrase (the phrase table's ``table-limit=``, default 20).
    :ivar max_phrase_length: longest source phrase looked up (Moses default 20).
    :ivar nbest_distinct: n-best lists without repeated translations (Moses ``-n-best-list FILE N distinct``).
    :ivar nbest_factor: with ``nbest_distinct``, look at most ``N * nbest_factor`` paths (Moses ``-nbest-factor``).
    """

    stack_size: int | None = None
    beam_threshold: float | None = None
    distortion_limit: int | None = None
    table_limit: int | None = None
    max_phrase_length: int | None = None
    nbest_distinct: bool = True
    nbest_factor: int = 20

    def resolved(self, spec: DecoderSpec) -> "DecoderConfig":
        """A copy with every ``None`` replaced by the moses.ini value or Moses's default; checked."""
        o = spec.ini_options

        def pick(v, key, default, conv):
            if v is not None:
                return v
            if key in o:
                try:
                    return conv(o[key])
                except ValueError:
                    raise PhraseRescoreError(f"[{key}] expected a number, got {o[key]!r}", spec.ini_path) from None
            return default

        c = dataclasses.replace(
            self,
            stack_size=pick(self.stack_size, "stack", 200, int),
            beam_threshold=pick(self.beam_threshold, "beam-threshold", 1e-5, float),
            distortion_limit=spec.distortion_limit if self.distortion_limit is None else self.distortion_limit,
            table_limit=spec.table_limit if self.table_limit is None else self.table_limit,
            max_phrase_length=pick(self.max_phrase_length, "max-phrase-length", 20, int))
        if c.stack_size < 1:
            raise PhraseRescoreError(f"stack size must be at least 1, got {c.stack_size}")
        if not 0 <= c.beam_threshold < 1:
            raise PhraseRescoreError(f"beam threshold must be in [0, 1), got {c.beam_threshold}")
        if c.max_phrase_length < 1 or c.nbest_factor < 1:
            raise PhraseRescoreError("max_phrase_length and nbest_factor must be at least 1")
        return c


@dataclass
class Candidate:
    """One translation with its feature vector (full, in :class:`DecoderSpec` order) and model score."""

    text: str
    features: np.ndarray
    total: float


@dataclass
class Translation:
    """The result for one sentence: the 1-best and (when asked) the n-best list, best first."""

    best: Candidate
    nbest: list[Candidate]


class Decoder:
    """A loaded system: phrase table (filtered to an input), LM and weights. Reusable across sentences."""

    def __init__(self, spec: DecoderSpec, config: DecoderConfig | None = None,
                 sentences: Iterable[Sequence[str]] | None = None, progress: bool = True):
        """Load the models of ``spec``; with ``sentences``, only the phrase-table entries they can use."""
        self.spec = spec
        self.config = (config or DecoderConfig()).resolved(spec)
        keep = None if sentences is None else source_phrases(sentences, self.config.max_phrase_length)
        self.lm = LanguageModel(spec.lm_path)
        self.table = PhraseTable(spec, keep, progress=progress)
        self.reordering = None if spec.reordering is None else ReorderingTable(spec.reordering, keep, progress)
        self.set_weights(spec.weights)

    @classmethod
    def from_ini(cls, ini_path: str | os.PathLike, config: DecoderConfig | None = None,
                 sentences: Iterable[Sequence[str]] | None = None, progress: bool = True) -> "Decoder":
        """Read a moses.ini (see :func:`~.features.load_decoder_spec`) and load its models."""
        return cls(load_decoder_spec(ini_path), config, sentences, progress)

    @property
    def weights(self) -> np.ndarray:
        return self.options.weights

    def set_weights(self, weights: Sequence[float]) -> None:
        """Use new weights (full vector, :class:`DecoderSpec` order); re-applies table-limit pruning."""
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (self.spec.dim,):
            raise PhraseRescoreError(f"expected {self.spec.dim} weights, got {w.shape}")
        self.options = OptionTable(self.table, self.lm, self.spec, w, self.config.table_limit, self.reordering)
        self.params = SearchParams(self.config.stack_size, self.config.beam_threshold,
                                   self.config.distortion_limit, self.config.max_phrase_length)

    def features_of(self, steps: Sequence[Hypothesis]) -> np.ndarray:
        """The feature vector of a path, computed step by step as Moses accumulates it."""
        ix = self.options.index
        h = np.zeros(self.spec.dim)
        lr = self.spec.reordering
        prev = None
        for s in steps:
            o = s.opt
            if lr is not None:
                self._add_reordering(h[ix.reordering], lr, prev, o)
                prev = o
            if o.unknown:
                if ix.unknown is not None:
                    h[ix.unknown] += UNKNOWN_SCORE
            else:
                h[ix.tm] += o.tm
            h[ix.lm] += s.lm
            if ix.distortion is not None:
                h[ix.distortion] -= s.dist
            if ix.word_penalty is not None:
                h[ix.word_penalty] -= len(o.words)
            if ix.phrase_penalty is not None:
                h[ix.phrase_penalty] += 1
        return h

    @staticmethod
    def _add_reordering(h: np.ndarray, lr, prev, o) -> None:
        """Add the LexicalReordering values of placing ``o`` after ``prev`` (None: ``o`` is the first
        phrase) to ``h`` (the model's components): ``o``'s backward score, ``prev``'s forward score."""
        if prev is None:
            if lr.backward:
                ori = lr.first_orientation(o.start)
                h[ori] += o.lr.values[ori]
            return
        ori = lr.orientation(prev.start, prev.end, o.start, o.end)
        if lr.backward:
            h[ori] += o.lr.values[ori]
        if lr.forward:
            f = lr.forward_offset + ori
            h[f] += prev.lr.values[f]

    def translate(self, words: Sequence[str], nbest: int = 0) -> Translation:
        """Translate one tokenized sentence; ``nbest`` > 0 also returns up to that many candidates."""
        # Hypotheses form no reference cycles; the cyclic GC only re-scans the hundreds of thousands of
        # them a search creates (10-20% of the time), so it is paused for the sentence.
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._translate(words, nbest)
        finally:
            if was_enabled:
                gc.enable()

    def _translate(self, words: Sequence[str], nbest: int) -> Translation:
        params = dataclasses.replace(self.params, keep_arcs=nbest > 0)
        final = search(list(words), self.options, params)
        best_h = final[0]
        steps = path_of(best_h)
        best = Candidate(" ".join(w for s in steps for w in s.opt.words), self.features_of(steps), best_h.score)
        out: list[Candidate] = []
        if nbest > 0:
            seen = set()
            limit = nbest * self.config.nbest_factor if self.config.nbest_distinct else nbest
            for score, path in kbest_paths(final, limit):
                text = " ".join(w for s in path for w in s.opt.words)
                if self.config.nbest_distinct:
                    if text in seen:
                        continue
                    seen.add(text)
                out.append(Candidate(text, self.features_of(path), score))
                if len(out) >= nbest:
                    break
        return Translation(best, out)

    def translate_all(self, sentences: Sequence[Sequence[str]], nbest: int = 0, threads: int = 1,
                      desc: str = "decoding") -> list[Translation]:
        """Translate many sentences, in input order, in ``threads`` processes (fork): at most the machine's
        cores (:func:`~phrase_rescore.core.config.cap_to_cores`, with a note) and at most one a sentence."""
        results: list[Translation] = []
        threads = min(cap_to_cores(int(threads), "threads"), max(1, len(sentences)))
        with bar(total=len(sentences), desc=desc, unit="sent") as pb:
            if threads <= 1 or len(sentences) < 2:
                for s in sentences:
                    results.append(self.translate(s, nbest))
                    pb.update(1)
                return results
            global _WORKER
            _WORKER = (self, nbest)
            ctx = multiprocessing.get_context("fork")
            chunk = max(1, min(16, len(sentences) // (threads * 4) or 1))
            try:
                # the workers take SIGTERM's default back: the pool's exit ends them with it, and a handler
                # inherited from the command (which raises SystemExit) leaves a worker waiting for the task
                # queue's lock, and the pool's exit waiting for that worker, for ever
                with ctx.Pool(min(threads, len(sentences)), initializer=signal.signal,
                              initargs=(signal.SIGTERM, signal.SIG_DFL)) as pool:   # no idle processes to fork
                    for r in pool.imap(_work, sentences, chunksize=chunk):
                        results.append(r)
                        pb.update(1)
            finally:
                _WORKER = None
        return results

    def nbest_lines(self, sent_id: int, cands: Sequence[Candidate]) -> list[str]:
        """Moses's n-best lines (``Manager::OutputNBest``): ``id ||| words  ||| Name= v ... ||| total``."""
        return [f"{sent_id} ||| {c.text}  ||| {self.spec.format_features(c.features)} ||| "
                f"{format_moses_float(c.total)}" for c in cands]


_WORKER: tuple[Decoder, int] | None = None


def _work(words):
    dec, nbest = _WORKER
    return dec.translate(words, nbest)


def decode_file(ini_path, input_path, output_path, nbest_path=None, nbest_size: int = 0, threads: int = 1,
                **options) -> None:
    """Translate ``input_path`` (tokenized, one sentence a line) with the system in ``ini_path``.

    Writes the 1-best translations to ``output_path`` (one per input line, same order) and, when
    ``nbest_path`` and ``nbest_size`` are given, a distinct n-best list in Moses's format. Both are written
    atomically. ``options`` are :class:`DecoderConfig` fields (e.g. ``stack_size=50``).
    """
    fields = {f.name for f in dataclasses.fields(DecoderConfig)}
    bad = sorted(set(options) - fields)
    if bad:
        raise PhraseRescoreError(f"unknown decoder option(s) {', '.join(bad)}; expected some of "
                                 f"{', '.join(sorted(fields))}")
    if nbest_path is not None and nbest_size < 1:
        raise PhraseRescoreError(f"an n-best list needs nbest_size >= 1, got {nbest_size}")
    sentences = read_sentences(input_path)
    dec = Decoder.from_ini(ini_path, DecoderConfig(**options), sentences)
    results = dec.translate_all(sentences, nbest_size if nbest_path is not None else 0, threads)
    with atomic_open(output_path, "w") as out:
        for r in results:
            out.write(r.best.text + "\n")
    if nbest_path is not None:
        with atomic_open(nbest_path, "w") as out:
            for i, r in enumerate(results):
                for line in dec.nbest_lines(i, r.nbest):
                    out.write(line + "\n")

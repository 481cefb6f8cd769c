"""Translation options: the phrase table in memory, table-limit pruning, and future-cost estimates.

Moses (``PhraseDictionaryMemory`` + ``TranslationOptionCollection``) does, per source span:

1. look the span's words up in the phrase table, keeping the ``table-limit`` best targets by their
   *future score* ``= w . h(isolation) + w_lm * lm_estimate`` (``TargetPhrase::EvaluateInIsolation``), where
   the LM part is the phrase scored alone: later words with their in-phrase context, the first
   ``order-1`` words with the shorter context they have (their score is the ``estimate``);
2. give every source word with no one-word option an unknown-word option copying the word through;
3. build the future-cost matrix: the best option score of each span, then for longer spans the best
   split into two adjacent spans (``SquareMatrix`` / ``CalcFutureScore``).

The table is loaded once, filtered to the source phrases of the input (Moses's filter-model-given-input),
and re-pruned whenever the weights change (MERT) without reading the file again.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.file_errors import GZIP_READ_ERRORS, gzip_read_error
from phrase_rescore.core.progress import bar
from phrase_rescore.core.reading import open_binary_read
from phrase_rescore.core.words import SEPARATORS
from phrase_rescore.core.words import words as split_words

from ..moses_values import floor_log
from ..phrase_table import EMPTY_TABLE, _parse, line_blocks
from .features import LN10, UNKNOWN_SCORE, DecoderSpec, ReorderingModel


class TranslationOption:
    """One target phrase for one source span (immutable once built)."""

    __slots__ = ("start", "end", "words", "tm", "unknown", "static", "future", "lm_est", "lr")

    def __init__(self, start: int, end: int, words: tuple[str, ...], tm: tuple[float, ...], unknown: bool,
                 static: float, future: float, lm_est: float, lr: "ReorderingScores | None" = None):
        self.start = start          # first source position covered
        self.end = end              # last source position covered (inclusive)
        self.words = words          # target words
        self.tm = tm                # ln-floored phrase-table scores (empty for an unknown word)
        self.unknown = unknown      # True for a copied-through unknown word
        self.static = static        # weighted score of the context-free features (TM, WP, PP, UWP)
        self.future = future        # static + w_lm * LM score of the phrase alone (the future-cost estimate)
        self.lm_est = lm_est        # ln LM score of the phrase alone
        self.lr = lr                # the pair's lexical-reordering scores (None: the system has no such model)


class ReorderingScores:
    """A phrase pair's lexical-reordering values, as the search uses them (shared by its options).

    ``values`` are the feature values per component (the table's, the ``default-scores`` for a pair not
    in it, or all 0 for such a pair without defaults); ``backward[o]`` / ``forward[o]`` are the weighted
    backward / forward scores for orientation ``o``; ``key`` is what recombination compares of a previous
    phrase: its forward table values, or None when the pair is not in the table (``ComparePrevScores``).
    """

    __slots__ = ("values", "backward", "forward", "key")

    def __init__(self, values: tuple[float, ...], backward: tuple[float, ...], forward: tuple[float, ...],
                 key: tuple[float, ...] | None):
        self.values = values
        self.backward = backward
        self.forward = forward
        self.key = key


def open_kenlm(path: str):
    """``kenlm.Model(path)`` without KenLM's chatter on stderr: an ARPA file loads without its advice to build a
    binary one ("Loading the LM will be faster if you build a binary file.") and without its progress bar
    (each decoder run, each tuning iteration, loads the LM again). Its warnings about the file itself (a
    missing ``<unk>``) still show."""
    import kenlm  # imported here so that loading this module needs no kenlm

    config = kenlm.Config()
    config.arpa_complain = kenlm.ARPALoadComplain.NONE
    config.show_progress = False
    return kenlm.Model(path, config)


class LanguageModel:
    """KenLM through its Python module, with the two things the decoder asks of it cached."""

    def __init__(self, path: str):
        import kenlm

        try:
            self.model = open_kenlm(path)
        except (OSError, RuntimeError) as e:
            raise PhraseRescoreError(f"cannot load the language model: {e}", path) from None
        self.kenlm = kenlm
        self.order = self.model.order
        self._isolation: dict[tuple[str, ...], float] = {}

    def begin_state(self):
        """The state after ``<s>`` (``BeginSentenceState``)."""
        s = self.kenlm.State()
        self.model.BeginSentenceWrite(s)
        return s

    def isolation_ln(self, words: tuple[str, ...]) -> float:
        """ln probability of ``words`` scored alone (no ``<s>``): the LM part of a phrase's future score."""
        v = self._isolation.get(words)
        if v is None:
            m = self.model
            a, b = self.kenlm.State(), self.kenlm.State()
            m.NullContextWrite(a)
            total = 0.0
            for w in words:
                total += m.BaseScore(a, w, b)
                a, b = b, a
            v = total * LN10
            self._isolation[words] = v
        return v


def source_phrases(sentences: Iterable[Sequence[str]], max_len: int) -> set[str]:
    """Every source n-gram (n <= max_len) of the input, space-joined: what the table is filtered to."""
    out: set[str] = set()
    for sentence in sentences:
        n = len(sentence)
        for i in range(n):
            for j in range(i + 1, min(n, i + max_len) + 1):
                out.add(" ".join(sentence[i:j]))
    return out


_CHUNK = 1 << 24     # bytes decompressed and split per read
_SEPARATORS = SEPARATORS.encode("ascii")


def _kept_lines(path: str, keep: set[str] | None, desc: str, progress: bool, refuse_empty: bool = True):
    """``(line number, line bytes without the \\n, ended by \\n)`` of the lines of a Moses text table
    (``source ||| ...``, plain or gzip) whose source phrase, trimmed of spaces and tabs as Moses trims it,
    is in ``keep`` (every line when None).

    The file is read in large blocks and a line's source is compared as bytes before anything else is
    done with it, so a line the input cannot use costs one search for ``|||`` and one set lookup (as
    Moses's filter-model-given-input, such lines are not parsed).
    """
    keep_b = None if keep is None else {k.encode("utf-8") for k in keep}
    pb = bar(desc=desc, unit="line") if progress else None
    line_no = 0
    with open_binary_read(path) as f:
        try:
            for lines, ended in line_blocks(f, _CHUNK):
                if keep_b is None:
                    for i, raw in enumerate(lines, start=line_no + 1):
                        yield i, raw, ended
                else:
                    for i, raw in enumerate(lines, start=line_no + 1):
                        j = raw.find(b"|||")
                        if (raw if j < 0 else raw[:j]).strip(_SEPARATORS) in keep_b:
                            yield i, raw, ended
                line_no += len(lines)
                if pb is not None and ended:
                    pb.update(len(lines))
        except GZIP_READ_ERRORS as e:
            raise gzip_read_error(e, path, line_no) from None
        finally:
            if pb is not None:
                pb.close()
    if line_no == 0 and refuse_empty:
        raise PhraseRescoreError(EMPTY_TABLE, path)


class PhraseTable:
    """The phrase-table entries needed for an input, with the ln-floored scores of each target."""

    def __init__(self, spec: DecoderSpec, keep: set[str] | None, progress: bool = True):
        """Load ``spec.phrase_table``, keeping only source phrases in ``keep`` (all when None)."""
        self.path = spec.phrase_table
        self.entries: dict[str, list[tuple[tuple[str, ...], tuple[float, ...]]]] = {}
        self.max_source_len = 0
        n_scores = spec.num_tm_features
        for line_no, raw, newline in _kept_lines(self.path, keep, "loading phrase table", progress):
            e = _parse(raw, line_no, newline)
            if e.error is not None:
                raise PhraseRescoreError(e.error, self.path, line_no)
            if keep is not None and e.source not in keep:
                continue
            if len(e.scores) != n_scores:
                raise PhraseRescoreError(f"expected {n_scores} scores (num-features in {spec.ini_path}), "
                                         f"found {len(e.scores)}", self.path, e.line_no)
            self.entries.setdefault(e.source, []).append(
                (tuple(split_words(e.target)), tuple(floor_log(p) for p in e.scores)))
            self.max_source_len = max(self.max_source_len, len(split_words(e.source)))


class ReorderingTable:
    """The reordering-table entries needed for an input: ``(source, target) -> ln-floored scores``.

    The table is Moses's text format, plain or gzip: ``source ||| target ||| p1 ... pN`` with N the
    model's number of features; values are stored as ``FloorScore(TransformScore(p))``
    (``LexicalReorderingTableMemory::LoadFromFile``).
    """

    def __init__(self, model: ReorderingModel, keep: set[str] | None, progress: bool = True):
        """Load ``model.path``, keeping only source phrases in ``keep`` (all when None)."""
        self.model = model
        self.path = model.path
        self.entries: dict[tuple[str, str], tuple[float, ...]] = {}
        n = model.size
        for line_no, raw, _ in _kept_lines(self.path, keep, "loading reordering table", progress,
                                           refuse_empty=False):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise PhraseRescoreError(f"invalid UTF-8 at byte {e.start} ({e.reason}): expected UTF-8 text",
                                         self.path, line_no) from None
            if text.endswith("\r"):
                text = text[:-1]
            src, sep, rest = text.partition("|||")
            src = src.strip(SEPARATORS)
            if keep is not None and src not in keep:
                continue
            fields = rest.split("|||")
            if not sep or len(fields) != 2:
                raise PhraseRescoreError("expected 'source ||| target ||| scores' (3 fields)", self.path, line_no)
            try:
                probs = [float(x) for x in fields[1].split()]
            except ValueError:
                raise PhraseRescoreError(f"expected {n} numbers in the scores field, got {fields[1].strip()!r}",
                                         self.path, line_no) from None
            if len(probs) != n:
                raise PhraseRescoreError(f"expected {n} scores ({model.name} type={model.type}), found "
                                         f"{len(probs)}", self.path, line_no)
            if any(not p >= 0 for p in probs):
                raise PhraseRescoreError("expected probabilities >= 0 in the scores field", self.path, line_no)
            self.entries[(src, fields[0].strip(SEPARATORS))] = tuple(floor_log(p) for p in probs)

    def scores(self, weights: np.ndarray, source: str, target: tuple[str, ...]) -> ReorderingScores:
        """The pair's :class:`ReorderingScores` under ``weights`` (the model's components only)."""
        m = self.model
        found = self.entries.get((source, " ".join(target)))
        values = found if found is not None else m.default_scores or (0.0,) * m.size
        c = m.classes
        back = tuple(float(weights[o]) * values[o] for o in range(c)) if m.backward else ()
        off = m.forward_offset
        fwd = tuple(float(weights[off + o]) * values[off + o] for o in range(c)) if m.forward else ()
        key = None if found is None else found[off:off + c]
        return ReorderingScores(values, back, fwd, key)


@dataclass
class WeightIndex:
    """Where each feature sits in the full vector, and its weight (for the inner loops)."""

    tm: slice
    lm: int
    distortion: int | None
    word_penalty: int | None
    phrase_penalty: int | None
    unknown: int | None
    reordering: slice | None = None

    @classmethod
    def from_spec(cls, spec: DecoderSpec) -> "WeightIndex":
        def idx(t):
            return spec.index(t) if spec.has(t) else None

        o = spec.index("PhraseDictionaryMemory")
        lr = None
        if spec.reordering is not None:
            r = spec.index("LexicalReordering")
            lr = slice(r, r + spec.reordering.size)
        return cls(slice(o, o + spec.num_tm_features), spec.index("KENLM"), idx("Distortion"),
                   idx("WordPenalty"), idx("PhrasePenalty"), idx("UnknownWordPenalty"), lr)


def _w(weights: np.ndarray, i: int | None) -> float:
    return 0.0 if i is None else float(weights[i])


class OptionTable:
    """The pruned, scored translation options of every source phrase under one weight vector."""

    def __init__(self, table: PhraseTable, lm: LanguageModel, spec: DecoderSpec, weights: np.ndarray,
                 table_limit: int, reordering: ReorderingTable | None = None):
        """``reordering``: the system's reordering table (required when ``spec`` has LexicalReordering)."""
        self.lm = lm
        self.reordering = reordering
        if (reordering is None) != (spec.reordering is None):
            raise PhraseRescoreError("a reordering table is needed exactly when the system has LexicalReordering",
                                     spec.ini_path)
        self.index = WeightIndex.from_spec(spec)
        self.weights = np.asarray(weights, dtype=np.float64)
        ix = self.index
        w_tm = self.weights[ix.tm]
        self.w_lm = float(self.weights[ix.lm])
        self.w_d = _w(self.weights, ix.distortion)
        self.w_wp = _w(self.weights, ix.word_penalty)
        self.w_pp = _w(self.weights, ix.phrase_penalty)
        self.w_unk = _w(self.weights, ix.unknown)
        self.has_wp = ix.word_penalty is not None
        self.has_pp = ix.phrase_penalty is not None
        self.table_limit = table_limit
        self.max_source_len = table.max_source_len
        self.w_lr = None if ix.reordering is None else self.weights[ix.reordering]
        # source phrase -> [(words, tm, static, future, lm_est, lr)], best future first, at most table_limit
        self.pruned: dict[str, list[tuple]] = {}
        for src, targets in table.entries.items():
            scored = []
            for target, tm in targets:
                static = float(np.dot(w_tm, tm)) + self.w_wp * -len(target) + self.w_pp
                lm_est = lm.isolation_ln(target)
                scored.append((static + self.w_lm * lm_est, static, target, tm, lm_est))
            # Moses: NthElement(tableLimit) on the future score, ties in any order; we keep file order for ties
            scored.sort(key=lambda t: -t[0])
            if table_limit > 0:
                scored = scored[:table_limit]
            self.pruned[src] = [(words, tm, static, fut, lm_est, self._reordering(src, words))
                                for fut, static, words, tm, lm_est in scored]

    def _reordering(self, source: str, words: tuple[str, ...]) -> ReorderingScores | None:
        if self.reordering is None:
            return None
        return self.reordering.scores(self.w_lr, source, words)

    def unknown_option(self, pos: int, word: str) -> TranslationOption:
        """The copy-through option Moses creates for a source word with no one-word translation."""
        words = (word,)
        static = self.w_unk * UNKNOWN_SCORE + self.w_wp * -1 + self.w_pp
        lm_est = self.lm.isolation_ln(words)
        return TranslationOption(pos, pos, words, (), True, static, static + self.w_lm * lm_est, lm_est,
                                 self._reordering(word, words))

    def collect(self, words: Sequence[str], max_phrase_length: int
                ) -> tuple[list[list[list[TranslationOption]]], np.ndarray]:
        """Options per span and the future-cost matrix for one sentence.

        :return: ``(opts, fc)`` with ``opts[i][k]`` the options of span ``[i, i+k]`` and ``fc`` an
            (n+1, n+1) array, ``fc[i, j]`` the best estimate for covering ``[i, j)``.
        """
        n = len(words)
        maxlen = min(max_phrase_length, max(self.max_source_len, 1))
        opts: list[list[list[TranslationOption]]] = []
        for i in range(n):
            row = []
            for k in range(min(maxlen, n - i)):
                src = " ".join(words[i:i + k + 1])
                cands = self.pruned.get(src, ())
                row.append([TranslationOption(i, i + k, w, tm, False, st, fu, le, lr)
                            for w, tm, st, fu, le, lr in cands])
            if not row[0]:
                row[0] = [self.unknown_option(i, words[i])]
            opts.append(row)
        # future-cost matrix (SquareMatrix): fc[i, j] covers source words i .. j-1
        fc = np.full((n + 1, n + 1), -np.inf)
        for i in range(n):
            for k, lst in enumerate(opts[i]):
                if lst:
                    fc[i, i + k + 1] = max(o.future for o in lst)
        for length in range(2, n + 1):
            for i in range(0, n - length + 1):
                j = i + length
                best = fc[i, j]
                for m in range(i + 1, j):
                    s = fc[i, m] + fc[m, j]
                    if s > best:
                        best = s
                fc[i, j] = best
        return opts, fc

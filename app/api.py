"""The Python API: the command line's steps as functions with typed results (``docs/api.md``).

Every name here is also at the top of the package, loaded on first use::

    import phrase_rescore as pr
    scores = pr.score_pairs("rnn/model.pt", [("the house", "la maison")])

=============================  ============================================================================
phrase tables                  :func:`read_phrase_table` (streams :class:`PhraseEntry` records),
                               :func:`write_phrase_table`
the neural side                :func:`prepare` -> :class:`PrepareSummary`, :func:`train` -> :class:`TrainSummary`,
                               :func:`score_table` -> :class:`ScoreSummary`, :func:`score_pairs` -> :class:`PairScore`
the Moses side                 :func:`rewrite_ini` -> :class:`RewriteResult`, :class:`Decoder` ->
                               :class:`DecoderOutput` / :class:`Hypothesis`, :func:`tune` -> :class:`TuneResult`,
                               :func:`evaluate` -> Table 1 as a ``pandas.DataFrame``
=============================  ============================================================================

Options are keyword arguments named as the command's options with ``_`` for ``-`` (``max_steps=20`` for
``--max-steps 20``), checked as the command checks them; each function also takes the command's config
object (``config=ScoreConfig(...)``). Errors are :class:`~phrase_rescore.core.errors.PhraseRescoreError`,
one line naming the file, as the command prints them; an option that does not exist is a ``TypeError``.
The functions guard a user's files as the commands do (an output may not replace an input; an output
folder must be new, empty or one of phrase-rescore's).

Importing this module (or ``phrase_rescore``) imports neither torch nor pandas: each function imports what
it needs when it is called, and the result types of other modules (``ScoreSummary``, ``TrainSummary``,
``PhraseEntry``, the config classes...) are loaded on first use (PEP 562 ``__getattr__``).

The examples below run as tests (``tests/test_api.py``), in the order of the pipeline, in a folder that holds
a tiny English-French system: ``model/phrase-table.gz``, ``model/lm.arpa``, ``model/moses.ini`` and
``dev.en``/``dev.fr``, ``test.en``/``test.fr``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence, Union

from phrase_rescore import __all__ as _package_names
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.moses_integration.configs import EvaluateConfig, RewriteConfig, SystemSpec, TuneConfig
from phrase_rescore.pipeline.configs import PrepareConfig, ScoreConfig, TrainConfig
from phrase_rescore.pipeline.ranks import is_rank_zero

if TYPE_CHECKING:
    import pandas as pd

    from phrase_rescore.moses_integration.embedded.decoder import DecoderConfig
    from phrase_rescore.moses_integration.phrase_table import PhraseTableReader
    from phrase_rescore.moses_integration.rewrite import RewriteResult
    from phrase_rescore.pipeline.score import ScoreSummary
    from phrase_rescore.pipeline.train import TrainSummary

PathLike = Union[str, os.PathLike]

#: the API's names: one list, the root package's (which must hold them without importing this module)
__all__ = list(_package_names)

#: names defined in other modules, loaded on first use: name -> module
_ELSEWHERE = {
    "PhraseEntry": "phrase_rescore.moses_integration.phrase_table",
    "PhraseTableReader": "phrase_rescore.moses_integration.phrase_table",
    "TrainSummary": "phrase_rescore.pipeline.train",
    "ScoreSummary": "phrase_rescore.pipeline.score",
    "RewriteResult": "phrase_rescore.moses_integration.rewrite",
    "DecoderConfig": "phrase_rescore.moses_integration.embedded.decoder",
}


def __getattr__(name: str) -> Any:
    """PEP 562: the result and config types of other modules, imported when first asked for."""
    module = _ELSEWHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


# --------------------------------------------------------------------------------------------- helpers

def _options(cls, config, options: dict, what: str, fixed: Sequence[str] = ()) -> dict:
    """``options`` checked as the command checks them (:func:`~phrase_rescore.core.config.check`), merged
    over ``config``'s values when a config object is given; ``fixed``: fields the function sets itself.

    :raises TypeError: an option ``cls`` does not have, or a ``config`` of another class.
    :raises PhraseRescoreError: a bad value (``max_steps = 0: expected at least 1``).
    """
    from phrase_rescore.core.config import check, key_name

    if config is not None and not isinstance(config, cls):
        raise TypeError(f"{what}(): config must be a {cls.__name__}, not {type(config).__name__}")
    names = [f.name for f in dataclasses.fields(cls) if f.name not in fixed]
    unknown = sorted(set(options) - set(names))
    if unknown:
        raise TypeError(f"{what}() got unknown option(s) {', '.join(unknown)}; its options are the fields of "
                        f"{cls.__name__}: {', '.join(names)}")
    values = {} if config is None else {n: getattr(config, n) for n in names}
    values.update(check(cls, options, key_name))
    return values


def _guard(command: str, inputs: Mapping, outputs: Mapping | None = None, out_dirs: Mapping | None = None) -> None:
    """The command line's guard of a user's files: no output may replace an input or another output, and
    an output folder must be new, empty or ``command``'s (it is claimed: created and marked)."""
    from phrase_rescore.core.outdir import claim_output_dir
    from phrase_rescore.core.output_paths import check_outputs

    check_outputs(inputs, outputs or {}, out_dirs)
    for name, folder in (out_dirs or {}).items():
        if folder is not None and is_rank_zero():  # under torchrun rank 0 claims for all
            claim_output_dir(folder, name, command)


@contextlib.contextmanager
def _released_on_error() -> Iterator[None]:
    """A call that fails removes the output folders it created and left empty, as a failed command does."""
    try:
        yield
    except BaseException:
        from phrase_rescore.core.outdir import release_unused

        release_unused()
        raise


def _optional_path(p: PathLike | None) -> Path | None:
    return None if p is None else Path(p)


# --------------------------------------------------------------------------------------------- phrase tables

def read_phrase_table(path: PathLike, *, on_error: str = "raise", rejects: PathLike | None = None,
                      allow_negative: bool = False) -> PhraseTableReader:
    """Stream a Moses phrase table (plain or gzip, by content) as :class:`PhraseEntry` records.

    :param on_error: ``"raise"``: a bad line stops the read with a :class:`PhraseRescoreError` naming it;
        ``"keep"``: it is yielded with ``error`` set (and listed in ``rejects``, when given).
    :param allow_negative: accept negative scores (a table of log-probabilities, ``score --raw-logprob``).
    :returns: an iterable reader; its ``stats`` count lines and rejects as it advances.

    Each record has ``line_no``, ``source``, ``target``, ``scores`` (floats), ``raw`` (the line's bytes) and
    ``error``:

    >>> entries = list(pr.read_phrase_table("model/phrase-table.gz"))
    >>> len(entries)
    6
    >>> e = entries[1]
    >>> e.source, e.target, e.scores
    ('house', 'maison', (0.8, 0.7, 0.6, 0.5))
    """
    from phrase_rescore.moses_integration.phrase_table import read_phrase_table as read

    return read(path, on_error=on_error, rejects_path=None if rejects is None else os.fspath(rejects),
                allow_negative=allow_negative)


def write_phrase_table(path: PathLike, entries: Iterable, *, compresslevel: int = 6) -> int:
    """Write a phrase table (gzip when ``path`` ends in .gz), atomically: the file appears whole or not at all.

    :param entries: :class:`PhraseEntry` records (written byte for byte as they were read) or
        ``(source, target, scores)`` tuples, written as ``source ||| target ||| s1 s2 ...`` with each score in
        7 significant digits. A score must be one Moses reads: finite and not negative.
    :returns: the number of lines written.

    >>> kept = [e for e in pr.read_phrase_table("model/phrase-table.gz") if e.scores[0] >= 0.5]
    >>> pr.write_phrase_table("pruned.gz", kept + [("a house", "une maison", (0.5, 0.25, 0.5, 0.25))])
    6
    >>> [e.target for e in pr.read_phrase_table("pruned.gz")][-2:]
    ['la maison', 'une maison']
    """
    from phrase_rescore.core.words import SEPARATORS
    from phrase_rescore.moses_integration.moses_values import format_score
    from phrase_rescore.moses_integration.phrase_table import FIELD_SEP, PhraseTableWriter, score_problem

    def line(n: int, item) -> bytes:
        raw = getattr(item, "raw", None)
        if raw is not None:
            return raw + b"\n"
        try:
            source, target, scores = item
        except (TypeError, ValueError):
            raise TypeError(f"entry {n}: expected a PhraseEntry or a (source, target, scores) tuple, "
                            f"got {item!r}") from None
        sides = []
        for side, text in (("source", source), ("target", target)):
            if not isinstance(text, str):
                raise TypeError(f"entry {n}: the {side} phrase must be a str, not {type(text).__name__}")
            text = text.strip(SEPARATORS)
            if not text or "|||" in text or "\n" in text or "\r" in text:
                raise PhraseRescoreError(f"entry {n}: {side} phrase {text!r}: expected at least one word, "
                                         "without '|||' or a line break")
            sides.append(text)
        texts = [format_score(float(s)) for s in scores]
        for t in texts:
            problem = score_problem(t)
            if problem is not None:
                raise PhraseRescoreError(f"entry {n}: {problem}")
        if not texts:
            raise PhraseRescoreError(f"entry {n}: expected at least one score")
        sep = b" " + FIELD_SEP + b" "
        return sep.join([sides[0].encode("utf-8"), sides[1].encode("utf-8"), " ".join(texts).encode("ascii")]) + b"\n"

    n = 0
    with PhraseTableWriter(path, compresslevel=compresslevel) as w:
        for n, item in enumerate(entries, start=1):
            w.write_raw([line(n, item)])
    return n


# --------------------------------------------------------------------------------------------- neural side

@dataclass(frozen=True)
class PrepareSummary:
    """What :func:`prepare` wrote (from the manifest ``OUT/manifest.json``)."""

    out: Path                   # the pairs folder
    lines: int                  # lines of the table
    rejected: int               # bad lines skipped (``on_error="keep"``), listed in OUT/rejects.txt
    unique_pairs: int           # distinct (source, target) pairs
    train_pairs: int
    valid_pairs: int            # held out for validation, by source phrase
    train_sources: int
    valid_sources: int
    vocab_source: int           # shortlist sizes (``<eos>`` and ``<unk>`` included)
    vocab_target: int
    vocab_counted_from: str     # "corpus" or "unique phrase pairs"


def prepare(table: PathLike, out: PathLike, config: PrepareConfig | None = None, **options) -> PrepareSummary:
    """The unique phrase pairs of a phrase table as Parquet with ids, a vocabulary and a validation split
    (``phrase-rescore prepare``).

    :param options: :class:`PrepareConfig` fields: ``vocab_size`` (15000), ``valid_fraction`` (0.01),
        ``seed``, ``on_error``, ``src_corpus``/``tgt_corpus`` (tokenized corpora to count the vocabulary
        from), ``vocab_from_corpus``...
    :returns: a :class:`PrepareSummary`.

    >>> s = pr.prepare("model/phrase-table.gz", "pairs", vocab_size=2)   # a shortlist that leaves words out
    >>> s.lines, s.unique_pairs, s.train_pairs + s.valid_pairs
    (6, 6, 6)
    >>> s.vocab_source, s.vocab_target           # the words and <eos>, <unk>
    (4, 4)
    """
    from phrase_rescore.pipeline.prepare import prepare as run

    values = _options(PrepareConfig, config, options, "prepare")
    cfg = PrepareConfig(**values)
    if not cfg.vocab_from_corpus and cfg.src_corpus is not None:
        raise PhraseRescoreError("src_corpus counts the vocabulary from the corpus: leave vocab_from_corpus True")
    with _released_on_error():
        _guard("prepare", {"table": table, "src_corpus": cfg.src_corpus, "tgt_corpus": cfg.tgt_corpus}, {},
               {"out": out})
        m = run(table, out, cfg)
    return PrepareSummary(Path(out), *(m[k] for k in (
        "lines", "rejected", "unique_pairs", "train_pairs", "valid_pairs", "train_sources", "valid_sources",
        "vocab_source", "vocab_target", "vocab_counted_from")))


def train(pairs: PathLike, out: PathLike, config: TrainConfig | None = None, **options) -> TrainSummary:
    """Train the RNN Encoder-Decoder on :func:`prepare`'s pairs (``phrase-rescore train``).

    :param out: the model folder: ``model.pt`` (the best checkpoint), ``last.pt``, ``train_log.csv``.
    :param options: :class:`TrainConfig` fields: ``preset`` ("small"; "paper" wants a GPU), ``max_steps``,
        ``time_budget_s``, ``batch_size``, ``valid_every``, ``device``, ``seed``, ``model_overrides``
        (e.g. ``{"hidden_dim": 500}``), ``resume``...
    :returns: a :class:`TrainSummary` (``steps``, ``stop_reason``, ``best_valid_ppl``, ``model``, ...).

    >>> tiny = {"emb_dim": 16, "hidden_dim": 32, "maxout_units": 16, "rank": 16}    # the example's model sizes
    >>> t = pr.train("pairs", "rnn", model_overrides=tiny, max_steps=20, valid_every=10, device="cpu")
    >>> t.steps, t.stop_reason, t.model
    (20, 'max_steps', 'rnn/model.pt')
    """
    from phrase_rescore.pipeline.train import train as run

    cfg = TrainConfig(**_options(TrainConfig, config, options, "train"))
    with _released_on_error():
        _guard("train", {"pairs": pairs}, {}, {"out": out})
        return run(pairs, out, cfg)


def score_table(model: PathLike, table: PathLike, out: PathLike, config: ScoreConfig | None = None, *,
                reverse_model: PathLike | None = None, ensemble_model: PathLike | None = None,
                **options) -> ScoreSummary:
    """Append log p(target|source) and the unknown-word penalty to every line of a phrase table
    (``phrase-rescore score``); streaming, resumable, every other byte of each line kept.

    :param model: an encoder-decoder checkpoint (``.pt``) or :func:`train`'s folder.
    :param out: the new table (gzip when it ends in .gz).
    :param reverse_model: a model trained in the other direction: one more column, log p(source|target).
    :param ensemble_model: a second model of the same direction: the log p column is the two models' mean.
    :param options: :class:`ScoreConfig` fields: ``columns`` (("logprob", "unk")), ``raw_logprob``,
        ``on_error``, ``device``, ``precision``, ``threads``, ``chunk_lines``, ``rare_words``, ``restart``...
    :returns: a :class:`ScoreSummary` (``lines``, ``pairs``, ``rejected``, ``pairs_per_s``, ``device``,
        ``out``, ...).

    >>> s = pr.score_table("rnn", "model/phrase-table.gz", "phrase-table.rnn.gz", device="cpu")
    >>> s.lines, s.pairs, s.rejected, s.out
    (6, 6, 0, 'phrase-table.rnn.gz')
    >>> next(iter(pr.read_phrase_table("phrase-table.rnn.gz"))).scores[4:]     # the two new columns  # doctest: +ELLIPSIS
    (0.0..., 2.718282)
    """
    from phrase_rescore.pipeline.score import score_table as run

    cfg = ScoreConfig(**_options(ScoreConfig, config, options, "score_table"))
    if reverse_model is None and ensemble_model is None:
        return run(model, table, out, cfg)      # it checks its own paths (and resumes into its own files)
    from phrase_rescore.pipeline.score_columns import score_with_extras

    check = {"model": model, "table": table, "reverse_model": reverse_model, "ensemble_model": ensemble_model,
             "rare_counts": cfg.rare_counts, "rare_counts_reverse": cfg.rare_counts_reverse}
    _guard("score", check, {"out": out})
    return score_with_extras(model, table, out, cfg, reverse_model=reverse_model, ensemble_model=ensemble_model)


@dataclass(frozen=True)
class PairScore:
    """One phrase pair as :func:`score_table` scores it.

    ``logprob`` is log p(target|source) (natural log, never above 0) and ``unknown_words`` the words
    outside the model's shortlists (source side plus target side): the two values behind the
    columns ``score`` appends; :meth:`columns` gives their text exactly as ``score`` writes it.
    """

    source: str
    target: str
    logprob: float
    unknown_words: int

    @property
    def wp(self) -> float:
        """The unknown-word (WP) column's value in Moses's form, ``exp(min(n, 88))``: Moses's log gives n back."""
        from phrase_rescore.moses_integration.moses_values import UNK_COUNT_MAX

        return math.exp(min(self.unknown_words, UNK_COUNT_MAX))

    def columns(self, columns: str | Sequence[str] = ("logprob", "unk"), raw: bool = False) -> tuple[str, ...]:
        """The text of the new columns as ``score --columns ... [--raw-logprob]`` writes them for this pair:
        ``logprob`` as exp(log p) (floored as Moses floors it), ``unk`` as exp(n); with ``raw``, log p and n."""
        import numpy as np

        from phrase_rescore.moses_integration.moses_values import logprob_texts, unk_texts
        from phrase_rescore.pipeline.configs import parse_columns

        texts = {"logprob": lambda: logprob_texts(np.array([self.logprob]), raw=raw)[0],
                 "unk": lambda: unk_texts(np.array([self.unknown_words]), raw=raw)[0]}
        return tuple(texts[c]() for c in parse_columns(columns))


def score_pairs(model: PathLike, pairs: Iterable, config: ScoreConfig | None = None, **options) -> list[PairScore]:
    """log p(target|source) and the unknown-word count of phrase pairs in memory, as :func:`score_table`
    computes them for the same pairs in a table (the same scorer, chunks, groups and columns): for a table's
    pairs in the table's order, :meth:`PairScore.columns` is the text ``score`` writes. A pair scored in other
    company (alone, or among other pairs) can differ in float32's last digits, as in ``score``: its sums
    then run in another order.

    :param model: an encoder-decoder checkpoint (``.pt``) or :func:`train`'s folder.
    :param pairs: ``(source, target)`` tuples of tokenized phrases, or :class:`PhraseEntry` records.
    :param options: the :class:`ScoreConfig` fields that decide the values: ``device``, ``precision``,
        ``threads``, ``vocab``, ``rare_words``/``rare_counts``, ``matmul``, ``max_tokens``, ``chunk_lines``.
    :returns: one :class:`PairScore` per pair, in order.

    >>> [p] = pr.score_pairs("rnn/model.pt", [("the house", "la maison")])
    >>> p.source, p.target, p.unknown_words, p.wp
    ('the house', 'la maison', 0, 1.0)
    >>> -100 < p.logprob < 0
    True
    >>> p.columns(raw=True)[1], p.columns()[1]          # the unknown-word column, raw and for Moses
    ('0', '1')
    >>> pr.score_pairs("rnn", [("the cat", "le chat")])[0].unknown_words      # cat, le, chat: not in the table
    3
    """
    from concurrent.futures import ThreadPoolExecutor

    import torch

    from phrase_rescore.pipeline.device import resolve_device
    from phrase_rescore.pipeline.model.checkpoint import resolve_checkpoint
    from phrase_rescore.pipeline.rare_words import RareWordShares
    from phrase_rescore.pipeline.score import load_model
    from phrase_rescore.pipeline.scoring.fast import FastScorer, choose_matmul, one_thread_each

    cfg = ScoreConfig(**_options(ScoreConfig, config, options, "score_pairs"))
    items = _pair_items(pairs)
    net, vocabs = load_model(resolve_checkpoint(model), cfg)
    shares = RareWordShares.from_corpus(cfg.rare_counts, vocabs.target) if cfg.rare_words == "unigram" else None
    device = resolve_device(cfg.device)
    if cfg.matmul == "numpy" and (device.type != "cpu" or cfg.precision != "fp32"):
        raise PhraseRescoreError(f"matmul 'numpy' is for float32 on a CPU, not {cfg.precision} on {device}: "
                                 "use matmul='auto' or 'torch'")
    matmul = choose_matmul(device, cfg.precision) if cfg.matmul == "auto" else cfg.matmul
    scorer = FastScorer(net, device, precision=cfg.precision, precompute_vocab=cfg.precompute_vocab,
                        max_tokens=cfg.max_tokens, matmul=matmul)
    cpu = device.type == "cpu"
    workers = int(cfg.threads or torch.get_num_threads()) if cpu else 1
    out: list[PairScore] = []
    # as score does: chunks of chunk_lines pairs, each scored by workers of one thread each on a CPU
    with one_thread_each() if cpu else contextlib.nullcontext(), ThreadPoolExecutor(workers) as pool:
        for start in range(0, len(items), cfg.chunk_lines):
            chunk = items[start:start + cfg.chunk_lines]
            out.extend(_score_chunk(scorer, pool, vocabs, shares, chunk, start, model))
    return out


def _pair_items(pairs: Iterable) -> list[tuple[str, str]]:
    """``(source, target)`` of each pair, trimmed as the table reader trims a phrase.

    :raises TypeError: a pair that is neither a tuple of two str nor a :class:`PhraseEntry`.
    :raises PhraseRescoreError: an empty phrase, or a rejected line of the reader.
    """
    from phrase_rescore.core.words import SEPARATORS

    items = []
    for n, p in enumerate(pairs, start=1):
        if hasattr(p, "source") and hasattr(p, "target"):
            if getattr(p, "error", None) is not None:
                raise PhraseRescoreError(f"pair {n} is a rejected line: {p.error}")
            source, target = p.source, p.target
        else:
            try:
                source, target = p
            except (TypeError, ValueError):
                raise TypeError(f"pair {n}: expected a (source, target) tuple or a PhraseEntry, got {p!r}") from None
        if not isinstance(source, str) or not isinstance(target, str):
            raise TypeError(f"pair {n}: the phrases must be str, got {type(source).__name__} and "
                            f"{type(target).__name__}")
        source, target = source.strip(SEPARATORS), target.strip(SEPARATORS)
        if not source or not target:
            raise PhraseRescoreError(f"pair {n}: empty {'source' if not source else 'target'} phrase: expected "
                                     "at least one word")
        items.append((source, target))
    return items


def _score_chunk(scorer, pool, vocabs, shares, chunk: list[tuple[str, str]], start: int, model) -> list[PairScore]:
    """One chunk of pairs (pairs ``start``... of the call) as ``score`` scores a chunk of table lines: each
    distinct source once, the pairs in groups on the pool's workers, plus the rare words' shares.

    :raises PhraseRescoreError: a pair whose log p is NaN (a model that overflows at this precision).
    """
    import numpy as np

    from phrase_rescore.pipeline.scoring.chunk_pairs import PairCollector

    collector = PairCollector(vocabs, shares)
    for k, (source, target) in enumerate(chunk):
        collector.add(k, source, target)
    found = collector.reset()
    logp = scorer.score(found, pool)
    if found.rare_log_share is not None:
        logp += found.rare_log_share
    bad = np.flatnonzero(np.isnan(logp))
    if len(bad):
        raise PhraseRescoreError(f"the model gives log p = NaN for pair {start + int(bad[0]) + 1} ({scorer.precision} "
                                 f"on {scorer.device}): its weights or this precision overflow; try precision='fp32'",
                                 model)
    logp = np.minimum(logp, 0.0)                # a log-probability (rounding can leave +1e-8), as written
    return [PairScore(s, t, float(lp), int(u)) for (s, t), lp, u in zip(chunk, logp.tolist(), found.n_unk.tolist())]


# --------------------------------------------------------------------------------------------- Moses side

def rewrite_ini(old_ini: PathLike, table: PathLike, out: PathLike, *, binarized_prefix: PathLike | None = None,
                **options) -> RewriteResult:
    """Point a moses.ini at a rescored table: its phrase dictionary's ``num-features`` grows by the new
    columns and matching weights are appended (``phrase-rescore moses-ini``); every other line is kept.

    :param options: :class:`~phrase_rescore.moses_integration.configs.RewriteConfig` settings: ``feature``
        (which phrase dictionary), ``weights`` (of the new columns; 0.2 each), ``binarize``, ``threads``,
        ``moses_home`` (for a ``PhraseDictionaryCompact``, whose table is binarized).
    :returns: a :class:`RewriteResult` (``old_count``, ``new_count``, ``added_weights``, ``notes``...).

    >>> r = pr.rewrite_ini("model/moses.ini", "phrase-table.rnn.gz", "moses.rnn.ini")
    >>> r.feature, r.old_count, r.new_count, r.added_weights
    ('TranslationModel0', 4, 6, [0.2, 0.2])
    """
    from phrase_rescore.moses_integration.moses_ini import read_moses_ini
    from phrase_rescore.moses_integration.rewrite import (
        BINARIZER_LOG,
        MINPHR,
        default_binarized_prefix,
        rewrite_moses_ini,
    )

    fixed = ("old_ini", "table", "out", "binarized_prefix")
    values = _options(RewriteConfig, None, options, "rewrite_ini", fixed)
    # processPhraseTableMin writes PREFIX.minphr and its log (for a PhraseDictionaryCompact only)
    prefix = binarized_prefix or (default_binarized_prefix(Path(table).resolve())
                                  if values.get("binarize", True) else None)
    binarized = [f"{prefix}{MINPHR}", f"{prefix}{BINARIZER_LOG}"] if prefix else None
    _guard("moses-ini", {"old_ini": old_ini, "table": table, **read_moses_ini(old_ini).model_files()},
           {"out": out, "binarized_prefix": binarized})
    return rewrite_moses_ini(RewriteConfig(Path(old_ini), Path(table), Path(out),
                                           binarized_prefix=_optional_path(binarized_prefix), **values))


@dataclass(frozen=True)
class Hypothesis:
    """One translation: its words, its model score (Moses's log-linear ``w . h``) and its feature values
    ``h`` by feature name, in the n-best list's order (tuneable features first; ``UnknownWordPenalty0``,
    which Moses does not print, last)."""

    words: tuple[str, ...]
    total: float
    features: dict[str, tuple[float, ...]]

    @property
    def text(self) -> str:
        """The words joined by spaces."""
        return " ".join(self.words)


@dataclass(frozen=True)
class DecoderOutput:
    """One sentence's result: the 1-best and, when asked for, the distinct n-best list (best first)."""

    source: tuple[str, ...]
    best: Hypothesis
    nbest: tuple[Hypothesis, ...] = ()

    @property
    def text(self) -> str:
        """The 1-best translation."""
        return self.best.text


class Decoder:
    """The embedded phrase-based decoder (``phrase-rescore decode``) on a moses.ini's system, in memory.

    The same search and scores as ``phrase-rescore decode -f INI`` (and, to float precision, as Moses):
    the 1-best of a sentence is the line ``decode`` prints. Build it with :meth:`from_ini`.

    >>> dec = pr.Decoder.from_ini("model/moses.ini")
    >>> [out] = dec.translate(["the house is small"], nbest=3)
    >>> out.text
    'la maison est petite'
    >>> [h.text for h in out.nbest]
    ['la maison est petite', 'la demeure est petite', 'la est petite maison']
    >>> list(out.best.features)
    ['Distortion0', 'LM0', 'WordPenalty0', 'PhrasePenalty0', 'TranslationModel0', 'UnknownWordPenalty0']
    >>> out.best.features["WordPenalty0"], round(out.best.total, 4)
    ((-4.0,), 1.6099)
    >>> dec.weights["TranslationModel0"]
    (0.2, 0.2, 0.2, 0.2)
    """

    def __init__(self, decoder) -> None:
        """Wrap a loaded :class:`phrase_rescore.moses_integration.embedded.decoder.Decoder` (use :meth:`from_ini`)."""
        self._dec = decoder
        self.spec = decoder.spec

    @classmethod
    def from_ini(cls, ini: PathLike, config: DecoderConfig | None = None, *, sentences: Iterable | None = None,
                 weight_overwrite: str | None = None, progress: bool = False, **options) -> Decoder:
        """Load the system of a moses.ini (one ``PhraseDictionaryMemory``, one ``KENLM``, the usual dense
        features; see :mod:`phrase_rescore.moses_integration.embedded.features`).

        :param sentences: only the table entries these sentences can use are loaded (less memory for a
            large table); other sentences then translate as if the rest of the table were missing.
        :param weight_overwrite: Moses's ``-weight-overwrite`` text, e.g. ``"LM0= 0.4 WordPenalty0= -0.5"``.
        :param progress: progress bars while the tables load.
        :param options: :class:`DecoderConfig` fields: ``stack_size``, ``beam_threshold``,
            ``distortion_limit``, ``table_limit``, ``max_phrase_length``, ``nbest_distinct`` (True),
            ``nbest_factor`` (unset: the moses.ini's values, else Moses's defaults).
        """
        from phrase_rescore.moses_integration.embedded.decoder import Decoder as Embedded
        from phrase_rescore.moses_integration.embedded.decoder import DecoderConfig
        from phrase_rescore.moses_integration.embedded.moses_command import DecodeRequest, load_spec

        cfg = DecoderConfig(**_options(DecoderConfig, config, options, "Decoder.from_ini"))
        spec = load_spec(DecodeRequest(os.fspath(ini), cfg, weight_overwrite))
        keep = None if sentences is None else [_words(s) for s in sentences]
        return cls(Embedded(spec, cfg, sentences=keep, progress=progress))

    @property
    def weights(self) -> dict[str, tuple[float, ...]]:
        """The weights by feature name, in the n-best list's order."""
        return self._by_feature(self.spec.weights)

    def translate(self, lines: str | Iterable, nbest: int = 0, threads: int = 1) -> list[DecoderOutput]:
        """Translate tokenized sentences (a str is one sentence; a sequence of words is one too).

        :param nbest: also return up to this many distinct translations per sentence (0: the 1-best only).
        :param threads: decoding processes (fork), as ``decode -threads``.
        :returns: one :class:`DecoderOutput` per sentence, in input order.
        """
        if isinstance(lines, str):
            lines = [lines]
        sentences = [_words(s) for s in lines]
        if nbest < 0:
            raise PhraseRescoreError(f"nbest must be at least 0, got {nbest}")
        if threads > 1:
            results = self._dec.translate_all(sentences, nbest, threads)
        else:
            results = [self._dec.translate(s, nbest) for s in sentences]
        return [DecoderOutput(tuple(s), self._hypothesis(r.best), tuple(self._hypothesis(c) for c in r.nbest))
                for s, r in zip(sentences, results)]

    def _by_feature(self, values) -> dict[str, tuple[float, ...]]:
        return {f.name: tuple(float(v) for v in values[f.offset:f.offset + f.size]) for f in self.spec.features}

    def _hypothesis(self, c) -> Hypothesis:
        from phrase_rescore.core.words import words

        return Hypothesis(tuple(words(c.text)), float(c.total), self._by_feature(c.features))


def _words(sentence) -> list[str]:
    """A sentence as Moses's words: a str is split at spaces and tabs; a sequence of words is taken as it is."""
    from phrase_rescore.core.words import words

    if isinstance(sentence, str):
        return words(sentence)
    out = list(sentence)
    if not all(isinstance(w, str) for w in out):
        raise TypeError(f"a sentence is a str or a sequence of str words, got {sentence!r}")
    return out


@dataclass(frozen=True)
class TuneResult:
    """The tuned moses.ini and its weights by feature name."""

    ini: Path
    weights: dict[str, tuple[float, ...]]


def tune(ini: PathLike, dev_src: PathLike, dev_ref: PathLike, workdir: PathLike, *, out: PathLike | None = None,
         echo: Callable[[str], None] | None = None, **options) -> TuneResult:
    """Tune a moses.ini's weights on a dev set with MERT (``phrase-rescore tune``).

    :param dev_src: tokenized dev source; ``dev_ref``: its tokenized reference.
    :param workdir: the tuning's folder (its log, n-best lists, the tuned moses.ini); a rerun resumes.
    :param out: where the tuned moses.ini goes [``workdir``'s].
    :param echo: receives the tuner's progress lines.
    :param options: :class:`~phrase_rescore.moses_integration.configs.TuneConfig` settings: ``backend``
        ("moses": mert-moses.pl of ``MOSES_HOME``; "embedded": the project's decoder and MERT),
        ``max_iterations``, ``nbest``, ``seed``, ``threads``, ``moses_home``...
    :returns: a :class:`TuneResult`.

    >>> res = pr.tune("moses.rnn.ini", "dev.en", "dev.fr", "tune", backend="embedded", max_iterations=2)
    >>> res.ini
    PosixPath('tune/moses.ini')
    >>> list(res.weights)[:3], len(res.weights["TranslationModel0"])
    (['UnknownWordPenalty0', 'WordPenalty0', 'PhrasePenalty0'], 6)
    """
    from phrase_rescore.moses_integration.moses_ini import read_moses_ini
    from phrase_rescore.moses_integration.tuning import tune as run

    values = _options(TuneConfig, None, options, "tune", ("ini", "dev_src", "dev_ref", "workdir", "out"))
    with _released_on_error():
        _guard("tune", {"ini": ini, "dev_src": dev_src, "dev_ref": dev_ref, **read_moses_ini(ini).model_files()},
               {"out": out}, {"workdir": workdir})
        tuned = run(TuneConfig(ini=Path(ini), dev_src=Path(dev_src), dev_ref=Path(dev_ref), workdir=Path(workdir),
                               out=_optional_path(out), **values), echo=echo)
    return TuneResult(Path(tuned), {k: tuple(v) for k, v in read_moses_ini(tuned).weights.items()})


def evaluate(systems: Mapping[str, PathLike] | Sequence[SystemSpec], test_src: PathLike, test_ref: PathLike,
             workdir: PathLike, *, dev_src: PathLike | None = None, dev_ref: PathLike | None = None,
             models: Mapping[str, PathLike] | None = None, **options) -> pd.DataFrame:
    """Decode the test (and dev) set with each configuration, score it with sacrebleu and give the paper's
    Table 1 (``phrase-rescore evaluate``): BLEU, its difference to the first configuration (the baseline) and
    the paired-bootstrap p-value, chrF and the sha256 of each moses.ini and model.

    :param systems: ``{name: moses.ini}``, the baseline first (or
        :class:`~phrase_rescore.moses_integration.configs.SystemSpec` records).
    :param test_src: tokenized test source; ``test_ref``: the raw (untokenized) reference; ``dev_*`` the same.
    :param workdir: the decoded outputs, ``table1.md`` and ``table1.csv`` (a rerun reuses the outputs).
    :param models: ``{name: model}``: the model behind a configuration (hashed in the table).
    :param options: :class:`~phrase_rescore.moses_integration.configs.EvaluateConfig` settings: ``backend``
        ("moses" or "embedded"), ``target_lang`` (detokenization; "en"), ``case``, ``bootstrap_samples``,
        ``seed``, ``threads``, ``moses_home``...
    :returns: Table 1 as a ``pandas.DataFrame``, one row per configuration: the numbers of ``table1.csv``
        (its path in ``df.attrs["csv"]``, the Markdown's in ``df.attrs["markdown"]``).

    >>> df = pr.evaluate({"baseline": "model/moses.ini", "+RNN": "tune/moses.ini"}, "test.en", "test.fr", "eval",
    ...                  backend="embedded", target_lang="fr")
    >>> df[["configuration", "test_bleu", "test_delta"]]
      configuration  test_bleu  test_delta
    0      baseline      100.0         0.0
    1          +RNN      100.0         0.0
    >>> df.attrs["csv"]
    'eval/table1.csv'
    """
    from phrase_rescore.moses_integration.report import evaluate as run

    models = dict(models or {})
    if isinstance(systems, Mapping):
        unknown = sorted(set(models) - set(systems))
        if unknown:
            raise PhraseRescoreError(f"models for unknown configuration(s): {', '.join(unknown)}")
        specs = [SystemSpec(n, Path(p), _optional_path(models.get(n))) for n, p in systems.items()]
    else:
        if models:
            raise TypeError("evaluate(): give the models in the SystemSpec records, not in models=")
        specs = list(systems)
    fixed = ("systems", "test_src", "test_ref", "workdir", "dev_src", "dev_ref")
    values = _options(EvaluateConfig, None, options, "evaluate", fixed)
    with _released_on_error():
        _guard("evaluate", {"systems": [s.ini for s in specs], "models": [s.model for s in specs if s.model],
                            "outputs": [p for s in specs for p in (*s.outputs.values(), *s.nbest.values())],
                            "test_src": test_src, "test_ref": test_ref, "dev_src": dev_src, "dev_ref": dev_ref},
               {}, {"workdir": workdir})
        return run(EvaluateConfig(systems=specs, test_src=Path(test_src), test_ref=Path(test_ref),
                                  workdir=Path(workdir), dev_src=_optional_path(dev_src),
                                  dev_ref=_optional_path(dev_ref), **values))

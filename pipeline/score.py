"""The `score` stage: append log p(f|e) and the unknown-word penalty to every line of a phrase table.

``score_table(model, table, out, config)`` streams TABLE and writes it with new columns appended to
each line's scores field (every other byte kept; line count and order unchanged). e is the first field
(the source phrase, the encoder's input), f the second. Column values and Moses's floor are described
in :mod:`phrase_rescore.moses_integration.moses_values`.

Threads overlap the work, joined by bounded queues (memory stays bounded whatever the table's
size): a reader parses lines, encodes words to ids and collects each chunk's distinct sources; the
main thread cuts each chunk into groups of sources (:meth:`phrase_rescore.pipeline.scoring.fast.FastScorer.groups`)
for a pool of scoring workers -- on a CPU one per core, each with one torch thread, which beats one
scorer with many torch threads on the small matrices of a phrase (no barrier after every op) -- and
hands the next chunk to the pool before waiting for the current one, so no core idles at chunk
boundaries; a writer formats the new columns, compresses and appends the chunk to the resumable
output of :mod:`phrase_rescore.pipeline.scoring.chunked`. Rerunning the same command after a crash or kill
continues after the last completed chunk, and the final file is byte-identical to an uninterrupted
run's: a group's scores do not depend on which worker, or how many, computed them (on the same
machine: floating-point sums can differ between BLAS builds).

Under ``torchrun`` (``WORLD_SIZE`` > 1) each rank scores one range of whole chunks on its own device
(``cuda:LOCAL_RANK``, or the CPU with ``cores / LOCAL_WORLD_SIZE`` workers) into a part file, and
rank 0 joins the parts into OUT: the same bytes as a single run (:mod:`phrase_rescore.pipeline.scoring.sharded`).
"""
from __future__ import annotations

import collections
import contextlib
import os
import queue
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from phrase_rescore.core import progress
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.gzip_writing import wants_gzip
from phrase_rescore.core.hashing import sha256_file
from phrase_rescore.core.version import code_version
from phrase_rescore.moses_integration.moses_values import logprob_texts, neutral_text, unk_texts
from phrase_rescore.moses_integration.phrase_table import (
    check_not_empty,
    num_scores,
    read_phrase_table,
    scored_line,
)

from . import distributed
from .configs import ScoreConfig
from .device import resolve_device
from .rare_words import RareWordShares
from .scoring import sharded
from .scoring.chunk_pairs import ChunkPairs, PairCollector
from .scoring.chunked import ChunkedOutput, chain_digest, check_not_same_file
from .scoring.fast import FastScorer, choose_matmul, one_thread_each

CONFIG_VERSION = 1


@dataclass
class _Chunk:
    index: int
    raw: list[bytes] = field(default_factory=list)       # each line's bytes, with its own newline
    bad: list[int] = field(default_factory=list)         # chunk positions of rejected lines
    pairs: ChunkPairs | None = None


_END = object()


@dataclass(frozen=True)
class ScoreSummary:
    """What :func:`score_table` did (``dataclasses.asdict`` / :meth:`as_dict` of it is JSON-able).

    Counts are of the whole output (a resumed run's earlier lines included); rates are this run's. Under
    ``torchrun`` every rank returns one (rank 0 after joining OUT): ``seconds`` is the split's, the slowest
    rank's scoring (timed as a single run's: from its scorer built to its part written) and the join's,
    ``pairs_per_s``, ``lines_per_s`` and ``cpu_seconds`` are of all ranks together over them, and
    ``resumed_from_line`` counts the lines the ranks had done before.
    """

    lines: int                      # lines of OUT (every line of the table)
    pairs: int                      # scored pairs (good lines) of OUT
    sources: int                    # distinct sources per chunk, summed
    rejected: int                   # lines kept with neutral values (``on_error="keep"``)
    seconds: float                  # wall time of the scoring
    pairs_per_s: float              # pairs scored by this run per second
    lines_per_s: float              # lines written by this run per second
    pairs_done: int                 # pairs scored by this run (not those of a resumed earlier run)
    cpu_seconds: float              # the process's CPU time while scoring (of all ranks)
    resumed_from_line: int          # lines an earlier interrupted run had written (0: a fresh run)
    restart_reason: str | None      # why an earlier partial output was not resumed (None: nothing to say)
    device: str                     # e.g. "cpu", "cuda:0"
    workers: int                    # scoring workers (this rank's)
    matmul: str                     # the BLAS of the CPU products: "torch" or "numpy"
    rejects: str | None             # where rejected lines are listed (``on_error="keep"``)
    out: str                        # the scored table
    config: ScoreConfig             # the options it ran with
    ranks: int = 1                  # processes of a torchrun job (1: a single run)
    rank: int = 0                   # this process's rank
    reverse_pairs_per_s: float | None = None    # score --reverse-model: the reverse column's rate
    ensemble_pairs_per_s: float | None = None   # score --ensemble-model: the second model's rate

    def as_dict(self) -> dict:
        """Every field by name, ``config`` as a dict (for JSON)."""
        return asdict(self)


def load_model(model_path, config: ScoreConfig):
    """(model, vocabularies) from a checkpoint file or training directory (+ ``config.vocab``)."""
    from .model.checkpoint import ENCDEC, load_checkpoint
    from .vocab import Vocabularies

    ck = load_checkpoint(model_path, "cpu", ENCDEC)
    model, vocabs = ck.model, ck.vocabs
    if config.vocab is not None:
        given = Vocabularies.load(config.vocab)
        if (len(given.source), len(given.target)) != (model.cfg.src_vocab_size, model.cfg.tgt_vocab_size):
            raise PhraseRescoreError(f"vocabulary sizes {len(given.source)}/{len(given.target)} differ from the "
                                     f"model's {model.cfg.src_vocab_size}/{model.cfg.tgt_vocab_size}", config.vocab)
        if vocabs is not None:          # a model's word lists are part of the model: another list changes its input
            for side, mine, theirs in (("source", vocabs.source, given.source), ("target", vocabs.target, given.target)):
                if mine != theirs:
                    i = next((i for i, (a, b) in enumerate(zip(mine.words, theirs.words)) if a != b), 0)
                    raise PhraseRescoreError(
                        f"the {side} words differ from the checkpoint's own (entry {i}: {theirs.words[i]!r} here, "
                        f"{mine.words[i]!r} in the checkpoint): a model's vocabulary is part of the model, and with "
                        "other words every id would mean another word; leave out --vocab (the checkpoint carries its "
                        "vocabulary)", config.vocab)
        vocabs = given
    if vocabs is None:
        raise PhraseRescoreError("the checkpoint carries no vocabulary: give one with --vocab", model_path)
    return model, vocabs


_REJECT_LINE = re.compile(rb"[0-9]+\t")


def rejects_path(out_path, config: ScoreConfig) -> str | None:
    """Where ``--on-error keep`` lists the rejected lines (None for ``raise``): ``config.rejects``, else
    ``OUT.rejects``.

    :raises PhraseRescoreError: ``OUT.rejects`` (the name derived from ``--out``, not one given with
        ``--rejects``) exists and is not a reject list (``LINE<TAB>REASON<TAB>BYTES`` lines), so it was not
        written by ``score`` and would be replaced.
    """
    if config.on_error != "keep":
        return None
    if config.rejects:
        return config.rejects
    path = os.fspath(out_path) + ".rejects"
    if os.path.lexists(path) and not _is_reject_list(path):
        raise PhraseRescoreError("exists and is not a reject list that `score` wrote (lines of LINE<TAB>REASON<TAB>"
                                 "BYTES), and --on-error keep would replace it: move it away, or name the "
                                 "list with --rejects", path)
    return path


def _is_reject_list(path: str) -> bool:
    """``path`` is a regular file of ``LINE<TAB>...`` lines (or empty), as the phrase-table reader writes them."""
    if os.path.islink(path) or not os.path.isfile(path):
        return False
    with open(path, "rb") as f:
        return all(_REJECT_LINE.match(line) for line in f)


def require_regular_file(path, what: str) -> None:
    """Refuse a path that is not a regular file (a pipe such as ``<(zcat t.gz)``, ``/dev/stdin``, a device):
    score reads the table more than once (its first line for the columns, then every line, and again on a
    resume), and a pipe gives its lines to the first reading only.

    :raises PhraseRescoreError: naming the path and what to give instead.
    """
    import stat

    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise PhraseRescoreError(f"{what} not found", path) from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a pipe" if stat.S_ISFIFO(st.st_mode) else "a directory" if stat.S_ISDIR(st.st_mode) else \
            "a socket" if stat.S_ISSOCK(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode) else "not a file"
        raise PhraseRescoreError(
            f"{what} is {kind}, not a regular file: score reads it more than once (to count its columns, then to "
            "score it, and again to resume), which a pipe such as <(zcat t.gz) or /dev/stdin cannot give; give the "
            "file itself (a .gz is read as it is) or write the stream to a file first", path)


def score_table(model_path, table_path, out_path, config: ScoreConfig | None = None) -> ScoreSummary:
    """Score every line of a phrase table and write it with the new columns appended.

    :param model_path: an encoder-decoder checkpoint (``.pt``) or a training directory.
    :param table_path: the Moses phrase table (plain or gzip, by content).
    :param out_path: the new table (gzip when it ends in .gz); written through ``OUT.partial`` and
        renamed at the end. Rerunning after an interruption resumes (see the module docstring).
    :returns: a :class:`ScoreSummary`: counts, rates, the device and BLAS, where the rejected lines are
        listed and the output; under torchrun also ``ranks`` and ``rank`` (see :class:`ScoreSummary`).
    """
    config = config or ScoreConfig()
    from .model.checkpoint import resolve_checkpoint

    require_regular_file(table_path, "the phrase table")
    model_file = resolve_checkpoint(model_path)
    rejects = rejects_path(out_path, config)
    check_not_same_file(table_path, out_path, rejects, model_file, config.vocab, config.rare_counts)
    model, vocabs = load_model(model_file, config)
    st = os.stat(table_path) if os.path.exists(table_path) else None
    if st is None:
        raise PhraseRescoreError("phrase table not found", table_path)
    shares = _rare_shares(config, vocabs)   # counted once, after the cheap checks
    identity = {"table": os.path.abspath(table_path), "table_size": st.st_size, "table_mtime_ns": st.st_mtime_ns,
                "model_sha256": sha256_file(model_file),
                "vocab_sha256": None if config.vocab is None else sha256_file(config.vocab),
                "tool_version": code_version(), **config.output_identity(),
                "rare_shares_sha256": None if shares is None else shares.digest()}
    if distributed.env_world_size() > 1:
        return _score_sharded(model, vocabs, table_path, out_path, config, identity, model_file, shares)
    return score_table_with_model(model, vocabs, table_path, out_path, config, identity, model_file, shares)


def _rare_shares(config: ScoreConfig, vocabs) -> RareWordShares | None:
    """The target side's rare-word shares for ``--rare-words unigram`` (None for the paper's class)."""
    if config.rare_words != "unigram":
        return None
    return RareWordShares.from_corpus(config.rare_counts, vocabs.target)


def score_table_with_model(model, vocabs, table_path, out_path, config: ScoreConfig, identity: dict,
                           model_path=None, shares: RareWordShares | None = None) -> ScoreSummary:
    """:func:`score_table` for an already loaded model; ``identity`` guards resumes (see chunked.py);
    ``model_path`` names the model in errors; ``shares``: the rare words' shares when already counted."""
    rejects = _check_paths(table_path, out_path, config)
    device = resolve_device(config.device)
    _check_matmul(config, device)
    workers = _worker_count(device, config, torch.get_num_threads)
    out = ChunkedOutput(out_path, _on_device(identity, device), compresslevel=config.compresslevel)
    with _scoring_pool(device, workers) as pool:
        return _run(model, vocabs, table_path, out, rejects, config, device, pool, workers, model_path,
                    shares=shares)


def _check_paths(table_path, out_path, config: ScoreConfig):
    """The checks of the files every run makes before scoring; returns where rejected lines are listed."""
    rejects = rejects_path(out_path, config)
    check_not_same_file(table_path, out_path, rejects, vocab=config.vocab, counts=config.rare_counts)
    check_not_empty(table_path)
    return rejects


def _check_matmul(config: ScoreConfig, device) -> None:
    """``--matmul numpy`` computes float32 on a CPU only."""
    if config.matmul == "numpy" and (device.type != "cpu" or config.precision != "fp32"):
        raise PhraseRescoreError(f"matmul 'numpy' is for float32 on a CPU, not {config.precision} on {device}: "
                                 "use --matmul auto or torch")


def _on_device(identity: dict, device) -> dict:
    """The output's identity with the device type: CPU and GPU round differently, so never one file of both."""
    return {**identity, "device": device.type}


def _worker_count(device, config: ScoreConfig, cpu_threads) -> int:
    """Scoring workers: one on an accelerator; on a CPU ``--threads``, else ``cpu_threads()``."""
    return 1 if device.type != "cpu" else int(config.threads or cpu_threads())


@contextlib.contextmanager
def _scoring_pool(device, workers: int):
    """The pool of scoring workers; on a CPU each computes on its own core, torch and either BLAS on
    one thread."""
    with one_thread_each() if device.type == "cpu" else contextlib.nullcontext(), \
            ThreadPoolExecutor(workers, thread_name_prefix="score-worker") as pool:
        yield pool


def _score_sharded(model, vocabs, table_path, out_path, config: ScoreConfig, identity: dict, model_path,
                   shares: RareWordShares | None = None) -> ScoreSummary:
    """:func:`score_table` as one rank of a torchrun job (see
    :mod:`phrase_rescore.pipeline.scoring.sharded`): rank 0 cuts the table, each rank scores its shard
    into a part file, rank 0 joins the parts into OUT."""
    rejects = _check_paths(table_path, out_path, config)
    d = distributed.setup(config.device)
    device = d.device
    _check_matmul(config, device)
    identity = _on_device(identity, device)
    gz = wants_gzip(out_path)
    shards, n_scores, matmul, split = _plan_shards(d, table_path, out_path, config, device)

    def part(shard):
        ident = {**identity, "shard": [shard.index, shard.count, shard.lines_before, shard.lines, shard.start,
                                       shard.stop], "num_scores": n_scores}
        return sharded.part_output(out_path, shard, ident, config.compresslevel, gz)

    result: dict | str
    error = None
    try:
        result = _score_shard(model, vocabs, table_path, part(shards[d.rank]), rejects, config, device,
                              model_path, shards[d.rank], n_scores, matmul, d.is_main, shares)
    except Exception as e:           # every rank reaches the gather below, so none waits for a failed one
        result, error = str(e), e
    results = _gather_results(d, result, error)
    parts = [part(s) for s in shards]
    states = [p.finished() for p in parts]
    d.barrier()                      # every rank has read the parts' states before rank 0 removes them
    join = _join_parts(out_path, parts, states, rejects, gz) if d.is_main else (0.0, 0.0)
    split, join = d.broadcast_object((split, join) if d.is_main else None)
    d.barrier()                      # OUT is complete when any rank returns
    return _sharded_summary(d, shards, states, results, split, join, device, matmul, rejects, out_path, config)


def _plan_shards(d, table_path, out_path, config: ScoreConfig, device) -> tuple:
    """(shards, number of scores, BLAS, (seconds, CPU seconds) of the split) on every rank: rank 0 cuts the
    table and takes the choices every rank must share (a BLAS like a single run's); the split's times
    are None on the other ranks."""
    shared: tuple | str = ""
    split = None
    if d.is_main:
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            matmul = config.matmul if config.matmul != "auto" else choose_matmul(device, config.precision)
            shards = sharded.load_or_plan(table_path, out_path, config.chunk_lines, d.world_size,
                                          fresh=config.restart)
            try:
                n_scores = num_scores(table_path)
            except PhraseRescoreError:   # no good line at all: each rank rejects every line, as a single run
                n_scores = None
            shared = (shards, n_scores, matmul)
            split = (time.perf_counter() - t0, time.process_time() - c0)
        except PhraseRescoreError as e:
            shared = str(e)
    shared = d.broadcast_object(shared)
    if isinstance(shared, str):
        raise PhraseRescoreError(f"rank 0 could not cut the table: {shared}")
    return (*shared, split)


def _score_shard(model, vocabs, table_path, out: ChunkedOutput, rejects, config: ScoreConfig, device, model_path,
                 shard: sharded.Shard, n_scores, matmul: str, show: bool, shares) -> dict:
    """Score this rank's shard into its part file (nothing when a finished part is there); what it did."""
    part_rejects = None if rejects is None else out.path.with_name(out.path.name + ".rejects")
    done = None if config.restart else out.finished()
    if done is not None and (part_rejects is None or part_rejects.exists()):
        return {"lines": 0, "pairs": 0, "resumed": done["lines"], "workers": 0, "seconds": 0.0,
                "cpu_seconds": 0.0}
    workers = _worker_count(device, config, distributed.rank_threads)
    with _scoring_pool(device, workers) as pool:
        s = _run(model, vocabs, table_path, out, part_rejects, config, device, pool, workers, model_path,
                 shard=shard, num_scores=n_scores, matmul=matmul, show=show, shares=shares)
    return {"lines": s.lines - s.resumed_from_line, "pairs": s.pairs_done, "resumed": s.resumed_from_line,
            "workers": workers, "seconds": s.seconds, "cpu_seconds": s.cpu_seconds}


def _gather_results(d, result: dict | str, error: Exception | None) -> list[dict]:
    """Every rank's result; raises this rank's own error, else the first failed rank's message."""
    results = d.all_gather_object(result)
    failed = [(r, m) for r, m in enumerate(results) if isinstance(m, str)]
    if error is not None:
        raise error
    if failed:
        raise PhraseRescoreError(f"rank {failed[0][0]} failed: {failed[0][1]}")
    return results


def _join_parts(out_path, parts, states, rejects, gz: bool) -> tuple[float, float]:
    """Rank 0: join the finished parts (and their reject lists) into OUT and remove them; the join's
    (seconds, CPU seconds)."""
    t0, c0 = time.perf_counter(), time.process_time()
    missing = [p.path for p, st in zip(parts, states) if st is None]
    if missing:
        raise PhraseRescoreError("a rank's part is missing or not the one this job wrote: rerun the "
                                 "same command", missing[0])
    sharded.join_parts(out_path, parts, states, gz)
    rejected_parts = []
    if rejects is not None:
        rejected_parts = [p.path.with_name(p.path.name + ".rejects") for p in parts]
        sharded.join_files(rejects, rejected_parts)
    sharded.remove([f for p in parts for f in (p.path, p.done_path)] + rejected_parts +
                   [sharded.plan_path(out_path)] + sharded.stale_parts(out_path))
    return time.perf_counter() - t0, time.process_time() - c0


def _sharded_summary(d, shards, states, results, split, join, device, matmul, rejects, out_path,
                     config: ScoreConfig) -> ScoreSummary:
    """The :class:`ScoreSummary` of a torchrun job: counts of the parts, rates of all ranks together."""
    seconds = split[0] + max(r["seconds"] for r in results) + join[0]
    totals = {k: sum((st or {}).get("stats", {}).get(k, 0) for st in states)
              for k in ("pairs", "sources", "rejected")}
    lines_done = sum(r["lines"] for r in results)
    pairs_done = sum(r["pairs"] for r in results)
    return ScoreSummary(lines=sum(s.lines for s in shards), **totals, seconds=seconds,
                        pairs_per_s=pairs_done / seconds if seconds > 0 else 0.0,
                        lines_per_s=lines_done / seconds if seconds > 0 else 0.0, pairs_done=pairs_done,
                        cpu_seconds=split[1] + sum(r["cpu_seconds"] for r in results) + join[1],
                        resumed_from_line=sum(r["resumed"] for r in results), restart_reason=None,
                        device=str(device), workers=results[d.rank]["workers"], matmul=matmul, rejects=rejects,
                        out=os.fspath(out_path), config=config, ranks=d.world_size, rank=d.rank)


def _run(model, vocabs, table_path, out: ChunkedOutput, rejects, config: ScoreConfig, device, pool,
         workers: int, model_path, shard: sharded.Shard | None = None, num_scores: int | None = None,
         matmul: str | None = None, show: bool = True, shares: RareWordShares | None = None) -> ScoreSummary:
    """Score the table (or the lines of ``shard``) into ``out``; ``matmul``: the BLAS when ``out``
    records none [from ``config``]; ``show``: a progress bar; ``shares``: the rare words' shares when
    already counted [counted here for ``--rare-words unigram``]."""
    start_line = out.open(restart=config.restart)
    matmul = _recorded_matmul(out, matmul or config.matmul, device, config.precision)
    scorer = FastScorer(model, device, precision=config.precision, precompute_vocab=config.precompute_vocab,
                        max_tokens=config.max_tokens, matmul=matmul)
    if shares is None:
        shares = _rare_shares(config, vocabs)
    t0, c0 = time.perf_counter(), time.process_time()
    reader = read_phrase_table(table_path, on_error=config.on_error, rejects_path=rejects,
                               span=None if shard is None else shard.span, num_scores=num_scores)
    flow = _ChunkFlow(out, config, table_path, model_path, device, start_line,
                      shard.lines_before if shard is not None else 0, shard)
    counts = flow.run(reader, vocabs, shares, scorer, pool, show)
    prior = out.stats
    out.finish()
    seconds = time.perf_counter() - t0
    return ScoreSummary(lines=out.lines, pairs=prior.get("pairs", 0), sources=prior.get("sources", 0),
                        rejected=prior.get("rejected", 0), seconds=seconds,
                        pairs_per_s=counts["pairs"] / seconds if seconds > 0 else 0.0,
                        lines_per_s=counts["lines"] / seconds if seconds > 0 else 0.0, pairs_done=counts["pairs"],
                        cpu_seconds=time.process_time() - c0, resumed_from_line=start_line,
                        restart_reason=out.restart_reason, device=str(device), workers=workers, matmul=matmul,
                        rejects=None if rejects is None else os.fspath(rejects), out=os.fspath(out.path),
                        config=config)


def _recorded_matmul(out: ChunkedOutput, matmul: str, device, precision: str) -> str:
    """The BLAS ``out`` records, noting ``matmul`` (``auto``: chosen now) when it records none: a resumed
    run repeats the first run's choice."""
    if out.notes.get("matmul") is None:
        if matmul == "auto":
            matmul = choose_matmul(device, precision)
        out.note("matmul", matmul)
    return out.notes["matmul"]


class _ChunkFlow:
    """One run's threads: a reader cuts the table into chunks of encoded pairs, the main thread hands
    each chunk's groups to the scoring pool, a writer formats and appends the scored chunks to ``out``;
    joined by bounded queues. The first error of any of them stops them all and is raised."""

    def __init__(self, out: ChunkedOutput, config: ScoreConfig, table_path, model_path, device, start_line: int,
                 lines_before: int, shard: sharded.Shard | None):
        self.out, self.config, self.table_path, self.model_path, self.device = \
            out, config, table_path, model_path, device
        self.start_line, self.lines_before, self.shard = start_line, lines_before, shard
        self.in_q: queue.Queue = queue.Queue(maxsize=2)
        self.out_q: queue.Queue = queue.Queue(maxsize=2)
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.counts = {"lines": 0, "pairs": 0, "sources": 0, "rejected": 0}

    def run(self, reader, vocabs, shares, scorer: FastScorer, pool, show: bool) -> dict:
        """Score every chunk; this run's counts. On an error ``out`` is closed (a rerun resumes) or, for a
        :class:`PhraseRescoreError` (a rerun fails the same way), discarded."""
        threads = [threading.Thread(target=self._read, args=(reader, vocabs, shares),
                                    name="score-reader", daemon=True),
                   threading.Thread(target=self._write, name="score-writer", daemon=True)]
        for t in threads:
            t.start()
        shard = self.shard
        self.bar = progress.bar(desc="score" if shard is None else f"score, rank 0 of {shard.count}", unit="line",
                                initial=self.start_line) if show else _NoBar()
        self._score(scorer, pool, threads)
        if self.errors:
            if isinstance(self.errors[0], PhraseRescoreError):
                # bad input or a broken model: a rerun of the same command fails the same way, so the files
                # this run started are of no use to it (an earlier run's partial output stays as it was)
                self.out.discard()
            raise self.errors[0]
        return self.counts

    def _read(self, reader, vocabs, shares) -> None:
        """The reader thread: every chunk into ``in_q``, then the end."""
        try:
            self._read_chunks(reader, PairCollector(vocabs, shares))
        except BaseException as e:  # handed to the main thread
            self.errors.append(e)
        finally:
            _put(self.in_q, _END, self.stop)

    def _read_chunks(self, reader, collector: PairCollector) -> None:
        config, start_line, lines_before = self.config, self.start_line, self.lines_before
        chunk = _Chunk((lines_before + start_line) // config.chunk_lines)
        pos = 0
        done = _DoneLines(self.out, config.chunk_lines, self.table_path)
        for entry in reader:
            if entry.line_no - lines_before <= start_line:      # already in the output (resume)
                done.add(entry.raw + b"\n" if entry.newline else entry.raw)
                continue
            done.check()
            chunk.raw.append(entry.raw + b"\n" if entry.newline else entry.raw)
            if entry.error is None:
                collector.add(pos, entry.source, entry.target)
            else:
                chunk.bad.append(pos)
            pos += 1
            if pos == config.chunk_lines:
                chunk.pairs = collector.reset()
                _put(self.in_q, chunk, self.stop)
                chunk, pos = _Chunk(chunk.index + 1), 0
        if pos:
            chunk.pairs = collector.reset()
            _put(self.in_q, chunk, self.stop)
        if reader.stats.lines - lines_before < start_line:
            raise PhraseRescoreError(f"the table has {reader.stats.lines - lines_before} lines"
                                     f"{' in this range' if self.shard else ''} but the partial output "
                                     f"already holds {start_line}: rerun with --restart", self.table_path)
        done.check()

    def _write(self) -> None:
        """The writer thread: each scored chunk from ``out_q`` appended to ``out``, until the end."""
        try:
            while True:
                item = self.out_q.get()
                if item is _END:
                    return
                chunk, logp = item
                data = _format_chunk(chunk, logp, self.config)
                self.out.write_chunk(data, len(chunk.raw), {"rejected": len(chunk.bad), "pairs": len(chunk.pairs),
                                                            "sources": len(chunk.pairs.src)}, b"".join(chunk.raw))
        except BaseException as e:
            self.errors.append(e)
            self.stop.set()
            while self.out_q.get() is not _END:  # drain so the main thread never blocks
                pass

    def _score(self, scorer: FastScorer, pool, threads: list) -> None:
        """The main thread: each chunk's groups to the pool, the next chunk handed over before waiting for
        the current one (no core idles at chunk boundaries)."""
        pending: collections.deque = collections.deque()                 # chunks in the pool, oldest first
        completed = False
        try:
            while True:
                chunk = self.in_q.get()
                if chunk is _END or self.errors:
                    break
                groups = scorer.groups(chunk.pairs)
                pending.append((chunk, groups, [pool.submit(scorer.score_group, chunk.pairs, g) for g in groups]))
                if len(pending) == 2:                                     # the next chunk is queued: finish one
                    self._finish(*pending.popleft())
            while pending and not self.errors:
                self._finish(*pending.popleft())
            completed = not self.errors
        except BaseException as e:   # a NaN chunk, a worker's exception, an interrupt: handled by run()
            self.errors.append(e)
        finally:
            for _, _, futures in pending:
                for f in futures:
                    f.cancel()
            self.stop.set()
            self.out_q.put(_END)
            for t in threads:
                t.join()
            self.bar.close()
            if self.errors or not completed:
                self.out.close()          # OUT.partial and its manifest stay for a resume

    def _finish(self, chunk: _Chunk, groups: list, futures: list) -> None:
        """Collect a chunk's scores, check them, count it and hand it to the writer."""
        logp = np.zeros(len(chunk.pairs), dtype=np.float64)          # (pairs,)
        for idx, f in zip(groups, futures):
            logp[idx] = f.result()
        if chunk.pairs.rare_log_share is not None:
            logp += chunk.pairs.rare_log_share
        _check_logp(logp, chunk, self.config, self.device, self.model_path)
        for key, n in (("lines", len(chunk.raw)), ("pairs", len(chunk.pairs)), ("sources", len(chunk.pairs.src)),
                       ("rejected", len(chunk.bad))):
            self.counts[key] += n
        self.bar.update(len(chunk.raw))
        self.out_q.put((chunk, logp))


class _NoBar:
    """No progress bar (the ranks other than 0 of a sharded run)."""

    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


class _DoneLines:
    """On a resume, the digest of the lines the partial output already holds, checked against the
    manifest's before anything new is written: a table rewritten with its size and time kept is refused."""

    def __init__(self, out: ChunkedOutput, chunk_lines: int, table_path):
        self.out, self.chunk_lines, self.table_path = out, chunk_lines, table_path
        self.digest, self.lines, self.buf = "", 0, []
        self.checked = out.lines == 0 or out.input_digest is None

    def add(self, raw: bytes) -> None:
        self.buf.append(raw)
        if len(self.buf) == self.chunk_lines:
            self.digest = chain_digest(self.digest, b"".join(self.buf))
            self.lines += len(self.buf)
            self.buf = []

    def check(self) -> None:
        if self.checked:
            return
        self.checked = True
        if self.buf or self.lines != self.out.lines or self.digest != self.out.input_digest:
            raise PhraseRescoreError(f"the table's first {self.out.lines} lines are not those {self.out.partial} "
                                     "was made from (the table changed but kept its size and time): rerun "
                                     "with --restart", self.table_path)


def _check_logp(logp: np.ndarray, chunk: _Chunk, config: ScoreConfig, device, model_path) -> None:
    """Stop at the first pair whose log p is NaN (a model that overflows at this precision), naming the
    model and the table line."""
    bad = np.flatnonzero(np.isnan(logp))
    if len(bad):
        line = chunk.index * config.chunk_lines + int(chunk.pairs.pair_line[bad[0]]) + 1
        raise PhraseRescoreError(f"the model gives log p = NaN for line {line} of the table ({len(bad)} pairs of "
                                 f"this chunk, {config.precision} on {device}): its weights or this precision "
                                 "overflow; try --precision fp32", model_path)


def _put(q: queue.Queue, item, stop: threading.Event) -> None:
    """Put ``item`` unless the run is stopping (so a failed consumer never deadlocks the reader)."""
    while True:
        try:
            q.put(item, timeout=0.2)
            return
        except queue.Full:
            if stop.is_set():   # the consumer has gone: nobody will read it
                return


def _format_chunk(chunk: _Chunk, logp: np.ndarray, config: ScoreConfig) -> bytes:
    """The chunk's lines with the new columns appended (rejected lines: neutral values)."""
    pairs = chunk.pairs
    cols = []
    for name in config.columns:
        if name == "logprob":
            cols.append(logprob_texts(logp, raw=config.raw_logprob))
        else:
            cols.append(unk_texts(pairs.n_unk, raw=config.raw_logprob))
    texts = [" ".join(t).encode("ascii") for t in zip(*cols)]        # one per pair
    lines = list(chunk.raw)
    for k, pos in enumerate(pairs.pair_line.tolist()):
        lines[pos] = scored_line(lines[pos], texts[k])
    if chunk.bad:
        neutral = " ".join([neutral_text(config.raw_logprob)] * len(config.columns)).encode("ascii")
        for pos in chunk.bad:
            lines[pos] = scored_line(lines[pos], neutral)
    return b"".join(lines)

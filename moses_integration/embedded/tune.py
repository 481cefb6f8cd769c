"""Tuning with the embedded decoder: decode -> merge n-best lists -> MERT, as mert-moses.pl loops.

Each iteration decodes the dev set with the current weights (``workdir/run{i}.out`` and
``run{i}.best{N}.out``, Moses's names), adds the new candidates to the pool of all earlier ones
(duplicates dropped), and runs MERT from the current weights plus random restarts (and, with
``historic_bests``, from every earlier iteration's weights). It stops when no
weight changes by 1e-5 or more (mert-moses.pl's test) or after ``max_iterations``. The tuned moses.ini
(``workdir/moses.ini``) is the input ini with only its [weight] lines changed; ``workdir/tune-log.csv``
has one row per decoded iteration: its dev BLEU (of the 1-best, in percent), the optimizer's n-best BLEU,
the pool size, the seconds spent decoding (``seconds_decode``) and optimizing (``seconds_mert``), and the
weights used. The text tables are filtered to the dev set's phrases once, into ``workdir/filtered``
(:mod:`..table_filter`), and the iterations decode with them; a rerun with the same tables and dev set
reuses them.

A killed run continues from its last finished iteration when it is run again with the same inputs and
options (:class:`TuneState`, ``workdir/tune-state.json``); the tuned moses.ini is then the same bytes
as an uninterrupted run's.
"""
from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import os
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from phrase_rescore.core.atomic_write import atomic_open
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.hashing import sha256_file
from phrase_rescore.core.reading import read_text_lines
from phrase_rescore.core.version import code_version

from ..mert_seeds import iteration_seed
from ..moses_ini import read_moses_ini, resolve_model_path
from ..table_filter import filtered_ini
from .bleu_stats import NUM_STATS, Reference, bleu, sentence_stats
from .decoder import Decoder, DecoderConfig, read_sentences
from .features import load_decoder_spec
from .mert import NBestPool, l1_normalize, optimize

FILTERED = "filtered"    # workdir/filtered: the ini and its text tables filtered to the dev set
CONVERGENCE = 1e-5      # mert-moses.pl: stop when no weight changed by this much
STATE_NAME = "tune-state.json"
STATE_FORMAT = "phrase-rescore embedded tuning state 1"
RECORD_KEYS = {"iteration", "files", "candidates", "weights", "next_weights", "changed", "dev_bleu", "mert_bleu",
               "candidates_in_pool", "seconds_decode", "seconds_mert"}


@dataclass
class EmbeddedTuneConfig:
    """Settings of :func:`tune_embedded`.

    :ivar ini: the moses.ini to tune (its weights are the starting point).
    :ivar dev_src: tokenized dev source, one sentence a line.
    :ivar dev_ref: tokenized dev reference, same number of lines.
    :ivar workdir: where the tuned ``moses.ini``, ``tune-log.csv`` and the per-iteration outputs go.
    :ivar nbest: n-best list size per iteration (distinct, mert-moses.pl's default 100).
    :ivar max_iterations: at most this many decode + optimize rounds (mert-moses.pl: 25).
    :ivar seed: MERT's random restarts and directions, drawn anew in each iteration
        (:func:`~phrase_rescore.moses_integration.mert_seeds.iteration_seed`).
    :ivar return_best_dev: keep the weights of the iteration with the highest dev BLEU instead of the last ones.
    :ivar threads: decoding processes.
    :ivar restarts: random starting points per MERT run (mert-moses.pl: 20).
    :ivar historic_bests: MERT also starts from the weights of every earlier iteration (mert-moses.pl
        ``--historic-bests``, Foster & Kuhn 2009).
    :ivar random_directions: random directions per optimizer pass besides the coordinate axes.
    :ivar decoder: decoder settings (stack size etc.).
    """

    ini: str
    dev_src: str
    dev_ref: str
    workdir: str
    nbest: int = 100
    max_iterations: int = 25
    seed: int = 1234
    return_best_dev: bool = False
    threads: int = 1
    restarts: int = 20
    historic_bests: bool = False
    random_directions: int = 3
    decoder: DecoderConfig = field(default_factory=DecoderConfig)


@dataclass
class IterationLog:
    iteration: int
    dev_bleu: float          # percent, 1-best of this iteration's decode
    weights: np.ndarray      # used for this decode
    mert_bleu: float         # percent, optimizer's n-best BLEU for the next weights
    candidates: int          # pool size after merging
    seconds_decode: float
    seconds_mert: float


def _write_log(path, rows: list[IterationLog], names: list[str]) -> None:
    with atomic_open(path, "w") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["iteration", "dev_bleu", "mert_bleu", "candidates", "seconds_decode", "seconds_mert"] + names)
        for r in rows:
            w.writerow([r.iteration, f"{r.dev_bleu:.4f}", f"{r.mert_bleu:.4f}", r.candidates,
                        f"{r.seconds_decode:.6f}", f"{r.seconds_mert:.6f}"] + [repr(float(x)) for x in r.weights])


def weight_column_names(spec) -> list[str]:
    """CSV column names of the weights: ``Name`` or ``Name_i`` for multi-component features."""
    out = []
    for f in spec.features:
        out.extend([f.name] if f.size == 1 else [f"{f.name}_{i + 1}" for i in range(f.size)])
    return out


def write_tuned_ini(ini_path, out_path, spec, weights: np.ndarray) -> None:
    """Copy ``ini_path`` to ``out_path`` with the tuneable features' [weight] lines set to ``weights``.

    The copy is the ini as Moses reads it: a ``[weight-overwrite]`` (or ``[feature-overwrite]``) is applied to the
    lines it changes and dropped (:func:`~phrase_rescore.moses_integration.moses_ini.read_moses_ini`), so no
    section of the tuned ini replaces the tuned weights."""
    ini = read_moses_ini(ini_path)
    for f in spec.features:
        if f.tuneable:
            ini.set_weights(f.name, [float(x) for x in weights[f.offset:f.offset + f.size]])
    ini.write(out_path)


def _inputs_record(config: EmbeddedTuneConfig, spec, known: dict | None = None) -> dict:
    """What decides the iterations' results: the inputs' SHA-256 (the moses.ini, every model file it names,
    the dev set), the options that change a decode or a MERT run, and the code version. Not in it:
    ``max_iterations``, ``return_best_dev`` and ``threads``, which change no finished iteration.
    ``known``: SHA-256 already taken, by path (the tables :func:`filtered_ini` read)."""
    known = known or {}
    files = {"ini": config.ini, "dev_src": config.dev_src, "dev_ref": config.dev_ref}
    for f in read_moses_ini(config.ini).features:
        if f.get("path") is not None:
            files[f"{f.name} path"] = resolve_model_path(f.get("path"), config.ini)
    # a model path may leave out ".gz" (Moses's LexicalReordering adds it)
    found = {k: next((q for q in (p, p + ".gz") if os.path.isfile(q)), None) for k, p in files.items()}
    digests = {k: None if q is None else known.get(q) or sha256_file(q) for k, q in found.items()}
    decoder = {k: v for k, v in dataclasses.asdict(config.decoder.resolved(spec)).items()}
    return {"files": digests, "nbest": config.nbest, "seed": config.seed, "restarts": config.restarts,
            "historic_bests": config.historic_bests, "random_directions": config.random_directions,
            "decoder": decoder, "code": code_version()}


class TuneState:
    """``workdir/tune-state.json``: the finished iterations of a run and what they depend on.

    After each iteration its outputs are written (``run{i}.out``, ``run{i}.best{N}.out`` and
    ``run{i}.candidates.npz``: the exact features and BLEU statistics of the candidates it added to the
    pool), then the state, atomically: an iteration is finished when the state lists it. A rerun with the
    same inputs and options replays the finished iterations from their files (the pool and weights come
    back bit for bit) and decodes from the next one; a rerun with anything changed removes the files the
    state lists (the tuner's own) and starts afresh. Nothing else in the folder is touched.
    """

    def __init__(self, workdir: str, inputs: dict):
        self.workdir = workdir
        self.path = os.path.join(workdir, STATE_NAME)
        self.inputs = inputs
        self.iterations: list[dict] = []

    def load(self, echo: Callable[[str], None]) -> list[dict]:
        """The finished iterations to replay ([] when starting afresh; the reason is echoed)."""
        try:
            with open(self.path, encoding="utf-8") as f:
                old = json.load(f)
        except FileNotFoundError:
            return []
        except (OSError, ValueError):
            old = None
        if not isinstance(old, dict) or old.get("format") != STATE_FORMAT:
            echo(f"tune: started afresh ({self.path} is not a tuning state this version wrote)")
            self._remove_files(old)
            return []
        if old.get("inputs") != self.inputs:
            changed = _first_difference(old.get("inputs") or {}, self.inputs)
            echo(f"tune: started afresh ({changed} changed since the earlier run)")
            self._remove_files(old)
            return []
        done = []
        for i, rec in enumerate(old.get("iterations", []), start=1):
            if (not isinstance(rec, dict) or not RECORD_KEYS <= set(rec) or rec["iteration"] != i
                    or not all(os.path.isfile(os.path.join(self.workdir, n)) for n in rec["files"])):
                break
            done.append(rec)
        self.iterations = list(done)
        return done

    def _remove_files(self, old) -> None:
        names = {STATE_NAME}
        if isinstance(old, dict):
            for rec in old.get("iterations", []) if isinstance(old.get("iterations"), list) else []:
                names.update(n for n in rec.get("files", []) if isinstance(n, str) and os.sep not in n)
        for n in sorted(names):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(self.workdir, n))

    def commit(self, record: dict) -> None:
        """Record one more finished iteration (atomically; its files are already written)."""
        self.iterations.append(record)
        with atomic_open(self.path, "w") as f:
            json.dump({"format": STATE_FORMAT, "inputs": self.inputs, "iterations": self.iterations}, f, indent=1)
            f.write("\n")


def _first_difference(old: dict, new: dict, prefix: str = "") -> str:
    for k in sorted(set(old) | set(new)):
        a, b = old.get(k), new.get(k)
        if a != b:
            if isinstance(a, dict) and isinstance(b, dict):
                return _first_difference(a, b, f"{prefix}{k} ")
            return f"{prefix}{k}"
    return "the state"


def _replay(workdir: str, rec: dict, pool: NBestPool, num_sentences: int) -> IterationLog | None:
    """Add a finished iteration's candidates back to the pool; None when its file is not what it should be."""
    try:
        with np.load(os.path.join(workdir, rec["candidates"])) as z:
            sent, feats, stats = z["sent"], z["features"], z["stats"]
    except (OSError, ValueError, KeyError):
        return None
    if len(rec["weights"]) != pool.dim or len(rec["next_weights"]) != pool.dim:
        return None
    if (feats.ndim != 2 or feats.shape[1] != pool.dim or stats.shape != (len(feats), NUM_STATS)
            or sent.shape != (len(feats),) or (len(sent) and not 0 <= sent.min() <= sent.max() < num_sentences)):
        return None
    for i, f, st in zip(sent.tolist(), feats, stats):
        pool.add(i, f, st)
    return IterationLog(rec["iteration"], rec["dev_bleu"], np.asarray(rec["weights"], dtype=np.float64),
                        rec["mert_bleu"], rec["candidates_in_pool"], rec["seconds_decode"], rec["seconds_mert"])


def tune_embedded(config: EmbeddedTuneConfig, echo: Callable[[str], None] | None = None) -> str:
    """Tune the weights of ``config.ini`` on the dev set with the embedded decoder and MERT.

    Resumable: a rerun with the same inputs and options continues after the last finished iteration
    (:class:`TuneState`) and gives the same tuned moses.ini as an uninterrupted run.

    :param echo: receives a line when a run resumes or starts afresh.
    :return: the path of the tuned moses.ini (``workdir/moses.ini``).
    """
    echo = echo or (lambda _line: None)
    if config.nbest < 1 or config.max_iterations < 1:
        raise PhraseRescoreError("nbest and max_iterations must be at least 1")
    os.makedirs(config.workdir, exist_ok=True)
    spec = load_decoder_spec(config.ini)
    # the text tables filtered to the dev set once (reused by a rerun): no iteration reads the full table
    filtered = filtered_ini(config.ini, [config.dev_src], os.path.join(config.workdir, FILTERED),
                            config.decoder.resolved(spec).max_phrase_length)
    known = {t["path"]: t["sha256"] for t in filtered.tables.values()}
    decode_spec = load_decoder_spec(filtered.ini)
    src, refs = _read_dev_set(config)
    tuned = spec.tuneable_mask()
    names = weight_column_names(spec)
    pool = NBestPool(len(src), spec.dim)
    log_path = os.path.join(config.workdir, "tune-log.csv")
    state = TuneState(config.workdir, _inputs_record(config, spec, known))
    rows, w, converged = _resume(config, state, pool, spec.weights.copy(), len(src), echo)
    dec = None
    for it in range(len(rows) + 1, config.max_iterations + 1):
        if converged:
            break
        if dec is None:
            dec = Decoder(decode_spec, config.decoder, sentences=src)
        files = _iteration_files(it, config.nbest)
        row, new_w, changed = _tune_iteration(config, it, files, dec, w, tuned, src, refs, pool, rows)
        rows.append(row)
        state.commit({"iteration": it, "files": files, "candidates": files[2],
                      "weights": [float(x) for x in w], "next_weights": [float(x) for x in new_w],
                      "changed": changed, "dev_bleu": row.dev_bleu, "mert_bleu": row.mert_bleu,
                      "candidates_in_pool": row.candidates, "seconds_decode": row.seconds_decode,
                      "seconds_mert": row.seconds_mert})
        _write_log(log_path, rows, names)
        w = new_w
        converged = changed < CONVERGENCE
    _write_log(log_path, rows, names)
    final = w
    if config.return_best_dev:
        best = max(range(len(rows)), key=lambda i: (rows[i].dev_bleu, -i))   # the first of equals
        final = rows[best].weights
    out_ini = os.path.join(config.workdir, "moses.ini")
    write_tuned_ini(config.ini, out_ini, spec, final)
    return out_ini


def _read_dev_set(config: EmbeddedTuneConfig) -> tuple[list[list[str]], list[Reference]]:
    """The dev source sentences and their references, one per source line."""
    src = read_sentences(config.dev_src)
    refs_text = read_text_lines(config.dev_ref)
    if len(refs_text) != len(src):
        raise PhraseRescoreError(f"the dev reference has {len(refs_text)} lines but the dev source "
                                 f"{config.dev_src} has {len(src)}: expected one reference per source line",
                                 config.dev_ref)
    if not src:
        raise PhraseRescoreError("the dev source is empty: expected at least one sentence", config.dev_src)
    return src, [Reference(r) for r in refs_text]


def _resume(config: EmbeddedTuneConfig, state: TuneState, pool: NBestPool, w: np.ndarray, num_sentences: int,
            echo: Callable[[str], None]) -> tuple[list[IterationLog], np.ndarray, bool]:
    """Replay the finished iterations ``state`` lists into ``pool``: ``(their logs, the weights to decode
    with next, whether they converged)``; ``w``: the ini's weights, for a run that starts afresh."""
    rows: list[IterationLog] = []
    converged = False
    for rec in state.load(echo)[:config.max_iterations]:
        row = _replay(config.workdir, rec, pool, num_sentences)
        if row is None:
            break
        rows.append(row)
        w = np.asarray(rec["next_weights"], dtype=np.float64)
        converged = rec["changed"] < CONVERGENCE
        if converged:
            break
    if rows:
        state.iterations = state.iterations[:len(rows)]
        if converged or len(rows) == config.max_iterations:
            echo(f"tune: the {len(rows)} iteration(s) of this run had finished; writing the tuned moses.ini")
        else:
            echo(f"tune: resuming after iteration {len(rows)} (its n-best lists and weights are in {config.workdir})")
    return rows, w, converged


def _iteration_files(it: int, nbest: int) -> list[str]:
    """The files iteration ``it`` writes: the 1-best output, the n-best list, the candidates it adds."""
    return [f"run{it}.out", f"run{it}.best{nbest}.out", f"run{it}.candidates.npz"]


def _tune_iteration(config: EmbeddedTuneConfig, it: int, files: list[str], dec: Decoder, w: np.ndarray,
                    tuned: np.ndarray,
                    src: list[list[str]], refs: list[Reference], pool: NBestPool, rows: list[IterationLog],
                    ) -> tuple[IterationLog, np.ndarray, float]:
    """One decode of the dev set with ``w`` (its outputs written to ``files``) and one MERT run on the grown
    pool: ``(its log, the next weights, the largest change of a normalized tuneable weight)``."""
    t0 = time.perf_counter()
    dec.set_weights(w)
    results = dec.translate_all(src, config.nbest, config.threads, desc=f"tune iteration {it}")
    t1 = time.perf_counter()
    dev_bleu = _write_iteration(config.workdir, files, dec, results, refs, pool)
    res = optimize(pool, w, tuned, restarts=config.restarts, random_directions=config.random_directions,
                   seed=iteration_seed(config.seed, it),
                   more_starts=[r.weights for r in rows] if config.historic_bests else ())
    t2 = time.perf_counter()
    row = IterationLog(it, dev_bleu, w.copy(), 100.0 * res.score, pool.num_candidates(), t1 - t0, t2 - t1)
    changed = float(np.abs(l1_normalize(res.weights, tuned) - l1_normalize(w, tuned)).max())
    return row, res.weights, changed


def _write_iteration(workdir: str, files: list[str], dec: Decoder, results, refs: list[Reference],
                     pool: NBestPool) -> float:
    """Write an iteration's 1-best output, n-best list and candidates (as ``files`` names them), add the
    candidates to ``pool``; return the 1-best dev BLEU (percent)."""
    dev_stats = np.zeros(NUM_STATS)
    sent, feats, stats = [], [], []
    with atomic_open(os.path.join(workdir, files[0]), "w") as out1, \
            atomic_open(os.path.join(workdir, files[1]), "w") as outn:
        for i, r in enumerate(results):
            dev_stats += sentence_stats(r.best.text, refs[i])
            out1.write(r.best.text + "\n")
            for line in dec.nbest_lines(i, r.nbest):
                outn.write(line + "\n")
            for c in r.nbest or [r.best]:
                st = sentence_stats(c.text, refs[i])
                pool.add(i, c.features, st)
                sent.append(i)
                feats.append(c.features)
                stats.append(st)
    with atomic_open(os.path.join(workdir, files[2]), "wb") as f:
        np.savez(f, sent=np.asarray(sent, dtype=np.int64), features=np.asarray(feats, dtype=np.float64),
                 stats=np.asarray(stats, dtype=np.float64).reshape(len(stats), NUM_STATS))
    return 100.0 * bleu(dev_stats)

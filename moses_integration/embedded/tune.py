"""Tuning with the embedded decoder: decode -> merge n-best lists -> MERT, as mert-moses.pl loops.

Each iteration decodes the dev set with the current weights (``workdir/run{i}.out`` and
``run{i}.best{N}.out``, Moses's names), adds the new candidates to the pool of all earlier ones
(duplicates dropped), and runs MERT from the current weights plus random restarts. It stops when no
weight changes by 1e-5 or more (mert-moses.pl's test) or after ``max_iterations``. The tuned moses.ini
(``workdir/moses.ini``) is the input ini with only its [weight] lines changed; ``workdir/tune-log.csv``
has one row per decoded iteration: its dev BLEU (of the 1-best, in percent) and the weights used.
"""
from __future__ import annotations

import csv
import os
import time
from dataclasses import dataclass, field

import numpy as np

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.fileio import atomic_open, read_text_lines

from ..moses_ini import read_moses_ini
from .bleu_stats import NUM_STATS, Reference, bleu, sentence_stats
from .decoder import Decoder, DecoderConfig, read_sentences
from .features import load_decoder_spec
from .mert import NBestPool, l1_normalize, optimize

CONVERGENCE = 1e-5      # mert-moses.pl: stop when no weight changed by this much


@dataclass
class EmbeddedTuneConfig:
    """Settings of :func:`tune_embedded`.

    :ivar ini: the moses.ini to tune (its weights are the starting point).
    :ivar dev_src: tokenized dev source, one sentence a line.
    :ivar dev_ref: tokenized dev reference, same number of lines.
    :ivar workdir: where the tuned ``moses.ini``, ``tune-log.csv`` and the per-iteration outputs go.
    :ivar nbest: n-best list size per iteration (distinct, mert-moses.pl's default 100).
    :ivar max_iterations: at most this many decode + optimize rounds (mert-moses.pl: 25).
    :ivar seed: MERT's random restarts and directions.
    :ivar return_best_dev: keep the weights of the iteration with the highest dev BLEU instead of the last ones.
    :ivar threads: decoding processes.
    :ivar restarts: random starting points per MERT run (mert-moses.pl: 20).
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
                        f"{r.seconds_decode:.2f}", f"{r.seconds_mert:.2f}"] + [repr(float(x)) for x in r.weights])


def weight_column_names(spec) -> list[str]:
    """CSV column names of the weights: ``Name`` or ``Name_i`` for multi-component features."""
    out = []
    for f in spec.features:
        out.extend([f.name] if f.size == 1 else [f"{f.name}_{i + 1}" for i in range(f.size)])
    return out


def write_tuned_ini(ini_path, out_path, spec, weights: np.ndarray) -> None:
    """Copy ``ini_path`` to ``out_path`` with the tuneable features' [weight] lines set to ``weights``."""
    ini = read_moses_ini(ini_path)
    for f in spec.features:
        if f.tuneable:
            ini.set_weights(f.name, [float(x) for x in weights[f.offset:f.offset + f.size]])
    ini.write(out_path)


def tune_embedded(config: EmbeddedTuneConfig) -> str:
    """Tune the weights of ``config.ini`` on the dev set with the embedded decoder and MERT.

    :return: the path of the tuned moses.ini (``workdir/moses.ini``).
    """
    if config.nbest < 1 or config.max_iterations < 1:
        raise PhraseRescoreError("nbest and max_iterations must be at least 1")
    os.makedirs(config.workdir, exist_ok=True)
    spec = load_decoder_spec(config.ini)
    src = read_sentences(config.dev_src)
    refs_text = read_text_lines(config.dev_ref)
    if len(refs_text) != len(src):
        raise PhraseRescoreError(f"the dev reference has {len(refs_text)} lines but the dev source "
                                 f"{config.dev_src} has {len(src)}: expected one reference per source line",
                                 config.dev_ref)
    if not src:
        raise PhraseRescoreError("the dev source is empty: expected at least one sentence", config.dev_src)
    refs = [Reference(r) for r in refs_text]
    dec = Decoder(spec, config.decoder, sentences=src)
    tuned = spec.tuneable_mask()
    names = weight_column_names(spec)
    pool = NBestPool(len(src), spec.dim)
    w = spec.weights.copy()
    rows: list[IterationLog] = []
    log_path = os.path.join(config.workdir, "tune-log.csv")
    best_dev = (-1.0, w.copy())
    for it in range(1, config.max_iterations + 1):
        t0 = time.time()
        dec.set_weights(w)
        results = dec.translate_all(src, config.nbest, config.threads, desc=f"tune iteration {it}")
        t1 = time.time()
        dev_stats = np.zeros(NUM_STATS)
        with atomic_open(os.path.join(config.workdir, f"run{it}.out"), "w") as out1, \
                atomic_open(os.path.join(config.workdir, f"run{it}.best{config.nbest}.out"), "w") as outn:
            for i, r in enumerate(results):
                dev_stats += sentence_stats(r.best.text, refs[i])
                out1.write(r.best.text + "\n")
                for line in dec.nbest_lines(i, r.nbest):
                    outn.write(line + "\n")
                for c in r.nbest or [r.best]:
                    pool.add(i, c.features, sentence_stats(c.text, refs[i]))
        dev_bleu = 100.0 * bleu(dev_stats)
        if dev_bleu > best_dev[0]:
            best_dev = (dev_bleu, w.copy())
        res = optimize(pool, w, tuned, restarts=config.restarts, random_directions=config.random_directions,
                       seed=config.seed + it)
        t2 = time.time()
        rows.append(IterationLog(it, dev_bleu, w.copy(), 100.0 * res.score, pool.num_candidates(), t1 - t0, t2 - t1))
        _write_log(log_path, rows, names)
        new_w = res.weights
        changed = np.abs(l1_normalize(new_w, tuned) - l1_normalize(w, tuned)).max()
        w = new_w
        if changed < CONVERGENCE:
            break
    final = best_dev[1] if config.return_best_dev else w
    out_ini = os.path.join(config.workdir, "moses.ini")
    write_tuned_ini(config.ini, out_ini, spec, final)
    return out_ini

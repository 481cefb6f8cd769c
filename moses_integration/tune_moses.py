"""Tuning with a real Moses: run ``mert-moses.pl`` and collect the tuned moses.ini.

The command line is the one the Moses manual gives::

    mert-moses.pl DEV.SRC DEV.REF MOSES_HOME/bin/moses MODEL.ini --mertdir WORK/mert-bin --working-dir WORK/mert-work
        [--nbest N] [--maximum-iterations K] [--threads T] [--decoder-flags "..."] [--batch-mira]
        [--return-best-dev] [--predictable-seeds] [--historic-bests]

``--threads`` is mert-moses.pl's own (threads of the ``mert`` optimizer); decoder threads go in
``--decoder-flags "-threads N"``, as with mert-moses.pl itself: ``threads`` above 1 is passed there too
unless the decoder flags already name ``-threads``. ``mert`` seeds its random restarts from the
system clock, to the second, unless given ``-r``: two tunings started in the same second draw the same
restarts and, on the same n-best lists, return the same weights. So ``--mertdir`` is
``WORK/mert-bin``, where ``mert`` and ``kbmira`` are launchers that add ``-r`` with the seed of each
iteration (:mod:`.mert_seeds`: ``seed * 1000 + i``; the other programs link to ``MOSES_HOME/bin``), and
a tuning is repeatable while each iteration draws new restarts; ``predictable_seeds`` gives
mert-moses.pl's own seeds (1000 times the iteration's number, the same in every run) and the real
``--mertdir`` instead. It runs with an argument list (no shell) from the working directory, in a process group
that dies with the command, its decoders and optimizers included (:mod:`phrase_rescore.core.children`);
its output is kept in ``WORK/mert-moses.log`` (with the Moses decoder's per-sentence output, nearly all of
it), and the console gets one line per finished iteration (:func:`iteration_line`). mert-moses.pl leaves
the tuned configuration in ``mert-work/moses.ini``; it is checked (parsed, features and weights agree)
and copied to the requested output without its ``# finished DATE`` comment, so that the same tuning gives
the same bytes.

mert-moses.pl is given ``WORK/filtered/moses.ini``: the ini with its text tables filtered to the dev set's
phrases, made once and reused by a rerun with the same tables and dev set (:mod:`.table_filter`, what
mert-moses.pl's ``--filter`` does), so that no iteration's decoder reads a full text table; the tuned
ini names the original tables again. A binarized table (``PhraseDictionaryCompact``, ``moses-ini
--binarized-prefix``) is not filtered: Moses reads only the entries it looks up, whatever its size.

Resuming: ``WORK/tune-moses-state.json`` records the argv, the seed and the inputs (SHA-256 of the moses.ini and
the dev set; size and modification time of the model files the ini names) before mert-moses.pl starts.
A rerun with the same record, after a run that did not finish, adds mert-moses.pl's ``--continue``: it
reads ``mert-work/finished_step.txt`` and starts after the last iteration whose decoder and mert runs
both finished. A run that had finished is not run again (its tuned ini is collected). Anything changed:
mert-moses.pl starts from iteration 1 (it overwrites its own files in ``mert-work``).

``WORK/tune-log.csv``, one row per finished iteration: the dev BLEU of the iteration's 1-best
(``run{i}.out``, in percent, :mod:`.embedded.bleu_stats`), mert's n-best BLEU (``(i) BEST at i: ... =>
BLEU``), and the seconds spent decoding and optimizing, timed by when mert-moses.pl's unbuffered stderr
lines arrive: decoding from ``Executing: DECODER ... -n-best-list ... > run{i}.out`` to ``Scoring the
nbestlist.``; optimizing (extractor and mert) from there to ``Executing: \\cp -f weights.txt
run{i}.weights.txt``. mert-moses.pl prints no times of its own besides whole-iteration dates to the
second, so these include the few file operations between those lines. mert's BLEU comes after the line
that closes its iteration; the row is written when the iteration closes and again when it arrives.
"""
from __future__ import annotations

import csv
import dataclasses
import json
import os
import re
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from phrase_rescore.core import children
from phrase_rescore.core.atomic_write import atomic_open
from phrase_rescore.core.config import cap_to_cores
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.file_errors import naming
from phrase_rescore.core.hashing import sha256_file
from phrase_rescore.core.reading import read_text_lines

from .configs import MosesTuneConfig
from .embedded.bleu_stats import corpus_bleu
from .mert_seeds import write_launchers
from .moses_ini import parse_moses_ini, read_moses_ini
from .moses_install import MosesInstall, require_moses
from .table_filter import filtered_ini, original_paths

MERT_WORK = "mert-work"
MERT_BIN = "mert-bin"
LOG_NAME = "mert-moses.log"
STATE_NAME = "tune-moses-state.json"
STATE_FORMAT = "phrase-rescore mert-moses.pl state 1"
TUNE_LOG = "tune-log.csv"
FILTERED = "filtered"       # WORK/filtered: the ini and its text tables filtered to the dev set


@dataclass
class MosesTuneResult:
    """What tuning produced."""

    tuned_ini: Path
    log: Path
    argv: list[str]
    weights: dict[str, list[float]]

    def summary(self) -> str:
        return f"tuned moses.ini: {self.tuned_ini} (mert-moses.pl log: {self.log})"


#: the Moses decoder's names of its -threads option (moses/Parameter.cpp: "threads", abbreviated "th")
DECODER_THREAD_FLAGS = ("-threads", "-th", "--threads", "--th")


def decoder_flags(flags: str, threads: int) -> str:
    """``flags`` with ``-threads T`` appended when ``threads > 1`` and the flags do not set the decoder's
    threads themselves, so that a workflow's ``threads`` reaches the decoder mert-moses.pl runs."""
    flags = flags.strip()
    threads = cap_to_cores(int(threads), "threads")
    if threads > 1 and not any(t in DECODER_THREAD_FLAGS for t in flags.split()):
        flags = f"{flags} -threads {threads}".strip()
    return flags


def mert_moses_argv(cfg: MosesTuneConfig, install: MosesInstall) -> list[str]:
    """The exact argv of the mert-moses.pl run for ``cfg`` (paths absolute, since it changes directory)."""
    workdir = Path(cfg.workdir).resolve()
    # mert seeded in each iteration through the launchers in WORK/mert-bin (see the module docstring)
    mertdir = install.bin_dir if cfg.launcher_seed is None else workdir / MERT_BIN
    argv = [os.fspath(install.mert_moses),
            os.fspath(Path(cfg.dev_src).resolve()), os.fspath(Path(cfg.dev_ref).resolve()),
            os.fspath(install.moses), os.fspath(Path(cfg.ini).resolve()),
            f"--mertdir={mertdir}", f"--working-dir={workdir / MERT_WORK}",
            f"--nbest={int(cfg.nbest)}", f"--maximum-iterations={int(cfg.max_iterations)}",
            f"--threads={cap_to_cores(int(cfg.threads), 'threads')}"]
    flags = decoder_flags(cfg.decoder_flags, cfg.threads)
    if flags:
        argv.append(f"--decoder-flags={flags}")
    for flag, on in (("--batch-mira", cfg.batch_mira), ("--return-best-dev", cfg.return_best_dev),
                     ("--predictable-seeds", cfg.predictable_seeds), ("--historic-bests", cfg.historic_bests)):
        if on:
            argv.append(flag)
    return argv


def run_logged(argv: Sequence[str], log_path: Path, cwd: Path | None = None,
               echo: Callable[[str], None] | None = None, what: str | None = None, tail: int = 20,
               append: bool = False) -> None:
    """Run ``argv`` (no shell), streaming stdout+stderr line by line to ``echo`` and to ``log_path``
    (added to its end with ``append``).

    :raises PhraseRescoreError: on a non-zero exit (the message has the status, the last lines, and the kept log),
        or when the program cannot be started.
    """
    what = what or Path(argv[0]).name
    echo = echo if echo is not None else (lambda s: print(s, file=sys.stderr, flush=True))
    log_path.parent.mkdir(parents=True, exist_ok=True)
    last: deque[str] = deque(maxlen=tail)
    with naming(log_path), open(log_path, "a" if append else "w", encoding="utf-8") as log:
        log.write("# command: " + " ".join(argv) + "\n")
        log.flush()
        try:    # in a process group that dies with this process, or when anything below raises
            proc = children.start(list(argv), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, text=True, encoding="utf-8", errors="replace", bufsize=1)
        except OSError as e:
            log.write(f"# could not start: {e}\n")
            raise PhraseRescoreError(f"could not run {what}: {e}", argv[0]) from None
        with children.ended(proc):
            assert proc.stdout is not None
            for line in proc.stdout:
                log.write(line)
                log.flush()
                line = line.rstrip("\n")
                last.append(line)
                echo(line)
        rc = proc.returncode
        log.write(f"# exit status: {rc}\n")
    if rc != 0:
        shown = "\n  ".join(last)
        raise PhraseRescoreError(f"{what} failed with exit status {rc}; full log kept in {log_path}; last lines:\n  {shown}")


class MertProgress:
    """Per-iteration times and BLEU read from mert-moses.pl's output lines as they arrive (see the module
    docstring); ``on_finished(iteration)`` is called when an iteration's optimizer has finished, and
    ``on_best(iteration)``, if given, when mert's n-best BLEU of an iteration arrives (after the line that
    closes the iteration)."""

    DECODE = re.compile(r"^Executing: .* -n-best-list \S+ \d+.*> run(\d+)\.out\s*$")
    SCORING = "Scoring the nbestlist."
    OPTIMIZED = re.compile(r"^Executing: \\cp -f weights\.txt run(\d+)\.weights\.txt\s*$")
    BEST = re.compile(r"^\((\d+)\) BEST at \d+:? .* => (\S+) at ")

    def __init__(self, rows: dict[int, dict], on_finished: Callable[[int], None],
                 on_best: Callable[[int], None] | None = None):
        self.rows = rows
        self.on_finished = on_finished
        self.on_best = on_best
        self._current: int | None = None
        self._t: dict[str, float] = {}

    def feed(self, line: str, now: float) -> None:
        m = self.DECODE.match(line)
        if m:
            it = int(m.group(1))
            if it != self._current:             # mert-moses.pl and its safesystem both print the command
                self._current, self._t = it, {"decode": now}
            return
        if line.strip() == self.SCORING and "decode" in self._t:
            self._t["scoring"] = now
            return
        m = self.OPTIMIZED.match(line)
        if m and int(m.group(1)) == self._current and "scoring" in self._t:
            row = self.rows.setdefault(self._current, {})
            row["seconds_decode"] = self._t["scoring"] - self._t["decode"]
            row["seconds_mert"] = now - self._t["scoring"]
            self.on_finished(self._current)
            return
        m = self.BEST.match(line)
        if m:
            try:
                it, bleu = int(m.group(1)), 100.0 * float(m.group(2))
            except ValueError:
                return
            self.rows.setdefault(it, {})["mert_bleu"] = bleu
            if self.on_best is not None:
                self.on_best(it)


def iteration_line(it: int, row: dict, max_iterations: int) -> str:
    """The console's line for a finished MERT iteration: its dev BLEU and where the time went."""
    bleu = "dev BLEU ?" if row.get("dev_bleu") is None else f"dev BLEU {row['dev_bleu']:.2f}"
    return (f"tune: iteration {it}/{max_iterations}: {bleu}; decoding {row['seconds_decode']:.0f} s, "
            f"optimizing {row['seconds_mert']:.0f} s")


def _inputs_record(cfg: MosesTuneConfig, argv: list[str]) -> dict:
    """What decides mert-moses.pl's iterations: its argv, the seed and its inputs (see the module docstring)."""
    files = {"ini": sha256_file(cfg.ini), "dev_src": sha256_file(cfg.dev_src), "dev_ref": sha256_file(cfg.dev_ref)}
    models = {}
    for f in read_moses_ini(cfg.ini).features:
        p = f.get("path")
        if p is not None:
            try:
                st = os.stat(p)
                models[f.name] = [p, st.st_size, st.st_mtime_ns]
            except OSError:
                models[f.name] = [p, None, None]
    # the seed reaches mert through the launchers, not the argv
    return {"argv": argv, "seed": cfg.launcher_seed, "files": files,
            "models": models}


def _read_state(path: Path) -> dict | None:
    try:
        with open(path, encoding="utf-8") as f:
            old = json.load(f)
    except (OSError, ValueError):
        return None
    return old if isinstance(old, dict) and old.get("format") == STATE_FORMAT else None


def _finished_step(mert_work: Path) -> int:
    try:
        return int((mert_work / "finished_step.txt").read_text().strip() or 0)
    except (OSError, ValueError):
        return 0


def _write_tune_log(path: Path, rows: dict[int, dict]) -> None:
    done = sorted(i for i, r in rows.items() if "seconds_mert" in r)
    if not done:
        return
    with atomic_open(path, "w") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["iteration", "dev_bleu", "mert_bleu", "seconds_decode", "seconds_mert"])
        for i in done:
            r = rows[i]
            w.writerow([i, "" if r.get("dev_bleu") is None else f"{r['dev_bleu']:.4f}",
                        "" if r.get("mert_bleu") is None else f"{r['mert_bleu']:.4f}",
                        f"{r['seconds_decode']:.6f}", f"{r['seconds_mert']:.6f}"])


def tune_moses(cfg: MosesTuneConfig, echo: Callable[[str], None] | None = None) -> MosesTuneResult:
    """Run mert-moses.pl for ``cfg`` with the Moses found by :func:`require_moses`; return the tuned ini.

    Resumes an interrupted run of the same command and inputs with ``--continue`` (see the module docstring).
    """
    echo = echo if echo is not None else (lambda s: print(s, file=sys.stderr, flush=True))
    install = require_moses(cfg.moses_home)
    for p, what in ((cfg.ini, "moses.ini"), (cfg.dev_src, "dev source"), (cfg.dev_ref, "dev reference")):
        if not Path(p).is_file():
            raise PhraseRescoreError(f"{what} not found", p)
    read_moses_ini(cfg.ini).check_weights_match()   # fail here, not after the first decoder run
    workdir = Path(cfg.workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    # Moses reads a text table whole in every iteration: it decodes with the tables filtered to the dev set
    filtered = filtered_ini(cfg.ini, [cfg.dev_src], workdir / FILTERED)
    argv = mert_moses_argv(dataclasses.replace(cfg, ini=filtered.ini), install)
    if cfg.launcher_seed is not None:
        write_launchers(workdir / MERT_BIN, install.bin_dir, cfg.launcher_seed)
    log = workdir / LOG_NAME
    mert_work = workdir / MERT_WORK
    tuned = mert_work / "moses.ini"
    record = _inputs_record(cfg, argv)
    old = _read_state(workdir / STATE_NAME)
    same = old is not None and old.get("inputs") == record
    rows: dict[int, dict] = {int(k): v for k, v in old.get("iterations", {}).items()} if same else {}
    state = {"format": STATE_FORMAT, "inputs": record, "finished": False, "iterations": rows}

    def save() -> None:
        with atomic_open(workdir / STATE_NAME, "w") as f:
            json.dump({**state, "iterations": {str(k): v for k, v in sorted(rows.items())}}, f, indent=1)
            f.write("\n")
        _write_tune_log(workdir / TUNE_LOG, rows)

    if same and old.get("finished") and tuned.is_file():
        echo(f"tune: mert-moses.pl had finished this run; collecting {tuned}")
    else:
        step = _finished_step(mert_work) if same else 0
        run_argv = argv + (["--continue"] if step >= 1 else [])
        if step >= 1:
            echo(f"tune: resuming mert-moses.pl after iteration {step} (--continue)")
        rows = {i: r for i, r in rows.items() if i <= step}
        state["iterations"] = rows
        save()
        refs = read_text_lines(cfg.dev_ref)

        def finished(it: int) -> None:
            try:
                out = read_text_lines(mert_work / f"run{it}.out")
                rows[it]["dev_bleu"] = 100.0 * corpus_bleu(out, refs) if len(out) == len(refs) else None
            except (OSError, PhraseRescoreError):
                rows[it]["dev_bleu"] = None
            save()
            echo(iteration_line(it, rows[it], cfg.max_iterations))

        def best(it: int) -> None:
            if "seconds_mert" in rows.get(it, {}):   # the iteration's row is written; add mert's BLEU to it
                save()

        progress = MertProgress(rows, finished, best)

        def on_line(line: str) -> None:   # the decoder's chatter goes to the log only
            progress.feed(line, time.monotonic())

        echo(f"tune: mert-moses.pl, at most {cfg.max_iterations} iterations; one line per finished iteration "
             f"here, its whole output in {log}")
        run_logged(run_argv, log, cwd=workdir, echo=on_line, what="mert-moses.pl", append=step >= 1)
        if not tuned.is_file():
            raise PhraseRescoreError(f"mert-moses.pl finished but left no tuned configuration at {tuned}; see {log}")
        state["finished"] = True
        save()
    text = without_finish_date(tuned.read_bytes()).decode("utf-8")
    # mert-moses.pl copies every section but [weight] from the input ini: a [weight-overwrite] there would replace
    # the tuned weights whenever Moses reads the tuned ini (in tuning, its -weight-overwrite took that line's place)
    text = parse_moses_ini(text, tuned, as_moses_reads=False).without_section("weight-overwrite").text()
    ini = original_paths(parse_moses_ini(text, tuned), cfg.ini)   # the full tables again, not the filtered ones
    ini.check_weights_match()
    out = Path(cfg.out) if cfg.out is not None else workdir / "moses.tuned.ini"
    with atomic_open(out, "wb") as f:
        f.write(ini.text().encode("utf-8"))
    return MosesTuneResult(out, log, argv, ini.weights)


def without_finish_date(ini: bytes) -> bytes:
    """mert-moses.pl's tuned moses.ini without the ``# finished DATE`` line of its opening comments, the
    one part that differs between two runs of the same tuning; every other byte as it wrote them."""
    lines = ini.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if not line.startswith(b"#"):
            break
        if line.startswith(b"# finished "):
            return b"".join(lines[:i] + lines[i + 1:])
    return ini

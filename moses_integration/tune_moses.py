"""Tuning with a real Moses: run ``mert-moses.pl`` and collect the tuned moses.ini.

The command line is the one the Moses manual gives::

    mert-moses.pl DEV.SRC DEV.REF MOSES_HOME/bin/moses MODEL.ini --mertdir MOSES_HOME/bin --working-dir WORK/mert-work
        [--nbest N] [--maximum-iterations K] [--threads T] [--decoder-flags "..."] [--batch-mira]
        [--return-best-dev] [--predictable-seeds]

``--threads`` is mert-moses.pl's own (threads of the ``mert`` optimizer); decoder threads go in
``--decoder-flags "-threads N"``, as with mert-moses.pl itself: ``threads`` above 1 is passed there too
unless the decoder flags already name ``-threads``. It runs as a subprocess with an argument
list (no shell) from the working directory; its output is streamed to the user and kept in
``WORK/mert-moses.log``. mert-moses.pl leaves the tuned configuration in ``mert-work/moses.ini``; it is
checked (parsed, features and weights agree) and copied to the requested output.
"""
from __future__ import annotations

import os
import subprocess
import sys
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from phrase_rescore.core.config import setting
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.fileio import atomic_open

from .moses_ini import read_moses_ini
from .moses_install import MosesInstall, require_moses

MERT_WORK = "mert-work"
LOG_NAME = "mert-moses.log"


@dataclass
class MosesTuneConfig:
    """Options of ``tune --backend moses`` (names follow mert-moses.pl's options).

    :ivar ini: the moses.ini to tune (e.g. the one ``moses-ini`` wrote).
    :ivar dev_src: tokenized dev source, one sentence a line.
    :ivar dev_ref: tokenized dev reference (mert-moses.pl's reference basename).
    :ivar workdir: working directory; mert-moses.pl works in ``workdir/mert-work``.
    :ivar out: where to put the tuned moses.ini (default ``workdir/moses.tuned.ini``).
    """

    ini: Path
    dev_src: Path
    dev_ref: Path
    workdir: Path
    out: Path | None = None
    nbest: int = setting(100, at_least=1, help="n-best list size per iteration.")
    max_iterations: int = setting(25, at_least=1, aliases=("maximum-iterations",), help="Most MERT iterations.")
    threads: int = setting(1, at_least=1, help="moses: mert-moses.pl --threads (the optimizer) and the decoder's "
                                              "-threads (unless --decoder-flags sets it); embedded: decoder "
                                              "processes.")
    decoder_flags: str = setting("", help="moses: passed as mert-moses.pl --decoder-flags, e.g. '-threads 8'.")
    batch_mira: bool = setting(False, help="moses: tune with batch MIRA instead of MERT.")
    return_best_dev: bool = setting(False, help="Keep the weights of the best dev iteration, not the last.")
    predictable_seeds: bool = setting(False, help="moses: deterministic random restarts.")
    moses_home: str | None = setting(None, type=str, envvar="MOSES_HOME",
                                     help="Moses installation root (default: $MOSES_HOME, or moses on PATH).")


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
    if int(threads) > 1 and not any(t in DECODER_THREAD_FLAGS for t in flags.split()):
        flags = f"{flags} -threads {int(threads)}".strip()
    return flags


def mert_moses_argv(cfg: MosesTuneConfig, install: MosesInstall) -> list[str]:
    """The exact argv of the mert-moses.pl run for ``cfg`` (paths absolute, since it changes directory)."""
    work = Path(cfg.workdir).resolve() / MERT_WORK
    argv = [os.fspath(install.mert_moses),
            os.fspath(Path(cfg.dev_src).resolve()), os.fspath(Path(cfg.dev_ref).resolve()),
            os.fspath(install.moses), os.fspath(Path(cfg.ini).resolve()),
            f"--mertdir={install.bin_dir}", f"--working-dir={work}",
            f"--nbest={int(cfg.nbest)}", f"--maximum-iterations={int(cfg.max_iterations)}",
            f"--threads={int(cfg.threads)}"]
    flags = decoder_flags(cfg.decoder_flags, cfg.threads)
    if flags:
        argv.append(f"--decoder-flags={flags}")
    for flag, on in (("--batch-mira", cfg.batch_mira), ("--return-best-dev", cfg.return_best_dev),
                     ("--predictable-seeds", cfg.predictable_seeds)):
        if on:
            argv.append(flag)
    return argv


def run_logged(argv: Sequence[str], log_path: Path, cwd: Path | None = None,
               echo: Callable[[str], None] | None = None, what: str | None = None, tail: int = 20) -> None:
    """Run ``argv`` (no shell), streaming stdout+stderr line by line to ``echo`` and to ``log_path``.

    :raises PhraseRescoreError: on a non-zero exit (the message has the status, the last lines, and the kept log),
        or when the program cannot be started.
    """
    what = what or Path(argv[0]).name
    echo = echo if echo is not None else (lambda s: print(s, file=sys.stderr, flush=True))
    log_path.parent.mkdir(parents=True, exist_ok=True)
    last: deque[str] = deque(maxlen=tail)
    with open(log_path, "w", encoding="utf-8") as log:
        log.write("# command: " + " ".join(argv) + "\n")
        log.flush()
        try:
            proc = subprocess.Popen(list(argv), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, text=True, encoding="utf-8", errors="replace",
                                    bufsize=1)
        except OSError as e:
            log.write(f"# could not start: {e}\n")
            raise PhraseRescoreError(f"could not run {what}: {e}", argv[0]) from None
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            log.flush()
            line = line.rstrip("\n")
            last.append(line)
            echo(line)
        rc = proc.wait()
        log.write(f"# exit status: {rc}\n")
    if rc != 0:
        shown = "\n  ".join(last)
        raise PhraseRescoreError(f"{what} failed with exit status {rc}; full log kept in {log_path}; last lines:\n  {shown}")


def tune_moses(cfg: MosesTuneConfig, echo: Callable[[str], None] | None = None) -> MosesTuneResult:
    """Run mert-moses.pl for ``cfg`` with the Moses found by :func:`require_moses`; return the tuned ini."""
    install = require_moses(cfg.moses_home)
    for p, what in ((cfg.ini, "moses.ini"), (cfg.dev_src, "dev source"), (cfg.dev_ref, "dev reference")):
        if not Path(p).is_file():
            raise PhraseRescoreError(f"{what} not found", p)
    read_moses_ini(cfg.ini).check_weights_match()   # fail here, not after the first decoder run
    workdir = Path(cfg.workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    argv = mert_moses_argv(cfg, install)
    log = workdir / LOG_NAME
    run_logged(argv, log, cwd=workdir, echo=echo, what="mert-moses.pl")
    tuned = workdir / MERT_WORK / "moses.ini"
    if not tuned.is_file():
        raise PhraseRescoreError(f"mert-moses.pl finished but left no tuned configuration at {tuned}; see {log}")
    ini = read_moses_ini(tuned)
    ini.check_weights_match()
    out = Path(cfg.out) if cfg.out is not None else workdir / "moses.tuned.ini"
    with atomic_open(out, "wb") as f:
        f.write(tuned.read_bytes())
    return MosesTuneResult(out, log, argv, ini.weights)

"""``phrase-rescore tune``: one entry point, two backends.

``moses`` runs a real Moses's mert-moses.pl (:mod:`moses_integration.tune_moses`); ``embedded`` runs the
project's own decoder and MERT (``moses_integration.embedded.tune.tune_embedded``). Both return the path
of the tuned moses.ini.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pipeline.errors import PhraseRescoreError
from pipeline.fileio import atomic_open

from .backend import BACKENDS
from .tune_moses import MosesTuneConfig, tune_moses


@dataclass
class TuneConfig:
    """Options of ``tune``; ``backend`` picks who runs it. Moses-only options (``decoder_flags``, ``batch_mira``)
    are refused with ``embedded``; ``seed`` is used by ``embedded`` (mert-moses.pl has only ``predictable_seeds``)."""

    backend: str
    ini: Path
    dev_src: Path
    dev_ref: Path
    workdir: Path
    out: Path | None = None
    nbest: int = 100
    max_iterations: int = 25
    threads: int = 1
    decoder_flags: str = ""
    batch_mira: bool = False
    return_best_dev: bool = False
    predictable_seeds: bool = False
    seed: int = 1
    moses_home: str | None = None


def tune(cfg: TuneConfig, echo: Callable[[str], None] | None = None) -> Path:
    """Tune ``cfg.ini`` on the dev set with the chosen backend; return the tuned moses.ini's path."""
    if cfg.backend == "moses":
        res = tune_moses(MosesTuneConfig(
            ini=cfg.ini, dev_src=cfg.dev_src, dev_ref=cfg.dev_ref, workdir=cfg.workdir, out=cfg.out,
            nbest=cfg.nbest, max_iterations=cfg.max_iterations, threads=cfg.threads, decoder_flags=cfg.decoder_flags,
            batch_mira=cfg.batch_mira, return_best_dev=cfg.return_best_dev, predictable_seeds=cfg.predictable_seeds,
            moses_home=cfg.moses_home), echo=echo)
        return res.tuned_ini
    if cfg.backend == "embedded":
        unsupported = [flag for flag, on in (("--decoder-flags", bool(cfg.decoder_flags.strip())),
                                             ("--batch-mira", cfg.batch_mira)) if on]
        if unsupported:
            raise PhraseRescoreError(f"{' and '.join(unsupported)} only apply to --backend moses "
                                     "(the embedded backend always runs MERT, seeded by --seed)")
        try:
            from .embedded.tune import EmbeddedTuneConfig, tune_embedded
        except ImportError as e:
            raise PhraseRescoreError(f"the embedded tuner is not available in this installation ({e}); "
                                     "use --backend moses with MOSES_HOME set") from None
        tuned = Path(tune_embedded(EmbeddedTuneConfig(
            ini=str(cfg.ini), dev_src=str(cfg.dev_src), dev_ref=str(cfg.dev_ref), workdir=str(cfg.workdir),
            nbest=cfg.nbest, max_iterations=cfg.max_iterations, seed=cfg.seed,
            return_best_dev=cfg.return_best_dev, threads=cfg.threads)))
        if cfg.out is not None and Path(cfg.out).resolve() != tuned.resolve():
            with atomic_open(cfg.out, "wb") as f:
                f.write(tuned.read_bytes())
            return Path(cfg.out)
        return tuned
    raise PhraseRescoreError(f"unknown backend {cfg.backend!r}; expected one of: {', '.join(BACKENDS)}")

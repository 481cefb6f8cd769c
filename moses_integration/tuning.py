"""``phrase-rescore tune``: one entry point, two backends.

``moses`` runs a real Moses's mert-moses.pl (:mod:`phrase_rescore.moses_integration.tune_moses`); ``embedded`` runs the
project's own decoder and MERT (``phrase_rescore.moses_integration.embedded.tune.tune_embedded``). Both return the path
of the tuned moses.ini.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

from phrase_rescore.core.atomic_write import atomic_open
from phrase_rescore.core.config import check, flag_name, settings
from phrase_rescore.core.errors import PhraseRescoreError

from .configs import BACKENDS, MosesTuneConfig, TuneConfig
from .tune_moses import tune_moses


def tune(cfg: TuneConfig, echo: Callable[[str], None] | None = None) -> Path:
    """Tune ``cfg.ini`` on the dev set with the chosen backend; return the tuned moses.ini's path."""
    if cfg.backend == "moses":
        moses_fields = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(MosesTuneConfig)}
        res = tune_moses(MosesTuneConfig(**moses_fields), echo=echo)
        return res.tuned_ini
    if cfg.backend == "embedded":
        check(TuneConfig, {s.name: getattr(cfg, s.name) for s in settings(TuneConfig)}, flag_name)
        try:
            from .embedded.tune import EmbeddedTuneConfig, tune_embedded
        except ImportError as e:
            raise PhraseRescoreError(f"the embedded tuner is not available in this installation ({e}); "
                                     "use --backend moses with MOSES_HOME set") from None
        tuned = Path(tune_embedded(EmbeddedTuneConfig(
            ini=str(cfg.ini), dev_src=str(cfg.dev_src), dev_ref=str(cfg.dev_ref), workdir=str(cfg.workdir),
            nbest=cfg.nbest, max_iterations=cfg.max_iterations, seed=cfg.seed,
            return_best_dev=cfg.return_best_dev, historic_bests=cfg.historic_bests, threads=cfg.threads),
            echo=echo))
        if cfg.out is not None and Path(cfg.out).resolve() != tuned.resolve():
            with atomic_open(cfg.out, "wb") as f:
                f.write(tuned.read_bytes())
            return Path(cfg.out)
        return tuned
    raise PhraseRescoreError(f"unknown backend {cfg.backend!r}; expected one of: {', '.join(BACKENDS)}")

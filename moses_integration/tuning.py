"""``phrase-rescore tune``: one entry point, two backends.

``moses`` runs a real Moses's mert-moses.pl (:mod:`phrase_rescore.moses_integration.tune_moses`); ``embedded`` runs the
project's own decoder and MERT (``phrase_rescore.moses_integration.embedded.tune.tune_embedded``). Both return the path
of the tuned moses.ini.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from phrase_rescore.core.atomic_write import atomic_open
from phrase_rescore.core.config import check, flag_name, setting, settings
from phrase_rescore.core.errors import PhraseRescoreError

from .backend import BACKENDS
from .tune_moses import MosesTuneConfig, tune_moses


@dataclass
class TuneConfig(MosesTuneConfig):
    """Options of ``tune``: mert-moses.pl's (:class:`MosesTuneConfig`, ``seed`` included, which seeds either
    backend's MERT) plus ``backend``, which picks who runs it. Moses-only options (``decoder_flags``,
    ``batch_mira``) are refused with ``embedded``."""

    backend: str = setting("moses", choices=BACKENDS,
                           help="moses: a real Moses's mert-moses.pl (MOSES_HOME); embedded: the project's decoder "
                                "and MERT.")

    @staticmethod
    def check_settings(values: dict, name) -> None:
        """Moses-only options are refused with the embedded backend."""
        if values.get("backend") != "embedded":
            return
        moses_only = [k for k, on in (("decoder_flags", bool(values.get("decoder_flags", "").strip())),
                                      ("batch_mira", values.get("batch_mira"))) if on]
        if moses_only:
            raise PhraseRescoreError(f"{' and '.join(name(k, False) for k in moses_only)} only apply to "
                                     f"{name('backend', False)} moses (the embedded backend always runs MERT, "
                                     f"seeded by {name('seed', False)})")


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

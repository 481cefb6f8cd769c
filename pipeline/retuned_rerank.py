"""A system's dev and test n-best lists re-ranked with one model's feature, the weights retuned on the dev list.

The +CSLM rows of Table 1 (Cho et al. 2014, section 5: ``CSLM0 = log p(e)``) and the LSTM's re-ranked rows
(Sutskever et al. 2014: ``Seq2Seq0 = log p(e|f)``) are made so: the feature is added to every hypothesis of
both lists (:func:`~phrase_rescore.pipeline.rescore_nbest.rescore_nbest`), MERT (embedded, or Moses's mert or
kbmira) retunes the weights of all features on the dev list from the given starting weights, and both lists
are re-ranked by the tuned weights.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from phrase_rescore.moses_integration.moses_ini import read_moses_ini

from .configs import RescoreConfig
from .rescore_nbest import rerank_nbest, rescore_nbest, write_weights
from .sentences import read_sentences


class SplitFiles(NamedTuple):
    """One file per half of the held-out set."""

    dev: Path
    test: Path


class RetunedRerank(NamedTuple):
    """What re-ranking both lists did."""

    hypotheses: int                 # test hypotheses scored
    hyps_per_s: float               # their scoring speed
    dev_bleu: float                 # MERT's BLEU on the dev list
    tuner: str                      # who retuned the weights: embedded, mert or kbmira
    tune_seconds: float             # how long the tuning took
    seconds: float                  # how long scoring, tuning and re-ranking the test list took
    changed_test: int               # test sentences whose 1-best changed
    changed_dev: int                # dev sentences whose 1-best changed
    weights: dict[str, list[float]]  # the tuned weights
    scored: SplitFiles              # both lists with the feature added


def rerank_retuned(model: Path, feature: str, init: dict[str, list[float]], nbest: SplitFiles, src: SplitFiles,
                   dev_ref: Path, out: SplitFiles, work: Path, tag: str, restarts: int, tuner: str,
                   moses_home: str | None, seed: int = 0, device: str | None = None) -> RetunedRerank:
    """Add ``model``'s ``feature`` to the ``nbest`` lists of ``src``, retune from ``init`` on the dev list against
    ``dev_ref``, and write both re-ranked 1-best files ``out``.

    The starting weights go to ``WORK/TAG.init-weights.ini``, the test list with the feature to
    ``WORK/test.TAG.nbest`` (the dev list's to the same name with ``.dev``), the tuned weights to
    ``OUT.test.weights.ini``.
    """
    init_path = work / f"{tag}.init-weights.ini"
    write_weights(init_path, init)
    scored = SplitFiles(work / f"test.{tag}.nbest.dev", work / f"test.{tag}.nbest")
    s = rescore_nbest(RescoreConfig(os.fspath(nbest.test), os.fspath(src.test), [os.fspath(model)],
                                    os.fspath(scored.test), os.fspath(out.test), feature_name=feature,
                                    weights_ini=os.fspath(init_path), dev_nbest=os.fspath(nbest.dev),
                                    dev_src=os.fspath(src.dev), dev_ref=os.fspath(dev_ref), mert_restarts=restarts,
                                    seed=seed, tuner=tuner, moses_home=moses_home, device=device))
    weights = read_moses_ini(s.tuned_weights).weights
    changed_dev = rerank_nbest(scored.dev, weights, out.dev, len(read_sentences(src.dev)))
    return RetunedRerank(s.hypotheses, s.hyps_per_s, s.dev_bleu, s.tuner, s.tune_seconds, s.seconds,
                         s.changed_1best, changed_dev, weights, scored)

"""The settings a workflow has beyond its commands' configs: the demo corpus (``[demo-data]``, also
``make-demo-data``'s options), the initial weights of the added columns (``[moses-ini]``) and the re-ranking of
the +CSLM rows (``[evaluate]``). Plain settings (:func:`~phrase_rescore.core.config.setting`), without torch.
"""
from __future__ import annotations

import dataclasses

from phrase_rescore.core.config import FLOAT32_MAX, SEED_MAX, setting
from phrase_rescore.pipeline.configs import TUNERS


@dataclasses.dataclass
class DemoDataConfig:
    """Options of ``make-demo-data`` and ``[demo-data]``: the corpus is a function of them."""

    train: int = setting(10000, at_least=1, help="Training sentence pairs.")
    dev: int = setting(500, at_least=1, help="Development (tuning) sentence pairs.")
    test: int = setting(500, at_least=1, help="Test sentence pairs.")
    seed: int = setting(1, at_least=0, at_most=SEED_MAX, help="Seed; the corpus is a function of it.")
    noise: float = setting(0.04, at_least=0, at_most=1,
                           help="Share of training pairs misaligned or loosely translated.")


@dataclasses.dataclass
class AddedWeights:
    """The initial weights of the columns the workflow adds (tuning replaces them): ``[moses-ini]`` holds these
    instead of ``moses-ini --weights``, since its two stages add one column (+RNN) and two (+RNN+WP)."""

    rnn_weight: float = setting(0.2, at_least=-FLOAT32_MAX, at_most=FLOAT32_MAX, help="Initial weight of the log p(f|e) column.")
    wp_weight: float = setting(-0.2, at_least=-FLOAT32_MAX, at_most=FLOAT32_MAX, help="Initial weight of the unknown-word column (+RNN+WP).")
    reverse_weight: float = setting(0.2, at_least=-FLOAT32_MAX, at_most=FLOAT32_MAX, help="Initial weight of the reverse model's log p(e|f) column (with "
                                              "train-reverse).")


@dataclasses.dataclass
class CSLMRerank:
    """``[evaluate]``'s settings of the +CSLM rows, used when the workflow trains a CSLM (Cho et al. section 5):
    the tuned +RNN and +RNN+WP systems decode dev and test to n-best lists, ``CSLM0 = log p(e)`` is added to
    every hypothesis, the weights are retuned by MERT on the dev list and re-rank both lists: by the embedded
    MERT, or by Moses's ``mert`` or ``kbmira`` (``rerank_tuner``, with the Moses of ``moses_home``)."""

    nbest_size: int = setting(100, at_least=1, at_most=10_000,
                              help="Distinct hypotheses per sentence in the lists the CSLM re-ranks.")
    cslm_weight: float = setting(0.1, at_least=-FLOAT32_MAX, at_most=FLOAT32_MAX, help="CSLM0's starting weight for MERT (the others start at the tuned ones).")
    rerank_restarts: int = setting(20, at_least=1, help="MERT's random restarts on the dev n-best list.")
    rerank_tuner: str = setting("embedded", choices=TUNERS,
                                help="Who retunes the weights on the dev n-best list: the embedded MERT, or Moses's "
                                     "mert or kbmira (from moses_home / MOSES_HOME).")

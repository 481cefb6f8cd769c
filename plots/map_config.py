"""The settings of ``plot embeddings``, without matplotlib: the command line builds its options from them."""
from __future__ import annotations

import dataclasses

from phrase_rescore.core.config import setting


@dataclasses.dataclass
class MapConfig:
    """Options of ``plot embeddings``: which vectors are mapped and how t-SNE places them."""

    seed: int = setting(1, at_least=0, at_most=2 ** 32 - 1, help="Seed of t-SNE (scikit-learn's random_state; from the PCA start "
                                            "the map hardly depends on it).")
    iterations: int = setting(500, at_least=250, help="t-SNE iterations (Barnes-Hut; 250 at least).")
    perplexity: float = setting(30.0, above=0, help="t-SNE perplexity; lowered to (points - 1) / 3 for few points.")
    max_words: int = setting(500, at_least=1,
                             help="Map the embeddings of this many of each side's most frequent words.")
    max_phrases: int = setting(1000, at_least=1,
                               help="Map the summaries c of this many source phrases (most translations first).")
    min_phrase_words: int = setting(4, at_least=1, help="Map only source phrases of at least this many words.")
    labels: int = setting(150, at_least=0, help="Label at most this many points of a map, none overlapping another.")

"""phrase-rescore: the neural side (vocabulary, pairs, models, training, scoring) and the stage runner."""

__version__ = "0.1.0"

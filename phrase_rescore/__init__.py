"""phrase-rescore: rescore a Moses phrase table with the RNN Encoder-Decoder of Cho et al. (2014).

The installed packages are layers: core <- moses_integration, data <- pipeline (neural) <- app (CLI, workflow).

The Python API (``docs/api.md``, :mod:`phrase_rescore.app.api`) is at the top of the package::

    import phrase_rescore as pr
    scores = pr.score_pairs("rnn/model.pt", [("the house", "la maison")])

Its names are loaded on first use (PEP 562 ``__getattr__``): ``import phrase_rescore`` imports nothing else,
and torch and pandas wait until a function that needs them is called.
"""

__version__ = "0.1.0"

#: the API's names (those of :mod:`phrase_rescore.app.api`, which tests/test_api.py keeps equal to these)
__all__ = [
    "read_phrase_table", "write_phrase_table", "PhraseEntry", "PhraseTableReader",
    "prepare", "PrepareSummary", "PrepareConfig", "train", "TrainSummary", "TrainConfig",
    "score_table", "ScoreSummary", "ScoreConfig", "score_pairs", "PairScore",
    "rewrite_ini", "RewriteResult", "Decoder", "DecoderOutput", "Hypothesis", "DecoderConfig",
    "tune", "TuneResult", "evaluate",
    "PhraseRescoreError",
]


def __getattr__(name: str):
    """PEP 562: an API name, from :mod:`phrase_rescore.app.api`, imported on first use and kept."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .app import api

    value = getattr(api, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

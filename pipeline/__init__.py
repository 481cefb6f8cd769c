"""The neural side: vocabulary, unique pairs, the encoder-decoder and Seq2Seq, training, sampling, scoring, translation.

Imports the core and the Moses side's formats (moses_integration), never the application (app) or data.
"""

if __name__ != "phrase_rescore.pipeline":  # one name only: no module loads twice
    raise ImportError(f"{__name__} is phrase_rescore.pipeline: import it under that name")

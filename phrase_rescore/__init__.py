"""phrase-rescore: rescore a Moses phrase table with the RNN Encoder-Decoder of Cho et al. (2014).

The installed packages are layers: core <- moses_integration, data <- pipeline (neural) <- app (CLI, workflow).
"""

__version__ = "0.1.0"

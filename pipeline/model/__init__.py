"""Neural models: the GRU cells, the RNN Encoder-Decoder of Cho et al. (2014), Seq2Seq, numpy references, checkpoints.

Imports torch, the core and the neural side's vocabulary, never the Moses side or the application.
"""

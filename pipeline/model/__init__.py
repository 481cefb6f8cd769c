"""Neural models: the GRU cells, the RNN Encoder-Decoder of Cho et al. (2014), numpy references, checkpoints."""

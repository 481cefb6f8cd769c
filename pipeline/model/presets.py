"""The named sizes and forms a model's settings choose from, without torch (a command's options list them).

:class:`~phrase_rescore.pipeline.model.encdec.EncDecConfig` and :class:`~phrase_rescore.pipeline.model.cslm.CSLMConfig`
build from these presets; :class:`~phrase_rescore.pipeline.model.gru.GRUCell` takes one of the reset forms.
"""

#: the reset gate before U (the paper's equation 8) or after U (cuDNN, torch.nn.GRU)
RESET_FORMS = ("paper", "cudnn")

#: the RNN Encoder-Decoder's sizes by preset
ENCDEC_PRESETS = {
    # Cho et al. 2014, appendix A: about 18.25M weights with 15,001-word vocabularies.
    "paper": dict(emb_dim=100, hidden_dim=1000, maxout_units=500, maxout_pieces=2, rank=100),
    # Trains on 2 CPU cores in minutes on the demo data.
    "small": dict(emb_dim=64, hidden_dim=256, maxout_units=128, maxout_pieces=2, rank=64),
}

#: the CSLM's sizes by preset
CSLM_PRESETS = {
    "paper": {"emb_dim": 512, "hidden1": 1536, "hidden2": 1024},   # Cho et al. 2014, section 5
    "small": {"emb_dim": 64, "hidden1": 256, "hidden2": 128},      # for a CPU
}

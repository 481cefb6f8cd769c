"""Both neural models share their conventions: config names, presets, checkpoint keys and training summaries."""
import dataclasses
import json
import re

import pytest
from _encdec_data import make_learnable_table, write_sentences

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.pipeline.configs import PrepareConfig, TrainConfig, TrainSeq2SeqConfig
from phrase_rescore.pipeline.model.checkpoint import load_checkpoint
from phrase_rescore.pipeline.model.encdec import EncDecConfig, RNNEncoderDecoder
from phrase_rescore.pipeline.model.seq2seq import Seq2Seq, Seq2SeqConfig
from phrase_rescore.pipeline.prepare import prepare
from phrase_rescore.pipeline.train import TrainSummary, train
from phrase_rescore.pipeline.train_seq2seq import train as train_seq2seq

pytestmark = pytest.mark.usefixtures("one_thread")

CONFIGS = [(EncDecConfig, RNNEncoderDecoder), (Seq2SeqConfig, Seq2Seq)]
SHARED_FIELDS = ["src_vocab_size", "tgt_vocab_size", "emb_dim", "hidden_dim"]  # the same things, by the same names


@pytest.mark.parametrize("config_cls, model_cls", CONFIGS)
def test_both_configs_name_the_same_things_alike(config_cls, model_cls):
    names = [f.name for f in dataclasses.fields(config_cls)]
    assert names[:2] == SHARED_FIELDS[:2] and set(SHARED_FIELDS) <= set(names)
    cfg = config_cls.preset("small", 7, 9)
    assert model_cls(cfg).vocab_sizes == (7, 9)
    assert config_cls.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize("config_cls, name", [(cls, name) for cls, _ in CONFIGS for name in ("huge", "Small", "")])
def test_an_unknown_preset_is_a_named_error_listing_the_presets(config_cls, name):
    assert sorted(config_cls.PRESETS) == ["paper", "small"]
    with pytest.raises(PhraseRescoreError, match=re.escape(f"unknown model preset {name!r}; expected one of "
                                                           "['paper', 'small']")):
        config_cls.preset(name, 5, 5)


def test_both_trainers_return_one_summary_type(tmp_path, monkeypatch):
    monkeypatch.setenv("PHRASE_RESCORE_QUIET", "1")
    make_learnable_table(tmp_path / "table.txt", n_pairs=60)
    prepare(tmp_path / "table.txt", tmp_path / "pairs", PrepareConfig(vocab_size=100, valid_fraction=0.2, seed=1))
    encdec = train(tmp_path / "pairs", tmp_path / "encdec", TrainConfig(
        model_overrides=dict(emb_dim=4, hidden_dim=8, maxout_units=4, rank=4), batch_size=8, max_steps=4,
        valid_every=2))
    src, tgt = write_sentences(tmp_path / "s.txt", 40, 1), write_sentences(tmp_path / "t.txt", 40, 2)
    seq2seq = train_seq2seq(TrainSeq2SeqConfig(src, tgt, str(tmp_path / "seq2seq"), valid_size=4, emb_dim=4,
                                               hidden_dim=4, num_layers=1, batch_size=8, epochs=1.0))
    for s, out, stop, steps in ((encdec, "encdec", "max_steps", 4), (seq2seq, "seq2seq", "epochs", 5)):
        assert type(s) is TrainSummary
        assert (s.steps, s.stop_reason, s.out_dir, s.device) == (steps, stop, str(tmp_path / out), "cpu")
        assert s.model == str(tmp_path / out / "model.pt") and load_checkpoint(s.model).model is not None
        assert s.pairs_per_s > 0 and s.seconds > 0 and len(s.history) == 2
        assert s.best_valid_ppl <= s.last_valid_ppl == s.history[-1]["valid_ppl"]
        assert json.loads(json.dumps(dataclasses.asdict(s)))["steps"] == steps
    assert encdec.unigram_valid_ppl > 1 and seq2seq.unigram_valid_ppl is None
    assert seq2seq.epochs == 1.0 and seq2seq.target_tokens_per_s > 0 and encdec.epochs is None

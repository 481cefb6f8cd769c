"""Seq2Seq model and training: reversal, masking, checkpoints, the SGD recipe, learning a reverse task."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from _seq2seq_data import write_reverse_task

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.pipeline.batching import pad_batch
from phrase_rescore.pipeline.configs import TrainSeq2SeqConfig
from phrase_rescore.pipeline.model.checkpoint import ENCDEC, SEQ2SEQ, load_checkpoint, save_checkpoint
from phrase_rescore.pipeline.model.seq2seq import Seq2Seq, Seq2SeqConfig, reverse_source
from phrase_rescore.pipeline.train_seq2seq import epoch_batches, learning_rate, train
from phrase_rescore.pipeline.vocab import Vocab, Vocabularies


def tiny(reverse=True, seed=0, V=7, W=6) -> Seq2Seq:
    torch.manual_seed(seed)
    return Seq2Seq(Seq2SeqConfig(V, W, emb_dim=8, hidden_dim=12, num_layers=2, reverse=reverse, init_range=0.5)).eval()


@pytest.mark.parametrize("rows, expected", [
    ([[5, 0]], [[5, 0]]),
    ([[2, 3, 4, 0]], [[4, 3, 2, 0]]),
    ([[0]], [[0]]),
    # padding (id 0 after the eos) stays where it is; only the real words move
    ([[2, 3, 4, 0, 0, 0], [6, 5, 0, 0, 0, 0], [1, 2, 3, 4, 5, 0]],
     [[4, 3, 2, 0, 0, 0], [5, 6, 0, 0, 0, 0], [5, 4, 3, 2, 1, 0]]),
])
def test_reverse_source(rows, expected):
    lens = [r.index(0) + 1 for r in rows]
    ids = torch.tensor(rows)
    mask = torch.arange(ids.shape[1])[None, :] < torch.tensor(lens)[:, None]
    assert reverse_source(ids, mask).tolist() == expected


def test_reversed_model_equals_forward_model_on_reversed_input():
    fwd, rev = tiny(reverse=False), tiny(reverse=True)  # same seed: same weights
    src = [np.array([2, 3, 4, 5, 0]), np.array([6, 0])]
    src_r = [np.array([5, 4, 3, 2, 0]), np.array([6, 0])]
    tgt = [np.array([1, 2, 3, 0]), np.array([4, 0])]
    s, sm = pad_batch(src)
    sr, srm = pad_batch(src_r)
    t, tm = pad_batch(tgt)
    with torch.no_grad():
        assert torch.allclose(rev(s, sm, t, tm), fwd(sr, srm, t, tm), atol=1e-6)
        assert not torch.allclose(rev(s, sm, t, tm), fwd(s, sm, t, tm), atol=1e-4)


@pytest.mark.parametrize("reverse", [True, False])
def test_padded_batch_equals_one_at_a_time(reverse):
    m = tiny(reverse)
    rng = np.random.default_rng(1)
    src = [np.append(rng.integers(1, 7, n), 0) for n in (1, 4, 0, 7)]
    tgt = [np.append(rng.integers(1, 6, n), 0) for n in (3, 0, 5, 2)]
    s, sm = pad_batch(src)
    t, tm = pad_batch(tgt)
    with torch.no_grad():
        batched = m(s, sm, t, tm)
        single = [float(m(*pad_batch([a]), *pad_batch([b]))) for a, b in zip(src, tgt)]
    assert batched.shape == (4,)
    assert batched.tolist() == pytest.approx(single, abs=1e-5)
    # the sum over targets is a log-probability: exp over all 1-word targets + <eos> <= 1
    assert all(v < 0 for v in single)


def test_decoder_state_is_the_encoder_final_state_of_every_layer():
    m = tiny()
    s, sm = pad_batch([np.array([2, 3, 0]), np.array([4, 0])])
    h, c = m.encode(s, sm)
    assert h.shape == c.shape == (2, 2, 12)  # (L, B, H)
    assert m.cfg.state_size == 2 * 2 * 12
    assert Seq2SeqConfig.preset("paper", 160_000, 80_000).state_size == 8000  # the paper's 8000 numbers


def test_paper_preset_has_384m_parameters():
    cfg = Seq2SeqConfig.preset("paper", 160_000, 80_000)
    with torch.device("meta"):
        n = sum(p.numel() for p in Seq2Seq(cfg).parameters())
    # 160M + 80M + 80M embeddings/softmax + 64M recurrent; torch's LSTM has two bias vectors per layer
    assert 384e6 <= n < 385e6


def test_uniform_init_range():
    torch.manual_seed(3)
    m = Seq2Seq(Seq2SeqConfig(50, 40, emb_dim=16, hidden_dim=16, num_layers=2))
    for p in m.parameters():
        assert float(p.detach().abs().max()) <= 0.08


def test_checkpoint_round_trip(tmp_path):
    m = tiny()
    vocabs = Vocabularies(Vocab(["<eos>", "<unk>", "a", "b", "c", "d", "e"]), Vocab(["<eos>", "<unk>", "x", "y", "z", "w"]))
    save_checkpoint(tmp_path / "m.pt", m, vocabs, {"epoch": 3})
    ck = load_checkpoint(tmp_path / "m.pt")
    assert ck.model.cfg == m.cfg and ck.vocabs == vocabs and ck.train_state["epoch"] == 3
    for (k, a), (_, b) in zip(m.state_dict().items(), ck.model.state_dict().items()):
        assert torch.equal(a, b), k
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(PhraseRescoreError, match="bad.pt"):
        load_checkpoint(tmp_path / "bad.pt")


VOCABS = Vocabularies(Vocab(["<eos>", "<unk>", "a", "b", "c", "d", "e"]), Vocab(["<eos>", "<unk>", "x", "y", "z", "w"]))


@pytest.mark.parametrize("change, fragment", [
    (lambda d: d["config"].update(dropout=0.2), "bad model config in checkpoint: unknown Seq2SeqConfig keys ['dropout']"),
    (lambda d: d.update(version=2), "checkpoint version 2 is not supported (expected 1)"),
    (lambda d: d.pop("state_dict"), "damaged checkpoint: it has no 'state_dict' entry"),
    (lambda d: d["config"].update(src_vocab=7), "bad model config in checkpoint: unknown Seq2SeqConfig keys ['src_vocab']"),
])
def test_bad_seq2seq_checkpoints_are_named_errors(tmp_path, change, fragment):
    save_checkpoint(tmp_path / "m.pt", tiny(), VOCABS)
    payload = torch.load(tmp_path / "m.pt", weights_only=True)
    change(payload)
    torch.save(payload, tmp_path / "m.pt")
    with pytest.raises(PhraseRescoreError) as e:
        load_checkpoint(tmp_path / "m.pt")
    assert fragment in e.value.message and e.value.path == str(tmp_path / "m.pt")
    with pytest.raises(PhraseRescoreError, match=re.escape(fragment)):
        load_checkpoint(tmp_path / "m.pt", kind=SEQ2SEQ)
    with pytest.raises(PhraseRescoreError, match="not an encoder-decoder checkpoint"):
        load_checkpoint(tmp_path / "m.pt", kind=ENCDEC)


@pytest.mark.parametrize("progress, lr", [
    (0.0, 0.7), (4.99, 0.7), (5.0, 0.35), (5.49, 0.35), (5.5, 0.175), (6.0, 0.0875), (7.0, 0.7 / 32), (7.49, 0.7 / 32),
])
def test_learning_rate_schedule(progress, lr):
    cfg = TrainSeq2SeqConfig("s", "t", "o")
    assert learning_rate(cfg, progress) == pytest.approx(lr)


def test_length_grouped_batches_cover_everything_once_and_are_reproducible():
    rng = np.random.default_rng(0)
    sl, tl = rng.integers(2, 60, 1000), rng.integers(2, 60, 1000)
    b = epoch_batches(sl, tl, 128, seed=5, epoch=2, length_grouped=True)
    assert sorted(np.concatenate(b).tolist()) == list(range(1000))
    assert all(len(x) <= 128 for x in b) and sum(len(x) == 128 for x in b) == 7
    spread = np.mean([np.ptp((sl + tl)[x]) for x in b])
    rand = epoch_batches(sl, tl, 128, seed=5, epoch=2, length_grouped=False)
    assert spread < 0.2 * np.mean([np.ptp((sl + tl)[x]) for x in rand])  # similar lengths within a batch
    again = epoch_batches(sl, tl, 128, seed=5, epoch=2, length_grouped=True)
    assert all(np.array_equal(x, y) for x, y in zip(b, again))
    other = epoch_batches(sl, tl, 128, seed=5, epoch=3, length_grouped=True)
    assert not all(np.array_equal(x, y) for x, y in zip(b, other))


def test_training_learns_a_reverse_task(tmp_path, one_thread, monkeypatch):
    monkeypatch.setenv("PHRASE_RESCORE_QUIET", "1")
    src, tgt = write_reverse_task(tmp_path, 800, 0)
    vs, vt = write_reverse_task(tmp_path, 100, 1)
    # The recipe (SGD, clip 5, length-grouped batches, halving), sized for a toy task: a wider init skips
    # the long plateau SGD sits on from [-0.08, 0.08] at this scale.
    cfg = TrainSeq2SeqConfig(src, tgt, str(tmp_path / "run"), valid_src=vs, valid_tgt=vt, emb_dim=32,
                             hidden_dim=64, num_layers=1, batch_size=16, lr=1.0, epochs=12, decay_start=10,
                             init_range=0.3, seed=1)
    s = train(cfg)
    assert s.best_valid_ppl < 1.06  # log-loss < 0.06 nats per token: near zero
    assert s.history[0]["valid_ppl"] > 3
    ck = load_checkpoint(tmp_path / "run" / "model.pt")
    assert ck.train_state["best_valid_ppl"] == pytest.approx(s.best_valid_ppl)
    from phrase_rescore.pipeline.translate import Ensemble, translate_sentences
    sents = [["w1", "w2", "w3"], ["w4"], ["w0", "w0", "w2", "w1"]]
    hyps = translate_sentences(Ensemble([ck.model]), ck.vocabs, sents, beam=3)
    assert [ck.vocabs.target.decode(h.ids) for h in hyps] == [x[::-1] for x in sents]


def test_resume_continues_exactly(tmp_path, one_thread, monkeypatch):
    monkeypatch.setenv("PHRASE_RESCORE_QUIET", "1")
    src, tgt = write_reverse_task(tmp_path, 120, 2)
    common = dict(valid_size=20, emb_dim=8, hidden_dim=8, num_layers=1, batch_size=16, decay_start=1.0, seed=4)
    straight = train(TrainSeq2SeqConfig(src, tgt, str(tmp_path / "a"), epochs=2.5, **common))
    train(TrainSeq2SeqConfig(src, tgt, str(tmp_path / "b"), epochs=1.5, **common))
    resumed = train(TrainSeq2SeqConfig(src, tgt, str(tmp_path / "b"), epochs=2.5, **common))
    assert resumed.resumed_from == pytest.approx(1 + 4 / 7)  # 108 training pairs: 7 batches, stopped after 4
    assert [h["valid_ppl"] for h in resumed.history] == pytest.approx([h["valid_ppl"] for h in straight.history], rel=1e-5)
    a = load_checkpoint(tmp_path / "a" / "last.pt").model.state_dict()
    b = load_checkpoint(tmp_path / "b" / "last.pt").model.state_dict()
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-6), k


def test_parallel_files_must_have_equal_length(tmp_path):
    (tmp_path / "s").write_text("a b\nc\n")
    (tmp_path / "t").write_text("x\n")
    with pytest.raises(PhraseRescoreError, match=r"differ in length.*s has 2 lines.*t has 1"):
        train(TrainSeq2SeqConfig(str(tmp_path / "s"), str(tmp_path / "t"), str(tmp_path / "o")))


def test_train_seq2seq_command_forward_baseline(tmp_path, one_thread, monkeypatch):
    from click.testing import CliRunner

    from phrase_rescore.app.cli import main

    monkeypatch.setenv("PHRASE_RESCORE_QUIET", "1")
    src, tgt = write_reverse_task(tmp_path, 60, 3)
    r = CliRunner().invoke(main, ["train-seq2seq", src, tgt, "-o", str(tmp_path / "fwd"), "--no-reverse",
                                  "--emb-dim", "8", "--hidden-dim", "8", "--num-layers", "3", "--epochs", "1",
                                  "--batch-size", "8", "--valid-size", "6"])
    assert r.exit_code == 0, r.output
    assert "validation perplexity" in r.output
    ck = load_checkpoint(tmp_path / "fwd" / "model.pt")
    assert (ck.model.cfg.reverse, ck.model.cfg.num_layers, ck.model.cfg.hidden_dim) == (False, 3, 8)
    assert ck.train_state["train_config"]["lr"] == 0.7 and ck.train_state["train_config"]["clip_norm"] == 5.0
    assert (tmp_path / "fwd" / "vocab.json").exists() and (tmp_path / "fwd" / "last.pt").exists()

"""Training: learning beats the unigram baseline, exact resume, stopping rules, NaN handling, checkpoints."""
import csv
import json
import random
import re

import pytest
import torch
from _encdec_data import TINY, make_learnable_table, write_sentences
from click.testing import CliRunner

from phrase_rescore.app.cli import main
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.pipeline.configs import PrepareConfig, TrainConfig
from phrase_rescore.pipeline.model import checkpoint as ck
from phrase_rescore.pipeline.model.encdec import RNNEncoderDecoder
from phrase_rescore.pipeline.prepare import prepare
from phrase_rescore.pipeline.train import LOG_COLUMNS, train
from phrase_rescore.pipeline.vocab import Vocabularies

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def pairs_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("pairs")
    make_learnable_table(d / "table.txt")
    prepare(d / "table.txt", d / "pairs", PrepareConfig(vocab_size=100, valid_fraction=0.1, seed=1))
    return d / "pairs"


def cfg(**kw):
    base = dict(model_overrides=TINY, init_std=0.1, batch_size=32, max_steps=20, valid_every=10, seed=3)
    return TrainConfig(**{**base, **kw})


def test_training_drives_valid_perplexity_far_below_unigram(pairs_dir, tmp_path):
    s = train(pairs_dir, tmp_path / "m", cfg(max_steps=600, valid_every=200))
    assert s.steps == 600 and s.stop_reason == "max_steps"
    assert s.unigram_valid_ppl > 15                       # 30 target words, near-uniform
    assert s.best_valid_ppl < 0.5 * s.unigram_valid_ppl, s
    with open(tmp_path / "m" / "train_log.csv") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == LOG_COLUMNS and [int(r["step"]) for r in rows] == [200, 400, 600]
    assert float(rows[-1]["valid_ppl"]) < float(rows[0]["valid_ppl"])
    # the best checkpoint rebuilds itself with its vocabulary
    c = ck.load_checkpoint(tmp_path / "m")
    assert c.vocabs == Vocabularies.load(pairs_dir / "vocab.json") and c.train_state is None
    assert c.kind is ck.ENCDEC and c.path == tmp_path / "m" / "model.pt"
    assert isinstance(c.model, RNNEncoderDecoder) and not c.model.training


def _weights(path):
    return torch.load(path, weights_only=True)


def test_resume_equals_uninterrupted_run(pairs_dir, tmp_path):
    whole = train(pairs_dir, tmp_path / "whole", cfg(max_steps=30))
    first = train(pairs_dir, tmp_path / "split", cfg(max_steps=13))  # stops between validations
    assert first.steps == 13
    second = train(pairs_dir, tmp_path / "split", cfg(max_steps=30, resume=True))
    assert second.steps == whole.steps == 30
    a, b = _weights(tmp_path / "whole" / "last.pt"), _weights(tmp_path / "split" / "last.pt")
    assert a["state_dict"].keys() == b["state_dict"].keys()
    for k in a["state_dict"]:
        assert torch.equal(a["state_dict"][k], b["state_dict"][k]), k
    assert a["train_state"]["sampler"] == b["train_state"]["sampler"]
    assert a["train_state"]["pairs_seen"] == b["train_state"]["pairs_seen"] == 30 * 32
    for k in a["train_state"]["optimizer"]["state"]:
        for name, t in a["train_state"]["optimizer"]["state"][k].items():
            assert torch.equal(t, b["train_state"]["optimizer"]["state"][k][name])


def test_stop_by_time_budget_and_patience(pairs_dir, tmp_path):
    s = train(pairs_dir, tmp_path / "t", cfg(max_steps=10_000, time_budget_s=0.0))
    assert s.stop_reason == "time_budget" and s.steps == 0
    assert (tmp_path / "t" / "model.pt").exists() and (tmp_path / "t" / "last.pt").exists()
    # lr 0: the weights never move, so no validation after the first improves on it
    s = train(pairs_dir, tmp_path / "p", cfg(max_steps=10_000, lr=0.0, patience=2, valid_every=5))
    assert s.stop_reason == "patience" and s.steps == 15


def test_nan_loss_stops_and_keeps_last_good_checkpoint(pairs_dir, tmp_path, monkeypatch):
    real = RNNEncoderDecoder.log_prob
    calls = {"n": 0}

    def poisoned(self, *a):
        out = real(self, *a)
        if self.training:
            calls["n"] += 1
            if calls["n"] == 13:
                return out * float("nan")
        return out

    monkeypatch.setattr(RNNEncoderDecoder, "log_prob", poisoned)
    with pytest.raises(PhraseRescoreError, match=r"loss became nan at step 13.*kept in .*last.pt \(step 10\)"):
        train(pairs_dir, tmp_path / "m", cfg(max_steps=100))
    assert _weights(tmp_path / "m" / "last.pt")["train_state"]["step"] == 10
    for p in _weights(tmp_path / "m" / "last.pt")["state_dict"].values():
        assert torch.isfinite(p).all()


def test_refusals(pairs_dir, tmp_path):
    with pytest.raises(PhraseRescoreError, match="nothing to resume"):
        train(pairs_dir, tmp_path / "m", cfg(resume=True))
    train(pairs_dir, tmp_path / "m", cfg(max_steps=2))
    with pytest.raises(PhraseRescoreError, match="already holds a training run"):
        train(pairs_dir, tmp_path / "m", cfg())
    with pytest.raises(PhraseRescoreError, match="batch_size was 32, now 16"):
        train(pairs_dir, tmp_path / "m", cfg(batch_size=16, resume=True))
    with pytest.raises(PhraseRescoreError, match="valid_max_pairs was 20000, now 5"):   # another best-model yardstick
        train(pairs_dir, tmp_path / "m", cfg(valid_max_pairs=5, resume=True))
    with pytest.raises(PhraseRescoreError, match="missing train.parquet"):
        train(tmp_path, tmp_path / "x", cfg())


def _checkpoint_bytes(tmp_path) -> bytes:
    torch.manual_seed(0)
    model = RNNEncoderDecoder(ck.EncDecConfig(10, 10, emb_dim=4, hidden_dim=8, maxout_units=4, rank=4))
    ck.save_checkpoint(tmp_path / "good.pt", model, None)
    return (tmp_path / "good.pt").read_bytes()


def _pickled(obj) -> bytes:
    import io
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _tiny_config(**extra) -> dict:
    return {**ck.EncDecConfig(10, 10, emb_dim=4, hidden_dim=8, maxout_units=4, rank=4).to_dict(), **extra}


# (file contents as a function of a good checkpoint's bytes, expected message: the whole of it after the path)
BAD_CHECKPOINTS = [
    (lambda good: b"", "empty file (0 bytes)"),
    (lambda good: good[:len(good) // 2], "truncated or damaged file ({} bytes)"),
    (lambda good: good[:10], "truncated or damaged file (10 bytes)"),
    (lambda good: bytes(random.Random(5).randrange(256) for _ in range(300)), "not a file written by torch.save"),
    (lambda good: b"not a checkpoint", "not a file written by torch.save"),
    (lambda good: __import__("pickle").dumps({"format": ck.ENCDEC.format}), "not a file written by torch.save"),
    (lambda good: _pickled({"format": ck.ENCDEC.format, "config": __import__("fractions").Fraction(1, 2)}),
     "a torch file with objects other than tensors and plain values, which weights-only loading refuses"),
    (lambda good: _pickled([1, 2, 3]), "it holds a list"),
    (lambda good: _pickled({"weights": torch.zeros(2)}), "it holds a dict without a \"format\" entry"),
]
BAD_CHECKPOINT_IDS = ["empty", "half", "10-bytes", "random", "text", "plain-pickle", "object", "list",
                      "no-format"]
# well-formed torch files that are not a usable encoder-decoder checkpoint (message fragment)
BAD_CONTENTS = [
    ({"format": "something-else"}, "not an encoder-decoder checkpoint: expected format 'phrase-rescore-encdec'"),
    ({"format": ck.SEQ2SEQ.format, "version": 1}, "not an encoder-decoder checkpoint"),
    ({"format": ck.ENCDEC.format, "version": 2}, "checkpoint version 2 is not supported (expected 1)"),
    ({"format": ck.ENCDEC.format, "version": ck.VERSION}, "damaged checkpoint: it has no 'config'"),
    ({"format": ck.ENCDEC.format, "version": ck.VERSION, "config": _tiny_config(dropout=0.1), "state_dict": {}},
     "bad model config in checkpoint: unknown EncDecConfig keys ['dropout']"),
]


@pytest.mark.parametrize("make, message", BAD_CHECKPOINTS, ids=BAD_CHECKPOINT_IDS)
def test_bad_checkpoint_files_are_one_line_named_errors(tmp_path, make, message):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(make(_checkpoint_bytes(tmp_path)))
    message = "not a phrase-rescore checkpoint: " + message.format(bad.stat().st_size)
    with pytest.raises(PhraseRescoreError) as e:
        ck.load_checkpoint(bad)
    assert (e.value.message, e.value.path) == (message, str(bad))
    r = CliRunner().invoke(main, ["sample", str(bad), "s1"])       # the CLI: one short line, no traceback
    assert r.exit_code == 1 and r.output == f"error: {bad}: {message}\n"


@pytest.mark.parametrize("content, fragment", BAD_CONTENTS, ids=["other-format", "seq2seq", "version", "no-config",
                                                                 "unknown-config-key"])
def test_bad_checkpoint_contents_are_named_errors(tmp_path, content, fragment):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(_pickled(content))
    with pytest.raises(PhraseRescoreError) as e:
        ck.load_checkpoint(bad, kind=ck.ENCDEC)
    assert fragment in e.value.message and e.value.path == str(bad)
    r = CliRunner().invoke(main, ["sample", str(bad), "s1"])
    assert r.exit_code == 1 and fragment in r.output and "Traceback" not in r.output


def test_checkpoint_errors(tmp_path):
    with pytest.raises(PhraseRescoreError, match="no model.pt"):
        ck.load_checkpoint(tmp_path)
    with pytest.raises(PhraseRescoreError, match="model checkpoint not found"):
        ck.load_checkpoint(tmp_path / "missing.pt")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_checkpoint_with_non_finite_weights_is_refused(tmp_path, value):
    torch.manual_seed(0)
    model = RNNEncoderDecoder(ck.EncDecConfig(10, 10, emb_dim=4, hidden_dim=8, maxout_units=4, rank=4))
    with torch.no_grad():
        model.decoder.G_l[3, 1] = value
    ck.save_checkpoint(tmp_path / "m.pt", model, None)
    with pytest.raises(PhraseRescoreError, match=r"m.pt: the model's weights contain NaN or inf \(1 of 40 values "
                                                 r"of decoder.G_l\)"):
        ck.load_checkpoint(tmp_path / "m.pt")


def test_train_command_then_sample(pairs_dir, tmp_path):
    args = ["--quiet", "train", str(pairs_dir), "--out", str(tmp_path / "m"), "--max-steps", "20", "--valid-every", "10",
            "--model-overrides", "{emb_dim = 16, hidden_dim = 32, maxout_units = 16, rank = 16}", "--batch-size", "16",
            "--gru", "cudnn"]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    assert "20 steps (max_steps)" in r.output and "unigram" in r.output
    model = ck.load_checkpoint(tmp_path / "m").model
    assert model.cfg.gru == "cudnn" and model.cfg.hidden_dim == 32 and model.cfg.init_std == 0.05
    r = CliRunner().invoke(main, args)  # a second run into the same directory needs --resume
    assert r.exit_code == 1 and "error:" in r.output and "--resume" in r.output
    r = CliRunner().invoke(main, [*args[:6], "40", *args[7:], "--resume"])
    assert r.exit_code == 0 and "40 steps" in r.output, r.output
    r = CliRunner().invoke(main, ["sample", str(tmp_path / "m"), "s1 s2", "--beam", "3"])
    assert r.exit_code == 0 and len(r.output.splitlines()) == 4, r.output


def test_without_validation_pairs_the_model_is_the_latest(tmp_path):
    make_learnable_table(tmp_path / "t.txt", n_pairs=100)
    prepare(tmp_path / "t.txt", tmp_path / "pairs", PrepareConfig(vocab_size=100, valid_fraction=0.0))
    s = train(tmp_path / "pairs", tmp_path / "m", cfg(max_steps=30, valid_every=10, patience=1))
    assert s.steps == 30 and s.stop_reason == "max_steps"
    best, last = _weights(tmp_path / "m" / "model.pt"), _weights(tmp_path / "m" / "last.pt")
    assert all(torch.equal(best["state_dict"][k], last["state_dict"][k]) for k in best["state_dict"])


def _log_rows(path):
    with open(path) as f:
        return [{k: v for k, v in r.items() if k != "elapsed_s"} for r in csv.DictReader(f)]


def test_resume_rewrites_a_log_that_a_kill_left_behind_last_pt(pairs_dir, tmp_path):
    train(pairs_dir, tmp_path / "whole", cfg(max_steps=20))
    train(pairs_dir, tmp_path / "m", cfg(max_steps=20))
    log = tmp_path / "m" / "train_log.csv"
    log.write_text("".join(log.read_text().splitlines(keepends=True)[:-1]))   # killed before the log's rewrite
    s = train(pairs_dir, tmp_path / "m", cfg(max_steps=20, resume=True))
    assert s.steps == 20
    assert _log_rows(log) == _log_rows(tmp_path / "whole" / "train_log.csv")


@pytest.mark.parametrize("part", ["valid.parquet", "vocab.json"])
def test_resume_refuses_a_last_pt_trained_on_other_pairs(tmp_path, part):
    import shutil

    from phrase_rescore.core.hashing import sha256_file
    make_learnable_table(tmp_path / "a.txt", n_pairs=300, seed=0)
    make_learnable_table(tmp_path / "b.txt", n_pairs=300, seed=1)
    prepare(tmp_path / "a.txt", tmp_path / "pa", PrepareConfig(vocab_size=100, valid_fraction=0.1, seed=1))
    prepare(tmp_path / "b.txt", tmp_path / "pb", PrepareConfig(vocab_size=100, valid_fraction=0.1, seed=1))
    train(tmp_path / "pa", tmp_path / "m", cfg(max_steps=10))
    # the same training pairs beside another run's part, recorded in the manifest as a folder of its own
    shutil.copyfile(tmp_path / "pb" / part, tmp_path / "pa" / part)
    manifest = json.loads((tmp_path / "pa" / "manifest.json").read_text())
    manifest["parts"][part]["sha256"] = sha256_file(tmp_path / "pa" / part)
    (tmp_path / "pa" / "manifest.json").write_text(json.dumps(manifest))
    before = (tmp_path / "m" / "last.pt").read_bytes()
    with pytest.raises(PhraseRescoreError, match=f"cannot resume: {part} changed since this run started"):
        train(tmp_path / "pa", tmp_path / "m", cfg(max_steps=20, resume=True))
    assert (tmp_path / "m" / "last.pt").read_bytes() == before


@pytest.mark.parametrize("change", [{"valid_every": 7}, {"lr": 0.5}])
def test_resume_refuses_settings_that_decide_the_trajectory(pairs_dir, tmp_path, change):
    train(pairs_dir, tmp_path / "m", cfg(max_steps=10))
    before = (tmp_path / "m" / "last.pt").read_bytes()
    key = next(iter(change))
    with pytest.raises(PhraseRescoreError, match=f"cannot resume with different settings: {key} was"):
        train(pairs_dir, tmp_path / "m", cfg(max_steps=20, resume=True, **change))
    assert (tmp_path / "m" / "last.pt").read_bytes() == before


# --- train-seq2seq: a last.pt is resumed only by the run that wrote it


def _s2s(tmp_path, out="run", **kw):
    from phrase_rescore.pipeline.configs import TrainSeq2SeqConfig
    src = kw.pop("src", None) or write_sentences(tmp_path / "s.txt", 120, 1)
    tgt = write_sentences(tmp_path / "t.txt", 120, 2)
    base = dict(valid_size=20, emb_dim=8, hidden_dim=8, num_layers=1, batch_size=16, decay_start=1.0, seed=4,
                epochs=1.5)
    return TrainSeq2SeqConfig(src, tgt, str(tmp_path / out), **{**base, **kw})


@pytest.mark.parametrize("change, fragment", [                   # (what the resumed run changes, message)
    (dict(lr=0.5), "lr was 0.7, now 0.5"),
    (dict(batch_size=8), "batch_size was 16, now 8"),
    (dict(seed=5), "seed was 4, now 5"),
    (dict(src="other"), "the src file(s) are not the ones last.pt was trained on"),
])
def test_seq2seq_resume_refuses_a_last_pt_of_other_settings_or_data(tmp_path, monkeypatch, change, fragment):
    from phrase_rescore.pipeline.train_seq2seq import train as train_s2s
    monkeypatch.setenv("PHRASE_RESCORE_QUIET", "1")
    train_s2s(_s2s(tmp_path))
    before = (tmp_path / "run" / "last.pt").read_bytes()
    if change.get("src") == "other":
        change = {"src": write_sentences(tmp_path / "s2.txt", 120, 7)}
    with pytest.raises(PhraseRescoreError, match=re.escape(fragment)):
        train_s2s(_s2s(tmp_path, epochs=2.5, **change))
    assert (tmp_path / "run" / "last.pt").read_bytes() == before


def test_seq2seq_resume_drops_log_rows_written_after_the_last_save(tmp_path, monkeypatch):
    from phrase_rescore.pipeline.train_seq2seq import train as train_s2s
    monkeypatch.setenv("PHRASE_RESCORE_QUIET", "1")
    train_s2s(_s2s(tmp_path, out="whole", epochs=2.5))
    train_s2s(_s2s(tmp_path, epochs=1.5))
    log = tmp_path / "run" / "train_log.jsonl"
    with open(log, "a") as f:                         # a validation logged by a run killed before its save
        f.write('{"epoch": 2.0, "step": 14, "lr": 0.35, "train_loss": 1.0, "valid_ppl": 3.0}\n')
    train_s2s(_s2s(tmp_path, epochs=2.5))
    def rows(path):                                   # the schedule of validations (losses: float sums)
        return [{k: v for k, v in json.loads(line).items() if k not in ("train_loss", "valid_ppl")}
                for line in path.read_text().splitlines()]
    assert rows(log) == rows(tmp_path / "whole" / "train_log.jsonl")

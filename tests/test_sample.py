"""Sampling: beam search is exact against exhaustive enumeration, greedy = beam 1, samples carry their
true log-probabilities and follow the model's distribution, and the `sample` command prints Table 3."""
import itertools
import math

import pytest
import torch
from click.testing import CliRunner

from phrase_rescore.app.cli import main
from phrase_rescore.pipeline.configs import SampleConfig
from phrase_rescore.pipeline.model.checkpoint import save_checkpoint
from phrase_rescore.pipeline.model.encdec import EncDecConfig, RNNEncoderDecoder
from phrase_rescore.pipeline.sample import generate
from phrase_rescore.pipeline.vocab import EOS_ID, Vocab, Vocabularies

SRC_WORDS = ["<eos>", "<unk>", "la", "maison", "bleue"]
TGT_WORDS = ["<eos>", "<unk>", "the", "house", "blue"]


def tiny_model(seed=0, gru="paper", std=0.8):
    torch.manual_seed(seed)
    cfg = EncDecConfig(len(SRC_WORDS), len(TGT_WORDS), emb_dim=3, hidden_dim=4, maxout_units=3, rank=2, gru=gru)
    model = RNNEncoderDecoder(cfg).double().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, std)
    return model


def all_scores(model, src, max_len):
    """log p(y|x) of every target of at most max_len words: exhaustive enumeration."""
    seqs = [list(w) for n in range(max_len + 1) for w in itertools.product(range(1, len(TGT_WORDS)), repeat=n)]
    T = max_len + 1
    tgt = torch.zeros(len(seqs), T, dtype=torch.long)
    mask = torch.zeros(len(seqs), T, dtype=torch.bool)
    for i, s in enumerate(seqs):
        tgt[i, :len(s) + 1] = torch.tensor(s + [EOS_ID])
        mask[i, :len(s) + 1] = True
    s = torch.tensor([src] * len(seqs))
    with torch.no_grad():
        lp = model.log_prob(s, torch.ones_like(s, dtype=torch.bool), tgt, mask)
    return sorted(((tuple(q), v.item()) for q, v in zip(seqs, lp)), key=lambda x: -x[1])


@pytest.mark.parametrize("seed,gru", [(0, "paper"), (1, "cudnn"), (2, "paper"), (3, "paper")])
def test_beam_search_finds_exhaustive_best(seed, gru):
    model = tiny_model(seed, gru)
    src, max_len = [2, 3, EOS_ID], 3
    truth = all_scores(model, src, max_len)              # 1 + 4 + 16 + 64 = 85 targets
    wide = generate(model, src, SampleConfig(mode="beam", beam=85, max_len=max_len))
    assert [(g.ids, round(g.logprob, 9)) for g in wide] == [(t, round(lp, 9)) for t, lp in truth]
    # The early stop (the k-th finished beats every live prefix) must not cut a wide beam short.
    top = generate(model, src, SampleConfig(mode="beam", beam=85, max_len=max_len + 4))
    assert top[0].ids == truth[0][0] or top[0].logprob > truth[0][1]
    # Narrow beams are approximate (they may prune the best), but every score they report is exact.
    for k in (1, 3):
        got = generate(model, src, SampleConfig(mode="beam", beam=k, max_len=max_len))
        assert len(got) == k and all(math.isclose(g.logprob, dict(truth)[g.ids], abs_tol=1e-9) for g in got)
        assert all(a.logprob >= b.logprob for a, b in zip(got, got[1:]))


def test_greedy_equals_beam_of_one():
    for seed in range(4):
        model = tiny_model(seed)
        g = generate(model, [4, EOS_ID], SampleConfig(mode="greedy", max_len=5))
        b = generate(model, [4, EOS_ID], SampleConfig(mode="beam", beam=1, max_len=5))
        assert len(g) == len(b) == 1
        assert g[0].ids == b[0].ids and math.isclose(g[0].logprob, b[0].logprob, abs_tol=1e-9)


def test_ancestral_samples_follow_the_model():
    model = tiny_model(5, std=0.5)
    src, max_len, n = [2, 4, EOS_ID], 3, 4000
    truth = dict(all_scores(model, src, max_len))
    got = generate(model, src, SampleConfig(mode="sample", n=n, max_len=max_len, seed=7))
    assert sum(g.count for g in got) == n
    assert [g.count for g in got] == sorted((g.count for g in got), reverse=True)
    finished = [g for g in got if g.finished]
    for g in finished:  # every reported log-probability is the model's
        assert math.isclose(g.logprob, truth[g.ids], abs_tol=1e-9), g
    top = finished[0]
    p = math.exp(truth[top.ids])
    assert abs(top.count / n - p) < 4 * math.sqrt(p * (1 - p) / n)
    again = generate(model, src, SampleConfig(mode="sample", n=n, max_len=max_len, seed=7))
    assert [(g.ids, g.count) for g in again] == [(g.ids, g.count) for g in got]  # the seed decides


def test_sample_command_prints_table(tmp_path):
    model = tiny_model(0).float()
    save_checkpoint(tmp_path / "model.pt", model, Vocabularies(Vocab(SRC_WORDS), Vocab(TGT_WORDS)))
    r = CliRunner().invoke(main, ["--quiet", "sample", str(tmp_path), "la maison inconnue", "-n", "30", "--max-len", "3"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0].split() == ["target", "count", "log", "p"]
    assert sum(int(line.split()[-2]) for line in lines[1:]) == 30
    r = CliRunner().invoke(main, ["sample", str(tmp_path / "model.pt"), "la maison", "--beam", "4", "--max-len", "3"])
    assert r.exit_code == 0 and len(r.output.splitlines()) == 5, r.output
    scores = [float(line.split()[-1]) for line in r.output.splitlines()[1:]]
    assert scores == sorted(scores, reverse=True)
    r = CliRunner().invoke(main, ["sample", str(tmp_path), "la", "--greedy", "--beam", "2"])
    assert r.exit_code != 0 and "choose one of --greedy and --beam" in r.output
    r = CliRunner().invoke(main, ["sample", str(tmp_path / "missing.pt"), "la"])
    assert r.exit_code != 0

"""Beam search, greedy decoding and ensembles against exhaustive enumeration and the teacher-forced model."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from phrase_rescore.pipeline.batching import pad_batch
from phrase_rescore.pipeline.model.checkpoint import save_checkpoint
from phrase_rescore.pipeline.model.seq2seq import Seq2Seq, Seq2SeqConfig
from phrase_rescore.pipeline.translate import Ensemble, beam_search, greedy
from phrase_rescore.pipeline.vocab import Vocab, Vocabularies

pytestmark = pytest.mark.usefixtures("one_thread")


SOURCES = [np.array([2, 3, 4, 0]), np.array([3, 0]), np.array([4, 4, 2, 3, 2, 0]), np.array([0])]


def tiny(seed, V=4, eos_bias=0.0, sharpness=6.0) -> Seq2Seq:
    """A random model over a target vocabulary of V (eos, unk, words), its softmax sharpened so that the
    best output is not simply the empty one and beam search differs from greedy."""
    torch.manual_seed(seed)
    m = Seq2Seq(Seq2SeqConfig(6, V, emb_dim=8, hidden_dim=8, num_layers=2, init_range=1.0)).eval()
    with torch.no_grad():
        m.decoder.out.weight.mul_(sharpness)
        m.decoder.out.bias[0] += eos_bias
    return m


def logp(models, src: np.ndarray, words) -> float:
    """Teacher-forced log p(words + eos | src), averaged over the models."""
    t = torch.tensor([list(words) + [0]])
    s, sm = pad_batch([src])
    with torch.no_grad():
        return float(np.mean([float(m(s, sm, t, torch.ones_like(t, dtype=torch.bool))) for m in models]))


def exhaustive_best(models, src, V, max_len):
    """The best of every eos-terminated output with at most max_len tokens (eos included), scored in one batch."""
    cands = [list(w) for k in range(max_len) for w in itertools.product(range(1, V), repeat=k)]
    t, tm = pad_batch([np.array(c + [0]) for c in cands])
    s, sm = pad_batch([src] * len(cands))
    with torch.no_grad():
        lps = torch.stack([m(s, sm, t, tm) for m in models]).mean(0)  # (n_candidates,)
    k = int(lps.argmax())
    return cands[k], float(lps[k])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_one_equals_greedy(seed):
    m = tiny(seed, V=9)
    s, sm = pad_batch(SOURCES)
    g = greedy(m, s, sm, max_len=8)
    b = beam_search(m, s, sm, beam=1, max_len=8)
    assert [h.ids for h in b] == [h.ids for h in g]
    assert [h.logp for h in b] == pytest.approx([h.logp for h in g], abs=1e-5)


@pytest.mark.parametrize("seed, V, max_len", [(0, 4, 4), (1, 4, 5), (2, 3, 6), (1, 5, 3)])
def test_wide_beam_finds_the_exhaustive_best(seed, V, max_len):
    m = tiny(seed, V)
    s, sm = pad_batch(SOURCES)
    beam = (V - 1) ** (max_len - 1)  # wide enough to keep every live prefix
    hyps = beam_search(m, s, sm, beam=beam, max_len=max_len)
    for src, h in zip(SOURCES, hyps):
        words, lp = exhaustive_best([m], src, V, max_len)
        assert h.ids == words
        assert h.logp == pytest.approx(lp, abs=1e-5)
    assert any(len(h.ids) >= 1 for h in hyps)  # not a degenerate "empty output is best" model


def test_beam_scores_are_the_models_log_probabilities_and_never_worse_than_greedy():
    for seed in range(4):
        m = tiny(seed, V=6)
        s, sm = pad_batch(SOURCES)
        g = greedy(m, s, sm, max_len=7)
        for B in (2, 5):
            for src, h, gh in zip(SOURCES, beam_search(m, s, sm, beam=B, max_len=7), g):
                assert h.logp == pytest.approx(logp([m], src, h.ids), abs=1e-5)
                assert len(h.ids) <= 6
                assert h.logp >= gh.logp - 1e-6
        wide = beam_search(m, s, sm, beam=5 ** 3, max_len=4)
        narrow = beam_search(m, s, sm, beam=1, max_len=4)
        assert all(w.logp >= n.logp - 1e-6 for w, n in zip(wide, narrow))


def test_batched_beam_equals_one_sentence_at_a_time():
    m = tiny(5, V=7)
    s, sm = pad_batch(SOURCES)
    batched = beam_search(m, s, sm, beam=4, max_len=9)
    for src, h in zip(SOURCES, batched):
        one = beam_search(m, *pad_batch([src]), beam=4, max_len=9)[0]
        assert one.ids == h.ids and one.logp == pytest.approx(h.logp, abs=1e-5)


def test_ensemble_of_one_equals_the_model_and_of_two_averages_log_probs():
    a, b = tiny(0, V=5), tiny(1, V=5)
    s, sm = pad_batch(SOURCES)
    single = beam_search(a, s, sm, beam=3, max_len=6)
    ens1 = beam_search(Ensemble([a]), s, sm, beam=3, max_len=6)
    assert [h.ids for h in ens1] == [h.ids for h in single]
    assert [h.logp for h in ens1] == [h.logp for h in single]
    twice = beam_search([a, a], s, sm, beam=3, max_len=6)
    assert [h.ids for h in twice] == [h.ids for h in single]
    assert [h.logp for h in twice] == pytest.approx([h.logp for h in single], abs=1e-6)
    # a real ensemble finds the exhaustive best of the averaged per-step log-probabilities
    wide = beam_search([a, b], s, sm, beam=4 ** 3, max_len=4)
    for src, h in zip(SOURCES, wide):
        words, lp = exhaustive_best([a, b], src, 5, 4)
        assert h.ids == words and h.logp == pytest.approx(lp, abs=1e-5)


def test_max_len_forces_eos_and_length_penalty_prefers_longer():
    m = tiny(2, V=6, eos_bias=-6.0)  # eos very unlikely: every output runs to the budget
    s, sm = pad_batch(SOURCES)
    for h in beam_search(m, s, sm, beam=3, max_len=5):
        assert len(h.ids) == 4
    m = tiny(2, V=6, eos_bias=+1.0)
    raw = beam_search(m, s, sm, beam=4, max_len=8)
    normed = beam_search(m, s, sm, beam=4, max_len=8, length_penalty=1.0)
    assert sum(len(h.ids) for h in normed) >= sum(len(h.ids) for h in raw)
    for h in normed:
        assert h.score == pytest.approx(h.logp / (len(h.ids) + 1))


def test_translate_command_keeps_line_order(tmp_path, monkeypatch):
    from phrase_rescore.app.cli import main

    monkeypatch.setenv("PHRASE_RESCORE_QUIET", "1")
    m = tiny(0, V=5)
    vocabs = Vocabularies(Vocab(["<eos>", "<unk>", "a", "b", "c", "d"]), Vocab(["<eos>", "<unk>", "x", "y", "z"]))
    save_checkpoint(tmp_path / "m.pt", m, vocabs)
    lines = ["a b c", "b", "c c a b a", "", "d zzz"]
    (tmp_path / "src.txt").write_text("\n".join(lines) + "\n")
    r = CliRunner().invoke(main, ["translate", str(tmp_path / "src.txt"), "-m", str(tmp_path / "m.pt"),
                                  "-o", str(tmp_path / "out.txt"), "--beam", "3", "--batch-size", "2"])
    assert r.exit_code == 0, r.output
    out = (tmp_path / "out.txt").read_text().split("\n")
    assert len(out) == len(lines) + 1 and out[-1] == ""
    for line, got in zip(lines, out):
        src = np.array(vocabs.source.encode(line.split()) + [0])
        h = beam_search(m, *pad_batch([src]), beam=3, max_len=2 * len(line.split()) + 10)[0]
        assert got == " ".join(vocabs.target.decode(h.ids))

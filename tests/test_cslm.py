"""The target-language CSLM: the network is the paper's equation, its distribution over the whole vocabulary
sums to one, training resumes exactly, and rescoring adds CSLM0 = log p(hyp) to every n-best line."""
from __future__ import annotations

import collections
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from _cslm_workflow import cslm_rows_workflow
from _real_moses import needs_moses

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.moses_integration.nbest import read_nbest
from phrase_rescore.pipeline.configs import RescoreConfig, TrainCSLMConfig
from phrase_rescore.pipeline.model.checkpoint import CSLM_KIND, load_checkpoint, save_checkpoint
from phrase_rescore.pipeline.model.cslm import BOS_ID, CSLM, CSLMConfig, CSLMVocab, full_distribution, sentence_events
from phrase_rescore.pipeline.rescore_nbest import CSLMScorer, rescore_nbest
from phrase_rescore.pipeline.train_cslm import train_cslm

NBEST = Path(__file__).parent / "fixtures" / "moses" / "moses.nbest"  # ids 0, 0, 1, 2, 3 (2: the empty hypothesis, as Moses writes for an empty line)
CORPUS = ["the house is small", "the house is little", "it is a small house", "hello", "a house is a house",
          "the small house is old", "it is old", "hello house"] * 3


@pytest.fixture(autouse=True)
def quiet_one_thread(monkeypatch, one_thread):
    monkeypatch.setenv("PHRASE_RESCORE_QUIET", "1")


def vocab(size=6) -> CSLMVocab:
    counts = collections.Counter(w for s in CORPUS for w in s.split())
    return CSLMVocab.build(counts, size)


def model(v: CSLMVocab, seed=0, order=4) -> CSLM:
    torch.manual_seed(seed)
    return CSLM(CSLMConfig(len(v), order=order, emb_dim=5, hidden1=7, hidden2=6, init_std=0.5)).eval()


def test_network_is_the_papers_equation():
    v = vocab()
    m = model(v)
    ctx = torch.tensor([[BOS_ID, BOS_ID, 3], [4, 5, 6]])
    lp = m(ctx)
    assert lp.shape == (2, len(v))
    x = torch.cat([m.emb.weight[ctx[:, k]] for k in range(3)], dim=1)       # [E w_{t-3}; E w_{t-2}; E w_{t-1}]
    h1 = torch.relu(x @ m.l1.weight.T + m.l1.bias)
    h2 = torch.relu(h1 @ m.l2.weight.T + m.l2.bias)
    z = h2 @ m.out.weight.T + m.out.bias
    z[:, BOS_ID] = -math.inf                                                # <s> is never predicted
    assert torch.allclose(lp, torch.log_softmax(z, -1), atol=1e-6)
    assert torch.isinf(lp[:, BOS_ID]).all()
    p = CSLMConfig.preset("paper", 100)
    assert (p.emb_dim, p.hidden1, p.hidden2, p.context) == (512, 1536, 1024, 6)


def test_distribution_over_the_whole_vocabulary_sums_to_one():
    v = vocab(size=4)                                   # a shortlist smaller than the corpus's 9 words
    assert v.oos_words and math.isclose(sum(math.exp(x) for x in v.log_q.values()) + math.exp(v.log_q_novel), 1.0)
    m = model(v)
    for context in ([], ["the"], ["it", "is", "a"], ["hello", "zebra"]):
        dist = full_distribution(m, v, context)
        assert set(dist) == set(v.vocab.words[3:]) | set(v.oos_words) | {"<eos>", None}
        assert sum(dist.values()) == pytest.approx(1.0, abs=1e-5)


def test_sentence_logp_is_the_sum_of_the_word_probabilities():
    v = vocab(size=4)
    m = model(v)
    words = "the old house is a zebra".split()           # shortlist, out-of-shortlist and novel words
    want = 0.0
    for i, w in enumerate(words + ["<eos>"]):
        dist = full_distribution(m, v, words[:i])
        key = w if w in dist else None
        want += math.log(dist[key])
    got = CSLMScorer(m, v).score_groups([[]], [[words]])[0][0]
    assert got == pytest.approx(want, abs=1e-5)


def test_distinct_contexts_once_gives_the_one_by_one_values():
    v = vocab()
    m = model(v, order=3)
    hyps = [[s.split() for s in ("the house is small", "the house is little", "the house")],
            [s.split() for s in ("it is a small house", "it is a house", "")]]
    batched = CSLMScorer(m, v, batch=2)
    got = batched.score_groups([[], []], hyps)
    for i, hs in enumerate(hyps):
        for j, h in enumerate(hs):
            alone = CSLMScorer(m, v).score_groups([[]], [[h]])[0][0]
            assert got[i][j] == pytest.approx(alone, abs=1e-5)
    assert batched.events == sum(len(h) + 1 for hs in hyps for h in hs)
    assert batched.contexts_computed < batched.events                 # shared prefixes ran once
    contexts = {tuple(c) for hs in hyps for h in hs for c in sentence_events(v, h, 2)[0]}
    assert batched.contexts_computed == len(contexts)


def test_cslm0_added_to_every_nbest_line(tmp_path):
    v = vocab()
    m = model(v)
    save_checkpoint(tmp_path / "cslm.pt", m, v)
    assert load_checkpoint(tmp_path / "cslm.pt", "cpu", CSLM_KIND).vocabs.to_dict() == v.to_dict()
    (tmp_path / "src.txt").write_text("a\nb\nc\nd\n")
    out = tmp_path / "out.nbest"
    s = rescore_nbest(RescoreConfig(str(NBEST), str(tmp_path / "src.txt"), [str(tmp_path / "cslm.pt")], str(out),
                                    str(tmp_path / "1best.txt")))
    assert (s.hypotheses, s.feature_name, s.model_kind) == (5, "CSLM0", "cslm")
    before, after = NBEST.read_text().splitlines(), out.read_text().splitlines()
    assert len(after) == len(before)
    for b, a, e in zip(before, after, read_nbest(out)):
        fb, fa = b.split("|||"), a.split("|||")
        assert [x for i, x in enumerate(fa) if i != 2] == [x for i, x in enumerate(fb) if i != 2]
        assert fa[2].startswith(fb[2].rstrip(" ") + " CSLM0= ") and fa[2].endswith(" ")
        want = CSLMScorer(m, v).score_groups([[]], [[e.hypothesis.split()]])[0][0]
        assert e.feature("CSLM0")[0] == pytest.approx(want, abs=1e-5)
    with pytest.raises(PhraseRescoreError, match="one CSLM"):
        rescore_nbest(RescoreConfig(str(NBEST), str(tmp_path / "src.txt"),
                                    [str(tmp_path / "cslm.pt")] * 2, str(out), str(tmp_path / "1best.txt")))


def _corpus(tmp_path) -> Path:
    p = tmp_path / "corpus.txt"
    p.write_text("\n".join(CORPUS) + "\n")
    (tmp_path / "valid.txt").write_text("the house is old\nit is a small zebra\n")
    return p


def test_resume_is_exact(tmp_path):
    corpus = _corpus(tmp_path)
    cfg = dict(emb_dim=4, hidden1=8, hidden2=8, order=3, batch_size=16, valid_every=10, patience=0, dropout=0.3)
    full = train_cslm(corpus, tmp_path / "a", TrainCSLMConfig(max_steps=20, **cfg), valid=tmp_path / "valid.txt")
    train_cslm(corpus, tmp_path / "b", TrainCSLMConfig(max_steps=10, **cfg), valid=tmp_path / "valid.txt")
    resumed = train_cslm(corpus, tmp_path / "b", TrainCSLMConfig(max_steps=20, resume=True, **cfg),
                         valid=tmp_path / "valid.txt")
    a = load_checkpoint(tmp_path / "a" / "last.pt", "cpu", CSLM_KIND).model.state_dict()
    b = load_checkpoint(tmp_path / "b" / "last.pt", "cpu", CSLM_KIND).model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert [r["valid_ppl"] for r in full.history] == [r["valid_ppl"] for r in resumed.history]
    assert (tmp_path / "b" / "train_log.csv").read_text().splitlines()[0] == \
        "step,epoch,elapsed_s,train_loss,valid_ppl,best_valid_ppl"
    with pytest.raises(PhraseRescoreError, match="different settings"):
        train_cslm(corpus, tmp_path / "b", TrainCSLMConfig(max_steps=30, resume=True, **{**cfg, "lr": 0.01}),
                   valid=tmp_path / "valid.txt")


def test_perplexities_of_the_same_tokens(tmp_path):
    """Both perplexities count every word and </s> of the held-out text (not <s>); the n-gram LM's is KenLM's."""
    from phrase_rescore.moses_integration.embedded.lm import load_lm, train_lm

    corpus = _corpus(tmp_path)
    train_lm([s.split() for s in CORPUS], tmp_path / "lm.arpa")
    s = train_cslm(corpus, tmp_path / "m", TrainCSLMConfig(max_steps=5, valid_every=5, emb_dim=4, hidden1=8,
                                                           hidden2=8), valid=tmp_path / "valid.txt",
                   lm=tmp_path / "lm.arpa")
    assert s.valid_tokens == 4 + 1 + 5 + 1
    lm = load_lm(tmp_path / "lm.arpa")
    log10 = sum(lm.score(x, bos=True, eos=True) for x in ("the house is old", "it is a small zebra"))
    assert s.ngram_valid_ppl == pytest.approx(10 ** (-log10 / 11))
    ck = load_checkpoint(tmp_path / "m", "cpu", CSLM_KIND)
    ln = sum(CSLMScorer(ck.model, ck.vocabs).score_groups([[]], [[x.split()]])[0][0]
             for x in ("the house is old", "it is a small zebra"))
    assert s.best_valid_ppl == pytest.approx(math.exp(-ln / 11), rel=1e-6)
    assert np.isfinite(s.best_valid_ppl)


@pytest.mark.parametrize("backend", ["embedded", pytest.param("moses", marks=needs_moses)])
def test_workflow_reports_the_four_rows_of_table_1(tmp_path, backend):
    """train-cslm, then evaluate: Baseline, +RNN, +CSLM+RNN, +CSLM+RNN+WP (and +RNN+WP), the +CSLM rows the
    n-best lists re-ranked by the retuned weights, with the lists' oracle BLEU and the CSLM's hash."""
    import json

    import pandas as pd
    from click.testing import CliRunner

    from phrase_rescore.app.cli import main
    from phrase_rescore.moses_integration.moses_ini import read_moses_ini
    from phrase_rescore.pipeline.rescore_nbest import combined_score

    wf = cslm_rows_workflow(tmp_path)
    work = tmp_path / "work"
    r = CliRunner().invoke(main, ["--quiet", "run", str(wf), "--workdir", str(work), "--set",
                                  f"common.backend={backend}"])
    assert r.exit_code == 0, r.output + repr(r.exception)
    table = pd.read_csv(work / "evaluate" / "table1.csv")
    assert list(table["configuration"]) == ["Baseline", "+RNN", "+CSLM+RNN", "+CSLM+RNN+WP", "+RNN+WP"]
    assert table["test_oracle_bleu"].isna().tolist() == [True, False, False, False, False]
    assert (table["test_oracle_bleu"][1:] >= table["test_bleu"][1:]).all()
    assert table["cslm_sha256"].notna().tolist() == [False, False, True, True, False]
    assert table["test_p"].isna().tolist() == [True, False, False, False, False]
    md = (work / "evaluate" / "table1.md").read_text()
    assert "| +CSLM+RNN+WP |" in md and "Oracle test BLEU" in md and "cslm sha256" in md
    ev = work / "evaluate" / "work"
    weights = read_moses_ini(ev / "test.cslm-rnn.tok.weights.ini").weights
    assert set(weights) == {"Distortion0", "LM0", "WordPenalty0", "PhrasePenalty0", "TranslationModel0", "CSLM0"}
    best: dict[int, tuple] = {}
    for e in read_nbest(ev / "test.cslm-rnn.nbest"):
        assert e.feature_names()[-1] == "CSLM0"
        sc = combined_score(e, 0.0, weights)
        if e.sent_id not in best or sc > best[e.sent_id][0]:
            best[e.sent_id] = (sc, e.hypothesis)
    assert (ev / "test.cslm-rnn.tok").read_text().splitlines() == [best[i][1] for i in range(3)]
    cslm = json.loads((work / "train-cslm" / "stage-manifest.json").read_text())["summary"]
    assert cslm["ngram_valid_ppl"] > 1 and cslm["best_valid_ppl"] > 1 and cslm["valid_tokens"] == 4 + 2 + 3 + 3
    r = CliRunner().invoke(main, ["--quiet", "run", str(wf), "--workdir", str(work), "--set",
                                  f"common.backend={backend}"])
    log = json.loads((work / "run-log.json").read_text())
    assert [s["status"] for s in log["stages"]] == ["skipped", "skipped"]

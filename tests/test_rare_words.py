"""``score --rare-words unigram``: a word outside the shortlist gets its corpus share of ``<unk>``'s probability."""
from __future__ import annotations

import gzip
import math

import numpy as np
import pyarrow as pa
import pytest
import torch
from _tables import write_table
from click.testing import CliRunner

from phrase_rescore.app.cli import main as cli
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.pipeline.configs import ScoreConfig
from phrase_rescore.pipeline.model.checkpoint import save_checkpoint
from phrase_rescore.pipeline.model.encdec import EncDecConfig, RNNEncoderDecoder
from phrase_rescore.pipeline.rare_words import RareWordShares
from phrase_rescore.pipeline.score import score_table
from phrase_rescore.pipeline.score_columns import score_with_extras
from phrase_rescore.pipeline.vocab import Vocab, Vocabularies

pytestmark = pytest.mark.usefixtures("one_thread")

# the shortlist is "a b"; outside it the corpus has c once, d twice, e once and one literal <unk>:
# N = 5 tokens of T = 4 types, so s(w) = (c(w) + 1) / 10 and a word the corpus lacks gets 1/10
CORPUS = "a a a b b c\nd d e a\n<unk> b\n"
VOCAB = Vocab(["<eos>", "<unk>", "a", "b"])

SHARES = [  # (phrase, sum of log s(w) over its words outside the shortlist), by hand
    ("a b", 0.0),
    ("c", math.log(2 / 10)),
    ("a d b d", 2 * math.log(3 / 10)),
    ("e x", math.log(2 / 10) + math.log(1 / 10)),   # x: not in the corpus
    ("<unk> <eos>", math.log(2 / 10) + math.log(1 / 10)),   # literal specials are words outside the shortlist
]


@pytest.fixture
def corpus(tmp_path):
    p = tmp_path / "corpus.tgt"
    p.write_text(CORPUS, encoding="utf-8")
    return p


def test_shares_by_hand(corpus):
    s = RareWordShares.from_corpus(corpus, VOCAB)
    assert (s.tokens, s.types) == (5, 4)
    got = s.phrase_log_shares(pa.array([p for p, _ in SHARES], pa.string()))
    np.testing.assert_allclose(got, [v for _, v in SHARES], rtol=0, atol=1e-12)


def test_the_shares_and_the_unseen_class_sum_to_one(corpus):
    s = RareWordShares.from_corpus(corpus, VOCAB)
    assert math.fsum(np.exp(s.log_shares)) + math.exp(s.unseen_log_share) == pytest.approx(1.0, abs=1e-12)


def test_a_missing_or_empty_corpus_is_a_named_error(tmp_path):
    with pytest.raises(PhraseRescoreError, match="not found") as e:
        RareWordShares.from_corpus(tmp_path / "none", VOCAB)
    assert str(tmp_path / "none") in str(e.value)
    (tmp_path / "empty").write_text("\n\n")
    with pytest.raises(PhraseRescoreError, match="no words"):
        RareWordShares.from_corpus(tmp_path / "empty", VOCAB)


def test_unigram_needs_a_corpus():
    with pytest.raises(PhraseRescoreError, match="--rare-counts"):
        ScoreConfig(rare_words="unigram")


TABLE = [
    b"x y ||| a b ||| 0.5 0.5 0.5 0.5 ||| 0-0 1-1 ||| 1 1 1 ||| |||",
    b"x y ||| a c ||| 0.5 0.5 0.5 0.5 ||| 0-0 1-1 ||| 1 1 1 ||| |||",
    b"x z ||| d e zz ||| 0.5 0.5 0.5 0.5 ||| 0-0 ||| 1 1 1 ||| |||",
    b"z ||| b ||| 0.1 0.2 0.3 0.4",
]
TABLE_SHARES = [0.0, math.log(2 / 10), math.log(3 / 10) + math.log(2 / 10) + math.log(1 / 10), 0.0]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    torch.manual_seed(5)
    vocabs = Vocabularies(Vocab(["<eos>", "<unk>", "x", "y"]), VOCAB)
    cfg = EncDecConfig(len(vocabs.source), len(vocabs.target), emb_dim=6, hidden_dim=8, maxout_units=4, rank=3,
                       bias=True, init_std=0.3)
    path = tmp_path_factory.mktemp("model") / "model.pt"
    save_checkpoint(path, RNNEncoderDecoder(cfg), vocabs)
    return path


def _logp_columns(path) -> list[list[float]]:
    """Per line, the appended columns in the log domain (the table holds exp of log p)."""
    out = []
    for line in gzip.open(path).read().splitlines():
        scores = line.split(b"|||")[2].split()
        out.append([math.log(float(v)) for v in scores[4:]])
    return out


def test_unigram_adds_each_pairs_log_shares_to_its_log_p_and_keeps_the_wp_column(tmp_path, model, corpus):
    table = tmp_path / "pt.gz"
    write_table(table, TABLE)
    score_table(model, table, tmp_path / "class.gz", ScoreConfig())
    score_table(model, table, tmp_path / "uni.gz", ScoreConfig(rare_words="unigram", rare_counts=str(corpus),
                                                               chunk_lines=2))
    cls, uni = _logp_columns(tmp_path / "class.gz"), _logp_columns(tmp_path / "uni.gz")
    for (lp_c, wp_c), (lp_u, wp_u), share in zip(cls, uni, TABLE_SHARES, strict=True):
        assert wp_u == wp_c                                            # the WP column is unchanged
        assert lp_u - lp_c == pytest.approx(share, abs=1e-5)           # 7 significant digits in the table
    assert cls[0] == uni[0] and cls[3] == uni[3]                       # no rare word: the same bytes


def test_the_reverse_column_counts_the_source_side(tmp_path, model, corpus):
    """The reverse model's targets are the table's sources: its shares come from --rare-counts-reverse."""
    table = tmp_path / "pt.gz"
    write_table(table, TABLE)
    src = tmp_path / "corpus.src"
    src.write_text("x x y\nz\n", encoding="utf-8")    # source shortlist "x y": z is rare, N = 1, T = 1
    rev_vocabs = Vocabularies(VOCAB, Vocab(["<eos>", "<unk>", "x", "y"]))
    torch.manual_seed(6)
    cfg = EncDecConfig(4, 4, emb_dim=6, hidden_dim=8, maxout_units=4, rank=3, bias=True, init_std=0.3)
    rev = tmp_path / "rev.pt"
    save_checkpoint(rev, RNNEncoderDecoder(cfg), rev_vocabs)
    with pytest.raises(PhraseRescoreError, match="--rare-counts-reverse"):
        score_with_extras(model, table, tmp_path / "x.gz", ScoreConfig(rare_words="unigram", rare_counts=str(corpus)),
                          reverse_model=rev)
    score_with_extras(model, table, tmp_path / "class.gz", ScoreConfig(), reverse_model=rev)
    score_with_extras(model, table, tmp_path / "uni.gz", ScoreConfig(rare_words="unigram", rare_counts=str(corpus),
                                                                     rare_counts_reverse=str(src)), reverse_model=rev)
    cls, uni = _logp_columns(tmp_path / "class.gz"), _logp_columns(tmp_path / "uni.gz")
    rev_shares = [0.0, 0.0, math.log(2 / 3), math.log(2 / 3)]        # "x z" and "z": s(z) = 2 / 3
    for c, u, fwd, back in zip(cls, uni, TABLE_SHARES, rev_shares, strict=True):
        assert u[0] - c[0] == pytest.approx(fwd, abs=1e-5)
        assert u[2] - c[2] == pytest.approx(back, abs=1e-5)


def test_cli_unigram_without_a_corpus_is_a_message_not_a_traceback(tmp_path, model):
    table = tmp_path / "pt.gz"
    write_table(table, TABLE)
    r = CliRunner().invoke(cli, ["score", str(model), str(table), "--out", str(tmp_path / "o.gz"),
                                 "--rare-words", "unigram"])
    assert r.exit_code != 0 and "--rare-counts" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "o.gz").exists()


def _score_stage_ctx(tmp_path, model, table, params, **inputs):
    from phrase_rescore.app.stages import default_registry
    from phrase_rescore.app.workflow import StageContext

    stage = default_registry().stages["score"]
    d = tmp_path / params["rare_words"]
    d.mkdir()
    ins = {"model": model, "phrase_table": table, "model_reverse": None, "model_ensemble": None,
           "train_src_tok": None, "train_tgt_tok": None, **inputs}
    return stage, StageContext(stage, params, d, ins, tmp_path)


def test_the_score_stage_counts_the_training_corpus_it_was_built_from(tmp_path, model, corpus):
    """[score] rare_words = "unigram" takes the shares from build-smt's tokenized corpora (the target side's
    for the forward column); without them it is a named error."""
    table = tmp_path / "pt.gz"
    write_table(table, TABLE)
    src = tmp_path / "corpus.src"
    src.write_text("x y z\n", encoding="utf-8")
    stage, ctx = _score_stage_ctx(tmp_path, model, table, {"rare_words": "class"})
    stage.run(ctx)
    stage, ctx = _score_stage_ctx(tmp_path, model, table, {"rare_words": "unigram"},
                                  train_src_tok=src, train_tgt_tok=corpus)
    stage.run(ctx)
    cls = _logp_columns(tmp_path / "class" / "phrase-table.rnn-wp.gz")
    uni = _logp_columns(tmp_path / "unigram" / "phrase-table.rnn-wp.gz")
    assert [u[0] - c[0] for c, u in zip(cls, uni)] == pytest.approx(TABLE_SHARES, abs=1e-5)
    assert [u[0] for u in _logp_columns(tmp_path / "unigram" / "phrase-table.rnn.gz")] == [u[0] for u in uni]
    (tmp_path / "unigram2").mkdir()
    stage, ctx = _score_stage_ctx(tmp_path / "unigram2", model, table, {"rare_words": "unigram"})
    with pytest.raises(PhraseRescoreError, match="train_tgt_tok"):
        stage.run(ctx)


@pytest.mark.parametrize("reverse", [False, True])
def test_an_output_over_the_counted_corpus_is_refused_and_the_corpus_kept(tmp_path, model, corpus, reverse):
    table = tmp_path / "pt.gz"
    write_table(table, TABLE)
    before = corpus.read_bytes()
    args = ["score", str(model), str(table), "--out", str(corpus), "--rare-words", "unigram",
            "--rare-counts", str(corpus)]
    if reverse:
        args += ["--reverse-model", str(model), "--rare-counts-reverse", str(tmp_path / "other")]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code != 0 and "--rare-counts" in r.output and "Traceback" not in r.output
    assert corpus.read_bytes() == before

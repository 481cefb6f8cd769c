"""n-best rescoring: the feature is log p(hyp|src), nothing else on a line changes, re-ranking is right."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.moses_integration.nbest import read_nbest
from phrase_rescore.pipeline.batching import pad_batch
from phrase_rescore.pipeline.configs import RescoreConfig
from phrase_rescore.pipeline.model.checkpoint import save_checkpoint
from phrase_rescore.pipeline.model.seq2seq import Seq2Seq, Seq2SeqConfig
from phrase_rescore.pipeline.rescore_nbest import GroupedScorer, rescore_nbest
from phrase_rescore.pipeline.translate import Ensemble
from phrase_rescore.pipeline.vocab import Vocab, Vocabularies

NBEST = Path(__file__).parent / "fixtures" / "moses" / "moses.nbest"  # ids 0, 0, 1, 2, 3 (2: the empty hypothesis, as Moses writes for an empty line)
SOURCES = ["la maison est petite", "c' est une petite maison", "rien", "bonjour"]
VOCABS = Vocabularies(Vocab(["<eos>", "<unk>", "la", "maison", "est", "petite", "c'", "une", "bonjour"]),
                      Vocab(["<eos>", "<unk>", "the", "house", "is", "small", "it", "a", "hello", "little"]))


@pytest.fixture(autouse=True)
def quiet_one_thread(monkeypatch, one_thread):
    monkeypatch.setenv("PHRASE_RESCORE_QUIET", "1")


def model(seed) -> Seq2Seq:
    torch.manual_seed(seed)
    return Seq2Seq(Seq2SeqConfig(len(VOCABS.source), len(VOCABS.target), emb_dim=8, hidden_dim=8, num_layers=2,
                                 init_range=0.5)).eval()


def direct_logp(m, src: str, hyp: str) -> float:
    """log p(hyp | src) by one teacher-forced forward pass of one pair."""
    s = np.array(VOCABS.source.encode(src.split()) + [0])
    t = np.array(VOCABS.target.encode(hyp.split()) + [0])
    with torch.no_grad():
        return float(m(*pad_batch([s]), *pad_batch([t])))


@pytest.fixture
def files(tmp_path):
    (tmp_path / "src.txt").write_text("\n".join(SOURCES) + "\n")
    save_checkpoint(tmp_path / "m.pt", model(0), VOCABS)
    save_checkpoint(tmp_path / "m2.pt", model(1), VOCABS)
    return tmp_path


def test_feature_added_without_disturbing_anything_else(files):
    out = files / "out.nbest"
    s = rescore_nbest(RescoreConfig(str(NBEST), str(files / "src.txt"), [str(files / "m.pt")], str(out),
                                    str(files / "1best.txt")))
    assert (s.sentences, s.hypotheses, s.feature_name, s.model_kind) == (4, 5, "Seq2Seq0", "seq2seq")
    before = NBEST.read_text().splitlines()
    after = out.read_text().splitlines()
    assert len(after) == len(before)
    m = model(0)
    for b, a, e in zip(before, after, read_nbest(out)):
        fb, fa = b.split("|||"), a.split("|||")
        assert len(fa) == len(fb)
        assert [x for i, x in enumerate(fa) if i != 2] == [x for i, x in enumerate(fb) if i != 2]  # id, hyp, total, extra
        assert fa[2].startswith(fb[2].rstrip(" ") + " Seq2Seq0= ")  # old features first, byte for byte
        assert fa[2].endswith(" ")  # Moses's spacing before the next separator
        assert e.feature_names()[-1] == "Seq2Seq0"
        assert e.feature("Seq2Seq0")[0] == pytest.approx(direct_logp(m, SOURCES[e.sent_id], e.hypothesis), abs=1e-5)


def test_even_average_reranking(files):
    one = files / "1best.txt"
    rescore_nbest(RescoreConfig(str(NBEST), str(files / "src.txt"), [str(files / "m.pt")], str(files / "o.nbest"),
                                str(one)))
    lines = one.read_text().split("\n")
    assert lines[-1] == "" and len(lines) == 5  # one line per source sentence
    m = model(0)
    e0 = [(h, t) for h, t in (("the house is small", -4.71301), ("the house is little", -5.04137))]
    best0 = max(e0, key=lambda ht: 0.5 * direct_logp(m, SOURCES[0], ht[0]) + 0.5 * ht[1])[0]
    assert lines[:4] == [best0, "it is a small house", "", "hello"]  # sentence 2's one hypothesis is empty


def test_weights_from_moses_ini_decide_the_ranking(files):
    ini = files / "moses.ini"
    base = ("[weight]\nLexicalReordering0= 0 0 0 0 0 0\nDistortion0= 0\nLM0= 0\nWordPenalty0= {wp}\n"
            "PhrasePenalty0= 0\nTranslationModel0= 0 0 0 0\nSeq2Seq0= 0\n")
    for wp, expected in ((1.0, "the house is small"), (-1.0, "the house is small")):
        ini.write_text(base.format(wp=wp))
        rescore_nbest(RescoreConfig(str(NBEST), str(files / "src.txt"), [str(files / "m.pt")],
                                    str(files / "o.nbest"), str(files / "1.txt"), weights_ini=str(ini)))
        assert (files / "1.txt").read_text().split("\n")[0] == expected  # a tie keeps the decoder's order
    ini.write_text(base.format(wp=0).replace("LM0= 0", "LM0= -1"))  # prefer the worse language model score
    rescore_nbest(RescoreConfig(str(NBEST), str(files / "src.txt"), [str(files / "m.pt")],
                                str(files / "o.nbest"), str(files / "1.txt"), weights_ini=str(ini)))
    assert (files / "1.txt").read_text().split("\n")[0] == "the house is little"
    ini.write_text(base.format(wp=0).replace("Seq2Seq0= 0\n", ""))
    with pytest.raises(PhraseRescoreError, match="Seq2Seq0"):
        rescore_nbest(RescoreConfig(str(NBEST), str(files / "src.txt"), [str(files / "m.pt")],
                                    str(files / "o.nbest"), str(files / "1.txt"), weights_ini=str(ini)))


def test_grouped_scoring_equals_pair_by_pair_for_ensembles():
    a, b = model(0), model(1)
    srcs = [s.split() for s in SOURCES]
    hyps = [["the house".split(), "a house is a house".split(), []], [], ["hello".split()],
            ["it is".split(), "zzz unknown".split()]]
    got = GroupedScorer(Ensemble([a, b]), VOCABS, hyp_batch=2).score_groups(srcs, hyps)
    for s, hs, lps in zip(SOURCES, hyps, got):
        assert len(lps) == len(hs)
        for h, lp in zip(hs, lps):
            want = 0.5 * (direct_logp(a, s, " ".join(h)) + direct_logp(b, s, " ".join(h)))
            assert lp == pytest.approx(want, abs=1e-5)


def test_phrase_level_encoder_decoder_scores_whole_sentences(files):
    from phrase_rescore.pipeline.model.encdec import EncDecConfig, RNNEncoderDecoder

    torch.manual_seed(0)
    ed = RNNEncoderDecoder(EncDecConfig(len(VOCABS.source), len(VOCABS.target), emb_dim=6, hidden_dim=8,
                                        maxout_units=4, rank=3)).eval()
    srcs = [s.split() for s in SOURCES]
    hyps = [["the house is small".split(), "the".split()], [], [], ["hello".split()]]
    got = GroupedScorer(ed, VOCABS, hyp_batch=2).score_groups(srcs, hyps)
    for s, hs, lps in zip(srcs, hyps, got):
        for h, lp in zip(hs, lps):
            si, sm = pad_batch([np.array(VOCABS.source.encode(s) + [0])])
            ti, tm = pad_batch([np.array(VOCABS.target.encode(h) + [0])])
            with torch.no_grad():
                assert lp == pytest.approx(float(ed.log_prob(si, sm, ti, tm)), abs=1e-5)
    save_checkpoint(files / "ed.pt", ed, VOCABS)
    s = rescore_nbest(RescoreConfig(str(NBEST), str(files / "src.txt"), [str(files / "ed.pt")],
                                    str(files / "o.nbest"), str(files / "1.txt")))
    assert (s.model_kind, s.feature_name) == ("encdec", "RNNEncDec0")
    assert [e.feature_names()[-1] for e in read_nbest(files / "o.nbest")] == ["RNNEncDec0"] * 5


def test_ensembles_take_either_model_but_one_kind(files):
    from phrase_rescore.pipeline.model.encdec import EncDecConfig, RNNEncoderDecoder

    eds = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        eds.append(RNNEncoderDecoder(EncDecConfig(len(VOCABS.source), len(VOCABS.target), emb_dim=6, hidden_dim=8,
                                                  maxout_units=4, rank=3)).eval())
        save_checkpoint(files / f"ed{seed}.pt", eds[-1], VOCABS)
    srcs, hyps = [s.split() for s in SOURCES], [["the house".split()], [], [], ["hello".split(), []]]
    alone = [GroupedScorer(m, VOCABS).score_groups(srcs, hyps) for m in eds]
    got = GroupedScorer(Ensemble(eds), VOCABS, hyp_batch=1).score_groups(srcs, hyps)
    for i, lps in enumerate(got):
        assert lps == pytest.approx([0.5 * (a + b) for a, b in zip(alone[0][i], alone[1][i])], abs=1e-6)
    s = rescore_nbest(RescoreConfig(str(NBEST), str(files / "src.txt"), [str(files / "ed0.pt"), str(files / "ed1.pt")],
                                    str(files / "o.nbest"), str(files / "1.txt")))
    assert (s.model_kind, s.feature_name) == ("encdec", "RNNEncDec0")
    with pytest.raises(PhraseRescoreError, match="ensemble members must be of one kind") as e:
        rescore_nbest(RescoreConfig(str(NBEST), str(files / "src.txt"), [str(files / "m.pt"), str(files / "ed0.pt")],
                                    str(files / "o.nbest"), str(files / "1.txt")))
    assert e.value.path == str(files / "ed0.pt")


def test_nbest_ids_beyond_the_source_fail(files):
    (files / "short.txt").write_text("a\nb\n")
    with pytest.raises(PhraseRescoreError, match="sentence id 2 but the input has only 2"):
        rescore_nbest(RescoreConfig(str(NBEST), str(files / "short.txt"), [str(files / "m.pt")],
                                    str(files / "o.nbest"), str(files / "1.txt")))
    assert not (files / "o.nbest").exists() and not (files / "1.txt").exists()  # atomic: nothing half-written


def test_rescore_nbest_command(files):
    from phrase_rescore.app.cli import main

    r = CliRunner().invoke(main, ["rescore-nbest", str(NBEST), str(files / "src.txt"), "-m", str(files / "m.pt"),
                                  "-m", str(files / "m2.pt"), "--out-nbest", str(files / "o.nbest"),
                                  "--out-1best", str(files / "1.txt")])
    assert r.exit_code == 0, r.output
    assert "rescored 5 hypotheses of 4 sentences" in r.output
    assert len((files / "1.txt").read_text().split("\n")) == 5


def test_mert_tuned_weights_rerank_towards_the_reference(files):
    refs = ["the house is little", "it is a small house", "nothing", "hello"]
    (files / "ref.txt").write_text("\n".join(refs) + "\n")
    s = rescore_nbest(RescoreConfig(str(NBEST), str(files / "src.txt"), [str(files / "m.pt")], str(files / "o.nbest"),
                                    str(files / "1.txt"), dev_nbest=str(NBEST), dev_src=str(files / "src.txt"),
                                    dev_ref=str(files / "ref.txt"), mert_restarts=3))
    from phrase_rescore.moses_integration.embedded.bleu_stats import corpus_bleu
    from phrase_rescore.moses_integration.moses_ini import read_moses_ini

    out = (files / "1.txt").read_text().split("\n")[:4]
    assert out[:2] == refs[:2]  # MERT found weights that prefer the reference of sentence 0
    assert s.dev_bleu == pytest.approx(corpus_bleu(out, refs))
    w = read_moses_ini(s.tuned_weights).weights
    assert set(w) == {"LexicalReordering0", "Distortion0", "LM0", "WordPenalty0", "PhrasePenalty0",
                      "TranslationModel0", "Seq2Seq0"}
    assert sum(abs(v) for vs in w.values() for v in vs) == pytest.approx(1.0)  # L1-normalized, as mert prints


def test_each_source_is_encoded_once_for_all_its_hypotheses():
    m = model(0)
    encoded_rows = []
    original = m.encoder.forward
    m.encoder.forward = lambda src, mask: (encoded_rows.append(src.shape[0]), original(src, mask))[1]
    srcs = [s.split() for s in SOURCES]
    hyps = [[["the"]] * 7, [["it", "is"]] * 3, [], [["hello"]] * 5]
    GroupedScorer(m, VOCABS, hyp_batch=4).score_groups(srcs, hyps)
    assert encoded_rows == [4]  # one encoder pass over the 4 sources, not one per hypothesis or batch


def test_crlf_nbest_keeps_every_line_ending(files):
    crlf = files / "crlf.nbest"
    data = NBEST.read_bytes().replace(b"\n", b"\r\n")
    crlf.write_bytes(data[:-2])                                    # the last line without an ending
    out = files / "o.nbest"
    rescore_nbest(RescoreConfig(str(crlf), str(files / "src.txt"), [str(files / "m.pt")], str(out),
                                str(files / "1.txt")))
    got = out.read_bytes()
    assert got.count(b"\r\n") == 4 and not got.endswith(b"\n") and got.count(b"\r") == 4
    for b, a in zip(data[:-2].split(b"\r\n"), got.split(b"\r\n"), strict=True):
        fb, fa = b.split(b"|||"), a.split(b"|||")
        assert fa[:2] + fa[3:] == fb[:2] + fb[3:] and fa[2].startswith(fb[2].rstrip(b" ") + b" Seq2Seq0= ")


@pytest.mark.parametrize("total", [b"nan", b"inf", b"-nan"])
def test_non_finite_total_is_refused_not_ranked(files, total):
    bad = files / "bad.nbest"
    lines = NBEST.read_bytes().split(b"\n")
    f = lines[1].split(b"|||")
    f[3] = b" " + total + b" "
    lines[1] = b"|||".join(f)
    bad.write_bytes(b"\n".join(lines))
    with pytest.raises(PhraseRescoreError) as e:
        rescore_nbest(RescoreConfig(str(bad), str(files / "src.txt"), [str(files / "m.pt")], str(files / "o.nbest"),
                                    str(files / "1.txt")))
    assert (e.value.path, e.value.line) == (str(bad), 2) and "finite number" in e.value.message
    assert not (files / "1.txt").exists()


@pytest.mark.parametrize("data, line", [
    (b"la maison\n\xff est\nrien\nbonjour\n", 2),
    (b"la maison\nest\nrien\nbon\xc3jour\n", 4),
    (b"la \xe9 maison\n", 1),
])
def test_invalid_utf8_in_the_source_names_its_line(files, data, line):
    from phrase_rescore.pipeline.sentences import read_sentences

    src = files / "bad-src.txt"
    src.write_bytes(data)
    with pytest.raises(PhraseRescoreError) as e:
        read_sentences(src)
    assert (e.value.path, e.value.line) == (str(src), line) and "invalid UTF-8" in e.value.message
    with pytest.raises(PhraseRescoreError) as e:
        rescore_nbest(RescoreConfig(str(NBEST), str(src), [str(files / "m.pt")], str(files / "o.nbest"),
                                    str(files / "1.txt")))
    assert e.value.line == line


def test_source_lines_end_at_newlines_only(files):
    from phrase_rescore.pipeline.sentences import read_sentences

    src = files / "cr.txt"
    src.write_bytes(b"la\rmaison\r\nest\n\nrien")
    assert read_sentences(src) == [["la\rmaison"], ["est"], [], ["rien"]]     # a lone \r is part of a word


@pytest.mark.parametrize("keep, extra_source, message", [
    (0, 0, r"has no hypotheses \(none for sentence 0 or any after it\), but the source .*src.txt has 4 sentences"),
    (3, 0, r"ends after sentence 1: no hypotheses for sentence 2 or any after it, but the source .* has 4 sentences"),
    (5, 1, r"ends after sentence 3: no hypotheses for sentence 4, but the source .* has 5 sentences"),
])
def test_an_empty_or_cut_short_nbest_list_is_refused(files, keep, extra_source, message):
    from phrase_rescore.app.cli import main

    cut = files / "cut.nbest"
    cut.write_bytes(b"".join(NBEST.read_bytes().splitlines(keepends=True)[:keep]))
    (files / "src.txt").write_text("\n".join(SOURCES + ["encore"] * extra_source) + "\n")
    with pytest.raises(PhraseRescoreError, match=message) as e:
        rescore_nbest(RescoreConfig(str(cut), str(files / "src.txt"), [str(files / "m.pt")], str(files / "o.nbest"),
                                    str(files / "1.txt")))
    assert e.value.path == str(cut)
    assert not (files / "o.nbest").exists() and not (files / "1.txt").exists()
    r = CliRunner().invoke(main, ["rescore-nbest", str(cut), str(files / "src.txt"), "-m", str(files / "m.pt"),
                                  "--out-nbest", str(files / "o.nbest"), "--out-1best", str(files / "1.txt")])
    assert r.exit_code == 1 and r.output.startswith(f"error: {cut}: the n-best list "), r.output
    # the same list as the dev list: refused before any model is loaded or list written
    (files / "ref.txt").write_text("\n".join(["x"] * (4 + extra_source)) + "\n")
    with pytest.raises(PhraseRescoreError, match=message):
        rescore_nbest(RescoreConfig(str(NBEST), str(files / "src.txt"), [str(files / "missing.pt")],
                                    str(files / "o.nbest"), str(files / "1.txt"), dev_nbest=str(cut),
                                    dev_src=str(files / "src.txt"), dev_ref=str(files / "ref.txt")))
    assert sorted(p.name for p in files.iterdir()) == ["cut.nbest", "m.pt", "m2.pt", "ref.txt", "src.txt"]


@pytest.mark.parametrize("derived, user", [
    ("o.nbest.dev", b"my own notes\n"),
    ("o.nbest.dev", NBEST.read_bytes()),                        # an n-best list, but not one rescore-nbest wrote
    ("o.nbest.dev", b""),
    ("1.txt.weights.ini", b"my own notes\n"),
    ("1.txt.weights.ini", b"[input-factors]\n0\n\n[weight]\nLM0= 0.5\n"),   # a whole moses.ini
    ("1.txt.weights.ini", b""),
])
def test_tuning_refuses_user_files_named_like_its_derived_outputs(files, derived, user):
    (files / "ref.txt").write_text("the house is little\nit is a small house\nnothing\nhello\n")
    cfg = RescoreConfig(str(NBEST), str(files / "src.txt"), [str(files / "m.pt")], str(files / "o.nbest"),
                        str(files / "1.txt"), dev_nbest=str(NBEST), dev_src=str(files / "src.txt"),
                        dev_ref=str(files / "ref.txt"), mert_restarts=1)
    (files / derived).write_bytes(user)
    with pytest.raises(PhraseRescoreError, match="would replace this file, which is not") as e:
        rescore_nbest(cfg)
    assert e.value.path == str(files / derived) and (files / derived).read_bytes() == user
    assert not (files / "o.nbest").exists() and not (files / "1.txt").exists()
    (files / derived).unlink()
    for _ in range(2):   # a rerun replaces what the command wrote itself
        s = rescore_nbest(cfg)
        assert s.tuned_weights == str(files / "1.txt.weights.ini")
        assert (files / "o.nbest.dev").is_file() and (files / "1.txt.weights.ini").read_text().startswith("[weight]\n")


def test_a_hypothesis_without_a_weighted_feature_is_refused(files):
    """Without LM0= a hypothesis would be scored as if its LM0 were 0 and, with a negative LM score on every other
    line, become the 1-best."""
    ini = files / "w.ini"
    ini.write_text("[weight]\nLexicalReordering0= 0 0 0 0 0 0\nDistortion0= 0\nLM0= 1\nWordPenalty0= 0\n"
                   "PhrasePenalty0= 0\nTranslationModel0= 0 0 0 0\nSeq2Seq0= 0\n")
    bad = files / "no-lm.nbest"
    lines = NBEST.read_text().splitlines(keepends=True)
    lines[1] = lines[1].replace(" LM0= -15.1189", "")
    bad.write_text("".join(lines))
    with pytest.raises(PhraseRescoreError, match="this hypothesis has no feature 'LM0', which the weights name") as e:
        rescore_nbest(RescoreConfig(str(bad), str(files / "src.txt"), [str(files / "m.pt")], str(files / "o.nbest"),
                                    str(files / "1.txt"), weights_ini=str(ini)))
    assert (e.value.path, e.value.line) == (str(bad), 2)
    assert not (files / "o.nbest").exists() and not (files / "1.txt").exists()
    from phrase_rescore.pipeline.rescore_nbest import rerank_nbest

    with pytest.raises(PhraseRescoreError, match="no feature 'LM0'"):
        rerank_nbest(bad, {"LexicalReordering0": [0.0] * 6, "Distortion0": [0.0], "LM0": [1.0], "WordPenalty0": [0.0],
                           "PhrasePenalty0": [0.0], "TranslationModel0": [0.0] * 4}, files / "r.txt", 4)
    assert not (files / "r.txt").exists()
    # a whole moses.ini as --weights: UnknownWordPenalty0 and a tuneable=false feature are in [weight], but Moses
    # never prints them in an n-best list, so no hypothesis is expected to carry them
    ini = files / "moses.ini"
    ini.write_text("[feature]\nUnknownWordPenalty\nLexicalReordering name=LexicalReordering0 num-features=6 "
                   "type=msd-bidirectional-fe path=lr\nDistortion\nKENLM name=LM0 factor=0 path=lm order=2\n"
                   "WordPenalty\nPhrasePenalty\nPhraseDictionaryMemory name=TranslationModel0 num-features=4 path=pt\n"
                   "KENLM name=LM1 factor=0 path=lm2 order=2 tuneable=false\n\n"
                   "[weight]\nUnknownWordPenalty0= 1\nLexicalReordering0= 0 0 0 0 0 0\nDistortion0= 0\nLM0= 1\n"
                   "LM1= 0.5\nWordPenalty0= 0\nPhrasePenalty0= 0\nTranslationModel0= 0 0 0 0\nSeq2Seq0= 0\n")
    rescore_nbest(RescoreConfig(str(NBEST), str(files / "src.txt"), [str(files / "m.pt")], str(files / "o.nbest"),
                                str(files / "1.txt"), weights_ini=str(ini)))
    assert (files / "1.txt").read_text().split("\n")[:4] == ["the house is small", "it is a small house", "", "hello"]

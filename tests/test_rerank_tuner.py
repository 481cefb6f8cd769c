"""Re-ranking weights tuned on a dev n-best list by Moses's own ``mert`` and ``kbmira`` (after its ``extractor``),
against the embedded MERT; ``rescore-nbest --tuner`` and its errors.

The dev list has a known answer (``tests/_rerank_data.py``): a weight on CSLM0 re-ranks (nearly) every
reference first, and the starting weights re-rank badly.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
from _real_moses import needs_moses
from _rerank_data import START, VOCAB, write_dev
from click.testing import CliRunner

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.reading import read_text_lines
from phrase_rescore.moses_integration.moses_ini import read_moses_ini
from phrase_rescore.moses_integration.moses_install import MosesInstall, find_moses
from phrase_rescore.moses_integration.nbest_tuning import require_tuner, reranked_bleu, tune_nbest_moses
from phrase_rescore.pipeline.rescore_nbest import rerank_nbest, tune_rerank_weights, tune_rerank_weights_with


@pytest.fixture
def moses() -> MosesInstall:
    return require_tuner("mert")


@needs_moses
def test_moses_mert_reaches_the_embedded_merts_bleu_and_beats_the_start(tmp_path, moses):
    nbest, ref = write_dev(tmp_path)
    refs = read_text_lines(ref)
    start = reranked_bleu(nbest, refs, START)
    res = tune_nbest_moses(nbest, ref, START, moses, tmp_path / "mert", tuner="mert", restarts=5, seed=1)
    assert list(res.weights) == list(START) and [len(v) for v in res.weights.values()] == [1, 1, 2, 1]
    assert sum(abs(v) for vs in res.weights.values() for v in vs) == pytest.approx(1, abs=1e-4)  # mert's L1 norm
    got = reranked_bleu(nbest, refs, res.weights)
    embedded_weights, embedded = tune_rerank_weights(nbest, ref, START, restarts=5, seed=1)
    assert got >= start and got > start + 0.2                  # the known answer: trust CSLM0
    assert got == pytest.approx(embedded, abs=0.005)           # within 0.5 BLEU of the embedded MERT
    assert res.tool_bleu == pytest.approx(got, abs=1e-4)       # mert's own BLEU of its weights is ours
    assert res.weights["CSLM0"][0] > 0
    assert read_moses_ini(res.weights_ini).weights == res.weights
    assert (res.workdir / "init.opt").read_text().splitlines() == ["1 0 0.3 0.3 0", "0 0 0 0 0", "1 1 1 1 1"]
    again = tune_nbest_moses(nbest, ref, START, moses, tmp_path / "mert", tuner="mert", restarts=5, seed=1)
    assert again.weights == res.weights                        # the seed is explicit: same weights


@needs_moses
def test_kbmira_returns_finite_weights_for_every_feature(tmp_path):
    nbest, ref = write_dev(tmp_path)
    res = tune_nbest_moses(nbest, ref, START, require_tuner("kbmira"), tmp_path / "kb", tuner="kbmira", seed=2)
    assert [(n, len(v)) for n, v in res.weights.items()] == [("LM0", 1), ("WordPenalty0", 1),
                                                              ("TranslationModel0", 2), ("CSLM0", 1)]
    assert all(math.isfinite(v) for vs in res.weights.values() for v in vs)
    assert sum(abs(v) for vs in res.weights.values() for v in vs) == pytest.approx(1)
    assert res.tool_bleu is not None and 0 < res.tool_bleu <= 1
    dense = (res.workdir / "init.dense").read_text().splitlines()
    assert dense == ["LM0= 1", "WordPenalty0= 0", "TranslationModel0= 0.3", "TranslationModel0= 0.3", "CSLM0= 0"]
    refs = read_text_lines(ref)
    assert reranked_bleu(nbest, refs, res.weights) > reranked_bleu(nbest, refs, START)


@pytest.mark.parametrize("tuner", ["embedded", "mert"])
def test_a_sentence_without_hypotheses_is_refused(tmp_path, tuner):
    """Moses writes every sentence (the empty hypothesis where it finds none): a list without one is broken, and
    padding it with an empty translation would tune on a sentence the decoder never output."""
    nbest, ref = write_dev(tmp_path, n_sent=12, skip=(4,))
    line = 1 + 4 * 8          # the first line of sentence 5
    with pytest.raises(PhraseRescoreError, match="after sentence 3 comes sentence 5: no hypotheses for sentence 4") as e:
        tune_rerank_weights_with(tuner, nbest, ref, START, restarts=3, seed=0, install=object(),
                                 workdir=tmp_path / "w")
    assert (e.value.path, e.value.line) == (str(nbest), line)
    assert not (tmp_path / "w").exists()       # refused before any tool ran


@needs_moses
def test_a_failing_tool_is_one_error_with_its_log_kept(tmp_path, moses):
    nbest, ref = write_dev(tmp_path, n_sent=4)
    bad = tmp_path / "moses"
    (bad / "bin").mkdir(parents=True)
    for name in ("moses", "extractor"):
        os.symlink(moses.bin_dir / name, bad / "bin" / name)
    fake = bad / "bin" / "mert"
    fake.write_text("#!/bin/sh\necho 'mert: cannot read features.dat' >&2\nexit 3\n")
    fake.chmod(0o755)
    install = MosesInstall(bad, bad / "bin" / "moses", moses.mert_moses, bad / "bin")
    with pytest.raises(PhraseRescoreError) as e:
        tune_nbest_moses(nbest, ref, START, install, tmp_path / "w", tuner="mert")
    log = tmp_path / "w" / "mert.log"
    assert "exit status 3" in str(e.value) and str(log) in str(e.value)
    assert "mert: cannot read features.dat" in log.read_text()
    assert not (tmp_path / "w" / "weights.ini").exists()


@needs_moses
def test_features_that_change_between_lines_are_refused_before_any_program_runs(tmp_path, moses):
    nbest, ref = write_dev(tmp_path, n_sent=3)
    lines = nbest.read_text().splitlines(keepends=True)
    lines[5] = lines[5].replace(" CSLM0=", " Other0=")
    nbest.write_text("".join(lines))
    with pytest.raises(PhraseRescoreError, match=r"dev\.nbest:6: expected the same features"):
        tune_nbest_moses(nbest, ref, START, moses, tmp_path / "w", tuner="kbmira")
    assert not (tmp_path / "w").exists()


@needs_moses
def test_rescore_nbest_command_with_moses_mert(tmp_path, monkeypatch, one_thread):
    import torch

    from phrase_rescore.app.cli import main
    from phrase_rescore.pipeline.model.checkpoint import save_checkpoint
    from phrase_rescore.pipeline.model.seq2seq import Seq2Seq, Seq2SeqConfig
    from phrase_rescore.pipeline.vocab import Vocab, Vocabularies

    monkeypatch.setenv("PHRASE_RESCORE_QUIET", "1")
    nbest, ref = write_dev(tmp_path, n_sent=10)
    src = tmp_path / "dev.src"
    src.write_text("".join("s\n" for _ in range(10)))
    vocabs = Vocabularies(Vocab(["<eos>", "<unk>", "s"]), Vocab(["<eos>", "<unk>", *VOCAB]))
    torch.manual_seed(0)
    save_checkpoint(tmp_path / "m.pt", Seq2Seq(Seq2SeqConfig(3, len(VOCAB) + 2, emb_dim=4, hidden_dim=4,
                                                             num_layers=1)).eval(), vocabs)
    ini = tmp_path / "start.ini"
    ini.write_text("[weight]\nLM0= 1\nWordPenalty0= 0\nTranslationModel0= 0.3 0.3\nCSLM0= 0\nSeq2Seq0= 0.1\n")
    out_nb, out_1 = tmp_path / "test.nbest", tmp_path / "test.1best"
    r = CliRunner().invoke(main, ["--quiet", "rescore-nbest", str(nbest), str(src), "--model", str(tmp_path / "m.pt"),
                                  "--out-nbest", str(out_nb), "--out-1best", str(out_1), "--weights", str(ini),
                                  "--dev-nbest", str(nbest), "--dev-src", str(src), "--dev-ref", str(ref),
                                  "--tuner", "mert", "--mert-restarts", "3", "--device", "cpu"])
    assert r.exit_code == 0, r.output + repr(r.exception)
    assert "Moses mert on the dev n-best" in r.output
    weights = read_moses_ini(f"{out_1}.weights.ini").weights
    assert list(weights) == ["LM0", "WordPenalty0", "TranslationModel0", "CSLM0", "Seq2Seq0"]
    assert (tmp_path / "test.1best.mert" / "mert.log").is_file()
    # the test list (here the dev list itself) is re-ranked by the weights mert found
    rerank_nbest(out_nb, weights, tmp_path / "again.1best", 10)
    assert (tmp_path / "again.1best").read_text() == out_1.read_text()


@pytest.mark.parametrize("tuner", ["mert", "kbmira"])
def test_without_moses_the_tuner_is_one_error_naming_moses_home(tmp_path, monkeypatch, tuner):
    from phrase_rescore.app.cli import main

    monkeypatch.delenv("MOSES_HOME", raising=False)
    monkeypatch.setenv("PATH", os.fspath(tmp_path))          # no moses on PATH either
    assert find_moses() is None
    nbest, ref = write_dev(tmp_path, n_sent=2)
    (tmp_path / "m.pt").write_bytes(b"not read: the installation is looked for first")
    r = CliRunner().invoke(main, ["rescore-nbest", str(nbest), str(ref), "--model", str(tmp_path / "m.pt"),
                                  "--out-nbest", str(tmp_path / "o.nbest"), "--out-1best", str(tmp_path / "o.txt"),
                                  "--dev-nbest", str(nbest), "--dev-src", str(ref), "--dev-ref", str(ref),
                                  "--tuner", tuner])
    assert r.exit_code == 1
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "MOSES_HOME" in lines[0], r.output
    assert f"--tuner {tuner}" in lines[0] and "--tuner embedded" in lines[0]
    assert not (tmp_path / "o.txt").exists() and not (tmp_path / "o.txt.mert").exists()
    with pytest.raises(PhraseRescoreError, match="rerank_tuner = mert .*MOSES_HOME"):
        require_tuner("mert", option="rerank_tuner =")


def _workflow(tmp_path: Path, tuner: str) -> tuple[Path, list[str]]:
    from _cslm_workflow import cslm_rows_workflow

    wf = cslm_rows_workflow(tmp_path, max_steps=10, evaluate_extra=f'rerank_tuner = "{tuner}"\n')
    return wf, ["--quiet", "run", str(wf), "--workdir", str(tmp_path / "work")]


@needs_moses
def test_evaluate_retunes_the_cslm_rows_with_kbmira(tmp_path, one_thread):
    import json

    from phrase_rescore.app.cli import main

    _, argv = _workflow(tmp_path, "kbmira")
    r = CliRunner().invoke(main, argv)
    assert r.exit_code == 0, r.output + repr(r.exception)
    ev = tmp_path / "work" / "evaluate"
    summary = json.loads((ev / "stage-manifest.json").read_text())["summary"]["cslm_rerank"]
    assert {c: s["tuner"] for c, s in summary.items()} == {"cslm-rnn": "kbmira", "cslm-rnn-wp": "kbmira"}
    for config in summary:
        folder = ev / "work" / f"test.{config}.tok.kbmira"
        assert (folder / "kbmira.log").is_file() and (folder / "extractor.log").is_file()
        tuned = read_moses_ini(ev / "work" / f"test.{config}.tok.weights.ini").weights
        assert tuned == read_moses_ini(folder / "weights.ini").weights and "CSLM0" in tuned


def test_evaluate_with_a_moses_tuner_but_no_moses_stops_before_decoding(tmp_path, monkeypatch, one_thread):
    from phrase_rescore.app.cli import main

    monkeypatch.delenv("MOSES_HOME", raising=False)
    monkeypatch.setenv("PATH", os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                                                if not (Path(p) / "moses").exists()))
    assert find_moses() is None
    _, argv = _workflow(tmp_path, "mert")
    r = CliRunner().invoke(main, argv)
    assert r.exit_code != 0
    assert "rerank_tuner = mert" in r.output and "MOSES_HOME" in r.output, r.output
    assert not list((tmp_path / "work" / "evaluate").rglob("*.nbest"))      # nothing was decoded


@needs_moses
def test_a_folder_of_the_users_in_the_tuners_place_is_refused_before_scoring(tmp_path, moses):
    from phrase_rescore.pipeline.configs import RescoreConfig
    from phrase_rescore.pipeline.rescore_nbest import rescore_nbest

    nbest, ref = write_dev(tmp_path, n_sent=2)
    (tmp_path / "o.txt.kbmira").mkdir()
    (tmp_path / "o.txt.kbmira" / "notes.txt").write_text("mine")
    cfg = RescoreConfig(str(nbest), str(ref), [str(tmp_path / "no-model.pt")], str(tmp_path / "o.nbest"),
                        str(tmp_path / "o.txt"), dev_nbest=str(nbest), dev_src=str(ref), dev_ref=str(ref),
                        tuner="kbmira", device="cpu")
    with pytest.raises(PhraseRescoreError, match="notes.txt"):
        rescore_nbest(cfg)                   # before the (missing) model is read
    assert (tmp_path / "o.txt.kbmira" / "notes.txt").read_text() == "mine"
    assert not (tmp_path / "o.nbest.dev").exists()

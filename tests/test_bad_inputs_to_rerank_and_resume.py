"""Hostile inputs to ``rescore-nbest``'s re-ranking tuners (pipeline/rescore_nbest.py,
moses_integration/nbest_tuning.py) and to the shared training loop's resume (pipeline/training_loop.py).

Each bad input is one ``PhraseRescoreError`` naming the user's file (and line) before anything is written;
the user's files stay byte for byte as they were.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import zipfile
from pathlib import Path

import pytest
import torch
from _real_moses import needs_moses
from _rerank_data import START, VOCAB, write_dev
from click.testing import CliRunner

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.reading import read_text_lines
from phrase_rescore.moses_integration.nbest_tuning import nbest_layout, require_tuner, reranked_bleu, tune_nbest_moses
from phrase_rescore.pipeline.rescore_nbest import tune_rerank_weights

pytestmark = pytest.mark.usefixtures("one_thread")
N_SENT = 6
START_INI = "[weight]\nLM0= 1\nWordPenalty0= 0\nTranslationModel0= 0.3 0.3\nCSLM0= 0\nSeq2Seq0= 0.1\n"


@pytest.fixture(scope="module")
def model_pt(tmp_path_factory) -> Path:
    """A tiny untrained Seq2Seq checkpoint over the dev lists' words."""
    from phrase_rescore.pipeline.model.checkpoint import save_checkpoint
    from phrase_rescore.pipeline.model.seq2seq import Seq2Seq, Seq2SeqConfig
    from phrase_rescore.pipeline.vocab import Vocab, Vocabularies

    path = tmp_path_factory.mktemp("model") / "m.pt"
    vocabs = Vocabularies(Vocab(["<eos>", "<unk>", "s"]), Vocab(["<eos>", "<unk>", *VOCAB]))
    torch.manual_seed(0)
    save_checkpoint(path, Seq2Seq(Seq2SeqConfig(3, len(VOCAB) + 2, emb_dim=4, hidden_dim=4, num_layers=1)).eval(),
                    vocabs)
    return path


@pytest.fixture
def dev(tmp_path, model_pt, monkeypatch) -> Path:
    """A folder with dev.nbest, dev.ref, dev.src, start.ini and the model."""
    monkeypatch.setenv("PHRASE_RESCORE_QUIET", "1")
    write_dev(tmp_path, n_sent=N_SENT, n_hyp=4)
    (tmp_path / "dev.src").write_text("s\n" * N_SENT)
    (tmp_path / "start.ini").write_text(START_INI)
    shutil.copy(model_pt, tmp_path / "m.pt")
    return tmp_path


def _hashes(folder: Path) -> dict[str, str]:
    return {os.fspath(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def rescore(folder: Path, *extra: str, tuner: str = "embedded", nbest: str = "dev.nbest", out_nbest="o.nbest",
            out_1best="o.txt", weights="start.ini", dev_nbest="dev.nbest", ref="dev.ref", env=None):
    """``phrase-rescore rescore-nbest`` in ``folder`` (paths relative to it); (exit code, output lines)."""
    from phrase_rescore.app.cli import main

    p = lambda name: os.fspath(folder / name)  # noqa: E731
    argv = ["--quiet", "rescore-nbest", p(nbest), p("dev.src"), "--model", p("m.pt"), "--out-nbest", p(out_nbest),
            "--out-1best", p(out_1best), "--weights", p(weights), "--dev-nbest", p(dev_nbest), "--dev-src",
            p("dev.src"), "--dev-ref", p(ref), "--tuner", tuner, "--mert-restarts", "2", "--device", "cpu", *extra]
    r = CliRunner().invoke(main, argv, env=env)
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)   # no traceback
    return r.exit_code, r.output.strip().splitlines()


def refused(folder: Path, before: dict, match: str, **kw) -> str:
    """The command fails with one line matching ``match``, every file as it was and nothing new written."""
    code, lines = rescore(folder, **kw)
    assert code == 1 and len(lines) == 1 and lines[0].startswith("error: "), lines
    assert __import__("re").search(match, lines[0]), lines[0]
    assert _hashes(folder) == before
    return lines[0]


# --- outputs whose names rescore-nbest derives: OUT_NBEST.dev, OUT_1BEST.weights.ini, OUT_1BEST.<tuner>/

def test_a_dev_list_named_like_the_rescored_dev_output_is_refused_not_overwritten(dev):
    shutil.copy(dev / "dev.nbest", dev / "o.nbest.dev")
    refused(dev, _hashes(dev), r"o\.nbest\.dev.*--dev-nbest", dev_nbest="o.nbest.dev")


def test_starting_weights_named_like_the_tuned_weights_are_refused_not_overwritten(dev):
    shutil.move(dev / "start.ini", dev / "o.txt.weights.ini")
    refused(dev, _hashes(dev), r"o\.txt\.weights\.ini.*--weights", weights="o.txt.weights.ini")


def test_a_1best_named_like_the_rescored_dev_output_is_refused(dev):
    refused(dev, _hashes(dev), r"o\.nbest\.dev.*one file", out_1best="o.nbest.dev")


def _fake_moses(folder: Path, progs=("extractor", "mert", "kbmira")) -> Path:
    """A MOSES_HOME whose programs fail loudly if they are ever run."""
    for name in progs:
        p = folder / "bin" / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("#!/bin/sh\necho 'must not run' >&2\nexit 9\n")
        p.chmod(0o755)
    return folder


def test_a_tuner_folder_of_ours_that_holds_the_dev_reference_is_refused(dev, tmp_path_factory):
    from phrase_rescore.core.outdir import claim_output_dir
    from phrase_rescore.moses_integration.nbest_tuning import WORK_COMMAND

    home = _fake_moses(tmp_path_factory.mktemp("moses"))
    claim_output_dir(dev / "o.txt.mert", "the tuner's folder", WORK_COMMAND)   # an earlier run's folder
    shutil.move(dev / "dev.ref", dev / "o.txt.mert" / "dev.ref")                # where the user then put the refs
    refused(dev, _hashes(dev), r"o\.txt\.mert.*holds the input --dev-ref", tuner="mert", ref="o.txt.mert/dev.ref",
            env={"MOSES_HOME": os.fspath(home)})


# --- the dev set: references, n-best list, starting weights

@pytest.mark.parametrize("lines", [N_SENT - 1, N_SENT + 2])
def test_references_that_are_not_one_per_dev_sentence_are_refused(dev, lines):
    refs = read_text_lines(dev / "dev.ref")
    (dev / "dev.ref").write_text("".join(r + "\n" for r in (refs + ["w1 w2"] * 2)[:lines]))
    refused(dev, _hashes(dev), rf"dev\.ref: .*{lines} lines.*dev\.src.*{N_SENT}")


def test_a_feature_named_twice_is_refused_naming_the_line(dev):
    text = (dev / "dev.nbest").read_text().replace(" CSLM0=", " LM0=")
    (dev / "dev.nbest").write_text(text)
    refused(dev, _hashes(dev), r"dev\.nbest:1: .*'LM0' twice")
    with pytest.raises(PhraseRescoreError, match=r"dev\.nbest:1: .*'LM0' twice"):
        nbest_layout(dev / "dev.nbest", N_SENT)
    with pytest.raises(PhraseRescoreError, match=r"dev\.nbest:1: .*'LM0' twice"):
        tune_rerank_weights(dev / "dev.nbest", dev / "dev.ref", None, restarts=1)


def test_a_feature_without_values_is_refused_naming_the_line(dev):
    text = (dev / "dev.nbest").read_text().replace("WordPenalty0= ", "Empty0= WordPenalty0= ")
    (dev / "dev.nbest").write_text(text)
    refused(dev, _hashes(dev), r"dev\.nbest:1: .*'Empty0' has no values")


def test_an_empty_dev_list_is_refused_naming_it_not_the_rescored_copy(dev):
    (dev / "dev.nbest").write_bytes(b"")
    line = refused(dev, _hashes(dev), r"dev\.nbest: .*no hypotheses")
    assert "o.nbest.dev" not in line


def test_starting_weights_with_the_wrong_number_of_values_are_refused_naming_the_file(dev):
    (dev / "start.ini").write_text(START_INI.replace("TranslationModel0= 0.3 0.3", "TranslationModel0= 0.3"))
    refused(dev, _hashes(dev), r"start\.ini: .*1 value.*'TranslationModel0', which has 2")
    # the same number of values in all, in the wrong places: not silently shifted onto other features
    init = {"LM0": [1.0, 0.0], "WordPenalty0": [], "TranslationModel0": [0.3, 0.3], "CSLM0": [0.0]}
    with pytest.raises(PhraseRescoreError, match="'LM0'"):
        tune_rerank_weights(dev / "dev.nbest", dev / "dev.ref", init, restarts=1)



def test_a_test_list_feature_without_a_tuned_weight_is_refused_naming_the_line(dev):
    lines = (dev / "dev.nbest").read_text().splitlines(keepends=True)
    lines[2] = lines[2].replace(" CSLM0=", " Extra0= 1 CSLM0=")
    (dev / "test.nbest").write_text("".join(lines))
    code, out = rescore(dev, nbest="test.nbest")
    assert code == 1 and len(out) == 1 and __import__("re").search(r"test\.nbest:3: .*'Extra0'", out[0]), out
    assert not (dev / "o.nbest").exists() and not (dev / "o.txt").exists()


# --- the Moses installation

def test_a_moses_home_without_bin_mert_is_one_error_that_offers_the_embedded_tuner(dev, tmp_path_factory):
    home = _fake_moses(tmp_path_factory.mktemp("moses"), progs=("extractor",))
    line = refused(dev, _hashes(dev), r"bin/mert", tuner="mert", env={"MOSES_HOME": os.fspath(home)})
    assert "--tuner embedded" in line and "--backend" not in line


def test_the_tuners_need_only_moses_extractor_and_the_tuner_itself(tmp_path):
    home = _fake_moses(tmp_path, progs=("extractor", "kbmira"))
    assert require_tuner("kbmira", home).tool("kbmira") == home / "bin" / "kbmira"
    with pytest.raises(PhraseRescoreError, match=r"bin/mert.*--tuner embedded"):
        require_tuner("mert", home)


@needs_moses
def test_moses_mert_reads_crlf_references_as_the_reported_bleu_does(tmp_path):
    nbest, ref = write_dev(tmp_path, n_sent=N_SENT, n_hyp=4)
    ref.write_bytes(ref.read_bytes().replace(b"\n", b"\r\n"))
    before = ref.read_bytes()
    res = tune_nbest_moses(nbest, ref, START, require_tuner("mert"), tmp_path / "w", tuner="mert", restarts=2)
    assert res.tool_bleu == pytest.approx(reranked_bleu(nbest, read_text_lines(ref), res.weights), abs=1e-4)
    assert ref.read_bytes() == before


# --- training: resume

def _cslm_run(tmp: Path, steps: int, resume: bool = False):
    from _trainer_runs import run_cslm

    return run_cslm(tmp, "out", steps, resume)


def test_resume_refuses_a_last_pt_with_a_damaged_byte(tmp_path, monkeypatch):
    monkeypatch.setenv("PHRASE_RESCORE_QUIET", "1")
    _cslm_run(tmp_path, 20)
    last = tmp_path / "out" / "last.pt"
    with zipfile.ZipFile(last) as z:      # a byte inside the first weight tensor's stored data
        info = next(i for i in z.infolist() if "/data/" in i.filename and i.file_size >= 16)
    data = bytearray(last.read_bytes())
    name_len, extra_len = int.from_bytes(data[info.header_offset + 26:info.header_offset + 28], "little"), \
        int.from_bytes(data[info.header_offset + 28:info.header_offset + 30], "little")
    data[info.header_offset + 30 + name_len + extra_len + 5] ^= 0x40
    last.write_bytes(bytes(data))
    torch.load(last, weights_only=True)       # torch itself reads it without a word
    with pytest.raises(PhraseRescoreError, match=r"last\.pt: .*damaged"):
        _cslm_run(tmp_path, 40, resume=True)
    assert last.read_bytes() == bytes(data)


@pytest.mark.parametrize("key", ["optimizer", "log"])
def test_resume_refuses_a_last_pt_whose_training_state_lacks_a_part(tmp_path, monkeypatch, key):
    monkeypatch.setenv("PHRASE_RESCORE_QUIET", "1")
    _cslm_run(tmp_path, 20)
    last = tmp_path / "out" / "last.pt"
    ck = torch.load(last, weights_only=True)
    del ck["train_state"][key]             # a hand-edited or foreign last.pt
    torch.save(ck, last)
    before = last.read_bytes()
    with pytest.raises(PhraseRescoreError, match=rf"last\.pt: cannot resume: last\.pt's training state lacks {key}"):
        _cslm_run(tmp_path, 40, resume=True)
    assert last.read_bytes() == before


def test_an_interrupted_run_resumes_to_the_uninterrupted_runs_weights(tmp_path, monkeypatch):
    import phrase_rescore.pipeline.train_cslm as tc

    monkeypatch.setenv("PHRASE_RESCORE_QUIET", "1")
    straight = tmp_path / "straight"
    straight.mkdir()
    _cslm_run(straight, 60)
    real, calls = tc.cslm_perplexity, []

    def interrupted(*a, **k):             # Ctrl-C during the third validation, after 60 updates
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(tc, "cslm_perplexity", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _cslm_run(tmp_path, 60)
    monkeypatch.setattr(tc, "cslm_perplexity", real)
    out = tmp_path / "out"
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
    assert torch.load(out / "last.pt", weights_only=True)["train_state"]["step"] == 40
    _cslm_run(tmp_path, 60, resume=True)
    for name in ("last.pt", "model.pt"):
        a = torch.load(out / name, weights_only=True)["state_dict"]
        b = torch.load(straight / "out" / name, weights_only=True)["state_dict"]
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert (out / "train_log.csv").read_text().count("\n") == (straight / "out" / "train_log.csv").read_text().count("\n")

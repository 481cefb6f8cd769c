"""No silent wrong numbers, and no failure after hours that was visible at the start: what `run` refuses before its
first stage (every problem at once), what prepare refuses before training, and what moses-ini refuses. One refusal
per test, on the tiny system of tests/_tiny_smt.py."""
from __future__ import annotations

import gzip

import pytest
from _tiny_smt import make_tiny_system
from click.testing import CliRunner

from phrase_rescore.app.cli import main

pytestmark = pytest.mark.usefixtures("one_thread")

WORKFLOW = """
[workflow]
name = "tiny"
stages = ["prepare", "train", "score", "train-cslm", "moses-ini", "tune", "evaluate"]

[common]
backend = "embedded"
threads = 1

[prepare]
vocab_size = 3
valid_fraction = 0.2

[train]
model_overrides = { emb_dim = 4, hidden_dim = 8, maxout_units = 4, rank = 4 }
batch_size = 4
max_steps = 4
valid_every = 2

[train-cslm]
max_steps = 4

[tune]
max_iterations = 1
nbest = 5

[evaluate]
target_lang = "none"
bootstrap_samples = 20
"""


@pytest.fixture(autouse=True)
def no_moses(monkeypatch):
    monkeypatch.delenv("MOSES_HOME", raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")


@pytest.fixture
def tiny(tmp_path):
    s = make_tiny_system(tmp_path / "smt")
    d = tmp_path / "smt"
    (d / "corpus.tgt").write_text("the house is small\nthe house\nhouse is small\nsmall home\n")
    return {"ini": s["ini"], "src": s["src"], "ref": s["ref"], "table": d / "phrase-table", "lm": d / "lm.arpa",
            "dir": d, "corpus_tgt": d / "corpus.tgt"}


def _inputs(t, **more) -> dict:
    ins = {"phrase_table": t["table"], "moses_ini": t["ini"], "lm": t["lm"], "dev_src_tok": t["src"],
           "dev_ref": t["ref"], "dev_ref_tok": t["ref"], "test_src_tok": t["src"], "test_ref": t["ref"],
           "train_tgt_tok": t["corpus_tgt"], **more}
    return {k: v for k, v in ins.items() if v is not None}


def _run(tmp_path, inputs: dict, workflow: str = WORKFLOW, sets=()):
    wf = tmp_path / "wf.toml"
    wf.write_text(workflow + "\n[inputs]\n" + "".join(f'{k} = "{v}"\n' for k, v in inputs.items()))
    work = tmp_path / "work"
    args = ["--quiet", "run", str(wf), "--workdir", str(work)]
    for s in sets:
        args += ["--set", s]
    r = CliRunner().invoke(main, args)
    return r, work


def _nothing_ran(work) -> bool:
    return not work.exists() or not any(p.is_dir() for p in work.iterdir())


def test_backend_moses_without_a_moses_fails_before_the_first_stage(tiny, tmp_path):
    r, work = _run(tmp_path, _inputs(tiny), sets=["common.backend=moses"])
    assert r.exit_code == 1 and _nothing_ran(work)
    assert "[tune], [evaluate] backend = \"moses\": no Moses installation found" in r.output


def test_rerank_tuner_mert_without_a_moses_fails_before_the_first_stage(tiny, tmp_path):
    r, work = _run(tmp_path, _inputs(tiny), sets=["evaluate.rerank_tuner=mert"])
    assert r.exit_code == 1 and _nothing_ran(work)
    assert "[evaluate] rerank_tuner = mert" in r.output


def test_every_missing_input_is_reported_at_once(tiny, tmp_path):
    r, work = _run(tmp_path, _inputs(tiny, train_tgt_tok=None, dev_ref_tok=None, lm=tmp_path / "gone.arpa"))
    assert r.exit_code == 1 and _nothing_ran(work)
    assert "3 problems" in r.output
    assert "missing input: stage train-cslm needs 'train_tgt_tok'" in r.output
    assert "missing input: stages tune-baseline, tune-rnn, tune-rnn-wp need 'dev_ref_tok'" in r.output
    assert f"{tmp_path / 'gone.arpa'}: input lm not found" in r.output


def test_a_model_file_the_moses_ini_names_that_is_gone_is_refused_up_front(tiny, tmp_path):
    ini = tiny["ini"]
    ini.write_text(ini.read_text().replace("Distortion\n", "Distortion\nLexicalReordering name=LexicalReordering0 "
                                           "num-features=6 type=wbe-msd-bidirectional-fe-allff input-factor=0 "
                                           f"output-factor=0 path={tmp_path}/reordering-table.gz\n")
                   .replace("Distortion0= 0.3\n", "Distortion0= 0.3\nLexicalReordering0= 0.3 0.3 0.3 0.3 0.3 0.3\n"))
    r, work = _run(tmp_path, _inputs(tiny))
    assert r.exit_code == 1 and _nothing_ran(work)
    assert (f"the reordering table of LexicalReordering0 in {ini} is {tmp_path}/reordering-table.gz, which does not "
            "exist: the decoder loads it when tune starts") in r.output


def test_a_feature_the_embedded_decoder_lacks_is_refused_up_front(tiny, tmp_path):
    ini = tiny["ini"]
    ini.write_text(ini.read_text().replace("Distortion\n", "Distortion\nOpSequenceModel name=OpSequenceModel0 "
                                           "num-features=5 path=/x\n")
                   .replace("Distortion0= 0.3\n", "Distortion0= 0.3\nOpSequenceModel0= 0.1 0.1 0.1 0.1 0.1\n"))
    r, work = _run(tmp_path, _inputs(tiny))
    assert r.exit_code == 1 and _nothing_ran(work)
    assert ("[tune], [evaluate] backend = \"embedded\": " in r.output
            and "feature OpSequenceModel (OpSequenceModel0) is not implemented by the embedded decoder" in r.output)


def test_a_case_that_contradicts_the_systems_truecasing_is_refused(tiny, tmp_path):
    model = tmp_path / "truecase-model"
    model.write_text("the (3/4) The (1)\n")
    r, work = _run(tmp_path, _inputs(tiny, truecase_model_src=model, truecase_model_tgt=model),
                   sets=["evaluate.case=none"])
    assert r.exit_code == 1 and _nothing_ran(work)
    assert ("[evaluate] case = 'none' contradicts the system, which is truecase-cased (truecasing models are given "
            "in [inputs] (truecase_model_src, truecase_model_tgt)): the output would be scored as it is") in r.output


def test_an_unset_case_is_the_one_the_tokenized_text_shows(tiny, tmp_path):
    """A hand-written workflow with tokenized inputs and no [evaluate] case: truecased dev references make the
    Table detruecase (the default, none, would score truecased output against cased references)."""
    from phrase_rescore.app.preflight import resolve_preprocessing
    from phrase_rescore.app.stages import default_registry
    from phrase_rescore.app.workflow import load_workflow, plan

    ref = tmp_path / "dev.tok.fr"
    ref.write_text("".join(f"{w} maison est petite .\n" for w in ["la", "une", "Paris", "cette"] * 6))
    data = {"workflow": {"stages": ["evaluate"]}, "inputs": {"tuned_baseline": str(tiny["ini"]),
            "phrase_table": str(tiny["table"]),
            "test_src_tok": str(tiny["src"]), "test_ref": str(tiny["ref"]), "dev_ref_tok": str(ref)}}
    reg = default_registry()
    wf = load_workflow(None, reg, data=data)
    notes = []
    assert resolve_preprocessing(wf, plan(wf, reg), {}, notes.append) == []
    assert wf.params["evaluate"]["case"] == "truecase"
    assert notes == ["[evaluate] case = 'truecase', the system's: [inputs] dev_ref_tok, the tokenized dev references: "
                     "only 6 of 24 sentences start with a capital letter, as truecased text does"]


def test_a_shortlist_holding_every_word_is_refused_before_training(tiny, tmp_path):
    r, work = _run(tmp_path, _inputs(tiny), sets=["prepare.vocab_size=20"])
    assert r.exit_code == 1
    assert "[prepare] vocab_size = 20: every one of the 5 phrase pairs has 0 words outside the shortlists" in r.output
    assert "unknown-word column would be exp(0) on every line" in r.output
    assert not (work / "train").exists()


def test_a_shortlist_holding_every_word_is_fine_without_the_wp_configuration(tiny, tmp_path):
    workflow = WORKFLOW.replace('stages = ["prepare", "train", "score", "train-cslm", "moses-ini", "tune", "evaluate"]',
                                'stages = ["prepare", "train"]')
    workflow = workflow[:workflow.index("[common]")] + workflow[workflow.index("[prepare]"):workflow.index("[train-cslm]")]
    r, work = _run(tmp_path, {"phrase_table": tiny["table"]}, workflow, sets=["prepare.vocab_size=20"])
    assert r.exit_code == 0, r.output
    assert (work / "train" / "model" / "model.pt").exists()


def test_moses_ini_refuses_a_constant_column_naming_it(tiny, tmp_path):
    rescored = tmp_path / "phrase-table.rnn-wp.gz"
    lines = tiny["table"].read_text().splitlines()
    with gzip.open(rescored, "wt") as f:
        for i, line in enumerate(lines):
            src, tgt, scores, rest = line.split(" ||| ", 3)
            f.write(f"{src} ||| {tgt} ||| {scores} 0.{i + 1} 1 ||| {rest}\n")
    out = tmp_path / "moses.rnn-wp.ini"
    r = CliRunner().invoke(main, ["moses-ini", str(tiny["ini"]), "--table", str(rescored), "--out", str(out)])
    assert r.exit_code == 1 and not out.exists()
    assert f"{rescored}: added column 2 of 2, score 6 of the line, is 1 on every one of the 5 lines" in r.output
    assert "lower [prepare] vocab_size (prepare --vocab-size) below the vocabulary" in r.output

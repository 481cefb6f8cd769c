"""Sutskever et al.'s rows in a workflow: the deep LSTM trained (source reversed, and forward), translating the
test set itself (beam 12, beam 2, the forward model, the ensemble), re-ranking the tuned baseline's n-best
lists (the paper's even average; weights retuned by MERT on the dev list) and, with the CSLM, the +RNN+WP
system's (the whole stack); evaluate scores every row beside the baseline."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from phrase_rescore.app.cli import main
from phrase_rescore.app.stages import default_registry
from phrase_rescore.app.workflow import load_workflow, plan

pytestmark = pytest.mark.usefixtures("one_thread")

ROOT = Path(__file__).resolve().parent.parent
NEW = ["train-seq2seq", "train-seq2seq-forward", "translate-seq2seq", "nbest-baseline", "nbest-rnn-wp", "rerank-seq2seq",
       "rerank-stack"]

WORKFLOW = """
[workflow]
name = "seq2seq-rows"
stages = ["train-seq2seq", "train-seq2seq-forward", "translate-seq2seq", "nbest", "rerank-seq2seq", "train-cslm",
          "rerank-stack", "evaluate"]

[common]
backend = "embedded"
threads = 1

[train-seq2seq]
emb_dim = 8
hidden_dim = 8
epochs = 2.0
batch_size = 8
valid_size = 4

[translate-seq2seq]
dev = true
batch_size = 2

[nbest]
nbest_size = 5

[rerank-seq2seq]
rerank_restarts = 2

[rerank-stack]
rerank_restarts = 2

[train-cslm]
emb_dim = 4
hidden1 = 8
hidden2 = 8
max_steps = 10
valid_every = 5

[evaluate]
target_lang = "none"
bootstrap_samples = 20
"""

SRC = "das haus ist klein\ndas haus\nhaus ist klein\nklein haus\n"
TGT = "the house is small\nthe house\nhouse is small\nsmall house\n"


def _workflow(d: Path, text: str = WORKFLOW) -> Path:
    """The workflow over the tiny system, whose moses.ini stands for the tuned baseline and +RNN+WP."""
    from _tiny_smt import make_tiny_system

    sys_ = make_tiny_system(d / "smt")
    (d / "train.src").write_text(SRC * 8)
    (d / "train.tgt").write_text(TGT * 8)
    ins = {"tuned_baseline": sys_["ini"], "tuned_rnn_wp": sys_["ini"], "phrase_table": d / "smt" / "phrase-table",
           "lm": d / "smt" / "lm.arpa", "train_src_tok": d / "train.src", "train_tgt_tok": d / "train.tgt",
           "dev_src_tok": sys_["src"], "dev_ref_tok": sys_["ref"], "dev_ref": sys_["ref"],
           "test_src_tok": sys_["src"], "test_ref": sys_["ref"]}
    wf = d / "wf.toml"
    wf.write_text(text + "\n[inputs]\n" + "".join(f'{k} = "{v}"\n' for k, v in ins.items()))
    return wf


def _run(wf: Path, work: Path, *more: str):
    return CliRunner().invoke(main, ["--quiet", "run", str(wf), "--workdir", str(work), *more])


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    d = tmp_path_factory.mktemp("seq2seq-rows")
    r = _run(_workflow(d), d / "work")
    assert r.exit_code == 0, r.output + repr(r.exception)
    return d / "work"


@pytest.mark.parametrize("workflow", ["multi30k.toml", "rescore-existing.toml"])
def test_the_new_stages_are_off_by_default_and_run_before_evaluate_when_selected(workflow):
    reg = default_registry()
    wf = load_workflow(ROOT / "workflows" / workflow, reg)
    assert not set(NEW) & set(wf.stages)
    stages = [*wf.stages, *NEW] + (["train-cslm"] if "train-cslm" not in wf.stages else [])
    more = [] if "train_src_tok" in wf.inputs or "build-smt" in wf.stages else ['inputs.train_src_tok="src.tok"']
    order = plan(load_workflow(ROOT / "workflows" / workflow, reg,
                               overrides=["workflow.stages=" + repr(stages).replace("'", '"'), *more]), reg).order
    at = {s: i for i, s in enumerate(order)}
    assert at["train-seq2seq"] < at["translate-seq2seq"] < at["evaluate"]
    assert at["tune-baseline"] < at["nbest-baseline"] < at["rerank-seq2seq"] < at["evaluate"]
    assert at["tune-rnn-wp"] < at["nbest-rnn-wp"] < at["rerank-stack"] < at["evaluate"]


def test_table_1_scores_every_row_of_sutskever_beside_the_baseline(ran):
    table = pd.read_csv(ran / "evaluate" / "table1.csv")
    assert list(table["configuration"]) == [   # Cho's rows of the +RNN+WP system and the CSLM, then Sutskever's
        "Baseline", "+CSLM+RNN+WP", "+RNN+WP", "LSTM (beam 12)", "LSTM small beam (beam 2)", "LSTM forward (beam 12)",
        "LSTM ensemble of 2 (beam 12)", "Baseline+LSTM even", "Baseline+LSTM", "+CSLM+LSTM+RNN+WP"]
    assert table["test_p"].isna().tolist() == [True] + [False] * 9      # each against the baseline
    assert table["dev_bleu"].notna().all()
    reranked = table[table["configuration"].isin(["Baseline+LSTM even", "Baseline+LSTM", "+CSLM+LSTM+RNN+WP"])]
    assert reranked["test_oracle_bleu"].notna().all()
    assert (reranked["test_oracle_bleu"] >= reranked["test_bleu"]).all()


def test_the_translation_rows_are_what_translate_writes(ran, tmp_path):
    rev, fwd = (ran / s / "model" / "model.pt" for s in ("train-seq2seq", "train-seq2seq-forward"))
    src = ran.parent / "smt" / "src"
    for models, beam, row in (([rev], 12, "lstm"), ([rev], 2, "lstm-beam-small"), ([fwd], 12, "lstm-forward"),
                              ([rev, fwd], 12, "lstm-ensemble")):
        out = tmp_path / f"{row}.tok"
        models = [a for m in models for a in ("-m", str(m))]
        r = CliRunner().invoke(main, ["--quiet", "translate", str(src), *models, "-o", str(out), "--beam", str(beam),
                                      "--device", "cpu"])
        assert r.exit_code == 0, r.output
        assert out.read_bytes() == (ran / "translate-seq2seq" / f"test.{row}.tok").read_bytes(), row


def test_the_even_row_is_rescore_nbests_even_average(ran, tmp_path):
    d = ran / "rerank-seq2seq"
    out = tmp_path / "even.1best"
    r = CliRunner().invoke(main, ["--quiet", "rescore-nbest", str(ran / "nbest-baseline" / "lists" / "test.nbest"), str(ran.parent / "smt" / "src"),
                                  "-m", str(ran / "train-seq2seq" / "model" / "model.pt"), "--out-nbest",
                                  str(tmp_path / "n"), "--out-1best", str(out), "--device", "cpu"])
    assert r.exit_code == 0, r.output
    assert out.read_text() == (d / "test.even.tok").read_text()


def test_the_stack_retunes_the_cslm_and_lstm_weights_on_the_dev_list(ran):
    from phrase_rescore.moses_integration.moses_ini import read_moses_ini
    from phrase_rescore.moses_integration.nbest import read_nbest

    d = ran / "rerank-stack"
    weights = read_moses_ini(d / "test.stack.tok.weights.ini").weights
    assert {"CSLM0", "Seq2Seq0", "LM0", "TranslationModel0"} <= set(weights)
    first = next(iter(read_nbest(d / "test.stack.nbest")))
    assert [n for n, _ in first.features][-2:] == ["CSLM0", "Seq2Seq0"]


def test_evaluate_refuses_translation_rows_without_dev_when_it_scores_dev(tmp_path):
    r = _run(_workflow(tmp_path, WORKFLOW.replace("dev = true", "dev = false")), tmp_path / "work")
    assert r.exit_code != 0
    assert "has no dev translation" in r.output and "dev = true" in r.output

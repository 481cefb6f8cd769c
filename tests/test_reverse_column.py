"""The reverse model p(e|f) in a workflow: prepare-reverse and train-reverse make it as prepare and train make
the forward one, score appends its column to both rescored tables, moses-ini gives it a weight, and
evaluate reports its hash beside the forward model's."""
from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest
from _tiny_smt import run_tiny_workflow
from click.testing import CliRunner

from phrase_rescore.app.cli import main
from phrase_rescore.moses_integration.moses_ini import read_moses_ini

pytestmark = pytest.mark.usefixtures("one_thread")

WORKFLOW = """
[workflow]
name = "reverse"
stages = ["prepare", "prepare-reverse", "train", "train-reverse", "score", "moses-ini", "tune", "evaluate"]

[common]
backend = "embedded"
threads = 1

[prepare]
vocab_size = 3           # below both vocabularies: the unknown-word column varies
valid_fraction = 0.2

[train]
model_overrides = { emb_dim = 4, hidden_dim = 8, maxout_units = 4, rank = 4 }
batch_size = 4
max_steps = 4
valid_every = 2

[score]
threads = 1

[moses-ini]
reverse_weight = 0.3

[tune]
max_iterations = 1
nbest = 5

[evaluate]
target_lang = "none"
bootstrap_samples = 20
"""


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    d = tmp_path_factory.mktemp("reverse")
    (d / "corpus.src").write_text("das haus ist klein\ndas haus\nhaus ist klein\nklein haus\n")
    (d / "corpus.tgt").write_text("the house is small\nthe house\nhouse is small\nsmall home\n")
    return run_tiny_workflow(d, WORKFLOW, train_src_tok=d / "corpus.src", train_tgt_tok=d / "corpus.tgt")


def _scores(path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.split(" ||| ")[2].split() for line in f]


def test_both_tables_end_with_the_reverse_column_as_the_score_command_writes_it(ran, tmp_path):
    work = ran["work"]
    r = CliRunner().invoke(main, ["--quiet", "score", str(work / "train" / "model" / "model.pt"),
                                  str(ran["dir"] / "smt" / "phrase-table"), "-o", str(tmp_path / "cli.gz"),
                                  "--reverse-model", str(work / "train-reverse" / "model" / "model.pt"),
                                  "--device", "cpu", "--threads", "1"])
    assert r.exit_code == 0, r.output
    wp, rnn = _scores(work / "score" / "phrase-table.rnn-wp.gz"), _scores(work / "score" / "phrase-table.rnn.gz")
    assert gzip.open(tmp_path / "cli.gz").read() == gzip.open(work / "score" / "phrase-table.rnn-wp.gz").read()
    assert [len(s) for s in wp] == [7] * 5 and [len(s) for s in rnn] == [6] * 5
    assert [s[:5] + s[6:] for s in wp] == rnn        # +RNN: the same columns less the unknown-word one
    assert all(0 < float(s[-1]) < 1 for s in wp)     # p(e|f) of a real pair: a probability below 1


def test_reverse_model_is_prepared_on_the_swapped_table_and_corpora(ran):
    work = ran["work"]
    fwd = json.loads((work / "prepare" / "pairs" / "vocab.json").read_text())
    rev = json.loads((work / "prepare-reverse" / "pairs" / "vocab.json").read_text())
    assert rev["source"] == fwd["target"] and rev["target"] == fwd["source"]
    assert "house" in rev["source"] and "haus" in rev["target"]
    p_fwd = json.loads((work / "train" / "stage-manifest.json").read_text())["params"]
    p_rev = json.loads((work / "train-reverse" / "stage-manifest.json").read_text())["params"]
    assert p_rev == p_fwd                            # the [train] keys, followed


def test_moses_ini_weights_and_report_hashes(ran):
    work = ran["work"]
    wp = read_moses_ini(work / "moses-ini-rnn-wp" / "moses.ini")
    rnn = read_moses_ini(work / "moses-ini-rnn" / "moses.ini")
    assert wp.weights_for("TranslationModel0")[4:] == [0.2, -0.2, 0.3]
    assert rnn.weights_for("TranslationModel0")[4:] == [0.2, 0.3]
    table = pd.read_csv(work / "evaluate" / "table1.csv")
    assert list(table["configuration"]) == ["Baseline", "+RNN", "+RNN+WP"]
    assert table["reverse_model_sha256"].notna().tolist() == [False, True, True]
    assert "reverse model sha256" in (work / "evaluate" / "table1.md").read_text()


def test_reverse_preparation_must_match_but_its_training_may_set_its_own_values(ran):
    from phrase_rescore.app.stages import default_registry
    from phrase_rescore.app.workflow import load_workflow

    r = CliRunner().invoke(main, ["--quiet", "run", str(ran["wf"]), "--workdir", str(ran["work"]),
                                  "--set", "prepare-reverse.vocab_size=7"])
    assert r.exit_code != 0
    assert "[prepare-reverse] vocab_size = 7 contradicts [prepare] vocab_size = 3" in r.output
    # [train-reverse] takes [train]'s values, except those it sets itself
    wf = load_workflow(ran["wf"], default_registry(), ["train.max_steps=40", "train-reverse.seed=9",
                                                       "train-reverse.time_budget_s=60"])
    fwd, rev = wf.params["train"], wf.params["train-reverse"]
    assert (rev["seed"], rev["time_budget_s"], rev["max_steps"]) == (9, 60, 40)
    assert {k: v for k, v in rev.items() if k not in ("seed", "time_budget_s")} == \
        {k: v for k, v in fwd.items() if k not in ("seed", "time_budget_s")}

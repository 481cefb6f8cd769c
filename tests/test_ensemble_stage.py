"""The ensemble in a workflow: train-ensemble trains a second model on prepare's pairs with [train]'s settings
and the next seed, score's log p(f|e) column is the two models' mean (as ``score --ensemble-model`` writes
it), and evaluate reports the second model's hash."""
from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest
from _tiny_smt import run_tiny_workflow
from click.testing import CliRunner

from phrase_rescore.app.cli import main
from phrase_rescore.app.stages import default_registry
from phrase_rescore.app.workflow import load_workflow
from phrase_rescore.core.errors import PhraseRescoreError

pytestmark = pytest.mark.usefixtures("one_thread")

WORKFLOW = """
[workflow]
name = "ensemble"
stages = ["prepare", "train", "train-ensemble", "score", "moses-ini", "tune", "evaluate"]

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
seed = 5

[score]
threads = 1

[tune]
max_iterations = 1
nbest = 5

[evaluate]
target_lang = "none"
bootstrap_samples = 20
"""


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    return run_tiny_workflow(tmp_path_factory.mktemp("ensemble"), WORKFLOW)


def _scores(path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.split(" ||| ")[2].split() for line in f]


def test_score_writes_the_two_models_mean_as_the_score_command_does(ran, tmp_path):
    work = ran["work"]
    first, second = work / "train" / "model" / "model.pt", work / "train-ensemble" / "model" / "model.pt"
    table = ran["dir"] / "smt" / "phrase-table"
    r = CliRunner().invoke(main, ["--quiet", "score", str(first), str(table), "-o", str(tmp_path / "cli.gz"),
                                  "--ensemble-model", str(second), "--device", "cpu", "--threads", "1"])
    assert r.exit_code == 0, r.output
    wp = work / "score" / "phrase-table.rnn-wp.gz"
    assert gzip.open(tmp_path / "cli.gz").read() == gzip.open(wp).read()
    r = CliRunner().invoke(main, ["--quiet", "score", str(first), str(table), "-o", str(tmp_path / "one.gz"),
                                  "--device", "cpu", "--threads", "1"])
    assert r.exit_code == 0, r.output
    ens, one = _scores(wp), _scores(tmp_path / "one.gz")
    assert [len(s) for s in ens] == [6] * 5                  # two columns, as without the ensemble
    assert [s[:4] + s[5:] for s in ens] == [s[:4] + s[5:] for s in one]   # only log p(f|e) differs
    assert [s[4] for s in ens] != [s[4] for s in one]
    assert [s[:5] for s in ens] == _scores(work / "score" / "phrase-table.rnn.gz")


def test_second_model_trains_as_the_first_with_the_next_seed(ran):
    work = ran["work"]
    p_fwd = json.loads((work / "train" / "stage-manifest.json").read_text())["params"]
    p_ens = json.loads((work / "train-ensemble" / "stage-manifest.json").read_text())["params"]
    assert (p_fwd["seed"], p_ens["seed"]) == (5, 6)
    assert {k: v for k, v in p_ens.items() if k != "seed"} == {k: v for k, v in p_fwd.items() if k != "seed"}
    assert (work / "train" / "model" / "model.pt").read_bytes() != \
        (work / "train-ensemble" / "model" / "model.pt").read_bytes()


def test_report_gives_the_second_models_hash(ran):
    table = pd.read_csv(ran["work"] / "evaluate" / "table1.csv")
    assert list(table["configuration"]) == ["Baseline", "+RNN", "+RNN+WP"]
    assert table["ensemble_model_sha256"].notna().tolist() == [False, True, True]
    assert "ensemble model sha256" in (ran["work"] / "evaluate" / "table1.md").read_text()


@pytest.mark.parametrize("sets,seed", [
    ([], 6),                                             # [train]'s + 1
    (["train.seed=3"], 4),
    (["train-ensemble.seed=9"], 9),                      # its own value stands
])
def test_ensemble_seed_is_the_next_unless_set(ran, sets, seed):
    wf = load_workflow(ran["wf"], default_registry(), sets)
    assert wf.params["train-ensemble"]["seed"] == seed


def test_ensemble_with_the_first_models_seed_is_refused(ran):
    with pytest.raises(PhraseRescoreError, match=r"\[train-ensemble\] seed = 5 is \[train\]'s seed"):
        load_workflow(ran["wf"], default_registry(), ["train-ensemble.seed=5"])
    r = CliRunner().invoke(main, ["--quiet", "run", str(ran["wf"]), "--workdir", str(ran["work"]),
                                  "--set", "train-ensemble.seed=5"])
    assert r.exit_code != 0 and "seed = 5 is [train]'s seed" in r.output and "Traceback" not in r.output

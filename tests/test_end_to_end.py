"""A tiny workflow through every real stage (embedded backend), then reruns that skip or redo only what changed."""
from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
from click.testing import CliRunner

from phrase_rescore.app.cli import main
from phrase_rescore.app.workflow import MANIFEST

TINY = """
[workflow]
name = "tiny"
stages = ["demo-data", "build-smt", "tokenize", "prepare", "train", "score", "moses-ini", "tune", "evaluate"]

[common]
backend = "embedded"
case = "lower"
threads = 1

[demo-data]
train = 300
dev = 20
test = 25
seed = 3

[build-smt]
lm_order = 3
max_phrase_length = 4
eflomal_samplers = 1

[prepare]
vocab_size = 150
valid_fraction = 0.05

[train]
preset = "small"
model_overrides = { emb_dim = 16, hidden_dim = 32, maxout_units = 16, rank = 16 }
max_steps = 20
valid_every = 10
valid_max_pairs = 200

[tune]
max_iterations = 1
nbest = 10

[evaluate]
bootstrap_samples = 50
"""

ALL = ["demo-data", "build-smt", "tokenize", "prepare", "train", "score", "moses-ini-rnn", "moses-ini-rnn-wp",
       "tune-baseline", "tune-rnn", "tune-rnn-wp", "evaluate"]


def _run(wf, work, *args):
    r = CliRunner().invoke(main, ["--quiet", "run", str(wf), "--workdir", str(work), *args])
    assert r.exit_code == 0, r.output + repr(r.exception)
    log = json.loads((work / "run-log.json").read_text())
    print({s["name"]: round(s["wall_s"], 1) for s in log["stages"]})
    return {s["name"]: s["status"] for s in log["stages"]}, r.output


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    """The tiny workflow run once into a fresh workdir: ``(folder, status per stage, printed output)``."""
    root = tmp_path_factory.mktemp("tiny")
    (root / "tiny.toml").write_text(TINY)
    status, out = _run(root / "tiny.toml", root / "work")
    return root, status, out


@pytest.fixture
def done(first_run, tmp_path):
    """A copy of the first run's folder, for a test to rerun and change: ``(workflow file, workdir)``."""
    shutil.copytree(first_run[0], tmp_path / "tiny", symlinks=True)
    return tmp_path / "tiny" / "tiny.toml", tmp_path / "tiny" / "work"


def _ran(status):
    return [s for s, v in status.items() if v == "ran"]


def test_first_run_runs_every_stage_and_writes_the_report(first_run):
    root, status, out = first_run
    work = root / "work"
    assert list(status) == ALL and set(status.values()) == {"ran"}
    table = pd.read_csv(work / "evaluate" / "table1.csv")
    assert list(table["configuration"]) == ["Baseline", "+RNN", "+RNN+WP"]
    assert table["test_bleu"].between(0, 100).all() and table["dev_bleu"].between(0, 100).all()
    assert table["test_p"].isna().tolist() == [True, False, False]
    assert "| Baseline |" in out and "case-insensitive" in out  # the report is printed
    # the pictures: training curves and maps beside the model, MERT curves and the page beside the table
    assert sorted(p.name for p in (work / "train" / "pictures").iterdir()) == [
        "phrases.png", "training-curves.png", "words-source.png", "words-target.png"]
    page = (work / "evaluate" / "report.html").read_text(encoding="utf-8")
    assert "<td>+RNN+WP</td>" in page and page.count("data:image/png;base64,") == 5
    assert (work / "evaluate" / "tuning-curves.png").is_file()
    assert "report page: " in out and "train/pictures/phrases.png" in out and "evaluate/tuning-curves.png" in out
    # the rescored tables: the original 4 scores plus 1 and 2 columns
    ini_rnn = (work / "moses-ini-rnn" / "moses.ini").read_text()
    ini_wp = (work / "moses-ini-rnn-wp" / "moses.ini").read_text()
    assert "num-features=5" in ini_rnn and "num-features=6" in ini_wp


def test_a_rerun_with_nothing_changed_skips_every_stage(done):
    status, _ = _run(*done)
    assert list(status) == ALL and set(status.values()) == {"skipped"}


def test_a_changed_parameter_reruns_exactly_the_stages_downstream_of_it(done):
    # evaluate reruns only if the tuned system changed (MERT may reach the same weights from the new start,
    # and then its outputs are the same)
    wf, work = done
    tuned_before = json.loads((work / "tune-rnn-wp" / MANIFEST).read_text())["outputs"]
    status, _ = _run(wf, work, "--set", "moses-ini.wp_weight=-0.5")
    tuned_after = json.loads((work / "tune-rnn-wp" / MANIFEST).read_text())["outputs"]
    assert _ran(status) == ["moses-ini-rnn-wp", "tune-rnn-wp"] + (["evaluate"] if tuned_after != tuned_before else [])
    m = json.loads((work / "moses-ini-rnn-wp" / MANIFEST).read_text())
    assert m["params"]["wp_weight"] == -0.5


def test_a_damaged_intermediate_output_is_remade_and_nothing_after_it_reruns(done):
    wf, work = done
    tok = work / "tokenize" / "dev.tok.src"
    good = tok.read_bytes()
    tok.write_bytes(b"damaged\n")
    status, _ = _run(wf, work)
    assert _ran(status) == ["tokenize"]
    assert tok.read_bytes() == good


def test_from_forces_a_restart_point(done):
    status, _ = _run(*done, "--from", "evaluate")
    assert _ran(status) == ["evaluate"]


def test_a_damaged_rescored_table_is_scored_again_to_the_same_bytes(done):
    wf, work = done
    table = work / "score" / "phrase-table.rnn.gz"
    good = table.read_bytes()
    table.write_bytes(b"damaged")
    status, _ = _run(wf, work)
    assert _ran(status) == ["score"]
    assert table.read_bytes() == good


def test_drop_unk_column_gives_the_logprob_only_table(tmp_path):
    import gzip

    import pytest

    from phrase_rescore.core.errors import PhraseRescoreError
    from phrase_rescore.moses_integration.table_columns import drop_unk_column

    original = [b"a ||| x ||| 0.5 0.25 0.5 0.25 ||| 0-0 ||| 2 2 1 ||| |||",
                b"a b ||| x  y ||| 1 1 1 1",  # 3 fields, double space kept
                b"c ||| z ||| 0.1 0.2 0.3 0.4 ||| 0-0"]
    appended = [(b"0.01", b"2.718282"), (b"1e-45", b"1"), (b"0.9", b"7.389056")]
    rescored = [b"a ||| x ||| 0.5 0.25 0.5 0.25 0.01 2.718282 ||| 0-0 ||| 2 2 1 ||| |||",
                b"a b ||| x  y ||| 1 1 1 1 1e-45 1",
                b"c ||| z ||| 0.1 0.2 0.3 0.4 0.9 7.389056 ||| 0-0"]
    expected = [b"a ||| x ||| 0.5 0.25 0.5 0.25 0.01 ||| 0-0 ||| 2 2 1 ||| |||",
                b"a b ||| x  y ||| 1 1 1 1 1e-45",
                b"c ||| z ||| 0.1 0.2 0.3 0.4 0.9 ||| 0-0"]
    assert len(appended) == len(original)
    (tmp_path / "pt").write_bytes(b"\n".join(original) + b"\n")
    with gzip.open(tmp_path / "both.gz", "wb") as f:
        f.write(b"\n".join(rescored) + b"\n")
    assert drop_unk_column(tmp_path / "pt", tmp_path / "both.gz", tmp_path / "rnn.gz") == 3
    assert gzip.open(tmp_path / "rnn.gz").read() == b"\n".join(expected) + b"\n"
    # the same input gives the same bytes (no time or name in the gzip header): reruns compare by hash
    drop_unk_column(tmp_path / "pt", tmp_path / "both.gz", tmp_path / "rnn2.gz")
    assert (tmp_path / "rnn2.gz").read_bytes() == (tmp_path / "rnn.gz").read_bytes()
    # a rescored table that is not the original plus two columns is refused, naming the line
    with gzip.open(tmp_path / "bad.gz", "wb") as f:
        f.write(b"\n".join(rescored[:1] + [b"a b ||| x y ||| 1 1 1 1 1e-45 1"] + rescored[2:]) + b"\n")
    with pytest.raises(PhraseRescoreError, match=r"bad.gz:2: is not line 2 of .*pt with two score columns"):
        drop_unk_column(tmp_path / "pt", tmp_path / "bad.gz", tmp_path / "x.gz")
    with gzip.open(tmp_path / "short.gz", "wb") as f:
        f.write(b"\n".join(rescored[:2]) + b"\n")
    with pytest.raises(PhraseRescoreError, match=r"pt:3: has more lines than the rescored table"):
        drop_unk_column(tmp_path / "pt", tmp_path / "short.gz", tmp_path / "x.gz")
    # with the reverse model's column last, the +RNN table keeps it and drops the unknown-word column only
    with gzip.open(tmp_path / "three.gz", "wb") as f:
        f.write(b"\n".join(r.replace(b" ||| 0-0", b" 0.125 ||| 0-0") if r.count(b"|||") > 2 else r + b" 0.5"
                           for r in rescored) + b"\n")
    assert drop_unk_column(tmp_path / "pt", tmp_path / "three.gz", tmp_path / "rev.gz", appended=3) == 3
    assert gzip.open(tmp_path / "rev.gz").read().splitlines() == [
        b"a ||| x ||| 0.5 0.25 0.5 0.25 0.01 0.125 ||| 0-0 ||| 2 2 1 ||| |||",
        b"a b ||| x  y ||| 1 1 1 1 1e-45 0.5",
        b"c ||| z ||| 0.1 0.2 0.3 0.4 0.9 0.125 ||| 0-0"]
    with pytest.raises(PhraseRescoreError, match=r"both.gz:1: is not line 1 of .*pt with three score columns"):
        drop_unk_column(tmp_path / "pt", tmp_path / "both.gz", tmp_path / "x.gz", appended=3)

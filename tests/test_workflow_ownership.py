"""The workflow runner deletes only what it wrote: folders in the way and inputs in stage folders are refused."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from _workflow_toy import BASE, CALLS, registry
from click.testing import CliRunner

from phrase_rescore.app.cli import main
from phrase_rescore.app.workflow import STAGE_MARKER, load_workflow, run_workflow
from phrase_rescore.core.errors import PhraseRescoreError

FULL = {"workflow": {"stages": ["make", "double", "squares", "sum"]}}
FROM_INPUT = {"workflow": {"stages": ["double", "squares", "sum"]}}  # numbers comes from [inputs]


def run(work: Path, data=BASE, sets=()):
    CALLS.clear()
    wf = load_workflow(None, registry(), sets, data=data)
    return {r.name: r.status for r in run_workflow(wf, registry(), work, echo=None)}


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _user_folder(work):  # a folder of the user's named like a stage
    (work / "double").mkdir(parents=True)
    (work / "double" / "my-results.txt").write_text("keep me\n")
    return FULL, {}


def _user_file(work):  # a file named like a stage
    work.mkdir()
    (work / "make").write_text("keep me\n")
    return FULL, {}


def _workdir_is_a_file(work):
    work.write_text("keep me\n")
    return FULL, {}


def _input_in_user_folder(work):  # the README's case: an [inputs] file in a folder named like a stage
    (work / "double").mkdir(parents=True)
    (work / "double" / "numbers.txt").write_text("5\n")
    return FROM_INPUT, {"numbers": str(work / "double" / "numbers.txt")}


def _input_in_stage_folder(work):  # an [inputs] file put into a folder of the runner's
    run(work, FULL)
    (work / "squares" / "numbers.txt").write_text("5\n")
    return FROM_INPUT, {"numbers": str(work / "squares" / "numbers.txt")}


def _input_contains_stage_folder(work):
    run(work, FULL)
    return FROM_INPUT, {"numbers": str(work)}


def _input_is_run_log(work):
    run(work, FULL)
    return FROM_INPUT, {"numbers": str(work / "run-log.json")}


def _user_run_log(work):
    work.mkdir()
    (work / "run-log.json").write_text("my notes on the runs\n")
    return FULL, {}


def _foreign_marker(work):  # a stage folder copied under another stage's name
    run(work, FULL)
    (work / "sum").rename(work / "double-copy")
    (work / "double").rename(work / "sum")
    return FULL, {}


@pytest.mark.parametrize("setup,message", [
    (_user_folder, r"double: stage double writes into this folder, but it was not created by the workflow runner "
                   r"\(no \.phrase-rescore-stage\) and holds my-results\.txt"),
    (_user_file, r"make: stage make writes into this folder, but a file or link of that name is in the way"),
    (_workdir_is_a_file, r"work: the workdir is a file; expected a folder"),
    (_input_in_user_folder, r"double: stage double writes into this folder, but it was not created"),
    (_input_in_stage_folder, r"numbers\.txt: \[inputs\] numbers lies inside the folder of stage squares"),
    (_input_contains_stage_folder, r"\[inputs\] numbers contains the folder of stage double"),
    (_input_is_run_log, r"run-log\.json: \[inputs\] numbers is the run log the workflow runner rewrites"),
    (_user_run_log, r"run-log\.json: the workflow runner writes its run log here, but this file is not one"),
    (_foreign_marker, r"sum: stage sum writes into this folder, but it was not created by the workflow runner"),
])
def test_what_the_runner_did_not_write_is_refused_before_anything_runs(tmp_path, setup, message):
    work = tmp_path / "work"
    data, inputs = setup(work)
    before = snapshot(tmp_path)
    with pytest.raises(PhraseRescoreError, match=message):
        run(work, {**data, "inputs": inputs})
    assert CALLS == []  # no stage ran
    assert snapshot(tmp_path) == before  # nothing was deleted, written or created


def test_inputs_in_the_workdir_and_folders_of_other_stages_are_fine(tmp_path):
    work = tmp_path / "work"
    (work / "cubes").mkdir(parents=True)  # a folder named like a stage this workflow does not select
    (work / "cubes" / "mine.txt").write_text("keep me\n")
    (work / "numbers.txt").write_text("1\n2\n")
    status = run(work, {**FROM_INPUT, "inputs": {"numbers": str(work / "numbers.txt")}})
    assert set(status.values()) == {"ran"}
    assert (work / "cubes" / "mine.txt").read_text() == "keep me\n"
    assert (work / "numbers.txt").read_text() == "1\n2\n"
    assert (work / "sum" / "total" / "value.txt").read_text() == "11\n"  # doubled 2 + 4, squares 1 + 4


def test_empty_folder_is_taken_over_and_marked(tmp_path):
    work = tmp_path / "work"
    (work / "double").mkdir(parents=True)
    run(work, FULL)
    marker = json.loads((work / "double" / STAGE_MARKER).read_text())
    assert marker["stage"] == "double"
    assert (work / "double" / "doubled.txt").read_text() == "2\n4\n6\n"


def test_a_stage_folder_without_the_marker_is_not_ours_even_with_a_manifest(tmp_path):
    """Only the marker proves a folder is the runner's: a manifest can be copied in by anyone."""
    work = tmp_path / "work"
    run(work, FULL)
    (work / "double" / STAGE_MARKER).unlink()
    before = sorted(p.name for p in (work / "double").iterdir())
    with pytest.raises(PhraseRescoreError, match=r"double.*no \.phrase-rescore-stage"):
        run(work, FULL, sets=["make.n=4"])
    assert sorted(p.name for p in (work / "double").iterdir()) == before
    assert (work / "double" / "doubled.txt").read_text() == "2\n4\n6\n"


def test_cli_run_in_a_folder_with_a_users_stage_named_folder(tmp_path, monkeypatch):
    """``phrase-rescore run WF --workdir .`` where ./score/ is the user's: an error, and the folder intact."""
    monkeypatch.chdir(tmp_path)
    Path("model.pt").write_bytes(b"not a checkpoint")
    Path("table.txt").write_text("a ||| b ||| 0.5 0.5 0.5 0.5\n")
    Path("score").mkdir()
    Path("score/results-of-last-week.txt").write_text("irreplaceable\n")
    Path("wf.toml").write_text('[workflow]\nstages = ["score"]\n[inputs]\nmodel = "model.pt"\n'
                               'phrase_table = "table.txt"\n')
    r = CliRunner().invoke(main, ["run", "wf.toml", "--workdir", "."])
    assert r.exit_code == 1, r.output
    assert "error: " in r.output and "stage score writes into this folder, but it was not created" in r.output
    assert Path("score/results-of-last-week.txt").read_text() == "irreplaceable\n"
    assert sorted(p.name for p in Path("score").iterdir()) == ["results-of-last-week.txt"]


def test_files_the_stage_did_not_write_survive_its_reruns(tmp_path):
    work = tmp_path / "work"
    run(work, FULL)
    (work / "double" / "notes.txt").write_text("mine\n")        # beside a stage's output
    (work / "sum" / "total" / "notes.txt").write_text("mine\n")  # inside a directory output
    assert run(work, FULL, sets=["make.n=4"]) == dict.fromkeys(FULL["workflow"]["stages"], "ran")
    assert (work / "double" / "doubled.txt").read_text() == "2\n4\n6\n8\n"
    assert (work / "sum" / "total" / "value.txt").read_text() == "50\n"
    # an interrupted attempt: what it wrote goes, what was there before it stays
    with pytest.raises(RuntimeError):
        run(work, FULL, sets=["make.n=4", "sum.fail=true"])
    assert (work / "sum" / "partial.txt").exists()
    assert run(work, FULL, sets=["make.n=4", "sum.label='='"])["sum"] == "ran"
    assert not (work / "sum" / "partial.txt").exists()
    assert (work / "sum" / "total" / "value.txt").read_text() == "=50\n"
    for notes in (work / "double" / "notes.txt", work / "sum" / "total" / "notes.txt"):
        assert notes.read_text() == "mine\n"


@pytest.mark.parametrize("name", ["my runs", "run#2", "tab\there"])
def test_a_workdir_moses_cannot_read_from_a_moses_ini_is_refused_before_anything_runs(tmp_path, name):
    """build-smt and moses-ini write the workdir's paths into moses.ini files, which Moses splits at spaces
    and tabs and cuts at '#': such a workdir is refused at once, not after the stages before them have run."""
    wf = tmp_path / "w.toml"
    wf.write_text('[workflow]\nname = "w"\nstages = ["demo-data", "build-smt"]\n'
                  '[demo-data]\ntrain = 200\ndev = 10\ntest = 10\n')
    work = tmp_path / name
    r = CliRunner().invoke(main, ["run", str(wf), "--workdir", str(work)])
    assert r.exit_code == 1, r.output
    assert "the workdir, whose files the workflow's moses.ini files name," in r.output
    assert "cannot be written into a moses.ini" in r.output and not work.exists()

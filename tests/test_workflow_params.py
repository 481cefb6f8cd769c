"""Every selected stage's parameters are checked before any stage runs, naming section, key and valid values."""
from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest
from _workflow_toy import BASE, CALLS, registry
from click.testing import CliRunner

from phrase_rescore.app.cli import main
from phrase_rescore.app.stages import default_registry
from phrase_rescore.app.workflow import STAGE_MARKER, StageDef, load_workflow, run_workflow
from phrase_rescore.core.errors import PhraseRescoreError

DEMO = Path(__file__).parent.parent / "workflows" / "demo.toml"


@pytest.mark.parametrize("sets,message", [
    (["score.on_error='ignore'"], r"\[score\] on_error = 'ignore': expected one of 'raise', 'keep'"),
    (["score.matmul='blas'"], r"\[score\] matmul = 'blas': expected one of 'auto', 'torch', 'numpy'"),
    (["score.precision='fp8'"], r"\[score\] precision = 'fp8': expected one of 'fp32', 'bf16', 'fp16'"),
    (["score.chunk_lines=0"], r"\[score\] chunk_lines = 0: expected at least 1"),
    (["score.compresslevel=12"], r"\[score\] compresslevel = 12: expected 0 to 9"),
    (["score.threads=0"], r"\[score\] threads = 0: expected at least 1 \(or leave it unset\)"),
    (["score.device='tpu'"], r"\[score\] device = 'tpu': unknown device 'tpu'"),
    (["train.preset='huge'"], r"\[train\] preset = 'huge': expected one of 'paper', 'small'"),
    (["train.gru='lstm'"], r"\[train\] gru = 'lstm': expected one of 'paper', 'cudnn'"),
    (["train.batch_size=0"], r"\[train\] batch_size = 0: expected 1 to 4096"),
    (["train.rho=1.5"], r"\[train\] rho = 1.5: expected a number from 0 to 1"),
    (["train.lr=0"], r"\[train\] lr = 0.0: expected a number above 0"),
    (["train.model_overrides={hidden=8}"], r"\[train\] model_overrides = \{'hidden': 8\}: unknown key\(s\) hidden; valid keys: emb_dim, "
                                           r"hidden_dim, maxout_pieces, maxout_units, orthogonal_recurrent, rank"),
    (["train.model_overrides={hidden_dim=0}"], r"\[train\] model_overrides = \{'hidden_dim': 0\}: hidden_dim = 0: "
                                               r"expected 1 to 16384"),
    (["prepare.valid_fraction=1.0"], r"\[prepare\] valid_fraction = 1.0: expected at least 0 and below 1"),
    (["prepare.on_error='skip'"], r"\[prepare\] on_error = 'skip': expected one of 'raise', 'keep'"),
    (["prepare.vocab_size=0"], r"\[prepare\] vocab_size = 0: expected at least 1"),
    (["build-smt.case='upper'"], r"\[build-smt\] case = 'upper': expected one of 'lower', 'truecase', 'none'"),
    (["build-smt.eflomal_model=4"], r"\[build-smt\] eflomal_model = 4: expected one of 1, 2, 3"),
    (["build-smt.lm_order=0"], r"\[build-smt\] lm_order = 0: expected at least 1"),
    (["demo-data.noise=2.0"], r"\[demo-data\] noise = 2.0: expected a number from 0 to 1"),
    (["tune.backend='cdec'"], r"\[tune\] backend = 'cdec': expected one of 'moses', 'embedded'"),
    (["tune.nbest=0"], r"\[tune\] nbest = 0: expected 1 to 10000"),
    (["tune.decoder_flags='-threads 4'"], r"\[tune\] decoder_flags only apply to backend moses"),
    (["evaluate.bootstrap_samples=0"], r"\[evaluate\] bootstrap_samples = 0: expected 1 to 100000"),
])
def test_bad_stage_parameters_are_refused_when_the_workflow_loads(sets, message):
    with pytest.raises(PhraseRescoreError, match=r"demo.toml: " + message):
        load_workflow(DEMO, default_registry(), sets)


@pytest.mark.parametrize("name", ["demo", "rescore-existing", "paper"])
def test_shipped_workflows_pass_the_checks_and_keep_their_values(name):
    """Each workflow in workflows/ loads, and every value its stage sections set reaches those stages."""
    import tomllib

    path = DEMO.parent / f"{name}.toml"
    reg = default_registry()
    wf = load_workflow(path, reg)
    assert wf.stages
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    checked = 0
    for stage in wf.stages:
        for key, value in data.get(reg.stages[stage].section, {}).items():
            if key in wf.params[stage] and isinstance(value, (str, int, float, bool)):
                assert wf.params[stage][key] == value, (stage, key)
                checked += 1
    assert checked >= 5


def test_a_bad_value_of_the_last_stage_stops_the_run_before_the_first(tmp_path):
    def no_slash(p):
        if "/" in p["label"]:
            raise PhraseRescoreError(f"label = {p['label']!r}: expected no '/'")
    reg = registry()
    old = reg.stages["sum"]
    reg.stages["sum"] = StageDef(old.name, old.section, old.run, old.params, old.consumes, old.produces,
                                 old.optional, check=no_slash, choices={"fail": (False,)})
    work = tmp_path / "work"
    run_workflow(load_workflow(None, reg, data=BASE), reg, work, echo=None)
    before = {p: p.read_bytes() for p in work.rglob("*") if p.is_file()}
    for sets, message in ((["make.n=4", "sum.label='a/b'"], r"\[sum\] label = 'a/b': expected no '/'"),
                          (["make.n=4", "sum.fail=true"], r"\[sum\] fail = True: expected one of False")):
        CALLS.clear()
        with pytest.raises(PhraseRescoreError, match=message):
            run_workflow(load_workflow(None, reg, sets, data=BASE), reg, work, echo=None)
        assert CALLS == []  # make's parameter changed, but make did not run either
        assert {p: p.read_bytes() for p in work.rglob("*") if p.is_file()} == before


def test_cli_bad_value_leaves_the_previous_outputs(tmp_path, monkeypatch):
    """An invalid ``[score] on_error`` is an error before the score stage's folder is emptied."""
    monkeypatch.chdir(tmp_path)
    Path("model.pt").write_bytes(b"a checkpoint")
    Path("table.txt").write_text("a ||| b ||| 0.5 0.5 0.5 0.5\n")
    Path("wf.toml").write_text('[workflow]\nstages = ["score"]\n[inputs]\nmodel = "model.pt"\n'
                               'phrase_table = "table.txt"\n')
    score = tmp_path / "work" / "score"
    score.mkdir(parents=True)  # what an earlier run of the stage left
    (score / STAGE_MARKER).write_text(json.dumps({"stage": "score"}))
    (score / "phrase-table.rnn.gz").write_bytes(b"an earlier run's rescored table")
    before = {p.name: p.read_bytes() for p in score.iterdir()}
    r = CliRunner().invoke(main, ["run", "wf.toml", "--workdir", "work", "--set", "score.on_error=ignore"])
    assert r.exit_code == 1, r.output
    assert "error: wf.toml: [score] on_error = 'ignore': expected one of 'raise', 'keep'" in r.output
    assert {p.name: p.read_bytes() for p in score.iterdir()} == before


@pytest.mark.parametrize("text, message", [
    ('[workflow]\nname = 2024-01-01\nstages = ["prepare"]\n',
     r"\[workflow\] name = 2024-01-01: expected a plain folder name as a string"),
    ('[workflow]\ndescription = 1979-05-27T07:32:00Z\nstages = ["prepare"]\n',
     r"\[workflow\] description = 1979-05-27T07:32:00\+00:00: expected a string"),
    ('[workflow]\nstages = [1979-05-27]\n',
     r"\[workflow\] stages = \[1979-05-27\]: expected a non-empty list of stage or section names"),
    ('[workflow]\nstages = ["prepare"]\n[prepare]\nseed = 07:00:00\n',
     r"\[prepare\] seed = 07:00:00: expected a int like the default 1234"),
    ('[workflow]\nstages = ["prepare"]\n[common]\nseed = 1979-05-27T07:32:00\n',
     r"\[prepare\] seed = 1979-05-27T07:32:00: expected a int like the default 1234"),
    ('[workflow]\nstages = ["score"]\n[score]\nthreads = 07:00:00.5\n',
     r"\[score\] threads = 07:00:00.500000: expected a whole number at least 1 \(or leave it unset\)"),
    ('[workflow]\nstages = ["prepare"]\n[inputs]\nphrase_table = 1979-05-27\n',
     r"\[inputs\] phrase_table = 1979-05-27: expected a path \(a string\)"),
])
def test_a_toml_date_or_time_is_refused_naming_the_file_section_and_key(tmp_path, monkeypatch, text, message):
    monkeypatch.chdir(tmp_path)
    Path("d.toml").write_text(text)
    with pytest.raises(PhraseRescoreError, match=r"^d.toml: " + message):
        load_workflow("d.toml", default_registry())
    r = CliRunner().invoke(main, ["run", "d.toml", "--workdir", "wd"])
    assert r.exit_code == 1 and r.output.startswith("error: d.toml: [") and "Traceback" not in r.output, r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.toml"]


def test_a_date_or_time_for_a_parameter_that_no_check_covers_is_refused(tmp_path):
    def positive(p):             # a check that compares the value with a number
        if p["when"] is not None and p["when"] < 0:
            raise PhraseRescoreError(f"when = {p['when']!r}: expected at least 0")
    reg = registry()
    reg.add(StageDef("note", "note", lambda ctx: None, {"when": None}, produces={"n": "n.txt"}))
    reg.add(StageDef("later", "later", lambda ctx: None, {"when": None}, produces={"l": "l.txt"}, check=positive))
    for stage in ("note", "later"):
        data = {"workflow": {"stages": [stage]}, stage: {"when": 1}}
        load_workflow(None, reg, data=data)
        data[stage]["when"] = datetime.date(2024, 1, 1)             # as tomllib reads `when = 2024-01-01`
        with pytest.raises(PhraseRescoreError, match=rf"\[{stage}\] when = 2024-01-01: expected a number, string, "):
            load_workflow(None, reg, data=data)


@pytest.mark.parametrize("name", ["..", ".", "", "/abs/path", "a/b", "../elsewhere", 5])
def test_a_workflow_name_that_is_not_a_plain_folder_name_is_refused(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    Path("wf.toml").write_text(f'[workflow]\nname = {json.dumps(name)}\nstages = ["prepare"]\n')
    r = CliRunner().invoke(main, ["run", "wf.toml"])          # the default workdir is runs/NAME
    assert r.exit_code == 1, r.output
    assert r.output.startswith(f"error: wf.toml: [workflow] name = {name!r}: expected a plain folder name"), r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wf.toml"]


def test_plain_workflow_names_are_taken(tmp_path):
    for name in ("demo", "run-2024.01", "..x"):
        assert load_workflow(None, default_registry(), data={"workflow": {"name": name, "stages": ["prepare"]}}
                             ).name == name
    assert load_workflow(None, default_registry(), ["workflow.name=2024-01-01"],   # typed text, not a TOML date
                         data={"workflow": {"stages": ["prepare"]}}).name == "2024-01-01"


def test_an_unknown_input_names_the_workflow_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("wf.toml").write_text('[workflow]\nstages = ["prepare"]\n[inputs]\nphrase_table = "wf.toml"\nfoo = "x"\n')
    r = CliRunner().invoke(main, ["run", "wf.toml", "--workdir", "wd"])
    assert r.exit_code == 1 and r.output.startswith("error: wf.toml: unknown artifact 'foo' in [inputs]"), r.output

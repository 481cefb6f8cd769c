"""benchmarks/real_quality.py splits workflows/multi30k.toml into shared and per-MERT-seed workflow runs.

What a user relies on: the generated files give every stage the parameters the main workflow gives it
(so a stage already run is found current and not redone), each seed run gets its own seed and backend,
and the baseline's tuning waits only for the stages that build the system.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import real_quality  # noqa: E402

from phrase_rescore.app.stages import default_registry  # noqa: E402
from phrase_rescore.app.workflow import load_workflow, plan  # noqa: E402


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    work = tmp_path_factory.mktemp("rq")
    data = work / "data"
    data.mkdir()
    for name in ("train.en", "train.fr", "val.en", "val.fr"):
        (data / name).write_text("a b\n", encoding="utf-8")
    argv = ["--workdir", str(work / "w"), "--backends", "moses,embedded", "--mert-runs", "2", "--jobs", "2",
            "--job-threads", "1", "--train-budget", "60", "--dry-run",
            "--set", f"inputs.train_src={str(data / 'train.en')!r}", "--set", f"inputs.train_tgt={str(data / 'train.fr')!r}",
            "--set", f"inputs.heldout_src={str(data / 'val.en')!r}", "--set", f"inputs.heldout_ref={str(data / 'val.fr')!r}"]
    real_quality.main(argv)
    registry = default_registry()
    main = load_workflow(real_quality.WORKFLOW, registry, overrides=[
        "train.time_budget_s=60.0", "train-reverse.time_budget_s=60.0", "train.preset='small'",
        f"inputs.train_src={str(data / 'train.en')!r}", f"inputs.train_tgt={str(data / 'train.fr')!r}",
        f"inputs.heldout_src={str(data / 'val.en')!r}", f"inputs.heldout_ref={str(data / 'val.fr')!r}"])
    gen = work / "w" / "workflows"
    return main, registry, gen


def test_shared_stages_keep_the_main_workflows_parameters(planned):
    main, registry, gen = planned
    system = load_workflow(gen / "shared-system.toml", registry)
    models = load_workflow(gen / "shared-models.toml", registry)
    rest = load_workflow(gen / "shared-rest.toml", registry)
    assert system.stages == ["split", "build-smt", "tokenize"]
    # each run names its stages and those they read from: the models read the built system, not the split
    assert models.stages == [s for s in main.stages if not s.startswith("tune-")
                             and s not in ("split", "tokenize", "evaluate", "train-cslm")]
    assert rest.stages == ["split", "build-smt", "tokenize", "train-cslm"]   # its stage and those it reads from
    for wf in (system, models, rest):
        for s in wf.stages:
            assert wf.params[s] == main.params[s], s
    # --train-budget is each encoder-decoder's budget, the reverse one's too
    assert models.params["train"]["time_budget_s"] == models.params["train-reverse"]["time_budget_s"] == 60.0


@pytest.mark.parametrize("key,backend,seed", [("moses-seed1", "moses", 1), ("embedded-seed2", "embedded", 2)])
def test_each_seed_run_differs_only_in_seed_backend_and_threads(planned, key, backend, seed):
    main, registry, gen = planned
    wf = load_workflow(gen / f"{key}.toml", registry)
    assert wf.stages == [s for s in main.stages if s.startswith("tune-") or s == "evaluate"]
    for s in wf.stages:
        expected = dict(main.params[s])
        expected.update({k: v for k, v in (("backend", backend), ("seed", seed), ("threads", 1)) if k in expected})
        assert wf.params[s] == expected, s
    # every artifact the seed stages read comes from the shared stages' folders in the main workdir
    p = plan(wf, registry)
    assert all(src == "inputs" for s in wf.stages for a, src in p.inputs_of[s].items()
               if src is not None and src not in wf.stages)
    assert wf.inputs["phrase_table"] == gen.parent / "build-smt" / "smt" / "phrase-table.gz"
    assert wf.inputs["model"] == gen.parent / "train" / "model" / "model.pt"


def test_the_baselines_tuning_needs_only_the_built_system(planned):
    main, registry, gen = planned
    wf = load_workflow(gen / "moses-seed1-baseline.toml", registry)
    assert wf.stages == ["tune-baseline"]
    assert set(wf.inputs) == {"moses_ini", "phrase_table", "lm", "dev_src_tok", "dev_ref_tok"}
    assert wf.params["tune-baseline"]["seed"] == 1


@pytest.mark.parametrize("config", ["rnn", "rnn-wp"])
def test_each_tuning_run_is_one_stage_fed_by_the_shared_tables(planned, config):
    main, registry, gen = planned
    wf = load_workflow(gen / f"embedded-seed1-{config}.toml", registry)
    assert wf.stages == [f"tune-{config}"]
    assert wf.params[f"tune-{config}"]["backend"] == "embedded"
    table = "table_rnn" if config == "rnn" else "table_rnn_wp"
    assert wf.inputs[table].parent == gen.parent / "score"


def test_the_report_pairs_each_configuration_with_the_baselines_runs_of_the_same_seeds(tmp_path):
    """+RNN run once (seed 1) is compared with the baseline's seed-1 run, not with the mean of three."""
    import json

    ref = [f"le chat {i} est sur le tapis ." for i in range(40)]
    (tmp_path / "test.ref").write_text("\n".join(ref) + "\n", encoding="utf-8")
    runs = {"moses-seed1": {"Baseline": 30.0, "+RNN": 32.0, "+RNN+WP": 33.0},
            "moses-seed2": {"Baseline": 34.0, "+RNN+WP": 35.0},
            "moses-seed3": {"Baseline": 35.0, "+RNN+WP": 36.5}}
    for key, rows in runs.items():
        ev = tmp_path / "seeds" / key / "evaluate"
        (ev / "work").mkdir(parents=True)
        lines = ["configuration,dev_bleu,test_bleu,test_delta,test_p"]
        for c, b in rows.items():
            lines.append(f"{c},,{b},{b - rows['Baseline']},")
            good = int(40 * (b - 25) / 15)    # more sentences right for a higher row
            hyps = ref[:good] + ["un chien"] * (40 - good)
            (ev / "work" / f"test.{real_quality._safe(c)}.detok").write_text("\n".join(hyps) + "\n", encoding="utf-8")
        (ev / "table1.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "real_quality.log.json").write_text(json.dumps({
        "test_ref": str(tmp_path / "test.ref"), "seeds": list(runs), "jobs": 2, "job_threads": 1, "wall_s": 1.0,
        "machine": {"cpus": 2, "platform": "test", "loadavg_at_end": [0.0, 0.0, 0.0]}}))
    real_quality.write_report(tmp_path, 200)
    s = json.loads((tmp_path / "real_quality.json").read_text())["moses"]
    assert s["Baseline"]["test_bleu"] == [30.0, 34.0, 35.0]
    assert s["+RNN"]["runs"] == ["moses-seed1"] and s["+RNN"]["delta"] == pytest.approx(2.0)
    assert s["+RNN+WP"]["delta"] == pytest.approx((3.0 + 1.0 + 1.5) / 3) and s["+RNN+WP"]["mean"] == pytest.approx(34.833333)
    assert 0 < s["+RNN+WP"]["p"] <= 1
    md = (tmp_path / "real_quality.md").read_text()
    assert "| +RNN | 32.00 | 32.00 ± 0.00 | +2.00 |" in md


def test_the_report_marks_resumed_stages_and_says_which_invocations_its_wall_time_counts(tmp_path):
    """A stage resumed after a kill, and a run resumed by a second invocation, are not reported as if
    their times were the whole."""
    import json

    ref = ["le chat est sur le tapis ."] * 4
    (tmp_path / "test.ref").write_text("\n".join(ref) + "\n", encoding="utf-8")
    ev = tmp_path / "seeds" / "moses-seed1" / "evaluate"
    (ev / "work").mkdir(parents=True)
    (ev / "table1.csv").write_text("configuration,dev_bleu,test_bleu,test_delta,test_p\nBaseline,,30.0,0.0,\n",
                                   encoding="utf-8")
    (ev / "work" / "test.Baseline.detok").write_text("\n".join(ref) + "\n", encoding="utf-8")
    for stage, manifest in (("tune-baseline", {"wall_s": 700.4}), ("tune-rnn-wp", {"wall_s": 214.0, "resumed": True}),
                            ("evaluate", {"wall_s": 300.0})):
        (tmp_path / "seeds" / "moses-seed1" / stage).mkdir(parents=True, exist_ok=True)
        (tmp_path / "seeds" / "moses-seed1" / stage / "stage-manifest.json").write_text(json.dumps(manifest))
    log = {"test_ref": str(tmp_path / "test.ref"), "seeds": ["moses-seed1"], "jobs": 2, "job_threads": 1,
           "wall_s": 2106.0, "machine": {"cpus": 2, "platform": "test", "loadavg_at_end": [0.0, 0.0, 0.0]}}
    (tmp_path / "real_quality.log.json").write_text(json.dumps(log))
    real_quality.write_report(tmp_path, 10)
    md = (tmp_path / "real_quality.md").read_text()
    assert "| moses-seed1 | 700 | – | 214* | 300 | 1214 |" in md
    assert "resumed after an interruption: the time of its last attempt only" in md
    assert "the whole run took 2106 s of wall time" in md

    (tmp_path / "real_quality.log.json").write_text(json.dumps({**log, "invocations": 2}))
    real_quality.write_report(tmp_path, 10)
    md = (tmp_path / "real_quality.md").read_text()
    assert "the whole run took" not in md
    assert "the last of the run's 2 invocations took 2106 s of wall time" in md

def test_a_failed_job_stops_only_the_jobs_after_it(tmp_path, monkeypatch):
    fake = tmp_path / "phrase-rescore"
    fake.write_text('#!/bin/sh\ncase "$2" in *bad*) exit 3;; esac\nexit 0\n')
    fake.chmod(0o755)
    monkeypatch.setattr(real_quality.shutil, "which", lambda name: str(fake))
    monkeypatch.setattr(real_quality.time, "sleep", lambda s: None)
    job = lambda key, after=(): real_quality.Job(key, tmp_path / f"{key}.toml", tmp_path, after)  # noqa: E731
    jobs = [job("a"), job("bad"), job("after-bad", ("bad",)), job("after-a", ("a",))]
    finished, failed = real_quality.run_jobs(jobs, 2, tmp_path / "logs")
    assert set(finished) == {"a", "after-a"}
    assert failed == ["bad", "after-bad"]


def _dry_run_with(tmp_path, *flags: str, workdir: str = "w") -> None:
    """``real_quality.py --dry-run`` with one MERT run and ``flags``, on one-line stand-ins for the corpus."""
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    for name in ("train.en", "train.fr", "val.en", "val.fr"):
        (data / name).write_text("a b\n", encoding="utf-8")
    real_quality.main(["--workdir", str(tmp_path / workdir), "--backends", "moses", "--mert-runs", "1", *flags,
                       "--train-budget", "60", "--dry-run"] + [
        x for side, f in (("train_src", "train.en"), ("train_tgt", "train.fr"), ("heldout_src", "val.en"),
                          ("heldout_ref", "val.fr")) for x in ("--set", f"inputs.{side}={str(data / f)!r}")])


def test_reverse_adds_the_reverse_model_to_the_shared_models(tmp_path):
    """--reverse: prepare-reverse and train-reverse run once with the forward model's settings, and every seed's
    evaluation reads the reverse model (its hash goes in the report)."""
    _dry_run_with(tmp_path, "--reverse")
    registry = default_registry()
    gen = tmp_path / "w" / "workflows"
    models = load_workflow(gen / "shared-models.toml", registry)
    assert {"prepare-reverse", "train-reverse"} <= set(models.stages)
    assert models.params["train-reverse"] == models.params["train"]
    assert models.params["prepare-reverse"] == models.params["prepare"]
    final = load_workflow(gen / "moses-seed1.toml", registry)
    assert final.inputs["model_reverse"] == tmp_path / "w" / "train-reverse" / "model" / "model.pt"


def test_ensemble_adds_the_second_model_to_the_shared_models(tmp_path):
    """--ensemble: train-ensemble runs once, after train, with its settings and the next seed, and score reads
    its model."""
    _dry_run_with(tmp_path, "--ensemble")
    registry = default_registry()
    models = load_workflow(tmp_path / "w" / "workflows" / "shared-models.toml", registry)
    assert models.stages.index("train") < models.stages.index("train-ensemble") < models.stages.index("score")
    fwd, ens = models.params["train"], models.params["train-ensemble"]
    assert (ens["seed"], ens["time_budget_s"]) == (fwd["seed"] + 1, 60.0)
    assert {k: v for k, v in ens.items() if k != "seed"} == {k: v for k, v in fwd.items() if k != "seed"}
    assert plan(models, registry).inputs_of["score"]["model_ensemble"] == "train-ensemble"


def _job_plan(out: str) -> dict[str, list[str]]:
    """The jobs a dry run lists, each with the jobs it waits for."""
    plan_ = {}
    for line in out.splitlines():
        key, _, rest = line.partition(": ")
        plan_[key] = rest.split(", after ", 1)[1].split(", ") if ", after " in rest else []
    return plan_


def test_with_two_jobs_each_encoder_decoder_trains_in_a_job_of_its_own(tmp_path, capsys):
    """--jobs 2: the forward, reverse and ensemble models train side by side, each run naming only the
    stages it needs (two runs never run one stage at once), after what they share (prepare); score waits
    for all three."""
    _dry_run_with(tmp_path, "--ensemble", "--jobs", "2")
    jobs = _job_plan(capsys.readouterr().out)
    trainers = ["shared-train", "shared-train-reverse", "shared-train-ensemble"]
    assert jobs["shared-models-common"] == ["shared-system"]
    assert all(jobs[k] == ["shared-models-common"] for k in trainers)
    assert jobs["shared-models"] == trainers
    assert jobs["moses-seed1-baseline"] == ["shared-system"]
    registry = default_registry()
    gen = tmp_path / "w" / "workflows"
    models = load_workflow(gen / "shared-models.toml", registry)
    own = {"shared-train": ["prepare", "train"], "shared-train-reverse": ["prepare-reverse", "train-reverse"],
           "shared-train-ensemble": ["prepare", "train-ensemble"]}
    for key, stages in own.items():
        wf = load_workflow(gen / f"{key}.toml", registry)
        assert wf.stages == ["build-smt"] + stages, key
        for s in wf.stages:   # the same parameters as in the one run that scores, so nothing is redone there
            assert wf.params[s] == models.params[s], (key, s)


def test_with_one_job_the_shared_models_are_one_run(tmp_path, capsys):
    _dry_run_with(tmp_path, "--ensemble", "--jobs", "1")
    jobs = _job_plan(capsys.readouterr().out)
    assert not [k for k in jobs if k.startswith("shared-train")]
    assert jobs["shared-models"] == ["shared-system"]


def test_with_no_cslm_runs_the_cslm_is_not_trained(tmp_path, capsys):
    """--cslm-runs 0: no run has the +CSLM rows, so no job trains the CSLM and no evaluation reads one."""
    _dry_run_with(tmp_path, "--cslm-runs", "0", "--jobs", "2")
    jobs = _job_plan(capsys.readouterr().out)
    assert "shared-rest" not in jobs            # its one stage was train-cslm
    registry = default_registry()
    gen = tmp_path / "w" / "workflows"
    assert not any("train-cslm" in load_workflow(gen / f"{k}.toml", registry).stages for k in jobs)
    final = load_workflow(gen / "moses-seed1.toml", registry)
    assert "evaluate" in final.stages and "cslm" not in final.inputs
    assert jobs["moses-seed1"][-1] == "shared-models"


def test_without_a_tuning_stage_its_row_and_the_stages_only_it_reads_are_left_out(tmp_path, capsys):
    """--without tune-rnn: no +RNN tuning run, and no moses-ini-rnn (only tune-rnn reads its moses.ini); the
    stages the other rows need are all still run, with the main workflow's parameters."""
    _dry_run_with(tmp_path, "--without", "tune-rnn", "--cslm-runs", "0", "--jobs", "2")
    jobs = _job_plan(capsys.readouterr().out)
    assert "moses-seed1-rnn" not in jobs and "moses-seed1-rnn-wp" in jobs
    registry = default_registry()
    gen = tmp_path / "w" / "workflows"
    models = load_workflow(gen / "shared-models.toml", registry)
    assert "moses-ini-rnn" not in models.stages and {"score", "moses-ini-rnn-wp"} <= set(models.stages)
    final = load_workflow(gen / "moses-seed1.toml", registry)
    assert final.stages == ["tune-baseline", "tune-rnn-wp", "evaluate"] and "ini_rnn" not in final.inputs


@pytest.mark.parametrize("stage", ["tune-baseline", "evaluate", "no-such-stage"])
def test_without_refuses_the_baseline_the_evaluation_and_unknown_stages(tmp_path, stage):
    with pytest.raises(SystemExit, match=f"--without {stage}: expected a stage of the workflow"):
        _dry_run_with(tmp_path, "--without", stage)


def _finished_shared_stages(tmp_path, capsys) -> Path:
    """A workdir whose shared stages have finished as a dry run plans them (their manifests' parameters)."""
    import json

    _dry_run_with(tmp_path, "--jobs", "1", "--cslm-runs", "0")
    registry = default_registry()
    work = tmp_path / "w"
    for key in _job_plan(capsys.readouterr().out):
        if key.startswith("shared-"):
            wf = load_workflow(work / "workflows" / f"{key}.toml", registry)
            for s in wf.stages:
                (work / s).mkdir(exist_ok=True)
                (work / s / "stage-manifest.json").write_text(json.dumps({"params": wf.params[s]}))
    return work


def test_shared_from_tunes_and_evaluates_on_the_earlier_runs_system_and_models(tmp_path, capsys):
    """--shared-from: no shared stage runs again; every seed job starts at once and reads the earlier run's
    tables, models and tokenized sets; a tuning setting (batch MIRA here) changes only the seed runs."""
    home = _finished_shared_stages(tmp_path, capsys)
    _dry_run_with(tmp_path, "--jobs", "1", "--cslm-runs", "0", "--shared-from", str(home),
                  "--set", "common.backend='moses'", "--set", "tune.batch_mira=true", workdir="mira")
    jobs = _job_plan(capsys.readouterr().out)
    assert not [k for k in jobs if k.startswith("shared-")]
    assert all(after == [] for k, after in jobs.items() if k != "moses-seed1")
    assert set(jobs["moses-seed1"]) == {k for k in jobs if k.startswith("moses-seed1-")}
    registry = default_registry()
    final = load_workflow(tmp_path / "mira" / "workflows" / "moses-seed1.toml", registry)
    assert final.inputs["table_rnn_wp"] == home / "score" / "phrase-table.rnn-wp.gz"
    assert final.inputs["model"] == home / "train" / "model" / "model.pt"
    assert final.params["tune-rnn-wp"]["batch_mira"] is True


def test_shared_from_refuses_stages_run_with_other_parameters(tmp_path, capsys):
    home = _finished_shared_stages(tmp_path, capsys)
    with pytest.raises(SystemExit, match=r"stage train would have to run again \(time_budget_s = 60.0 there, 90.0 "
                                         r"here\), and it trains a network"):
        _dry_run_with(tmp_path, "--cslm-runs", "0", "--shared-from", str(home), "--set", "train.time_budget_s=90.0",
                      workdir="other")
    (home / "train" / "stage-manifest.json").unlink()
    with pytest.raises(SystemExit, match="stage train has not finished there .*, and it trains a network"):
        _dry_run_with(tmp_path, "--cslm-runs", "0", "--shared-from", str(home), workdir="other2")


def test_shared_from_runs_here_the_stages_the_earlier_run_left_out(tmp_path, capsys):
    """A shared stage with no manifest in the earlier run (moses-ini-rnn of a run made without tune-rnn) runs
    in this run's WORKDIR on the earlier run's tables; the other shared stages are still read from there."""
    home = _finished_shared_stages(tmp_path, capsys)
    (home / "moses-ini-rnn" / "stage-manifest.json").unlink()
    _dry_run_with(tmp_path, "--jobs", "1", "--cslm-runs", "0", "--shared-from", str(home), workdir="rnn")
    out = capsys.readouterr().out
    assert "--shared-from: moses-ini-rnn runs here (it has not finished there)" in out
    jobs = _job_plan(out)
    shared = [k for k in jobs if k.startswith("shared-")]
    assert len(shared) == 1
    registry = default_registry()
    work = tmp_path / "rnn"
    ini = load_workflow(work / "workflows" / f"{shared[0]}.toml", registry)
    assert ini.stages == ["moses-ini-rnn"]
    assert ini.inputs["table_rnn"] == home / "score" / "phrase-table.rnn.gz"
    tune = load_workflow(work / "workflows" / "moses-seed1-rnn.toml", registry)
    assert tune.inputs["ini_rnn"] == work / "moses-ini-rnn" / "moses.ini"
    assert jobs["moses-seed1-rnn"] == shared
    assert all(after == [] for k, after in jobs.items() if k.endswith(("-baseline", "-rnn-wp")))


def test_shared_from_splits_and_tokenizes_again_for_other_halves_and_keeps_the_models(tmp_path, capsys):
    """--set split.swap=true with --shared-from: split and tokenize (which reads the split) run here, the tables
    and models are the earlier run's, and the seed runs tune on this run's dev half and score its test half."""
    home = _finished_shared_stages(tmp_path, capsys)
    _dry_run_with(tmp_path, "--jobs", "1", "--cslm-runs", "0", "--shared-from", str(home),
                  "--set", "split.swap=true", workdir="swap")
    out = capsys.readouterr().out
    assert "--shared-from: split runs here (swap = False there, True here)" in out
    assert "--shared-from: tokenize runs here (it reads from split, which run here)" in out
    jobs = _job_plan(out)
    assert [k for k in jobs if k.startswith("shared-")] == ["shared-system"]
    registry = default_registry()
    work = tmp_path / "swap"
    system = load_workflow(work / "workflows" / "shared-system.toml", registry)
    assert system.stages == ["split", "tokenize"] and system.params["split"]["swap"] is True
    assert system.inputs["smt_model"] == home / "build-smt" / "smt" / "model"
    assert all(after == ["shared-system"] for k, after in jobs.items() if k.endswith("-baseline"))
    final = load_workflow(work / "workflows" / "moses-seed1.toml", registry)
    assert final.inputs["test_src_tok"] == work / "tokenize" / "test.tok.src"
    assert final.inputs["test_ref"] == work / "split" / "split" / "test.ref"
    assert final.inputs["model"] == home / "train" / "model" / "model.pt"
    with pytest.raises(SystemExit, match=r"stage train would have to run again \(it reads from prepare, which run "
                                         r"here\), and it trains a network"):
        _dry_run_with(tmp_path, "--cslm-runs", "0", "--shared-from", str(home), "--set", "prepare.vocab_size=10",
                      workdir="other")


def test_a_workflow_with_its_models_as_inputs_runs_without_a_train_stage(tmp_path, capsys):
    """A workflow that takes its trained models from ``[inputs]`` (a new system scored by existing models)
    plans without a train stage; ``--preset`` still sets [train]'s preset when the workflow trains."""
    data = tmp_path / "data"
    data.mkdir()
    for name in ("train.en", "train.fr", "dev.en", "dev.fr", "test.en", "test.fr", "model.pt", "reverse.pt"):
        (data / name).write_text("a b\n", encoding="utf-8")
    wf = tmp_path / "given-models.toml"
    wf.write_text('[workflow]\nname = "given-models"\n'
                  'stages = ["build-smt", "tokenize", "score", "moses-ini", "tune", "evaluate"]\n[inputs]\n'
                  + "".join(f'{a} = "{data / f}"\n' for a, f in (
                      ("train_src", "train.en"), ("train_tgt", "train.fr"), ("dev_src", "dev.en"),
                      ("dev_ref", "dev.fr"), ("test_src", "test.en"), ("test_ref", "test.fr"),
                      ("model", "model.pt"), ("model_reverse", "reverse.pt")))
                  + '[common]\nbackend = "moses"\n', encoding="utf-8")
    real_quality.main(["--workdir", str(tmp_path / "w"), "--workflow", str(wf), "--backends", "moses",
                       "--mert-runs", "1", "--dry-run"])
    registry = default_registry()
    models = load_workflow(tmp_path / "w" / "workflows" / "shared-models.toml", registry)
    assert models.stages == ["build-smt", "score", "moses-ini-rnn", "moses-ini-rnn-wp"]
    assert models.inputs["model"] == data / "model.pt"
    assert models.inputs["model_reverse"] == data / "reverse.pt"
    _dry_run_with(tmp_path, "--preset", "paper", workdir="p")
    trained = load_workflow(tmp_path / "p" / "workflows" / "shared-models.toml", registry)
    assert trained.params["train"]["preset"] == trained.params["train-reverse"]["preset"] == "paper"


def test_seq2seq_trains_the_lstms_once_and_reranks_in_every_mert_run(tmp_path, capsys):
    """--seq2seq --stack: the two LSTMs train and translate once, with the CPU-sized settings; each MERT run
    re-ranks its own tuned baseline's lists, and the whole stack only in the runs that have the CSLM."""
    _dry_run_with(tmp_path, "--seq2seq", "--stack", "--mert-runs", "2", "--cslm-runs", "1", "--no-dev-scores")
    registry = default_registry()
    gen = tmp_path / "w" / "workflows"
    rest = load_workflow(gen / "shared-rest.toml", registry)
    assert {"train-seq2seq", "train-seq2seq-forward", "translate-seq2seq"} <= set(rest.stages)
    assert rest.params["train-seq2seq"]["epochs"] == rest.params["train-seq2seq-forward"]["epochs"] == 0.8
    assert rest.params["translate-seq2seq"]["dev"] is False      # no dev column: the test half only
    first, second = (load_workflow(gen / f"moses-seed{n}.toml", registry) for n in (1, 2))
    assert {"nbest-baseline", "rerank-seq2seq", "nbest-rnn-wp", "rerank-stack"} <= set(first.stages)
    assert {"nbest-baseline", "rerank-seq2seq"} <= set(second.stages)
    assert not {"nbest-rnn-wp", "rerank-stack"} & set(second.stages)
    assert first.params["rerank-seq2seq"]["seed"] == 1 and second.params["rerank-seq2seq"]["seed"] == 2
    assert second.inputs["seq2seq"] == tmp_path / "w" / "train-seq2seq" / "model" / "model.pt"


def test_the_report_has_every_row_evaluate_wrote(tmp_path):
    """Rows beyond Cho et al.'s (Sutskever et al.'s) are reported with their Δ and p against the baseline."""
    import json

    ref = [f"le chat {i} est sur le tapis ." for i in range(40)]
    (tmp_path / "test.ref").write_text("\n".join(ref) + "\n", encoding="utf-8")
    ev = tmp_path / "seeds" / "moses-seed1" / "evaluate"
    (ev / "work").mkdir(parents=True)
    rows = {"Baseline": 20, "Baseline+LSTM": 30}
    for c, good in rows.items():
        (ev / "work" / f"test.{real_quality._safe(c)}.detok").write_text(
            "\n".join(ref[:good] + ["un chien"] * (40 - good)) + "\n", encoding="utf-8")
    (ev / "table1.csv").write_text("configuration,dev_bleu,test_bleu,test_delta,test_p\nBaseline,,30.0,0,\n"
                                   "Baseline+LSTM,,40.0,10.0,0.01\n", encoding="utf-8")
    (tmp_path / "real_quality.log.json").write_text(json.dumps({
        "test_ref": str(tmp_path / "test.ref"), "seeds": ["moses-seed1"], "jobs": 1, "job_threads": 1, "wall_s": 1.0,
        "machine": {"cpus": 2, "platform": "test", "loadavg_at_end": [0.0, 0.0, 0.0]}}))
    real_quality.write_report(tmp_path, 100)
    s = json.loads((tmp_path / "real_quality.json").read_text())["moses"]
    assert s["Baseline+LSTM"]["delta"] == pytest.approx(10.0) and s["Baseline+LSTM"]["p"] < 0.05

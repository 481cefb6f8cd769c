"""A workflow's ``threads`` reaches the Moses decoder: mert-moses.pl's decoder and evaluate's."""
from __future__ import annotations

from pathlib import Path

import pytest

from phrase_rescore.app.stages import default_registry
from phrase_rescore.app.workflow import load_workflow
from phrase_rescore.moses_integration.backend import MosesBackend
from phrase_rescore.moses_integration.configs import MosesTuneConfig
from phrase_rescore.moses_integration.moses_install import MosesInstall
from phrase_rescore.moses_integration.tune_moses import decoder_flags, mert_moses_argv

WORKFLOWS = Path(__file__).parent.parent / "workflows"
INSTALL = MosesInstall(root=Path("/m"), moses=Path("/m/bin/moses"),
                       mert_moses=Path("/m/scripts/training/mert-moses.pl"), bin_dir=Path("/m/bin"))


def _tune_cfg(params: dict) -> MosesTuneConfig:
    keep = {"nbest", "max_iterations", "threads", "decoder_flags", "batch_mira", "return_best_dev",
            "predictable_seeds", "historic_bests"}
    return MosesTuneConfig(ini=Path("/w/moses.ini"), dev_src=Path("/d/dev.en"), dev_ref=Path("/d/dev.fr"),
                           workdir=Path("/w"), **{k: v for k, v in params.items() if k in keep})


@pytest.mark.parametrize("flags, threads, want", [
    ("", 4, "-threads 4"),
    ("-s 500", 3, "-s 500 -threads 3"),
    (" -threads 8 -s 500 ", 4, "-threads 8 -s 500"),    # the user's own setting wins
    ("-th 2", 4, "-th 2"),                              # Moses's abbreviation of -threads
    ("", 1, ""),                                        # one thread: Moses's default, nothing to add
])
def test_decoder_flags_carry_the_threads(flags, threads, want, many_cores):
    assert decoder_flags(flags, threads) == want


def test_a_workflows_common_threads_reach_mert_moses_decoder_and_evaluate(many_cores):
    wf = load_workflow(WORKFLOWS / "rescore-existing.toml", default_registry(), overrides=["common.threads=3"])
    argv = mert_moses_argv(_tune_cfg(wf.params["tune-baseline"]), INSTALL)
    assert "--threads=3" in argv and "--decoder-flags=-threads 3" in argv
    assert MosesBackend(INSTALL).argv("x.ini", threads=wf.params["evaluate"]["threads"])[3:5] == ["-threads", "3"]
    # decoder flags given in [tune] are kept as they are when they set the threads
    wf = load_workflow(WORKFLOWS / "rescore-existing.toml", default_registry(),
                       overrides=["common.threads=3", "tune.decoder_flags='-threads 6'"])
    argv = mert_moses_argv(_tune_cfg(wf.params["tune-rnn"]), INSTALL)
    assert [a for a in argv if a.startswith("--decoder-flags")] == ["--decoder-flags=-threads 6"]


def test_training_on_a_cpu_takes_one_torch_thread_unless_asked(tmp_path):
    import torch
    from _encdec_data import TINY, make_learnable_table

    from phrase_rescore.pipeline.configs import PrepareConfig, TrainConfig
    from phrase_rescore.pipeline.prepare import prepare
    from phrase_rescore.pipeline.train import train

    make_learnable_table(tmp_path / "table.txt", n_pairs=80)
    prepare(tmp_path / "table.txt", tmp_path / "pairs", PrepareConfig(vocab_size=100, valid_fraction=0.1, seed=1))
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        base = dict(model_overrides=TINY, batch_size=8, max_steps=2, valid_every=2, device="cpu")
        train(tmp_path / "pairs", tmp_path / "m1", TrainConfig(**base))
        assert torch.get_num_threads() == 1
        train(tmp_path / "pairs", tmp_path / "m2", TrainConfig(**base, torch_threads=2))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    # a workflow's [common] threads (the decoders') leaves training at one torch thread
    wf = load_workflow(WORKFLOWS / "multi30k.toml", default_registry(), overrides=["common.threads=3"])
    assert wf.params["train"]["torch_threads"] == 1 and wf.params["evaluate"]["threads"] == 3


@pytest.fixture
def three_cores(monkeypatch):
    """A machine whose CPU set holds three cores."""
    import os

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    return 3


def test_threads_left_unset_are_the_cores_this_process_may_use(three_cores):
    from phrase_rescore.core.cores import available_cores
    from phrase_rescore.moses_integration.configs import EvaluateConfig, RewriteConfig

    assert available_cores() == three_cores
    argv = mert_moses_argv(_tune_cfg({}), INSTALL)
    assert "--threads=3" in argv and "--decoder-flags=-threads 3" in argv
    assert EvaluateConfig([], Path("t"), Path("r"), Path("w")).threads == 3
    assert RewriteConfig(Path("a.ini"), Path("t.gz"), Path("b.ini")).threads == 3
    assert EvaluateConfig([], Path("t"), Path("r"), Path("w"), threads=1).threads == 1


def test_no_workflow_fixes_threads_and_a_manifest_keeps_them_unset(three_cores):
    """The workflows leave ``threads`` unset (their comment says the default), so a stage's parameters,
    which its manifest keeps, say None on every machine and a workdir moved between machines is not rerun."""
    for toml in sorted(WORKFLOWS.glob("*.toml")):
        text = toml.read_text(encoding="utf-8")
        assert "\nthreads =" not in text and "# threads =" in text, toml.name
        wf = load_workflow(toml, default_registry())
        for stage, params in wf.params.items():
            assert params.get("threads", None) is None, (toml.name, stage)

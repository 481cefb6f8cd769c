"""One options schema: a workflow section holds exactly its command's options, with the same defaults, and a
bad value is refused in the same words by the command line and the workflow file."""
from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from phrase_rescore.app.cli import main
from phrase_rescore.app.seq2seq_stages import NBestLists, Seq2SeqRerank, Seq2SeqTranslate
from phrase_rescore.app.stage_settings import DemoDataConfig
from phrase_rescore.app.stages import default_registry
from phrase_rescore.app.workflow import load_workflow
from phrase_rescore.core.config import settings
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.data.split import SplitConfig
from phrase_rescore.moses_integration.configs import BuildConfig, EvaluateConfig, RewriteConfig, TuneConfig
from phrase_rescore.pipeline.configs import PrepareConfig, ScoreConfig, TrainConfig, TrainCSLMConfig, TrainSeq2SeqConfig

#: stage -> (its command, the config both are generated from, workflow keys that are no option of the command)
STAGES = {
    "demo-data": ("make-demo-data", DemoDataConfig, set()),
    "split": ("make-split", SplitConfig, set()),
    "build-smt": ("build-smt", BuildConfig, set()),
    "prepare": ("prepare", PrepareConfig, set()),
    "train": ("train", TrainConfig, set()),
    "prepare-reverse": ("prepare", PrepareConfig, set()),     # the reverse model's, made as the forward one
    "train-reverse": ("train", TrainConfig, set()),
    "train-ensemble": ("train", TrainConfig, set()),          # a second forward model, the next seed
    "score": ("score", ScoreConfig, set()),
    "train-seq2seq": ("train-seq2seq", TrainSeq2SeqConfig, set()),   # the source reversed: the stage decides
    "train-seq2seq-forward": ("train-seq2seq", TrainSeq2SeqConfig, set()),
    "tune-baseline": ("tune", TuneConfig, set()),
    "tune-rnn": ("tune", TuneConfig, set()),
    "tune-rnn-wp": ("tune", TuneConfig, set()),
    # evaluate lowercases the references and detokenizes as build-smt built the system (--target-lang)
    "evaluate": ("evaluate", EvaluateConfig, {"nbest_size", "cslm_weight", "rerank_restarts", "rerank_tuner"}),  # +CSLM rows
    "train-cslm": ("train-cslm", TrainCSLMConfig, set()),
    # the two stages add one column and two (and the reverse model's): one initial weight each, not --weights
    "moses-ini-rnn": ("moses-ini", RewriteConfig, {"rnn_weight", "reverse_weight"}),
    "moses-ini-rnn-wp": ("moses-ini", RewriteConfig, {"rnn_weight", "wp_weight", "reverse_weight"}),
}

#: command -> its options that are neither settings nor paths: evaluate's NAME=PATH lists
NOT_SETTINGS = {"evaluate": {"systems", "models"}}
#: command -> its settings a workflow section holds otherwise (see STAGES)
REPLACED = {"moses-ini": {"weights"}, "train-seq2seq": {"reverse", "resume"}}
#: stages of Sutskever et al.'s rows that combine several commands' work: the settings of their own config
OWN_SETTINGS = {"translate-seq2seq": Seq2SeqTranslate, "nbest-baseline": NBestLists, "nbest-rnn-wp": NBestLists,
                "rerank-seq2seq": Seq2SeqRerank, "rerank-stack": Seq2SeqRerank}


def _cli_default(opt: click.Option):
    """An option's default as its setting holds it: '0.2,-0.1' as a tuple, no table as {}."""
    if opt.name == "model_overrides":
        return {} if opt.default is None else opt.default
    if opt.name == "columns":
        return tuple(opt.default.split(","))
    return opt.default


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_each_workflow_section_holds_exactly_its_commands_options(stage):
    command, cls, stage_only = STAGES[stage]
    params = default_registry().stages[stage].params
    cmd = main.commands[command]
    ctx = click.Context(cmd)
    opts = {p.name: p for p in cmd.get_params(ctx)
            if isinstance(p, click.Option) and not p.hidden and p is not cmd.get_help_option(ctx)}
    runner_decides = {s.name for s in settings(cls) if not s.workflow}
    generated = {s.name for s in settings(cls)}
    # the command's options: the workflow's keys, what the runner decides itself, paths (artifacts), --config
    others = set(opts) - generated - {"config_file"}
    assert all(isinstance(opts[o].type, click.Path) for o in others - NOT_SETTINGS.get(command, set())), others
    assert set(params) - stage_only == generated - runner_decides - REPLACED.get(command, set())
    for key in set(params) - stage_only:
        assert _cli_default(opts[key]) == params[key], key
        assert opts[key].opts == ["--" + key.replace("_", "-")], key  # kebab-case flag == snake_case key


def test_every_stage_has_its_commands_options():
    """tokenize, which has no command of its own, takes build-smt's preprocessing settings and defaults; the
    stages of Sutskever et al.'s rows without a command hold exactly their own settings."""
    stages = default_registry().stages
    assert set(stages) - set(STAGES) - set(OWN_SETTINGS) == {"tokenize"}
    for stage, cls in OWN_SETTINGS.items():
        assert stages[stage].params == {s.name: s.default for s in settings(cls)}, stage
    build = main.commands["build-smt"]
    opts = {p.name: p.default for p in build.get_params(click.Context(build)) if isinstance(p, click.Option)}
    assert stages["tokenize"].params == {k: opts[k] for k in ("source_lang", "target_lang", "case", "escape")}


def test_every_setting_has_help():
    for cls in [c for _, c, _ in STAGES.values()] + list(OWN_SETTINGS.values()):
        for s in settings(cls):
            assert len(s.help) > 10 and s.help.endswith((".", "]", ")")), (cls.__name__, s.name)


@pytest.fixture
def files(tmp_path, monkeypatch):
    """Inputs a command checks the existence of before it reads them (the value checks come first)."""
    monkeypatch.chdir(tmp_path)
    for name in ("table.txt", "model.pt", "moses.ini", "dev.src", "dev.ref", "src.txt", "tgt.txt"):
        Path(name).write_text("a ||| b ||| 0.5 0.5 0.5 0.5\n")
    Path("pairs").mkdir()
    return tmp_path


TRAIN = ["train", "pairs", "--out", "model"]
TUNE = ["tune", "moses.ini", "--dev-src", "dev.src", "--dev-ref", "dev.ref", "--workdir", "tw"]
EVALUATE = ["evaluate", "--system", "b=moses.ini", "--test-src", "dev.src", "--test-ref", "dev.ref", "--workdir", "ew"]


@pytest.mark.parametrize("args,message", [
    (TRAIN + ["--batch-size", "0"], "--batch-size 0: expected 1 to 4096"),
    (TRAIN + ["--lr", "nan"], "--lr nan: expected a number above 0"),
    (TRAIN + ["--eps", "inf"], "--eps inf: expected a number above 0"),
    (TRAIN + ["--max-steps", "-5"], "--max-steps -5: expected at least 1"),
    (TRAIN + ["--rho", "1.5"], "--rho 1.5: expected a number from 0 to 1"),
    (TRAIN + ["--preset", "huge"], "--preset huge: expected one of 'paper', 'small'"),
    (TRAIN + ["--time-budget-s", "-1"], "--time-budget-s -1.0: expected a number above 0 (or leave it unset)"),
    (TRAIN + ["--model-overrides", "{hidden=8}"], "--model-overrides {'hidden': 8}: unknown key(s) hidden"),
    (TRAIN + ["--model-overrides", "{hidden_dim = 0}"], "--model-overrides {'hidden_dim': 0}: hidden_dim = 0: expected 1 to 16384"),
    (TRAIN + ["--device", "tpu"], "--device tpu: unknown device 'tpu'"),
    (["sample", "model.pt", "a", "--beam", "0"], "--beam 0: expected 1 to 1000"),
    (["sample", "model.pt", "a", "-n", "0"], "--num-samples 0: expected 1 to 10000"),
    (["sample", "model.pt", "a", "--mode", "top-k"], "--mode top-k: expected one of 'sample', 'greedy', 'beam'"),
    (["moses-ini", "moses.ini", "--table", "table.txt", "--out", "o.ini", "--weights", "0.1,nan"],
     "--weights 0.1,nan: expected a list of numbers from -3.40282e+38 to 3.40282e+38 (or leave it unset)"),
    (["moses-ini", "moses.ini", "--table", "table.txt", "--out", "o.ini", "--threads", "0"],
     "--threads 0: expected at least 1"),
    (["score", "model.pt", "table.txt", "--out", "o.gz", "--chunk-lines", "0"], "--chunk-lines 0: expected at least 1"),
    (["score", "model.pt", "table.txt", "--out", "o.gz", "--compresslevel", "10"], "--compresslevel 10: expected 0 to 9"),
    (["score", "model.pt", "table.txt", "--out", "o.gz", "--matmul", "blas"],
     "--matmul blas: expected one of 'auto', 'torch', 'numpy'"),
    (["score", "model.pt", "table.txt", "--out", "o.gz", "--columns", "logprob,logprob"], "--columns logprob,logprob"),
    (["prepare", "table.txt", "--out", "p", "--partition-bytes", "0"], "--partition-bytes 0: expected at least 1"),
    (["prepare", "table.txt", "--out", "p", "--valid-fraction", "1"], "--valid-fraction 1.0: expected at least 0 and below 1"),
    (["build-smt", "src.txt", "tgt.txt", "--out", "s", "--max-length-ratio", "nan"],
     "--max-length-ratio nan: expected a number above 0"),
    (["build-smt", "src.txt", "tgt.txt", "--out", "s", "--eflomal-model", "4"], "--eflomal-model 4: expected one of 1, 2, 3"),
    (TUNE + ["--nbest", "0"], "--nbest 0: expected 1 to 10000"),
    (TUNE + ["--max-iterations", "0"], "--max-iterations 0: expected at least 1"),
    (EVALUATE + ["--bootstrap-samples", "0"], "--bootstrap-samples 0: expected 1 to 100000"),
    (EVALUATE + ["--threads", "0"], "--threads 0: expected at least 1"),
    (["make-demo-data", "--out", "d", "--noise", "2"], "--noise 2.0: expected a number from 0 to 1"),
    (["translate", "src.txt", "-m", "model.pt", "-o", "o.txt", "-b", "0"], "--beam 0: expected 1 to 1000"),
    (["translate", "src.txt", "-m", "model.pt", "-o", "o.txt", "--length-penalty", "nan"],
     "--length-penalty nan: expected a number at least 0"),
    (["train-seq2seq", "src.txt", "tgt.txt", "-o", "s2s", "--lr", "inf"], "--lr inf: expected a number above 0"),
    (["train-seq2seq", "src.txt", "tgt.txt", "-o", "s2s", "--epochs", "0"], "--epochs 0.0: expected a number above 0"),
    (["rescore-nbest", "table.txt", "src.txt", "-m", "model.pt", "--out-nbest", "o.nb", "--out-1best", "o.txt",
      "--hyp-batch", "0"], "--hyp-batch 0: expected 1 to 65536"),
])
def test_bad_option_values_are_one_error_line(files, args, message):
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 1, r.output
    assert r.output.startswith("error: ") and message in r.output, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)  # no traceback
    assert not any(Path(p).exists() for p in ("model", "o.gz", "o.ini", "p", "s", "tw", "ew", "d", "o.txt", "s2s"))


DEMO = Path(__file__).parent.parent / "workflows" / "demo.toml"


@pytest.mark.parametrize("sets,message", [
    (["train.lr=nan"], r"[train] lr = nan: expected a number above 0"),
    (["train.eps=inf"], r"[train] eps = inf: expected a number above 0"),
    (["train.seed=-1"], r"[train] seed = -1: expected 0 to 9223372036854775807"),
    (["build-smt.max_length_ratio=nan"], r"[build-smt] max_length_ratio = nan: expected a number above 0"),
    (["build-smt.distortion_limit=-1"], r"[build-smt] distortion_limit = -1: expected at least 0"),
    (["score.max_tokens=0"], r"[score] max_tokens = 0: expected at least 1 (or leave it unset)"),
    (["tune.seed=-3"], r"[tune] seed = -3: expected 0 to 9223372036854775807"),
    (["tune.backend='embedded'", "tune.batch_mira=true"], r"[tune] batch_mira only apply to backend moses"),
    (["moses-ini.wp_weight=nan"], r"[moses-ini] wp_weight = nan: expected a number from -3.40282e+38 to 3.40282e+38"),
    (["moses-ini.threads=0"], r"[moses-ini] threads = 0: expected at least 1"),
])
def test_bad_workflow_values_name_file_section_and_key(sets, message):
    with pytest.raises(PhraseRescoreError) as e:
        load_workflow(DEMO, default_registry(), sets)
    assert str(e.value).startswith(f"{DEMO}: "), str(e.value)
    assert message in str(e.value)


def test_config_file_values_and_flags_over_them(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("demo.toml").write_text("train = 30\ndev = 5\ntest = 4\nseed = 7\n")
    r = CliRunner().invoke(main, ["make-demo-data", "--out", "d", "--config", "demo.toml", "--dev", "6"])
    assert r.exit_code == 0, r.output
    assert r.output.startswith("30 train / 6 dev / 4 test pairs (seed 7;"), r.output
    assert len(Path("d/dev.en").read_text().splitlines()) == 6


@pytest.mark.parametrize("text,message", [
    ("noise = 2.0\n", "demo.toml: noise = 2.0: expected a number from 0 to 1"),
    ("trian = 3\n", "demo.toml: unknown key 'trian'; valid keys: dev, noise, seed, test, train"),
    ("train = 'many'\n", "demo.toml: train = 'many': expected a whole number at least 1"),
    ("train = 1979-05-27\n", "demo.toml: train = 1979-05-27: expected a whole number at least 1"),
    ("noise = 07:32:00\n", "demo.toml: noise = 07:32:00: expected a number from 0 to 1"),
    ("noise = 1979-05-27T07:32:00-08:00\n", "demo.toml: noise = 1979-05-27T07:32:00-08:00: expected a number from 0 to 1"),
    ("train = [\n", "demo.toml: not a valid TOML file"),
])
def test_bad_config_files_are_refused(tmp_path, monkeypatch, text, message):
    monkeypatch.chdir(tmp_path)
    Path("demo.toml").write_text(text)
    r = CliRunner().invoke(main, ["make-demo-data", "--out", "d", "--config", "demo.toml"])
    assert r.exit_code == 1 and message in r.output, r.output
    assert not Path("d").exists()


def test_a_config_file_holds_the_workflow_section_keys(tmp_path, monkeypatch):
    """The [train] section of a workflow, as a file, is a valid --config of train (runner-only keys refused)."""
    monkeypatch.chdir(tmp_path)
    Path("pairs").mkdir()
    Path("t.toml").write_text("max_steps = 0\n")
    r = CliRunner().invoke(main, ["train", "pairs", "--out", "m", "--config", "t.toml", "--batch-size", "8"])
    assert r.exit_code == 1 and "t.toml: max_steps = 0: expected at least 1" in r.output, r.output
    Path("t.toml").write_text("resume = true\n")
    r = CliRunner().invoke(main, ["train", "pairs", "--out", "m", "--config", "t.toml"])
    assert r.exit_code == 1 and "t.toml: unknown key 'resume'" in r.output, r.output


#: what the command line does not load to start or to show a command's help (the config modules are free of them)
HEAVY = ("torch", "pandas", "numpy", "matplotlib", "sacremoses")


def test_the_command_line_and_every_help_load_neither_torch_nor_pandas_numpy_matplotlib_sacremoses():
    """Every command's options come from a config class whose module loads none of :data:`HEAVY`, so
    importing the command line and ``--help`` of any command start without them (``decode`` reads its own)."""
    import subprocess
    import sys

    code = ("import sys, click; from click.testing import CliRunner; from phrase_rescore.app.cli import main\n"
            "heavy = " + repr(HEAVY) + "\n"
            "print('import', sorted(m for m in heavy if m in sys.modules))\n"
            "helps = [['--help']] + [[n, '--help'] for n in main.commands if n != 'decode'] + [\n"
            "    ['plot', n, '--help'] for n in main.commands['plot'].commands]\n"
            "for a in helps:\n"
            "    r = CliRunner().invoke(main, a)\n"
            "    assert r.exit_code == 0, (a, r.output)\n"
            "print('help', sorted(m for m in heavy if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[:2] == ["import []", "help []"], out


@pytest.mark.parametrize("content, fragment", [
    (b"\xff = 1\n", "not UTF-8 text (byte 0): expected a TOML"),
    (b"[workflow\n", "not a valid TOML file"),
    (None, "not found"),
])
@pytest.mark.parametrize("what", ["workflow", "config"])
def test_bad_toml_files_are_named_errors(tmp_path, content, fragment, what):
    from click.testing import CliRunner

    from phrase_rescore.app.cli import main

    f = tmp_path / "x.toml"
    if content is not None:
        f.write_bytes(content)
    table = tmp_path / "t.txt"
    table.write_text("a ||| b ||| 0.5\n")
    args = ["run", str(f)] if what == "workflow" else ["prepare", str(table), "--out", str(tmp_path / "p"),
                                                        "--config", str(f)]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 1 and f"error: {f}: " in r.output and fragment in r.output, r.output
    assert "Traceback" not in r.output and not (tmp_path / "p").exists()

"""One number parser and one declared range for every number a user types: an option, a ``--config`` file, a
workflow key, ``--set``, a table such as ``--model-overrides``, ``moses-ini --weights``; threads capped at the
cores; sizes bounded before anything runs; and docs/promises.md listing every declared limit."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from _tiny_smt import make_tiny_system
from click.testing import CliRunner

from phrase_rescore.app.cli import main
from phrase_rescore.app.schema import limits_markdown
from phrase_rescore.app.stages import default_registry
from phrase_rescore.app.workflow import load_workflow
from phrase_rescore.core import config as config_module
from phrase_rescore.core.config import SEED_MAX, machine_cores, parse_float, parse_int
from phrase_rescore.core.errors import PhraseRescoreError

PROMISES = Path(__file__).resolve().parents[1] / "docs" / "promises.md"
TRAIN = ["train", "pairs", "--out", "m"]


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pairs").mkdir()
    return tmp_path


def cli(*argv):
    return CliRunner().invoke(main, ["--quiet", *map(str, argv)])


def refused(r, words):
    assert r.exit_code == 1 and r.output.startswith("error: ") and words in r.output, r.output
    assert "Traceback" not in r.output


@pytest.mark.parametrize("text", ["0_2", "０.５", "٤", "1e999", "inf", "nan", "0x10", " 1", "1.", "+.5e-3"])
def test_one_parser_reads_whole_ascii_tokens(text):
    ok = {"1.": 1.0, "+.5e-3": 0.0005}
    assert parse_float(text) == ok.get(text)
    assert parse_int(text) is None
    assert parse_int("-12") == -12 and parse_int("٤") is None and parse_int("4_0") is None


@pytest.mark.parametrize("value", ["0_2", "０.５", "٤", "1e39"])
def test_moses_ini_weights_are_refused_as_the_ini_would_be(files, value):
    sys_ = make_tiny_system(files / "sys")
    table = files / "t"
    table.write_text("das ||| the ||| 0.6 0.5 0.7 0.4 0.5 ||| 0-0 ||| 3 3 3\n")
    r = cli("moses-ini", sys_["ini"], "--table", table, "--out", files / "o.ini", "--weights", value)
    refused(r, f"--weights {'1e+39' if value == '1e39' else value}: expected a list of numbers from -3.40282e+38 to "
               "3.40282e+38")
    assert not (files / "o.ini").exists()


def test_a_value_reads_the_same_from_the_command_line_a_config_file_and_a_workflow(files):
    refused(cli(*TRAIN, "--lr", "0_1"), "--lr 0_1: expected a number above 0")
    refused(cli(*TRAIN, "--batch-size", "٦٤"), "--batch-size ٦٤: expected a whole number 1 to 4096")
    (files / "c.toml").write_text('lr = "0_1"\n')
    refused(cli(*TRAIN, "--config", files / "c.toml"), "lr = '0_1': expected a number above 0")
    (files / "c.toml").write_text("# a comment\nbatch_size = 1_0\n")    # TOML takes 1_0; the command line does not
    refused(cli(*TRAIN, "--config", files / "c.toml"), "c.toml:2: 1_0 is not a number as this tool reads numbers")
    (files / "c.toml").write_text('model_overrides = {hidden_dim = 0x10}\n')
    refused(cli(*TRAIN, "--config", files / "c.toml"), "0x10 is not a number as this tool reads numbers")
    refused(cli(*TRAIN, "--model-overrides", "{hidden_dim = 1_000}"), "1_000 is not a number")
    refused(cli(*TRAIN, "--model-overrides", "{hidden_dim = 1e400}"),
            "hidden_dim = inf: expected a whole number 1 to 16384")
    refused(cli(*TRAIN, "--model-overrides", "{hidden_dim = '1_6'}"), "hidden_dim = '1_6': expected a whole number 1 to 16384")


@pytest.mark.parametrize("argv, words", [
    (TRAIN + ["--seed", str(2 ** 63)], f"--seed {2 ** 63}: expected 0 to {SEED_MAX}"),
    (TRAIN + ["--batch-size", "100000000"], "--batch-size 100000000: expected 1 to 4096"),
    (TRAIN + ["--valid-batch-tokens", "100000000"], "expected 1 to 262144"),
    (TRAIN + ["--model-overrides", "{hidden_dim = 100000000}"], "hidden_dim = 100000000: expected 1 to 16384"),
    (["train-cslm", "corpus.txt", "--out", "c", "--order", "100000"], "--order 100000: expected 2 to 20"),
    (["train-cslm", "corpus.txt", "--out", "c", "--seed", str(2 ** 63)], "expected 0 to"),
    (["sample", "model.pt", "a b", "-n", "100000000"], "--num-samples 100000000: expected 1 to 10000"),
    (["sample", "model.pt", "a b", "--seed", str(2 ** 64)], f"--seed {2 ** 64}: expected 0 to {SEED_MAX}"),
    (["rescore-nbest", "n.txt", "s.txt", "-m", "m.pt", "--out-nbest", "o", "--out-1best", "b", "--seed",
      str(2 ** 31)], "expected 0 to 2147483647"),
])
def test_sizes_and_seeds_out_of_range_are_refused_before_anything_runs(files, argv, words):
    for name in ("corpus.txt", "model.pt", "n.txt", "s.txt", "m.pt"):
        (files / name).write_text("x\n")
    refused(cli(*argv), words)


def test_a_workflow_refuses_a_seed_before_the_first_stage(tmp_path):
    wf = tmp_path / "wf.toml"
    wf.write_text(f'[workflow]\nstages = ["prepare", "train"]\n[inputs]\nphrase_table = "t"\n[train]\nseed = {2 ** 63}\n')
    with pytest.raises(PhraseRescoreError, match=rf"\[train\] seed = {2 ** 63}: expected 0 to {SEED_MAX}"):
        load_workflow(wf, default_registry())
    # a seed the ensemble's second model takes as [train]'s + 1
    wf.write_text(f'[workflow]\nstages = ["prepare", "train", "train-ensemble"]\n[inputs]\nphrase_table = "t"\n'
                  f'[train]\nseed = {SEED_MAX}\n')
    with pytest.raises(PhraseRescoreError, match=rf"seed = {2 ** 63}: expected 0 to {SEED_MAX}"):
        load_workflow(wf, default_registry())
    wf.write_text('[workflow]\nstages = ["prepare", "train"]\n[inputs]\nphrase_table = "t"\n[train]\nbatch_size = 1_0\n')
    with pytest.raises(PhraseRescoreError, match="wf.toml:6: 1_0 is not a number"):
        load_workflow(wf, default_registry())
    wf.write_text('[workflow]\nstages = ["prepare", "train"]\n[inputs]\nphrase_table = "t"\n')
    with pytest.raises(PhraseRescoreError, match="--set train.seed=1_0: 1_0 is not a number"):
        load_workflow(wf, default_registry(), ["train.seed=1_0"])


def test_threads_above_the_cores_run_on_the_cores_with_a_note(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(config_module, "_NOTED", set())
    from phrase_rescore.app.schema import collect  # noqa: F401  (the options' own check caps)
    from phrase_rescore.core.config import check_value, flag_name, settings
    from phrase_rescore.moses_integration.configs import TuneConfig

    threads = next(s for s in settings(TuneConfig) if s.name == "threads")
    assert check_value(threads, 100_000, flag_name) == machine_cores()
    assert check_value(threads, 1, flag_name) == 1
    err = capsys.readouterr().err
    assert err == f"note: --threads 100000 is more than this machine's {machine_cores()} cores: using " \
                  f"{machine_cores()}\n"


def test_the_decoder_forks_no_more_processes_than_cores_and_sentences(tmp_path, monkeypatch):
    import multiprocessing

    from phrase_rescore.moses_integration.embedded.decoder import Decoder

    sys_ = make_tiny_system(tmp_path / "sys")
    started = []
    real = multiprocessing.get_context

    def spy(method=None):
        ctx = real(method)

        class Ctx:
            def Pool(self, n, **kw):   # noqa: N802 (multiprocessing's name)
                started.append(n)
                return ctx.Pool(n, **kw)
        return Ctx()

    monkeypatch.setattr(multiprocessing, "get_context", spy)
    sents = [s.split() for s in sys_["src"].read_text().splitlines()]
    dec = Decoder.from_ini(sys_["ini"], sentences=sents, progress=False)
    one = [r.best.text for r in dec.translate_all(sents, threads=1)]
    many = [r.best.text for r in dec.translate_all(sents, threads=100_000)]
    assert one == many
    assert started == [] if machine_cores() == 1 else started == [min(machine_cores(), len(sents))]


def test_decode_caps_its_threads_with_a_note(tmp_path):
    sys_ = make_tiny_system(tmp_path / "sys")
    r = CliRunner().invoke(main, ["--quiet", "decode", "-f", str(sys_["ini"]), "-i", str(sys_["src"]),
                                  "-threads", "300"])
    assert r.exit_code == 0, r.output
    assert r.stdout == "the house is small \nthe house \nhouse is small \n"
    if machine_cores() < 300:
        assert f"-threads 300 is more than this machine's {machine_cores()} cores" in r.stderr


def test_promises_lists_every_declared_limit():
    text = PROMISES.read_text(encoding="utf-8")
    m = re.search(r"<!-- limits: generated by [^\n]*-->\n(.*?)<!-- limits: end -->", text, re.S)
    assert m, "docs/promises.md has no generated Limits table"
    assert m.group(1) == limits_markdown(main), ("docs/promises.md's Limits table is not what the settings declare; "
                                                 "regenerate it with phrase_rescore.app.schema.limits_markdown(main)")
    for section in ("weight-overwrite", "feature-overwrite", "distortion-limit", "threads"):
        assert f"`[{section}]`" in text


def test_decode_refuses_a_line_longer_than_max_input_length_naming_it(tmp_path):
    """Moses has no such limit and translates any length, slowly; this decoder refuses, before loading anything, a
    line above -max-input-length (default 200 words), and with -max-input-length 0 translates it as Moses would."""
    sys_ = make_tiny_system(tmp_path / "sys")
    src = tmp_path / "in.txt"
    src.write_text("das haus\n" + " ".join(["das", "haus", "ist", "klein"] * 60) + "\nklein\n")   # 240 words
    r = CliRunner().invoke(main, ["--quiet", "decode", "-f", str(sys_["ini"]), "-i", str(src)])
    refused(r, f"{src}:2: 240 words, more than -max-input-length 200")
    assert r.stdout == ""
    r = CliRunner().invoke(main, ["--quiet", "decode", "-f", str(sys_["ini"]), "-max-input-length", "2",
                                  "-v", "0"], input="das haus\nist klein ok\n")
    refused(r, "stdin:2: 3 words, more than -max-input-length 2")
    r = CliRunner().invoke(main, ["--quiet", "decode", "-f", str(sys_["ini"]), "-max-input-length", "0"],
                           input="das haus ist klein " * 60 + "\n")
    assert r.exit_code == 0 and r.stdout.count("the house is small") == 60, r.output


def test_decode_shows_its_progress_in_words_on_one_line(tmp_path):
    sys_ = make_tiny_system(tmp_path / "sys")
    r = CliRunner().invoke(main, ["decode", "-f", str(sys_["ini"]), "-i", str(sys_["src"])])
    assert r.exit_code == 0, r.output
    tail = r.stderr[r.stderr.index("decoding:"):]           # tqdm's one line, redrawn after \r
    assert "decoding: 100%" in tail and "9.00/9.00" in tail and "word/s" in tail and tail.count("\n") == 1, r.stderr
    quiet = CliRunner().invoke(main, ["decode", "-f", str(sys_["ini"]), "-i", str(sys_["src"]), "-v", "0"])
    assert "decoding" not in quiet.stderr


def test_tune_help_names_each_backends_default_output():
    r = CliRunner().invoke(main, ["tune", "--help"])
    text = " ".join(r.output.split())
    assert "WORKDIR/moses.tuned.ini with --backend moses, WORKDIR/moses.ini with --backend embedded" in text, text


def test_training_without_validation_pairs_says_so(tmp_path):
    from test_train import make_learnable_table

    from phrase_rescore.pipeline.configs import PrepareConfig
    from phrase_rescore.pipeline.prepare import prepare

    make_learnable_table(tmp_path / "t.txt", n_pairs=60)
    prepare(tmp_path / "t.txt", tmp_path / "pairs", PrepareConfig(vocab_size=100, valid_fraction=0.0))
    r = cli("train", tmp_path / "pairs", "--out", tmp_path / "m", "--max-steps", "4", "--valid-every", "2",
            "--batch-size", "8", "--model-overrides", "{emb_dim = 4, hidden_dim = 8, maxout_units = 4, rank = 2}")
    assert r.exit_code == 0, r.output
    assert "nan" not in r.output and "inf" not in r.output, r.output
    assert "no validation (prepare held out no pairs): the model is the last step's weights" in r.output

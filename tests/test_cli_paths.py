"""Every command refuses an output that would destroy one of its inputs or another output.

An output may not be an input (the same path, a symbolic link to it, a hard link to it), nor another
output, and an output folder may not hold an input. Each refusal exits with status 1 and an
``error:`` line naming the path, before anything is written: the input keeps its bytes.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from phrase_rescore.app.cli import main as cli
from phrase_rescore.pipeline.model.checkpoint import save_checkpoint
from phrase_rescore.pipeline.model.encdec import EncDecConfig, RNNEncoderDecoder
from phrase_rescore.pipeline.vocab import Vocab, Vocabularies

FIX = Path(__file__).parent / "fixtures" / "moses"

TABLE = (b"das haus ||| the house ||| 0.5 0.25 0.125 1 ||| 0-0 1-1 ||| 4 2 1 ||| |||\n"
         b"ein mann ||| a man ||| 0.1 0.2 0.3 0.4 ||| 0-0 1-1 ||| 1 1 1 ||| |||\n")
RESCORED = (b"das haus ||| the house ||| 0.5 0.25 0.125 1 0.5 1 ||| 0-0 1-1 ||| 4 2 1 ||| |||\n")

# the inputs every case may name; a command is refused before it reads them, so most may be dummies
INPUTS = {"pt.txt": TABLE, "model.pt": None, "vocab.json": b"{}\n", "moses.ini": None, "src.txt": b"das haus\n",
          "tgt.txt": b"the house\n", "ref.txt": b"the house\n", "nbest.txt": b"0 ||| the house ||| F0= 1 ||| 1\n",
          "rescored.txt": RESCORED}


@pytest.fixture(scope="module")
def model_bytes(tmp_path_factory) -> bytes:
    """A tiny encoder-decoder checkpoint, so that `score` gets as far as it would with a real one."""
    torch.manual_seed(3)
    vocabs = Vocabularies(Vocab(["<eos>", "<unk>", "das", "haus"]), Vocab(["<eos>", "<unk>", "the", "house"]))
    model = RNNEncoderDecoder(EncDecConfig(len(vocabs.source), len(vocabs.target), emb_dim=4, hidden_dim=6,
                                           maxout_units=4, rank=3))
    path = tmp_path_factory.mktemp("model") / "model.pt"
    save_checkpoint(path, model, vocabs)
    return path.read_bytes()


@pytest.fixture
def work(tmp_path, model_bytes, monkeypatch):
    """A folder holding every input (and a prepared-pairs folder), made the current directory."""
    for name, data in INPUTS.items():
        if name == "model.pt":
            data = model_bytes
        elif name == "moses.ini":
            data = (FIX / "train-model.moses.ini").read_bytes()
        (tmp_path / name).write_bytes(data)
    (tmp_path / "pairs").mkdir()
    (tmp_path / "pairs" / "vocab.json").write_bytes(b"{}\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _collide(kind: str, victim: str, name: str) -> str:
    """An output path that is ``victim`` in the way ``kind`` says."""
    if kind == "same":
        return victim
    if kind == "symlink":
        os.symlink(os.path.abspath(victim), name)
    elif kind == "hardlink":
        os.link(victim, name)
    elif kind == "dotted":                     # the same file, spelled differently
        return f"./sub/../{victim}"
    return name


# (command line with {OUT} for the colliding output, the input it collides with, the option named)
FILE_CASES = [
    ("score model.pt pt.txt --out {OUT}", "pt.txt", "--out"),
    ("score model.pt pt.txt --out {OUT}", "model.pt", "--out"),
    ("score model.pt pt.txt --vocab vocab.json --out {OUT}", "vocab.json", "--out"),
    ("score model.pt pt.txt --out new.txt --on-error keep --rejects {OUT}", "pt.txt", "--rejects"),
    ("score model.pt pt.txt --out new.txt --on-error keep --rejects {OUT}", "model.pt", "--rejects"),
    ("moses-ini moses.ini --table rescored.txt --out {OUT}", "moses.ini", "--out"),
    ("moses-ini moses.ini --table rescored.txt --out {OUT}", "rescored.txt", "--out"),
    ("tune moses.ini --dev-src src.txt --dev-ref ref.txt --workdir tw --out {OUT}", "moses.ini", "--out"),
    ("tune moses.ini --dev-src src.txt --dev-ref ref.txt --workdir tw --out {OUT}", "ref.txt", "--out"),
    ("translate src.txt -m model.pt -o {OUT}", "src.txt", "--output"),
    ("translate src.txt -m model.pt -o {OUT}", "model.pt", "--output"),
    ("translate src.txt -m model.pt -o out.txt --scores {OUT}", "src.txt", "--scores"),
    ("rescore-nbest nbest.txt src.txt -m model.pt --out-nbest {OUT} --out-1best 1best.txt", "nbest.txt",
     "--out-nbest"),
    ("rescore-nbest nbest.txt src.txt -m model.pt --out-nbest {OUT} --out-1best 1best.txt", "model.pt",
     "--out-nbest"),
    ("rescore-nbest nbest.txt src.txt -m model.pt --out-nbest new.nbest --out-1best {OUT}", "src.txt",
     "--out-1best"),
]


@pytest.mark.parametrize("kind", ["same", "symlink", "hardlink", "dotted"])
@pytest.mark.parametrize("line, victim, option", FILE_CASES)
def test_output_that_is_an_input_is_refused(work, line, victim, option, kind):
    (work / "sub").mkdir()
    before = (work / victim).read_bytes()
    out = _collide(kind, victim, "the-output")
    r = CliRunner().invoke(cli, ["--quiet"] + line.replace("{OUT}", out).split())
    assert r.exit_code == 1, r.output
    assert isinstance(r.exception, SystemExit)                      # a message, not a traceback
    assert f"error: {out}: {option} would overwrite the input" in r.output
    assert victim in r.output
    assert (work / victim).read_bytes() == before
    assert sorted(p.name for p in work.iterdir()) == sorted(list(INPUTS) + ["pairs", "sub"]
                                                              + ([out] if kind in ("symlink", "hardlink") else []))


# two outputs of one command that are one file: (command line with {A} and {B}, option of A, option of B)
OUTPUT_PAIRS = [
    ("score model.pt pt.txt --out {A} --on-error keep --rejects {B}", "--out", "--rejects"),
    ("translate src.txt -m model.pt -o {A} --scores {B}", "--output", "--scores"),
    ("rescore-nbest nbest.txt src.txt -m model.pt --out-nbest {A} --out-1best {B}", "--out-nbest", "--out-1best"),
]
# outputs derived from another's name: only the same path can collide
DERIVED_PAIRS = [
    ("score model.pt pt.txt --out {A} --on-error keep --rejects {A}.partial", "the partial output", "--rejects"),
    ("score model.pt pt.txt --out {A} --on-error keep --rejects {A}.partial.json", "its manifest", "--rejects"),
    ("tune moses.ini --dev-src src.txt --dev-ref ref.txt --out {A}.d --workdir {A}.d", "--out", "--workdir"),
    ("moses-ini moses.ini --table rescored.txt --out {A}.minphr --binarized-prefix {A}", "--out",
     "--binarized-prefix"),
]


@pytest.mark.parametrize("line, opt_a, opt_b, kind",
                         [(*case, kind) for case in OUTPUT_PAIRS for kind in ("same", "symlink", "hardlink")]
                         + [(*case, "same") for case in DERIVED_PAIRS])
def test_two_outputs_that_are_one_file_are_refused(work, line, opt_a, opt_b, kind):
    (work / "old").write_bytes(b"an earlier output\n")
    b = _collide(kind, "old", "link")
    r = CliRunner().invoke(cli, ["--quiet"] + line.replace("{A}", "old").replace("{B}", b).split())
    assert r.exit_code == 1, r.output
    assert isinstance(r.exception, SystemExit)
    assert "are one file" in r.output and opt_a in r.output and opt_b in r.output
    assert (work / "old").read_bytes() == b"an earlier output\n"


# output folders that are or hold an input: (command line with {DIR}, the input inside, the option)
DIR_CASES = [
    ("prepare {DIR}/pt.txt --out {DIR}", "pt.txt", "--out"),
    ("prepare pt.txt --src-corpus {DIR}/src.txt --tgt-corpus tgt.txt --out {DIR}", "src.txt", "--out"),
    ("build-smt {DIR}/src.txt tgt.txt --out {DIR}", "src.txt", "--out"),
    ("train-seq2seq src.txt {DIR}/tgt.txt -o {DIR}", "tgt.txt", "--out-dir"),
    ("train-seq2seq src.txt tgt.txt --vocab {DIR}/vocab.json -o {DIR}", "vocab.json", "--out-dir"),
    ("tune {DIR}/moses.ini --dev-src src.txt --dev-ref ref.txt --workdir {DIR}", "moses.ini", "--workdir"),
    ("evaluate --system base={DIR}/moses.ini --test-src src.txt --test-ref ref.txt --workdir {DIR}", "moses.ini",
     "--workdir"),
    ("evaluate --system base=moses.ini --test-src src.txt --test-ref {DIR}/ref.txt --workdir {DIR}", "ref.txt",
     "--workdir"),
    ("train {DIR}/pairs --out {DIR}", "pairs", "--out"),
]


@pytest.mark.parametrize("spelled", ["same", "symlink"])
@pytest.mark.parametrize("line, inner, option", DIR_CASES)
def test_output_folder_holding_an_input_is_refused(work, line, inner, option, spelled):
    d = work / "d"
    d.mkdir()
    shutil.move(work / inner, d / inner)
    before = sorted(os.listdir(d))
    folder = "d"
    if spelled == "symlink":
        os.symlink(d, "dlink")
        folder = "dlink"
    argv = line.replace("{DIR}", folder).split()
    argv = [a.replace(f"{folder}/", "d/", 1) if spelled == "symlink" else a for a in argv]  # input named as d/..
    r = CliRunner().invoke(cli, ["--quiet"] + argv)
    assert r.exit_code == 1, r.output
    assert isinstance(r.exception, SystemExit)
    assert f"error: {folder}: the output folder {option} holds the input" in r.output
    assert sorted(os.listdir(d)) == before


def test_output_folder_that_is_the_input_folder_is_refused(work):
    r = CliRunner().invoke(cli, ["--quiet", "train", "pairs", "--out", "pairs"])
    assert r.exit_code == 1 and "error: pairs: the output folder --out is the input PAIRS_DIR pairs" in r.output
    assert os.listdir(work / "pairs") == ["vocab.json"]


# the failures seen with real inputs, which exited 0 and destroyed a file
def test_score_rejects_on_the_input_table_keeps_the_table(work):
    r = CliRunner().invoke(cli, ["--quiet", "score", "model.pt", "pt.txt", "--out", "new.txt", "--on-error", "keep",
                                 "--rejects", "pt.txt", "--device", "cpu", "--matmul", "torch"])
    assert r.exit_code == 1 and "--rejects would overwrite the input TABLE pt.txt" in r.output
    assert (work / "pt.txt").read_bytes() == TABLE and not (work / "new.txt").exists()
    assert not (work / "new.txt.partial").exists()


def test_score_out_on_the_model_keeps_the_checkpoint(work, model_bytes):
    r = CliRunner().invoke(cli, ["--quiet", "score", "model.pt", "pt.txt", "--out", "model.pt", "--device", "cpu"])
    assert r.exit_code == 1 and "--out would overwrite the input MODEL model.pt" in r.output
    assert (work / "model.pt").read_bytes() == model_bytes


def test_score_in_a_training_folder_refuses_its_model_but_not_a_new_name(work, model_bytes):
    (work / "rnn").mkdir()
    shutil.copy(work / "model.pt", work / "rnn" / "model.pt")
    r = CliRunner().invoke(cli, ["--quiet", "score", "rnn", "pt.txt", "--out", "rnn/model.pt", "--device", "cpu"])
    assert r.exit_code == 1 and "--out would overwrite the input MODEL rnn/model.pt" in r.output
    assert (work / "rnn" / "model.pt").read_bytes() == model_bytes
    r = CliRunner().invoke(cli, ["--quiet", "score", "rnn", "pt.txt", "--out", "rnn/scored.txt", "--device", "cpu",
                                 "--matmul", "torch"])
    assert r.exit_code == 0, r.output
    assert (work / "rnn" / "scored.txt").read_bytes().count(b"\n") == 2


def test_moses_ini_out_on_the_old_ini_keeps_it(work):
    before = (work / "moses.ini").read_bytes()
    r = CliRunner().invoke(cli, ["--quiet", "moses-ini", "moses.ini", "--table", "rescored.txt", "--out", "moses.ini"])
    assert r.exit_code == 1 and "error: moses.ini: --out would overwrite the input OLD_INI moses.ini" in r.output
    assert (work / "moses.ini").read_bytes() == before
    r = CliRunner().invoke(cli, ["--quiet", "moses-ini", "moses.ini", "--table", "rescored.txt", "--out", "new.ini"])
    assert r.exit_code == 0, r.output
    assert b"num-features=6" in (work / "new.ini").read_bytes()

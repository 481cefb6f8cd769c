"""BLEU/chrF and paired-bootstrap p-values checked against sacrebleu's own CLI; Table 1 written by evaluate."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.hashing import sha256_file
from phrase_rescore.core.reading import read_text_lines
from phrase_rescore.moses_integration.backend import Backend
from phrase_rescore.moses_integration.configs import EvaluateConfig, SystemSpec
from phrase_rescore.moses_integration.report import DEV_NOTE, evaluate, score_systems

FIX = Path(__file__).parent / "fixtures" / "moses"

REF = ["The cat sat on the mat.", "It is raining today.", "A quick brown fox jumps over the lazy dog.",
       "We will meet at noon tomorrow.", "The results were surprising to everyone.",
       "She bought three apples and a pear.", "Nobody knew the answer.", "The train leaves at 6 p.m."]
BASE = ["The cat sat on a mat.", "It rains today.", "A fast brown fox jumps over the lazy dog.",
        "We meet at noon tomorrow.", "The results surprised everyone.", "She bought three apples and one pear.",
        "No one knew an answer.", "The train goes at 6 p.m."]
SYS1 = ["The cat sat on the mat.", "It is raining today.", "A fast brown fox jumped over the lazy dog.",
        "We will meet at noon tomorrow.", "The results were surprising for everyone.",
        "She buys three apples and a pear.", "Nobody knew the answer.", "The train leaves at 6 p.m."]
SYS2 = ["cat the sat mat.", "It raining.", "A brown fox jumps over the dog.", "We will meet at noon tomorrow.",
        "Results were surprising to everyone.", "She bought apples.", "Nobody knew.", "The train leaves at 6."]


def _write(path: Path, lines) -> Path:
    path.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    return path


def _sacrebleu(*args) -> str:
    return subprocess.run([sys.executable, "-m", "sacrebleu", *args], capture_output=True, text=True, check=True,
                          env={"SACREBLEU_SEED": "12345", "PATH": "", "PYTHONIOENCODING": "utf-8"}).stdout


def test_single_system_scores_equal_sacrebleu_cli(tmp_path):
    ref, hyp = _write(tmp_path / "ref", REF), _write(tmp_path / "hyp", SYS1)
    cli = json.loads(_sacrebleu(str(ref), "-i", str(hyp), "-m", "bleu", "chrf", "-w", "4"))
    ours = score_systems([("sys1", SYS1)], REF)
    assert ours.bleu[0] == pytest.approx(cli[0]["score"], abs=5e-5)
    assert ours.chrf[0] == pytest.approx(cli[1]["score"], abs=5e-5)
    assert ours.signatures["BLEU"] == cli[0]["signature"]
    assert ours.signatures["chrF2"] == cli[1]["signature"]
    assert ours.p_bleu == [None]


def test_paired_bootstrap_p_values_equal_sacrebleu_cli(tmp_path):
    ref = _write(tmp_path / "ref", REF)
    files = [str(_write(tmp_path / n, h)) for n, h in (("base", BASE), ("sys1", SYS1), ("sys2", SYS2))]
    out = _sacrebleu(str(ref), "-i", *files, "-m", "bleu", "chrf", "--paired-bs", "--paired-bs-n", "300",
                     "-f", "text")  # sacrebleu 2.6 cannot write paired results as JSON (float32)
    # rows: "│ <name> │ 54.8 (54.1 ± 21.6) │ 71.1 (...) │" then "│ │ (p = 0.1393) │ (p = 0.1095) │"
    scores = [tuple(map(float, m)) for m in re.findall(r"│\s*\S[^│]*│\s*([\d.]+) \([^│]*│\s*([\d.]+) \(", out)]
    pvals = [tuple(map(float, m)) for m in re.findall(r"\(p = ([\d.]+)\)\*?\s*│\s*\(p = ([\d.]+)\)", out)]
    assert len(scores) == 3 and len(pvals) == 2, out
    ours = score_systems([("base", BASE), ("sys1", SYS1), ("sys2", SYS2)], REF, n_samples=300, seed=12345)
    for i in range(3):
        assert round(ours.bleu[i], 1) == scores[i][0]
        assert round(ours.chrf[i], 1) == scores[i][1]
    assert ours.p_bleu[0] is None
    for i in range(2):
        assert round(ours.p_bleu[i + 1], 4) == pvals[i][0]
        assert round(ours.p_chrf[i + 1], 4) == pvals[i][1]
    sig = re.search(r"BLEU\s+(nrefs:\S+)", out).group(1)
    assert ours.signatures["BLEU"] == sig


def test_mismatched_lengths_are_refused():
    with pytest.raises(PhraseRescoreError, match="has 7 lines but the reference has 8"):
        score_systems([("b", BASE), ("s", SYS1[:7])], REF)


class _TableBackend(Backend):
    """A backend that 'decodes' by looking up prepared tokenized outputs per moses.ini (tests only)."""

    name = "table"

    def __init__(self, outputs: dict[str, list[str]]):
        self.outputs = outputs
        self.calls = []

    def decode(self, ini, input_path, output_path, nbest_path=None, nbest=0, threads=1):
        self.calls.append((Path(ini).name, Path(input_path).name))
        lines = self.outputs[Path(ini).name]
        assert len(lines) == len(read_text_lines(input_path))
        _write(Path(output_path), lines)


def _tok(lines):
    from sacremoses import MosesTokenizer

    mt = MosesTokenizer(lang="en")
    return [mt.tokenize(x, return_str=True, escape=False) for x in lines]


def test_evaluate_writes_table1_and_resumes(tmp_path, monkeypatch):
    inis = {}
    for name in ("base.ini", "rnn.ini", "rnnwp.ini"):
        inis[name] = tmp_path / name
        inis[name].write_text((FIX / "train-model.moses.ini").read_text() + f"# {name}\n")
    model = tmp_path / "model.pt"
    model.write_bytes(b"weights")
    backend = _TableBackend({"base.ini": _tok(BASE), "rnn.ini": _tok(SYS1), "rnnwp.ini": _tok(SYS2)})
    monkeypatch.setattr("phrase_rescore.moses_integration.report.get_backend", lambda name, home=None: backend)
    src = _write(tmp_path / "test.tok.fr", ["x"] * len(REF))
    ref = _write(tmp_path / "test.en", REF)
    dsrc = _write(tmp_path / "dev.tok.fr", ["y"] * len(REF))
    cfg = EvaluateConfig(systems=[SystemSpec("Baseline", inis["base.ini"]),
                                  SystemSpec("+RNN", inis["rnn.ini"], model),
                                  SystemSpec("+RNN+WP", inis["rnnwp.ini"], model)],
                         test_src=src, test_ref=ref, dev_src=dsrc, dev_ref=ref, workdir=tmp_path / "eval",
                         bootstrap_samples=100)
    df = evaluate(cfg)
    assert list(df["configuration"]) == ["Baseline", "+RNN", "+RNN+WP"]
    # detokenized output scored as sacrebleu scores the raw text
    want = score_systems([("b", BASE), ("s1", SYS1), ("s2", SYS2)], REF, n_samples=100)
    assert list(df["test_bleu"]) == [round(x, 2) for x in want.bleu]
    assert list(df["test_delta"]) == [round(x - want.bleu[0], 2) for x in want.bleu]
    assert df["test_p"].iloc[1] == pytest.approx(want.p_bleu[1])
    assert df["ini_sha256"].iloc[1] == sha256_file(inis["rnn.ini"])
    assert df["model_sha256"].iloc[2] == sha256_file(model) and pd.isna(df["model_sha256"].iloc[0])
    csv = pd.read_csv(tmp_path / "eval" / "table1.csv")
    assert list(csv.columns) == ["configuration", "dev_bleu", "dev_delta", "dev_p", "dev_chrf", "test_bleu",
                                 "test_delta", "test_p", "test_chrf", "ini_sha256", "model_sha256"]
    md = (tmp_path / "eval" / "table1.md").read_text()
    assert md.splitlines()[0] == ("| Configuration | Dev BLEU (MERT's set) | Δ dev | p (dev) | Test BLEU | Δ test "
                                  "| p (test) | Test chrF |")
    assert DEV_NOTE in md              # the dev column is the set the weights were tuned on, and says so
    assert f"| +RNN | {want.bleu[1]:.2f} | {want.bleu[1] - want.bleu[0]:+.2f} |" in md
    assert sha256_file(inis["rnnwp.ini"]) in md and "nrefs:1|bs:100|seed:12345" in md
    assert len(backend.calls) == 6
    # a rerun reuses the decoded outputs; a changed ini is decoded again
    evaluate(cfg)
    assert len(backend.calls) == 6
    inis["rnn.ini"].write_text(inis["rnn.ini"].read_text() + "# changed\n")
    evaluate(cfg)
    assert sorted(backend.calls[6:]) == [("rnn.ini", "dev.tok.fr"), ("rnn.ini", "test.tok.fr")]


def test_evaluate_cli_with_standin_moses(tmp_path, monkeypatch):
    from _moses_standin import make_standin_moses
    from click.testing import CliRunner

    from phrase_rescore.app.cli import main

    monkeypatch.setenv("MOSES_HOME", str(make_standin_moses(tmp_path / "moses")))
    src = _write(tmp_path / "test.tok", _tok(SYS1))   # the stand-in decoder copies its input
    ref = _write(tmp_path / "test.ref", REF)
    r = CliRunner().invoke(main, ["evaluate", "--system", f"Baseline={FIX / 'train-model.moses.ini'}",
                                  "--system", f"+RNN={FIX / 'rescored.moses.ini'}", "--test-src", str(src),
                                  "--test-ref", str(ref), "--workdir", str(tmp_path / "ev"), "--bootstrap-samples", "50"])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "ev" / "test.Baseline.detok").read_text().splitlines() == SYS1
    row = pd.read_csv(tmp_path / "ev" / "table1.csv").iloc[1]
    assert row["configuration"] == "+RNN" and row["test_delta"] == 0.0
    assert row["test_bleu"] == round(score_systems([("s", SYS1)], REF).bleu[0], 2)
    r = CliRunner().invoke(main, ["evaluate", "--system", "x", "--test-src", str(src), "--test-ref", str(ref),
                                  "--workdir", str(tmp_path / "ev2")])
    assert r.exit_code != 0 and "expected NAME=PATH" in r.output


def test_evaluate_with_embedded_backend(tmp_path):
    from _tiny_smt import make_tiny_system

    s = make_tiny_system(tmp_path / "sys")
    df = evaluate(EvaluateConfig(systems=[SystemSpec("Baseline", s["ini"])], test_src=s["src"], test_ref=s["ref"],
                                 workdir=tmp_path / "ev", backend="embedded", target_lang=None))
    hyps = read_text_lines(tmp_path / "ev" / "test.Baseline.tok")
    assert len(hyps) == 3
    assert df["test_bleu"].iloc[0] == round(score_systems([("b", hyps)], read_text_lines(s["ref"])).bleu[0], 2)

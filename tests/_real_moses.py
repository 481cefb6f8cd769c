"""Helpers for the tests that run a real Moses build (``MOSES_HOME``), and the one tiny system they share.

Every such test module sets ``pytestmark = needs_moses``: without ``MOSES_HOME`` the tests are skipped
and :func:`pytest_terminal_summary` (imported by conftest.py) prints why. :func:`tiny_system` builds,
once per test session, a complete small system the way a user would: the demo-corpus generator
(300 training pairs), ``build-smt``, a tiny encoder-decoder trained for a few dozen updates,
``score`` (+RNN and WP columns) and ``moses-ini``.

External programs are always run with argument lists, one decoder thread and small stacks.
"""
from __future__ import annotations

import gzip
import math
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pytest

ENV = "MOSES_HOME"
SKIP_REASON = (f"{ENV} is not set: the tests against a real Moses build are skipped "
               f"(set {ENV} to a Moses installation with bin/moses and scripts/, e.g. ../shared/moses)")


def moses_home() -> Path | None:
    """The real Moses root named by ``MOSES_HOME``, or None when it is unset or empty."""
    v = os.environ.get(ENV, "").strip()
    return Path(v).expanduser().resolve() if v else None


needs_moses = pytest.mark.skipif(moses_home() is None, reason=SKIP_REASON)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Say which Moses the real-Moses tests ran against, or why they were skipped."""
    home = moses_home()
    terminalreporter.write_line(f"real Moses: {home}" if home else f"real Moses: {SKIP_REASON}")


def tool(name: str) -> Path:
    """``MOSES_HOME/bin/NAME`` (or ``tools/NAME``); the test fails when the installation lacks it."""
    home = moses_home()
    assert home is not None, SKIP_REASON
    for sub in ("bin", "tools"):
        p = home / sub / name
        if p.is_file():
            return p
    raise AssertionError(f"{ENV}={home} has no bin/{name}")


def script(rel: str) -> Path:
    """``MOSES_HOME/scripts/REL``."""
    p = moses_home() / "scripts" / rel
    assert p.is_file(), f"{p} is missing"
    return p


def run(argv: Sequence[str | os.PathLike], stdin: bytes | None = None, cwd: Path | None = None,
        env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``argv`` (no shell), capture its output; a non-zero exit fails the test with the output's tail."""
    argv = [os.fspath(a) for a in argv]
    p = subprocess.run(argv, input=stdin, capture_output=True, cwd=cwd, env=env, timeout=timeout)
    if p.returncode != 0:
        tail = (p.stdout[-2000:] + b"\n" + p.stderr[-3000:]).decode("utf-8", "replace")
        raise AssertionError(f"{' '.join(argv)} exited with {p.returncode}:\n{tail}")
    return p


def moses_decode(ini: Path, lines: Sequence[str], nbest: Path | None = None, n: int = 10,
                 extra: Sequence[str] = (), distinct: bool = True) -> tuple[list[str], str]:
    """Real ``moses -f INI -threads 1`` on ``lines``: (1-best lines, stderr); an n-best list when asked."""
    argv = [tool("moses"), "-f", ini, "-threads", "1", "-v", "1", *extra]
    if nbest is not None:
        argv += ["-n-best-list", nbest, str(n)] + (["distinct"] if distinct else [])
    p = run(argv, stdin="".join(s + "\n" for s in lines).encode("utf-8"))
    out = p.stdout.decode("utf-8").split("\n")
    assert out[-1] == "" and len(out) == len(lines) + 1, p.stdout[-500:]
    return [s.rstrip(" ") for s in out[:-1]], p.stderr.decode("utf-8", "replace")


@dataclass
class NbestLine:
    """One line of a Moses n-best list, as Moses writes it (the labelled feature scores kept in order)."""

    sent: int
    text: str
    features: dict[str, list[float]]
    total: float
    segmentation: list[tuple[tuple[int, int], tuple[int, int]]]


def _range(s: str) -> tuple[int, int]:
    a, _, b = s.partition("-")
    return int(a), int(b or a)


def printed_slack(a: float, b: float) -> float:
    """How far apart two values Moses and we print may be and still be one number: 1e-4 of summation
    order, widened by what printing six significant digits (C++'s default precision) can lose, half a
    unit of the sixth digit on each side (-124.5345 prints as -124.534 from one decoder, -124.535 from the
    other)."""
    m = max(abs(a), abs(b))
    return 1e-4 + (10.0 ** (math.floor(math.log10(m)) - 5) if m > 0 else 0.0)


def printed_close(a: float, b: float) -> bool:
    """Whether ``a`` and ``b``, as Moses and we print them, are one number (:func:`printed_slack`)."""
    return abs(a - b) <= printed_slack(a, b)


def parse_nbest(path: Path) -> list[NbestLine]:
    """Parse ``moses -n-best-list`` output (with or without ``-include-segmentation-in-n-best``)."""
    out = []
    for raw in Path(path).read_text(encoding="utf-8").splitlines():
        fields = raw.split(" ||| ")
        feats: dict[str, list[float]] = {}
        name = None
        for tok in fields[2].split():
            if tok.endswith("="):
                name = tok[:-1]
                feats[name] = []
            else:
                feats[name].append(float(tok))
        seg = []
        if len(fields) > 4:
            for item in fields[4].split():
                s, _, t = item.partition("=")
                seg.append((_range(s), _range(t)))
        out.append(NbestLine(int(fields[0]), fields[1].strip(), feats, float(fields[3]), seg))
    return out


def read_table(path: Path) -> dict[tuple[str, str], list[str]]:
    """(source, target) -> the score texts, for a text phrase table (plain or gzip)."""
    opener = gzip.open if Path(path).read_bytes()[:2] == b"\x1f\x8b" else open
    table = {}
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split(" ||| ")
            table[(fields[0].strip(), fields[1].strip())] = fields[2].split()
    return table


def moses_log(text: str) -> float:
    """What Moses stores for a phrase-table score written as ``text``: FloorScore(ln(float32(text)))."""
    import numpy as np

    x = np.float32(float(text))
    return max(math.log(x), -100.0) if x > 0 else -100.0


def tokenize_file(src: Path, out: Path, lang: str) -> list[str]:
    """Tokenize and lowercase ``src`` as the workflow's tokenize stage does; write ``out``; return its lines."""
    from phrase_rescore.core.reading import read_text_lines
    from phrase_rescore.moses_integration.embedded.clean import strip_pipes
    from phrase_rescore.moses_integration.embedded.tokenizer import TokenizeConfig, Tokenizer

    tok = Tokenizer(TokenizeConfig(lang=lang, case="lower"))
    lines = [" ".join(strip_pipes(tok.tokenize(s))[0]) for s in read_text_lines(src)]
    out.write_text("".join(s + "\n" for s in lines), encoding="utf-8")
    return lines


@dataclass
class TinySystem:
    """The shared tiny system (all paths absolute)."""

    root: Path
    corpus: Path            # demo corpus: train/dev/test .en/.fr, raw
    smt: Path               # build-smt's output directory
    dev_src: Path           # tokenized, lowercased
    dev_ref: Path
    test_src: Path
    test_ref: Path          # raw
    model: Path             # the encoder-decoder checkpoint
    rescored: Path          # phrase-table.rnn-wp.gz: 4 + RNN + WP columns
    rescored_ini: Path      # moses-ini's output for it

    @property
    def ini(self) -> Path:
        return self.smt / "moses.ini"

    @property
    def table(self) -> Path:
        return self.smt / "phrase-table.gz"


def cli(*args: str) -> str:
    """Run ``phrase-rescore ARGS`` in process; fail the test with its output on a non-zero exit."""
    from click.testing import CliRunner

    from phrase_rescore.app.cli import main

    r = CliRunner().invoke(main, ["--quiet", *args])
    assert r.exit_code == 0, r.output + (repr(r.exception) if r.exception else "")
    return r.output


_SYSTEM: TinySystem | BaseException | None = None


def build_tiny_system(root: Path) -> TinySystem:
    """Build the tiny system under ``root`` (see the module docstring); about 10 s on one busy core."""
    import torch

    from phrase_rescore.data.demo_corpus import generate

    corpus = root / "corpus"
    generate(corpus, n_train=300, n_dev=8, n_test=8, seed=5)
    smt = root / "smt"
    cli("build-smt", str(corpus / "train.en"), str(corpus / "train.fr"), "--out", str(smt), "--lm-order", "3",
        "--max-phrase-length", "4", "--eflomal-model", "2")
    dev_src, dev_ref, test_src = root / "dev.tok.en", root / "dev.tok.fr", root / "test.tok.en"
    tokenize_file(corpus / "dev.en", dev_src, "en")
    tokenize_file(corpus / "dev.fr", dev_ref, "fr")
    tokenize_file(corpus / "test.en", test_src, "en")
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cli("prepare", str(smt / "phrase-table.gz"), "--out", str(root / "pairs"), "--vocab-size", "200")
        cli("train", str(root / "pairs"), "--out", str(root / "rnn"), "--preset", "small",
            "--model-overrides", "{emb_dim = 8, hidden_dim = 16, maxout_units = 8, rank = 6}", "--max-steps", "30",
            "--valid-every", "30",
            "--valid-max-pairs", "200", "--device", "cpu")
        rescored = root / "phrase-table.rnn-wp.gz"
        cli("score", str(root / "rnn" / "model.pt"), str(smt / "phrase-table.gz"), "--out", str(rescored),
            "--threads", "1")
    finally:
        torch.set_num_threads(n)
    rescored_ini = root / "moses.rnn-wp.ini"
    cli("moses-ini", str(smt / "moses.ini"), "--table", str(rescored), "--out", str(rescored_ini))
    return TinySystem(root, corpus, smt, dev_src, dev_ref, test_src, corpus / "test.fr", root / "rnn" / "model.pt",
                      rescored, rescored_ini)


@pytest.fixture(scope="session")
def tiny_system(tmp_path_factory) -> TinySystem:
    """The tiny system, built once per session however many modules import this fixture."""
    global _SYSTEM
    if moses_home() is None:
        pytest.skip(SKIP_REASON)
    if isinstance(_SYSTEM, BaseException):       # built once: a failure is not retried by every module
        pytest.fail(f"the tiny system could not be built: {_SYSTEM}")
    if _SYSTEM is None:
        try:
            _SYSTEM = build_tiny_system(tmp_path_factory.mktemp("real-moses-system"))
        except BaseException as e:
            _SYSTEM = e
            raise
    return _SYSTEM

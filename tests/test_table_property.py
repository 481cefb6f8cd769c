"""Random tables mixing good and bad lines through `score`: nothing a user gave is lost, moved or altered.

With ``--on-error keep`` the output has the input's lines in their order, each with every original byte
and two new values that Moses reads as finite float32s > 0; in the default mode the error names the
first bad line. Also: ``score``, ``prepare`` and ``moses-ini`` all refuse an empty table, with one message.
"""
from __future__ import annotations

import gzip
import re
import tempfile
from pathlib import Path

import pytest
import torch
from _tables import write_table
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from phrase_rescore.app.cli import main as cli
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.moses_integration.moses_values import moses_float32
from phrase_rescore.moses_integration.phrase_table import EMPTY_TABLE
from phrase_rescore.pipeline.configs import ScoreConfig
from phrase_rescore.pipeline.model.checkpoint import save_checkpoint
from phrase_rescore.pipeline.model.encdec import EncDecConfig, RNNEncoderDecoder
from phrase_rescore.pipeline.score import score_table
from phrase_rescore.pipeline.vocab import Vocab, Vocabularies

pytestmark = pytest.mark.usefixtures("one_thread")

SRC_WORDS = ["das", "haus", "ist", "klein"]
TGT_WORDS = ["the", "house", "is", "small"]
WORDS = SRC_WORDS + TGT_WORDS + ["Katze", "für", "x"]  # some inside the shortlists, some not
GOOD_SCORES = ["0.5", "1", "0", "-0", "1e-05", ".25", "3.", "+0.125", "2.718282", "1E-30", "3.4e38"]
BAD_SCORES = ["zero", "-0.5", "inf", "-inf", "nan", "1e39", "1e308", "1_0", "0x10", "Infinity"]
# good lines (short, or 90-300 words a side: more unknown words than the WP column can count) and bad ones:
# too few fields, a wrong score count, a bad score, invalid UTF-8, a CRLF ending, an empty phrase
LINE_KINDS = ["good", "good", "good", "huge", "fields", "count", "score", "utf8", "crlf", "empty"]


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    torch.manual_seed(3)
    vocabs = Vocabularies(Vocab(["<eos>", "<unk>"] + SRC_WORDS), Vocab(["<eos>", "<unk>"] + TGT_WORDS))
    cfg = EncDecConfig(len(vocabs.source), len(vocabs.target), emb_dim=4, hidden_dim=8, maxout_units=4, rank=3,
                       bias=True, init_std=0.3)
    path = tmp_path_factory.mktemp("model") / "model.pt"
    save_checkpoint(path, RNNEncoderDecoder(cfg), vocabs)
    return path


@st.composite
def table_lines(draw):
    """``(lines without endings, kinds, final newline)``; a table of 1 to 12 lines of random kinds."""
    kinds = draw(st.lists(st.sampled_from(LINE_KINDS), min_size=1, max_size=12))
    # a wrong score count is wrong against the first good line: before one, the line would set the count
    first_good = min((i for i, k in enumerate(kinds) if k in ("good", "huge")), default=len(kinds))
    kinds = ["good" if k == "count" and i < first_good else k for i, k in enumerate(kinds)]
    lines = []
    for kind in kinds:
        n_words = (draw(st.integers(90, 300)),) * 2 if kind == "huge" else \
            (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
        src, tgt = (" ".join(draw(st.lists(st.sampled_from(WORDS), min_size=n, max_size=n))) for n in n_words)
        scores = draw(st.lists(st.sampled_from(GOOD_SCORES), min_size=4, max_size=4))
        if kind == "count":
            scores = (scores * 2)[:draw(st.sampled_from([0, 1, 3, 5]))]
        if kind == "score":
            scores[draw(st.integers(0, 3))] = draw(st.sampled_from(BAD_SCORES))
        if kind == "empty":
            src, tgt = ("", tgt) if draw(st.booleans()) else (src, " ")
        sep = draw(st.sampled_from([" ", "\t", "  "]))
        tail = draw(st.sampled_from(["", " ||| 0-0 ||| 1 1 1 ||| |||", "|||0-0", " ||| ||| 2 2 1 ||| ||| {{K v}}"]))
        line = f"{src} ||| {tgt} ||| {sep.join(scores)}{tail}".encode("utf-8")
        if kind == "fields":
            line = f"{src} ||| {tgt}".encode("utf-8") if draw(st.booleans()) else src.encode("utf-8")
        if kind == "utf8":
            cut = draw(st.integers(0, len(line)))
            line = line[:cut] + b"\xff" + line[cut:]
        if kind == "crlf":
            line += b"\r"
        lines.append(line)
    return lines, kinds, draw(st.booleans())


def split_lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def inserted(orig: bytes, out: bytes) -> bytes | None:
    """The bytes ``out`` has in one place beyond ``orig`` when it is ``orig`` with them inserted, else None."""
    n = len(out) - len(orig)
    if n <= 0:
        return None
    prefix = next((i for i, (a, b) in enumerate(zip(orig, out)) if a != b), len(orig))
    for p in range(prefix, -1, -1):
        if out[:p] == orig[:p] and out[p + n:] == orig[p:] and re.fullmatch(rb" \S+ \S+", out[p:p + n]):
            return out[p:p + n]
    return None


@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(table=table_lines())
@example(table=([b"a ||| b ||| -inf inf 0.5 0.5", b"das ||| the ||| 0.5 0.5 0.5 0.5"], ["score", "good"], True))
@example(table=([b"das ||| the ||| 1e308 1e308 0.5 0.5", b"x ||| y ||| 1_0 1 1 1"], ["score", "score"], False))
@example(table=([b"das ||| the ||| 1 1 1 1", b" ".join([b"Katze"] * 200) + b" ||| the ||| 1 1 1 1 ||| |||"],
                ["good", "huge"], True))
def test_random_tables_through_score(tmp_path, model_path, table):
    lines, kinds, final_newline = table
    tmp_path = Path(tempfile.mkdtemp(dir=tmp_path))             # one folder per example
    pt, out = tmp_path / "pt.gz", tmp_path / "out.txt"
    data = write_table(pt, lines, final_newline)
    cfg = dict(chunk_lines=4, threads=1, matmul="torch")

    # keep: every line in its place, every original byte, two new values Moses reads as finite float32s > 0
    score_table(model_path, pt, out, ScoreConfig(on_error="keep", rejects=str(tmp_path / "rejects"), **cfg))
    got = out.read_bytes()
    assert got.endswith(b"\n") == data.endswith(b"\n")
    assert len(split_lines(got)) == len(split_lines(data))
    for i, (orig, new, kind) in enumerate(zip(lines, split_lines(got), kinds), 1):
        if orig.count(b"|||") < 2:
            assert new == orig, i                               # no scores field: copied unchanged
            continue
        ins = inserted(orig, new)
        assert ins is not None, (i, orig, new)
        assert new.split(b"|||")[2].split()[-2:] == ins.split(), i   # where Moses reads the last two scores
        for token in ins.split():
            x = moses_float32(token.decode("ascii"))
            assert x is not None and x > 0, (i, token)
        if kind not in ("good", "huge"):
            assert ins == b" 1 1", (i, kind)                    # a rejected line: neutral values
        if kind == "huge":
            assert ins.split()[1] == b"1.651636e+38"             # the unknown-word count clamped at 88
    rejected = [int(r.split(b"\t")[0]) for r in (tmp_path / "rejects").read_bytes().splitlines()]
    assert rejected == [i for i, k in enumerate(kinds, 1) if k not in ("good", "huge")]

    # raise: the error names the first bad line of the table
    bad = next((i for i, k in enumerate(kinds, 1) if k not in ("good", "huge")), None)
    strict = tmp_path / "strict.txt"
    if bad is None:
        score_table(model_path, pt, strict, ScoreConfig(**cfg))
        assert strict.read_bytes() == got
    else:
        with pytest.raises(PhraseRescoreError) as e:
            score_table(model_path, pt, strict, ScoreConfig(**cfg))
        assert (e.value.path, e.value.line) == (str(pt), bad)
        assert not strict.exists()


@pytest.mark.parametrize("data", [b"", gzip.compress(b"", mtime=0)], ids=["plain", "gzip"])
def test_score_prepare_and_moses_ini_all_refuse_an_empty_table(tmp_path, model_path, data):
    table = tmp_path / "empty.gz"
    table.write_bytes(data)
    ini = tmp_path / "moses.ini"
    ini.write_text("[feature]\nPhraseDictionaryMemory name=TranslationModel0 num-features=4 path=/nowhere/pt.gz\n\n"
                   "[weight]\nTranslationModel0= 0.2 0.2 0.2 0.2\n")
    runs = {"score": ["score", str(model_path), str(table), "--out", str(tmp_path / "o.gz")],
            "score keep": ["score", str(model_path), str(table), "--out", str(tmp_path / "k.gz"), "--on-error", "keep"],
            "prepare": ["prepare", str(table), "--out", str(tmp_path / "pairs")],
            "moses-ini": ["moses-ini", str(ini), "--table", str(table), "--out", str(tmp_path / "o.ini")]}
    for name, argv in runs.items():
        r = CliRunner().invoke(cli, argv)
        assert r.exit_code == 1, (name, r.output)
        assert f"error: {table}: {EMPTY_TABLE}" in r.output, (name, r.output)
    assert sorted(p.name for p in tmp_path.rglob("*") if not p.is_dir()) == ["empty.gz", "moses.ini"]  # no file


@pytest.mark.parametrize("bad, words", [
    (b"das ||| the ||| -inf inf 0.5 0.5", "score '-inf' is not finite"),
    (b"das ||| the ||| 1e308 1e308 0.5 0.5", "score '1e308' is out of float range"),
    (b"das ||| the ||| 1_0 0.5 0.5 0.5", "score '1_0' is not a number"),
    (b"das ||| the ||| 0.5 -0.25 0.5 0.5", "score '-0.25' is negative"),
])
def test_score_and_prepare_name_a_bad_score_line_or_keep_it(tmp_path, model_path, bad, words):
    table = tmp_path / "pt.txt"
    write_table(table, [b"das haus ||| the house ||| 0.5 0.5 0.5 0.5", bad, b"ist ||| is ||| 1 1 1 1"])
    strict = {"score": ["score", str(model_path), str(table), "--out", str(tmp_path / "o.txt")],
              "prepare": ["prepare", str(table), "--out", str(tmp_path / "pairs")]}
    for name, argv in strict.items():
        r = CliRunner().invoke(cli, argv)
        assert r.exit_code == 1 and f"error: {table}:2: {words}" in r.output, (name, r.output)
    for name, argv in strict.items():
        r = CliRunner().invoke(cli, argv[:-1] + [argv[-1] + ".keep", "--on-error", "keep"])
        assert r.exit_code == 0, (name, r.output)
    assert (tmp_path / "o.txt.keep").read_bytes().split(b"\n")[1] == bad + b" 1 1"
    assert words.encode() in (tmp_path / "o.txt.keep.rejects").read_bytes()

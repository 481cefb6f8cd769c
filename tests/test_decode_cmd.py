"""``phrase-rescore decode`` stands in for the ``moses`` binary: its options, its stdout and n-best formats,
``-show-weights``, ``-weight-overwrite``, one-line errors, and mert-moses.pl driving it for one iteration."""
from __future__ import annotations

import dataclasses
import gzip
import os
import shutil
import subprocess
import sys

import pytest
from _real_moses import moses_home, needs_moses, run, script, tool
from _tiny_smt import make_tiny_system
from click.testing import CliRunner

from phrase_rescore.app.cli import main
from phrase_rescore.app.decode_cli import parse_decode_args
from phrase_rescore.core.config import machine_cores
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.moses_integration.embedded.decoder import Decoder, DecoderConfig, decode_file
from phrase_rescore.moses_integration.moses_ini import read_moses_ini

SRC = ["das haus ist klein", "das haus", "", "haus ist klein", "das haus unbekannt"]

# what the real moses prints for the tiny system (moses -f moses.ini -show-weights, Moses at 34452895f)
SHOW_WEIGHTS = """Distortion0= 0.300000
LM0= 0.500000
UnknownWordPenalty0 UNTUNEABLE
WordPenalty0= -1.000000
PhrasePenalty0= 0.200000
TranslationModel0= 0.200000 0.200000 0.200000 0.200000
"""


@pytest.fixture
def tiny(tmp_path):
    return make_tiny_system(tmp_path / "sys")


def decode(*argv: str, stdin: str = "", ok: bool = True):
    r = CliRunner().invoke(main, ["--quiet", "decode", *argv], input=stdin.encode("utf-8"))
    if ok:
        assert r.exit_code == 0, r.output + repr(r.exception)
    return r


@pytest.mark.parametrize("argv, expected", [
    (["-f", "m.ini"], dict(config="m.ini", nbest_file=None, threads=None, stack=None)),   # threads: the ini's
    (["-config", "m.ini", "-s", "50", "-b", "0.001", "-dl", "-1", "-ttable-limit", "10"],
     dict(stack=50, beam_threshold=0.001, distortion_limit=-1, ttable_limit=10)),
    (["--config", "m.ini", "-stack", "7", "-beam-threshold", "1e-3", "-distortion-limit", "0", "-threads", "3"],
     dict(stack=7, beam_threshold=1e-3, distortion_limit=0, threads=min(3, machine_cores()))),
    (["-f", "m.ini", "-n-best-list", "nb.txt", "100", "distinct"], dict(nbest_file="nb.txt", nbest_size=100,
                                                                       nbest_distinct=True)),
    (["-f", "m.ini", "-n-best-list", "nb.txt", "20"], dict(nbest_file="nb.txt", nbest_size=20, nbest_distinct=False)),
    (["-f", "m.ini", "-n-best-list", "nb.txt 5 distinct"], dict(nbest_file="nb.txt", nbest_size=5,
                                                               nbest_distinct=True)),    # moses-parallel quotes it
    # mert-moses.pl's quoting, and the same words as separate arguments; "-1" is a value, not an option
    (["-f", "m.ini", "-weight-overwrite", "LM0= 0.5 WordPenalty0= -1 TranslationModel0= x 0.2"],
     dict(weight_overwrite="LM0= 0.5 WordPenalty0= -1 TranslationModel0= x 0.2")),
    (["-f", "m.ini", "-weight-overwrite", "LM0=", "0.5", "WordPenalty0=", "-1"],
     dict(weight_overwrite="LM0= 0.5 WordPenalty0= -1")),
    (["-f", "m.ini", "-inputtype", "0", "-show-weights", "-v", "0", "-i", "in.txt"],
     dict(show_weights=True, verbose=0, input_file="in.txt")),
    (["-f", "m.ini", "-search-algorithm", "0", "-cube-pruning-pop-limit", "500", "-threads", "all"],
     dict(search_algorithm=0, cube_pruning_pop_limit=500, threads=machine_cores())),
])
def test_moses_spellings_parse(argv, expected):
    a = parse_decode_args(argv)
    assert {k: getattr(a, k) for k in expected} == expected


@pytest.mark.parametrize("argv, message", [
    (["-f", "m.ini", "-mbr"], "unknown option '-mbr'"),
    (["-s", "10"], "no moses.ini: give -f INI"),
    (["m.ini"], "unexpected argument 'm.ini'"),
    (["-f", "m.ini", "-s", "10", "-stack", "20"], "-stack given twice"),
    (["-f", "m.ini", "-stack", "ten"], "-stack: expected an integer in ASCII digits, got 'ten'"),
    (["-f", "m.ini", "-stack", "0"], "-stack: expected at least 1"),
    (["-f", "m.ini", "-n-best-list", "nb.txt"], "-n-best-list: expected FILE N [distinct]"),
    (["-f", "m.ini", "-n-best-list", "nb.txt", "10", "unique"], "-n-best-list: expected FILE N [distinct]"),
    (["-f", "m.ini", "-n-best-list", "nb.txt", "0"], "-n-best-list: expected at least 1"),
    (["-f", "m.ini", "-inputtype", "1"], "-inputtype 1: the embedded decoder reads plain text only"),
    (["-f", "m.ini", "-show-weights", "yes please"], "-show-weights takes no value"),
    (["-f", "a.ini", "b.ini"], "-f: expected one file name, got 2 values"),
])
def test_bad_command_lines_are_refused(argv, message):
    with pytest.raises(PhraseRescoreError, match="^" + message.replace("[", r"\[").replace("]", r"\]")):
        parse_decode_args(argv)


def test_bad_options_give_one_line_and_a_nonzero_exit(tiny):
    for argv in (["-f", str(tiny["ini"]), "-stack", "ten"], ["-f", str(tiny["ini"]), "-nbest", "x", "3"],
                 ["-f", str(tiny["ini"]), "-weight-overwrite", "LM9= 1", "-show-weights"],
                 ["-f", str(tiny["ini"]), "-weight-overwrite", "TranslationModel0= 1 2", "-show-weights"],
                 ["-f", str(tiny["ini"].parent / "missing.ini")]):
        r = decode(*argv, ok=False)
        assert r.exit_code == 1
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
        assert r.stdout == ""


def test_cube_pruning_only_where_the_decoder_has_it(tiny):
    r = decode("-f", str(tiny["ini"]), "-search-algorithm", "1", stdin="das haus\n",
               ok="search_algorithm" in {f.name for f in dataclasses.fields(DecoderConfig)})
    if r.exit_code:
        assert r.stderr.strip() == ("error: -search-algorithm 1: this embedded decoder has no cube pruning; "
                                    "use -search-algorithm 0 (stack search)")
    else:
        assert r.stdout.startswith("the house ")
    assert decode("-f", str(tiny["ini"]), "-search-algorithm", "2", ok=False).exit_code == 1


def test_stdin_to_stdout_is_the_decoders_translation_in_moses_format(tiny, tmp_path):
    stdin = "".join(s + "\n" for s in SRC)
    r = decode("-f", str(tiny["ini"]), "-n-best-list", str(tmp_path / "nb"), "3", "distinct", stdin=stdin)
    # what evaluate's decode_file writes, each word followed by a space as moses prints it
    (tmp_path / "in").write_text(stdin)
    decode_file(tiny["ini"], tmp_path / "in", tmp_path / "ref.out", nbest_path=tmp_path / "ref.nb", nbest_size=3)
    expected = [" ".join(ln.split()) for ln in (tmp_path / "ref.out").read_text().splitlines()]
    assert r.stdout == "".join("".join(w + " " for w in ln.split()) + "\n" for ln in expected)
    assert r.stdout.splitlines()[:3] == ["the house is small ", "the house ", ""]
    assert r.stdout.splitlines()[4] == "the house unbekannt "
    nb = (tmp_path / "nb").read_text().splitlines()
    assert nb[0] == ("0 ||| the house is small  ||| Distortion0= 0 LM0= -3.91439 WordPenalty0= -4 PhrasePenalty0= 4 "
                     "TranslationModel0= -1.196 -1.78379 -1.32954 -2.34341 ||| 1.51225")
    # the empty sentence's line as moses writes it: the empty words field is "|||  |||"
    assert [ln for ln in nb if ln.startswith("2 ")] == [
        "2 |||  ||| Distortion0= 0 LM0= 0 WordPenalty0= 0 PhrasePenalty0= 0 TranslationModel0= 0 0 0 0 ||| 0"]
    ref_nb = [ln for ln in (tmp_path / "ref.nb").read_text().splitlines() if not ln.startswith("2 ")]
    assert [ln for ln in nb if not ln.startswith("2 ")] == ref_nb
    assert [int(ln.split(" ||| ")[0]) for ln in nb] == sorted(int(ln.split(" ||| ")[0]) for ln in nb)
    # -input-file, and two processes, give the same bytes
    r2 = decode("-f", str(tiny["ini"]), "-input-file", str(tmp_path / "in"), "-threads", "2")
    assert r2.stdout == r.stdout
    # an n-best list to "-" takes the 1-best's place on stdout, as in moses
    r3 = decode("-f", str(tiny["ini"]), "-n-best-list", "-", "3", "distinct", stdin=stdin)
    assert r3.stdout == (tmp_path / "nb").read_text()


def test_weight_overwrite_changes_the_translation(tiny):
    default = decode("-f", str(tiny["ini"]), stdin="das haus ist klein\n").stdout
    w = "LM0= 0 TranslationModel0= -1 -1 -1 x"     # x: keeps the ini's weight of that component
    r = decode("-f", str(tiny["ini"]), "-weight-overwrite", w, stdin="das haus ist klein\n")
    assert default == "the house is small \n" and r.stdout == "the home is small \n"
    dec = Decoder.from_ini(tiny["ini"], progress=False)
    weights = dec.spec.weights.copy()
    weights[dec.spec.index("KENLM")] = 0
    tm = dec.spec.index("PhraseDictionaryMemory")
    weights[tm:tm + 3] = -1
    dec.set_weights(weights)
    assert dec.translate("das haus ist klein".split()).best.text + " \n" == r.stdout
    shown = decode("-f", str(tiny["ini"]), "-weight-overwrite", w, "-show-weights").stdout
    assert "LM0= 0.000000\n" in shown and "TranslationModel0= -1.000000 -1.000000 -1.000000 0.200000\n" in shown


def test_show_weights_prints_what_moses_prints(tiny):
    assert decode("-f", str(tiny["ini"]), "-show-weights").stdout == SHOW_WEIGHTS


# ---------------------------------------------------------------------------------------- with a real Moses

@needs_moses
def test_same_bytes_as_the_real_moses(tiny, tmp_path):
    stdin = "".join(s + "\n" for s in SRC).encode("utf-8")
    argv = ["-f", str(tiny["ini"]), "-n-best-list", None, "5", "distinct", "-s", "50"]
    out = {}
    for who in ("moses", "embedded"):
        argv[3] = str(tmp_path / f"{who}.nbest")
        if who == "moses":
            p = run([tool("moses"), *argv, "-threads", "1", "-v", "0"], stdin=stdin)
            out[who] = p.stdout.decode("utf-8")
            shown = run([tool("moses"), "-f", tiny["ini"], "-show-weights"]).stdout.decode("utf-8")
        else:
            out[who] = decode(*argv, stdin=stdin.decode("utf-8")).stdout
    assert out["embedded"] == out["moses"]
    assert (tmp_path / "embedded.nbest").read_text() == (tmp_path / "moses.nbest").read_text()
    assert shown == SHOW_WEIGHTS
    to_stdout = run([tool("moses"), "-f", tiny["ini"], "-n-best-list", "-", "3", "-threads", "1", "-v", "0"],
                    stdin=stdin).stdout.decode("utf-8")
    assert decode("-f", str(tiny["ini"]), "-n-best-list", "-", "3", stdin=stdin.decode("utf-8")).stdout == to_stdout


@needs_moses
def test_mert_moses_runs_one_iteration_with_decode_as_its_decoder(tiny, tmp_path):
    # mert-moses.pl takes one executable as --decoder and parses --decoder-flags as -options only, so the
    # subcommand goes into a two-line wrapper, as a user would write it
    exe = shutil.which("phrase-rescore", path=os.path.dirname(sys.executable)) or shutil.which("phrase-rescore")
    assert exe, "the phrase-rescore console script is not installed"
    wrapper = tmp_path / "moses-embedded"
    wrapper.write_text(f'#!/bin/sh\nexec {exe} decode "$@"\n')
    wrapper.chmod(0o755)
    work = tmp_path / "mert-work"
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    p = subprocess.run([script("training/mert-moses.pl"), tiny["src"], tiny["ref"], wrapper, tiny["ini"],
                        f"--mertdir={moses_home() / 'bin'}", f"--working-dir={work}", "--nbest=10",
                        "--maximum-iterations=1", "--predictable-seeds", "--decoder-flags=-threads 1 -v 0"],
                       cwd=tmp_path, env=env, capture_output=True, timeout=120)
    log = (p.stdout + p.stderr).decode("utf-8", "replace")
    assert p.returncode == 0, log[-3000:]
    assert f"Executing: {wrapper} -threads 1 -v 0 -config filtered/moses.ini -show-weights" in log
    # it read the feature list from -show-weights and the n-best list it asked for
    assert (work / "features.list").read_text() == SHOW_WEIGHTS
    with gzip.open(work / "run1.best10.out.gz", "rt") as f:
        nbest = f.read().splitlines()
    assert {int(ln.split(" ||| ")[0]) for ln in nbest} == {0, 1, 2}
    assert (work / "run1.out").read_text().splitlines()[0] == "the house is small "
    assert not (work / "run2.best10.out.gz").exists()
    tuned = read_moses_ini(work / "moses.ini")
    tuned.check_weights_match()
    tuneable = [v for name, vs in tuned.weights.items() if name != "UnknownWordPenalty0" for v in vs]
    assert sum(abs(v) for v in tuneable) == pytest.approx(1.0, abs=1e-4)   # mert's L1-normalized weights
    # and the embedded decoder decodes with the tuned ini
    assert decode("-f", str(work / "moses.ini"), stdin="das haus\n").stdout == "the house \n"

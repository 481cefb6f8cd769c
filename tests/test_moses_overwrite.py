"""A moses.ini read as Moses reads it: ``[weight-overwrite]`` and ``[feature-overwrite]`` applied as Moses applies
them (compared with a real ``moses -show-weights`` where ``MOSES_HOME`` is set), what Moses refuses there refused,
the sections the tool does not implement refused by name by every command that reads an ini, and no written
moses.ini (``moses-ini``'s, a tuned one) keeping an overwrite that would replace the weights it holds."""
from __future__ import annotations

import subprocess

import pytest
from _real_moses import moses_home, needs_moses, tool
from _tiny_smt import make_tiny_system
from click.testing import CliRunner

from phrase_rescore.app.cli import main
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.moses_integration.moses_ini import parse_moses_ini, read_moses_ini

#: sections appended to the tiny system's moses.ini, and what ``-show-weights`` prints for each (Moses's order:
#: stateful features, then stateless, in [feature] order; six decimals)
OVERWRITES = {
    "weights": ("[weight-overwrite]\nLM0= 0.7 WordPenalty0= -2\n",
                "Distortion0= 0.300000\nLM0= 0.700000\nUnknownWordPenalty0 UNTUNEABLE\nWordPenalty0= -2.000000\n"
                "PhrasePenalty0= 0.200000\nTranslationModel0= 0.200000 0.200000 0.200000 0.200000\n"),
    "x keeps a weight": ("[weight-overwrite]\nTranslationModel0= 1 x -1 x UnknownWordPenalty0= 3\n",
                         "Distortion0= 0.300000\nLM0= 0.500000\nUnknownWordPenalty0 UNTUNEABLE\n"
                         "WordPenalty0= -1.000000\nPhrasePenalty0= 0.200000\n"
                         "TranslationModel0= 1.000000 0.200000 -1.000000 0.200000\n"),
    "untuneable": ("[feature-overwrite]\nTranslationModel0 tuneable=false\nLM0 tuneable=0\n",
                   "Distortion0= 0.300000\nLM0 UNTUNEABLE\nUnknownWordPenalty0 UNTUNEABLE\nWordPenalty0= -1.000000\n"
                   "PhrasePenalty0= 0.200000\nTranslationModel0 UNTUNEABLE\n"),
    "both": ("[feature-overwrite]\nDistortion0 tuneable=No\nUnknownWordPenalty0 tuneable=true\n\n"
             "[weight-overwrite]\nDistortion0= 0.9 UnknownWordPenalty0= 2 LM0= x\n",
             "Distortion0 UNTUNEABLE\nLM0= 0.500000\nUnknownWordPenalty0= 2.000000\nWordPenalty0= -1.000000\n"
             "PhrasePenalty0= 0.200000\nTranslationModel0= 0.200000 0.200000 0.200000 0.200000\n"),
}
#: what -show-weights prints for the tiny system as it is
PLAIN = ("Distortion0= 0.300000\nLM0= 0.500000\nUnknownWordPenalty0 UNTUNEABLE\nWordPenalty0= -1.000000\n"
         "PhrasePenalty0= 0.200000\nTranslationModel0= 0.200000 0.200000 0.200000 0.200000\n")

#: sections Moses refuses (an error, or a crash), and the words of ours
REFUSED = {
    "two lines": ("[weight-overwrite]\nLM0= 0.7\nWordPenalty0= -2\n", "should only be on 1 line"),
    "no such feature": ("[weight-overwrite]\nLM9= 1\n", "no feature named 'LM9'"),
    "too few weights": ("[weight-overwrite]\nTranslationModel0= 1 2\n", "features: 4 vs. weights: 2"),
    "x with nothing to keep": ("[weight-overwrite]\nLM0= x x\n", "Keeping previous weight failed"),
    "a weight before any name": ("[weight-overwrite]\n0.5 LM0= 0.3\n", "comes before any 'Name='"),
    "num-features": ("[feature-overwrite]\nTranslationModel0 num-features=5\n", "Unknown argument num-features=5"),
    "name": ("[feature-overwrite]\nTranslationModel0 name=TM\n", "Unknown argument name=TM"),
    "an LM's path": ("[feature-overwrite]\nLM0 path=/x/lm.arpa\n", "Unknown argument path=/x/lm.arpa"),
    "no feature to overwrite": ("[feature-overwrite]\nNope0 tuneable=false\n", "no feature named 'Nope0'"),
    "no argument": ("[feature-overwrite]\nTranslationModel0\n", "Incorrect format for feature override"),
    "two =": ("[feature-overwrite]\nTranslationModel0 path=a=b\n", "Incorrect format for parameter override"),
    "not a boolean": ("[feature-overwrite]\nTranslationModel0 tuneable=f\n", "as Moses reads a boolean"),
    "a weight for no feature": ("[weight]\nLM9= 1\n", "Maybe incorrectly spelt weights: LM9"),
    "not implemented": ("[cube-pruning-pop-limit]\n500\n", "[cube-pruning-pop-limit] is a Moses setting this tool"),
    "not Moses's": ("[foo]\n1\n", "Moses stops with 'Unknown parameter foo'"),
}


@pytest.fixture
def tiny(tmp_path):
    return make_tiny_system(tmp_path / "sys")


def _with(tiny, extra: str, name: str = "t.ini"):
    ini = tiny["ini"].parent / name
    ini.write_text(tiny["ini"].read_text() + "\n" + extra)
    return ini


def _decode(*argv, ok=True):
    r = CliRunner().invoke(main, ["--quiet", "decode", *map(str, argv)])
    if ok:
        assert r.exit_code == 0, r.output + repr(r.exception)
    return r


def _moses(*argv):
    return subprocess.run([str(tool("moses")), *map(str, argv)], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("case", sorted(OVERWRITES))
def test_show_weights_applies_the_overwrite_sections(tiny, case):
    ini = _with(tiny, OVERWRITES[case][0])
    assert _decode("-f", ini, "-show-weights").stdout == OVERWRITES[case][1]


@needs_moses
@pytest.mark.parametrize("case", sorted(OVERWRITES))
def test_show_weights_is_what_the_real_moses_shows(tiny, case):
    ini = _with(tiny, OVERWRITES[case][0])
    real = _moses("-f", ini, "-show-weights", "-v", "0")
    assert real.returncode == 0, real.stderr[-2000:]
    assert _decode("-f", ini, "-show-weights").stdout == real.stdout == OVERWRITES[case][1]


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_moses_refuses_there_is_refused_naming_the_line(tiny, case):
    text, words = REFUSED[case]
    ini = _with(tiny, text)
    with pytest.raises(PhraseRescoreError) as e:
        read_moses_ini(ini)
    assert words in e.value.message and e.value.path == str(ini) and e.value.line is not None, e.value
    r = _decode("-f", ini, "-show-weights", ok=False)
    assert r.exit_code == 1 and r.output.startswith("error: ") and words in r.output, r.output
    if moses_home() is not None and case != "not implemented":     # and the real Moses does not run it either
        real = _moses("-f", ini, "-show-weights", "-v", "0")
        assert real.returncode != 0 or "Unknown parameter" in real.stderr or "Unknown argument" in real.stderr, case


def test_the_command_line_overwrite_takes_the_place_of_the_section(tiny):
    """Moses's -weight-overwrite replaces the ini's [weight-overwrite] line: LM0 goes back to [weight]'s value."""
    ini = _with(tiny, OVERWRITES["weights"][0])
    assert _decode("-f", ini, "-show-weights").stdout == OVERWRITES["weights"][1]
    shown = _decode("-f", ini, "-weight-overwrite", "PhrasePenalty0= 0.5", "-show-weights").stdout
    assert "LM0= 0.500000\n" in shown and "WordPenalty0= -1.000000\n" in shown and "PhrasePenalty0= 0.500000\n" in shown
    if moses_home() is not None:
        real = _moses("-f", ini, "-weight-overwrite", "PhrasePenalty0= 0.5", "-show-weights", "-v", "0")
        assert real.stdout == shown


def test_a_name_glued_to_its_weight_is_refused(tiny):
    """Moses reads 'LM0=0.3' as a weight (0), not as LM0's: the tool would have used 0.3."""
    r = _decode("-f", tiny["ini"], "-weight-overwrite", "LM0=0.3", "-show-weights", ok=False)
    assert r.exit_code == 1 and "reads 'LM0=0.3' as the weight 0" in r.output, r.output


def test_decode_translates_with_the_overwritten_weights(tiny):
    plain = _decode("-f", tiny["ini"], "-i", tiny["src"]).stdout
    ini = _with(tiny, "[weight-overwrite]\nLM0= 0 TranslationModel0= -1 -1 -1 x\n")
    over = _decode("-f", ini, "-i", tiny["src"]).stdout
    same = _decode("-f", tiny["ini"], "-i", tiny["src"], "-weight-overwrite", "LM0= 0 TranslationModel0= -1 -1 -1 x").stdout
    assert over == same != plain
    if moses_home() is not None:
        real = _moses("-f", ini, "-i", tiny["src"], "-v", "0")
        assert real.returncode == 0 and real.stdout == over


def test_decode_reads_the_phrase_table_a_feature_overwrite_names(tiny, tmp_path):
    """[feature-overwrite] TranslationModel0 path=... makes Moses read another table (after table-limit=, verbosity=
    it also takes)."""
    other = tmp_path / "other-table"
    other.write_text("".join(line for line in (tiny["ini"].parent / "phrase-table").read_text().splitlines(True)
                             if not line.startswith("haus ||| house ")))      # haus: home only
    ini = _with(tiny, f"[feature-overwrite]\nTranslationModel0 path={other} table-limit=20 verbosity=0\n")
    assert _decode("-f", tiny["ini"], "-i", tiny["src"]).stdout.startswith("the house is small \n")
    out = _decode("-f", ini, "-i", tiny["src"]).stdout
    assert out.startswith("the home is small \n")
    r = CliRunner().invoke(main, ["--quiet", "decode", "-f", str(ini), "-i", str(tiny["src"]), "-n-best-list",
                                  str(other), "2"])
    assert r.exit_code == 1 and "-n-best-list would overwrite the input" in r.output, r.output   # the table Moses reads
    if moses_home() is not None:
        real = _moses("-f", ini, "-i", tiny["src"], "-v", "0")
        assert real.returncode == 0 and real.stdout == out


def test_moses_ini_writes_the_ini_moses_reads(tiny, tmp_path):
    """The rescored table's two new columns get weights on top of the overwritten four, and the written ini has
    no [weight-overwrite] left to put four weights back on a feature of six (Moses: 'features: 6 vs. weights: 4')."""
    ini = _with(tiny, "[weight-overwrite]\nTranslationModel0= 0.1 0.2 0.3 0.4\n\n"
                      "[feature-overwrite]\nTranslationModel0 table-limit=5\n")
    table = tmp_path / "rescored"
    table.write_text("".join(line.replace(" ||| 0-0", f" 0.{i + 1} {'2.71828' if i % 2 else '1'} ||| 0-0") + "\n"
                             for i, line in enumerate((tiny["ini"].parent / "phrase-table").read_text().splitlines())))
    out = tmp_path / "new.ini"
    r = CliRunner().invoke(main, ["moses-ini", str(ini), "--table", str(table), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "[weight-overwrite] applied as Moses applies it" in r.output and "[feature-overwrite] applied" in r.output
    text = out.read_text()
    assert "overwrite" not in text
    new = read_moses_ini(out)
    assert new.weights["TranslationModel0"] == [0.1, 0.2, 0.3, 0.4, 0.2, 0.2]
    tm = new.feature("TranslationModel0")
    assert tm.get("table-limit") == "5" and tm.get("path") == str(table.resolve()) and tm.num_features == 6
    if moses_home() is not None:
        real = _moses("-f", out, "-show-weights", "-v", "0")
        assert real.returncode == 0, real.stderr[-2000:]
        assert "TranslationModel0= 0.100000 0.200000 0.300000 0.400000 0.200000 0.200000" in real.stdout


def test_the_embedded_tuner_writes_no_overwrite(tiny, tmp_path):
    """The tuned weights land in [weight], and no [weight-overwrite] of the input replaces them."""
    from phrase_rescore.moses_integration.embedded.tune import EmbeddedTuneConfig, tune_embedded

    ini = _with(tiny, "[weight-overwrite]\nLM0= 0.7 UnknownWordPenalty0= 2\n")
    tuned = tune_embedded(EmbeddedTuneConfig(str(ini), str(tiny["src"]), str(tiny["ref"]), str(tmp_path / "w"),
                                             nbest=5, max_iterations=1, restarts=2, random_directions=0))
    text = open(tuned).read()
    assert "overwrite" not in text
    weights = parse_moses_ini(text).weights
    assert weights["UnknownWordPenalty0"] == [2.0]            # untuneable: the overwritten value, kept
    raw = parse_moses_ini(text, as_moses_reads=False).weights
    assert raw == weights                                     # what Moses reads is what [weight] says


def test_mert_moses_pls_copy_of_the_overwrite_is_dropped():
    """mert-moses.pl copies every section but [weight]: a [weight-overwrite] left there would undo the tuning."""
    tuned = ("# MERT optimized configuration\n[feature]\nWordPenalty\nKENLM name=LM0 factor=0 path=lm order=2\n\n"
             "[weight-overwrite]\nLM0= 0.7\n\n[v]\n0\n\n[weight]\n\nWordPenalty0= -0.31\nLM0= 0.12\n")
    kept = parse_moses_ini(tuned, as_moses_reads=False).without_section("weight-overwrite").text()
    assert "[weight-overwrite]" not in kept and "LM0= 0.7" not in kept and "[v]\n0\n" in kept
    assert parse_moses_ini(kept).weights == {"WordPenalty0": [-0.31], "LM0": [0.12]}
    assert parse_moses_ini(tuned).weights["LM0"] == [0.7]    # what Moses would have used


@pytest.mark.parametrize("command", ["moses-ini", "tune", "evaluate", "decode"])
def test_every_command_refuses_a_section_it_does_not_implement(tiny, tmp_path, command):
    ini = _with(tiny, "[drop-unknown]\n1\n")
    table = tiny["ini"].parent / "phrase-table"
    argv = {"moses-ini": ["moses-ini", ini, "--table", table, "--out", tmp_path / "o.ini"],
            "tune": ["tune", ini, "--dev-src", tiny["src"], "--dev-ref", tiny["ref"], "--workdir", tmp_path / "w",
                     "--backend", "embedded"],
            "evaluate": ["evaluate", "--system", f"base={ini}", "--test-src", tiny["src"], "--test-ref", tiny["ref"],
                         "--workdir", tmp_path / "ev", "--backend", "embedded"],
            "decode": ["decode", "-f", ini, "-i", tiny["src"]]}[command]
    r = CliRunner().invoke(main, ["--quiet", *map(str, argv)])
    assert r.exit_code == 1, r.output
    assert r.output.startswith("error: ") and "[drop-unknown] is a Moses setting this tool does not implement" in r.output
    assert f"{ini}:" in r.output, r.output
    # sections Moses keeps without their changing a translation are kept: mert-moses.pl writes --decoder-flags
    # "-v 0" as [v], which Moses stores under 'v', where nothing reads it
    kept = _with(tiny, "[v]\n0\n\n[threads]\n2\n\n[verbose]\n0\n", "kept.ini")
    assert _decode("-f", kept, "-show-weights").stdout == PLAIN

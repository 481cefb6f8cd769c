"""moses.ini the way Moses reads it, and the files a moses.ini names kept safe: the model files are inputs
that no output of moses-ini, decode or tune may overwrite; a binarized prefix may not name the old system's
.minphr; a path Moses cannot read back from a [feature] line is never written; numbers are read only in the
forms Moses reads as the same number; lines end at "\\n" only."""
from __future__ import annotations

import gzip
import os
import subprocess
from pathlib import Path

import pytest
from _real_moses import needs_moses, tool
from _tiny_smt import make_tiny_system
from click.testing import CliRunner

from phrase_rescore.app.cli import main
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.moses_integration.configs import RewriteConfig
from phrase_rescore.moses_integration.moses_ini import check_ini_path, parse_moses_ini, read_moses_ini
from phrase_rescore.moses_integration.rewrite import rewrite_moses_ini

SIX = ("das ||| the ||| 0.6 0.5 0.7 0.4 0.1 1 ||| 0-0 ||| 3 3 3\n"
       "haus ||| house ||| 0.8 0.7 0.6 0.5 0.2 2.718282 ||| 0-0 ||| 2 2 2\n")   # the added columns vary


@pytest.fixture
def tiny(tmp_path):
    s = make_tiny_system(tmp_path / "sys")
    s["pt"], s["lm"] = tmp_path / "sys" / "phrase-table", tmp_path / "sys" / "lm.arpa"
    s["new"] = tmp_path / "pt.rnn.txt"
    s["new"].write_text(SIX)
    return s


def _snapshot(s):
    return {k: s[k].read_bytes() for k in ("pt", "lm", "ini")}


# --- the model files a  names are inputs ------------------------------------------------------

def test_model_files_lists_every_path_and_what_moses_opens_in_its_place():
    ini = parse_moses_ini(
        "[feature]\nPhraseDictionaryCompact name=TranslationModel0 num-features=4 path=/m/pt\n"
        "LexicalReordering name=LexicalReordering0 num-features=6 type=wbe-msd-bidirectional-fe-allff "
        "path=/m/rt.gz\nDistortion\nKENLM name=LM0 factor=0 path=/m/lm.arpa order=3\n", "m.ini")
    assert ini.model_files() == {
        "the phrase table of TranslationModel0 in m.ini": ["/m/pt", "/m/pt.minphr"],
        "the reordering table of LexicalReordering0 in m.ini": ["/m/rt.gz", "/m/rt.gz.minlexr"],
        "the language model of LM0 in m.ini": ["/m/lm.arpa"]}


# (command line, with {pt}, {lm}, {ini}, {new}, {src}, {ref}, {w}, {link}; what the message says)
OVERWRITES = [
    (["moses-ini", "{ini}", "--table", "{new}", "--out", "{pt}"],
     "--out would overwrite the input the phrase table of TranslationModel0 in {ini} {pt}"),
    (["moses-ini", "{ini}", "--table", "{new}", "--out", "{lm}"],
     "--out would overwrite the input the language model of LM0 in {ini} {lm}"),
    (["moses-ini", "{ini}", "--table", "{new}", "--out", "{link}"],
     "the phrase table of TranslationModel0 in {ini} {pt} (through a symbolic link)"),
    (["decode", "-f", "{ini}", "-i", "{src}", "-n-best-list", "{pt}", "3"],
     "-n-best-list would overwrite the input the phrase table of TranslationModel0 in {ini} {pt}"),
    (["tune", "--backend", "embedded", "{ini}", "--dev-src", "{src}", "--dev-ref", "{ref}", "--workdir", "{w}",
      "--out", "{lm}"], "--out would overwrite the input the language model of LM0 in {ini} {lm}"),
]


@pytest.mark.parametrize("argv, expected", OVERWRITES,
                         ids=["moses-ini-pt", "moses-ini-lm", "moses-ini-symlink", "decode-nbest", "tune-out"])
def test_no_output_overwrites_a_model_file_of_the_ini(tmp_path, tiny, argv, expected):
    names = {k: str(v) for k, v in tiny.items()}
    names.update(w=str(tmp_path / "w"), link=str(tmp_path / "link.txt"))
    os.symlink(tiny["pt"], tmp_path / "link.txt")
    before = _snapshot(tiny)
    r = CliRunner().invoke(main, ["--quiet"] + [a.format(**names) for a in argv])
    assert r.exit_code == 1, r.output
    assert "Traceback" not in r.output and expected.format(**names) in r.output
    assert _snapshot(tiny) == before
    assert not (tmp_path / "w").exists()


def test_rewrite_itself_refuses_out_on_a_model_file(tiny):
    """The workflow calls rewrite_moses_ini without the CLI's checks."""
    before = _snapshot(tiny)
    with pytest.raises(PhraseRescoreError, match="--out would overwrite the input the phrase table of "
                                                 "TranslationModel0"):
        rewrite_moses_ini(RewriteConfig(tiny["ini"], tiny["new"], tiny["pt"]))
    assert _snapshot(tiny) == before


# --- PhraseDictionaryCompact: the binarized prefix ------------------------------------------------------

def _compact_system(tmp_path, path_in_ini: str):
    d = tmp_path / "m"
    d.mkdir()
    (d / "phrase-table.minphr").write_bytes(b"the old system's binarized table")
    ini = d / "moses.ini"
    ini.write_text("[feature]\nWordPenalty\n"
                   f"PhraseDictionaryCompact name=TranslationModel0 num-features=4 path={d / path_in_ini}\n"
                   "[weight]\nWordPenalty0= -1\nTranslationModel0= 0.2 0.2 0.2 0.2\n")
    new = d / "phrase-table.gz"
    with gzip.open(new, "wt") as f:
        f.write(SIX)
    return d, ini, new


# (path= in the old ini, --binarized-prefix (None: the default), what is refused (None: accepted))
COMPACT = [
    ("phrase-table.minphr", None, "the binarized table PREFIX.minphr would overwrite the input the phrase table "
                                  "of TranslationModel0 in {ini} {d}/phrase-table.minphr"),
    ("phrase-table", None, "the binarized table PREFIX.minphr would overwrite the input the phrase table of "
                           "TranslationModel0 in {ini} {d}/phrase-table.minphr"),
    ("phrase-table.minphr", "moses", "processPhraseTableMin's log PREFIX.processPhraseTableMin.log would overwrite "
                                     "the input OLD_INI {ini}"),
    ("phrase-table.minphr", "new", None),
]


@pytest.mark.parametrize("path_in_ini, prefix, error", COMPACT,
                         ids=["default-prefix-is-the-old-minphr", "old-path-without-suffix", "log-on-the-ini",
                              "new-prefix"])
def test_binarized_prefix_never_names_a_file_of_the_old_system(tmp_path, path_in_ini, prefix, error):
    d, ini, new = _compact_system(tmp_path, path_in_ini)
    if prefix == "moses":      # PREFIX.processPhraseTableMin.log is the old ini itself
        ini = ini.rename(d / "moses.processPhraseTableMin.log")
    before = {p: p.read_bytes() for p in d.iterdir()}
    cfg = RewriteConfig(ini, new, d / "new.ini", binarize=False,
                        binarized_prefix=None if prefix is None else d / prefix)
    if error is None:
        res = rewrite_moses_ini(cfg)
        assert res.table_path_in_ini == f"{d}/new.minphr"
        return
    with pytest.raises(PhraseRescoreError) as e:
        rewrite_moses_ini(cfg)
    assert error.format(ini=ini, d=d) in e.value.message and "give --binarized-prefix a prefix" in e.value.message
    assert {p: p.read_bytes() for p in d.iterdir()} == before


def test_the_binarizer_never_runs_onto_the_old_table(tmp_path, monkeypatch):
    from _moses_standin import add_process_phrase_table_min, make_standin_moses

    root = make_standin_moses(tmp_path / "mosesdecoder")
    add_process_phrase_table_min(root)
    monkeypatch.setenv("MOSES_HOME", str(root))
    d, ini, new = _compact_system(tmp_path, "phrase-table.minphr")
    r = CliRunner().invoke(main, ["moses-ini", str(ini), "--table", str(new), "--out", str(d / "new.ini")])
    assert r.exit_code == 1 and "--binarized-prefix" in r.output and "Traceback" not in r.output
    assert (d / "phrase-table.minphr").read_bytes() == b"the old system's binarized table"
    assert not (d / "phrase-table.processPhraseTableMin.log").exists() and not (d / "new.ini").exists()


# --- paths that Moses cannot read back from a [feature] line --------------------------------------------

@pytest.mark.parametrize("folder, why", [("with space", "a space"), ("tab\tdir", "a tab"), ("run#2", "'#'"),
                                         ("a b#c", "a space and '#'")])
def test_a_table_path_moses_would_split_is_refused_before_writing(tmp_path, tiny, folder, why):
    d = tmp_path / folder
    d.mkdir()
    table = d / "pt.rnn.txt"
    table.write_text(SIX)
    out = tmp_path / "new.ini"
    r = CliRunner().invoke(main, ["moses-ini", str(tiny["ini"]), "--table", str(table), "--out", str(out)])
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert f"the new phrase table {str(table)!r} cannot be written into a moses.ini: it holds {why}" in r.output
    assert not out.exists()


def test_a_binarized_prefix_moses_would_split_is_refused(tmp_path):
    d, ini, new = _compact_system(tmp_path, "phrase-table.minphr")
    with pytest.raises(PhraseRescoreError, match="the binarized phrase table .* holds a space"):
        rewrite_moses_ini(RewriteConfig(ini, new, d / "new.ini", binarize=False, binarized_prefix=d / "my table"))
    assert not (d / "new.ini").exists()


def test_build_smt_refuses_a_folder_moses_would_split_before_writing(tmp_path):
    from phrase_rescore.moses_integration.embedded.build import build_smt

    src, tgt = tmp_path / "a.en", tmp_path / "a.fr"
    src.write_text("the house\n")
    tgt.write_text("la maison\n")
    out = tmp_path / "smt sp#1"
    with pytest.raises(PhraseRescoreError, match=r"the build folder .* holds a space and '#'"):
        build_smt(src, tgt, out)
    assert not out.exists()


def test_an_edited_feature_line_is_checked_when_written(tmp_path):
    ini = parse_moses_ini("[feature]\nKENLM name=LM0 factor=0 path=/m/lm.arpa order=3\n[weight]\nLM0= 0.5\n")
    lm = ini.feature("LM0")
    lm.set("path", "/m/my lm.arpa")
    ini.mark_feature_changed(lm)
    with pytest.raises(PhraseRescoreError, match="path= of LM0 '/m/my lm.arpa' cannot be written"):
        ini.write(tmp_path / "o.ini")
    assert not (tmp_path / "o.ini").exists()
    assert check_ini_path("/m/no\xa0break/lm.arpa", "x") == "/m/no\xa0break/lm.arpa"   # Moses splits at " \t" only


# --- numbers as Moses reads them ------------------------------------------------------------------------

# (the weight as written, what Moses's Scan<float> reads (None: refused here, with the reason))
WEIGHTS = [
    ("0.25", 0.25), (".5", 0.5), ("5.", 5.0), ("+1", 1.0), ("-1.5e-1", -0.15), ("2E1", 20.0),
    ("0_2", "expected a number as weight of LM0"),               # Moses: 0
    ("\uff10.\uff15", "expected a number as weight of LM0"),      # full-width 0.5; Moses: 0
    ("\u0664", "expected a number as weight of LM0"),             # Arabic-Indic 4; Moses: 0
    ("\xa00.5", "expected a number as weight of LM0"),            # a leading no-break space; Moses: 0
    ("0x1p-2", "expected a number as weight of LM0"),
    ("1e39", "out of range"),
    ("nan", "not finite"),
]


@pytest.mark.parametrize("token, expected", WEIGHTS)
def test_weights_are_read_only_as_moses_reads_them(token, expected):
    text = f"[feature]\nKENLM name=LM0 factor=0 path=/m/lm.arpa order=3\n\n[weight]\nLM0= {token}\n"
    if isinstance(expected, float):
        assert parse_moses_ini(text).weights_for("LM0") == [expected]
        return
    with pytest.raises(PhraseRescoreError) as e:
        parse_moses_ini(text, "m.ini")
    assert (e.value.path, e.value.line) == ("m.ini", 5) and expected in e.value.message
    assert repr(token) in e.value.message


@pytest.mark.parametrize("value, ok", [("4", True), ("04", True), ("4_0", False), ("\uff14", False),
                                       ("\u0664", False), ("+4", False), ("\u00b2", False)])
def test_num_features_is_ascii_digits(value, ok):
    text = f"[feature]\nPhraseDictionaryMemory name=TranslationModel0 num-features={value} path=/m/pt\n"
    if ok:
        assert parse_moses_ini(text).feature("TranslationModel0").num_features == int(value)
        return
    with pytest.raises(PhraseRescoreError) as e:
        parse_moses_ini(text, "m.ini")
    assert e.value.line == 2 and "expected a non-negative integer for num-features" in e.value.message


def test_a_refused_weight_is_not_rewritten_by_moses_ini(tiny):
    tiny["ini"].write_text(tiny["ini"].read_text().replace("TranslationModel0= 0.2 0.2", "TranslationModel0= 0_2 0.2"))
    out = tiny["ini"].parent / "new.ini"
    r = CliRunner().invoke(main, ["moses-ini", str(tiny["ini"]), "--table", str(tiny["new"]), "--out", str(out)])
    assert r.exit_code == 1 and f"error: {tiny['ini']}:22: expected a number as weight of TranslationModel0" \
        in r.output
    assert not out.exists()


# --- lines end at "\n" only, words end at spaces and tabs ----------------------------------------------

@pytest.mark.parametrize("char", ["\x0c", "\x0b", "\x85", "\u2028", "\u2029", "\x1c", "\r"])
def test_only_newline_ends_a_line(char):
    text = (f"# input{char}factors\n[input-factors]\n0\n# feature functions{char}here\n[feature]\n"
            f"KENLM name=LM0 factor=0 path=/m/lm.arpa order=3\n[weight]\nLM0= 0.5 # tuned{char}by hand\n"
            "WordPenalty0= 0.5 0.5 x\n")
    with pytest.raises(PhraseRescoreError) as e:
        parse_moses_ini(text, "m.ini")
    assert e.value.line == 9 and "'x'" in e.value.message       # the line number Moses and an editor give
    ini = parse_moses_ini(text.rsplit("WordPenalty0", 1)[0])
    assert ini.weights == {"LM0": [0.5]} and ini.sections == ["input-factors", "feature", "weight"]
    assert ini.text() == text.rsplit("WordPenalty0", 1)[0]


def test_a_feature_line_splits_at_spaces_and_tabs_only():
    ini = parse_moses_ini("[feature]\nKENLM\tname=LM0 factor=0 path=/m/no\xa0break\u2003lm.arpa  order=3\n")
    assert ini.feature("LM0").get("path") == "/m/no\xa0break\u2003lm.arpa"
    assert ini.feature("LM0").get("order") == "3"


# --- against the real Moses ----------------------------------------------------------------------------

def _moses_weights(ini: Path) -> dict[str, list[float]]:
    r = subprocess.run([str(tool("moses")), "-f", str(ini), "-show-weights"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    out = {}
    for line in r.stdout.splitlines():
        name, _, values = line.partition("= ")
        if values:
            out[name] = [float(v) for v in values.split()]
    return out


@needs_moses
def test_real_moses_reads_the_weights_accepted_here_and_others_differently(tiny):
    text = tiny["ini"].read_text()
    for token, expected in WEIGHTS[:10]:
        tiny["ini"].write_text(text.replace("LM0= 0.5", f"LM0= {token}"))
        moses = _moses_weights(tiny["ini"])["LM0"]
        if isinstance(expected, float):
            assert moses == pytest.approx([expected], abs=1e-6)
            assert read_moses_ini(tiny["ini"]).weights_for("LM0") == pytest.approx(moses, abs=1e-6)
        else:   # Python's float() takes it, as another number than Moses's: refused here
            assert moses != pytest.approx([float(token)], abs=1e-6)
            with pytest.raises(PhraseRescoreError, match="expected a number as weight of LM0"):
                read_moses_ini(tiny["ini"])


@needs_moses
@pytest.mark.parametrize("char", ["\x0c", "\x85", "\u2028"])
def test_real_moses_loads_an_ini_with_these_characters_in_comments_as_read_here(tiny, char):
    text = tiny["ini"].read_text().replace("[mapping]", f"# mapping{char}steps\n[mapping]").replace(
        "LM0= 0.5", f"LM0= 0.5 # by{char}hand")
    tiny["ini"].write_text(text)
    moses = _moses_weights(tiny["ini"])
    ours = read_moses_ini(tiny["ini"]).weights
    assert set(moses) == set(ours) - {"UnknownWordPenalty0"}      # Moses shows it as UNTUNEABLE
    for name, values in moses.items():
        assert ours[name] == pytest.approx(values)

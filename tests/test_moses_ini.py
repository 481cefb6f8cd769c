"""moses.ini: parse, look up, edit and write files in the layout train-model.perl and mert-moses.pl write."""
from __future__ import annotations

from pathlib import Path

import pytest
from _tables import write_table
from click.testing import CliRunner

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.moses_integration.moses_ini import MosesIni, parse_moses_ini, read_moses_ini

FIX = Path(__file__).parent / "fixtures" / "moses"


@pytest.mark.parametrize("name", ["train-model.moses.ini", "rescored.moses.ini", "mert-work.moses.ini"])
def test_unmodified_round_trip_is_byte_identical(name, tmp_path):
    ini = read_moses_ini(FIX / name)
    out = tmp_path / "out.ini"
    ini.write(out)
    assert out.read_bytes() == (FIX / name).read_bytes()


def test_features_and_weights_of_train_model_ini():
    ini = read_moses_ini(FIX / "train-model.moses.ini")
    assert [f.name for f in ini.features] == [
        "UnknownWordPenalty0", "WordPenalty0", "PhrasePenalty0", "TranslationModel0",
        "LexicalReordering0", "Distortion0", "LM0"]
    tm = ini.feature("TranslationModel0")
    assert tm.type == "PhraseDictionaryMemory"
    assert tm.num_features == 4
    assert tm.get("path") == "/home/smt/work/train/model/phrase-table.gz"
    assert tm.get("table-limit") == "20"
    lm = ini.feature("LM0")
    assert (lm.type, lm.get("lazyken"), lm.get("order")) == ("KENLM", "0", "5")
    assert ini.weights_for("TranslationModel0") == [0.2] * 4
    assert ini.weights_for("LexicalReordering0") == [0.3] * 6
    assert ini.weights_for("WordPenalty0") == [-1.0]
    assert [f.name for f in ini.phrase_dictionaries()] == ["TranslationModel0"]
    assert ini.get_value("distortion-limit") == "6"
    assert ini.section_values("mapping") == ["0 T 0"]
    assert ini.sections == ["input-factors", "mapping", "distortion-limit", "feature", "weight"]
    ini.check_weights_match()


def test_mert_moses_output_with_blank_line_after_weight_header():
    ini = read_moses_ini(FIX / "mert-work.moses.ini")
    assert ini.weights_for("TranslationModel0") == pytest.approx(
        [0.0250129, 0.0577011, 0.0489922, 0.0153088, 0.0925316, -0.0607223])
    assert ini.feature("TranslationModel0").num_features == 6
    ini.check_weights_match()


def test_editing_keeps_every_other_byte():
    ini = read_moses_ini(FIX / "train-model.moses.ini")
    tm = ini.feature("TranslationModel0")
    tm.set("path", "/home/smt/work/rescore/phrase-table.rnn.gz")
    tm.set("num-features", "6")
    ini.mark_feature_changed(tm)
    ini.set_weights("TranslationModel0", [0.2] * 6)
    assert ini.text() == (FIX / "rescored.moses.ini").read_text()


def test_edited_line_keeps_its_comment_and_reparses():
    text = "[feature]\nWordPenalty\nDistortion   # distance-based\n\n[weight]\nWordPenalty0= -1  # keep me\nDistortion0= 0.3\n"
    ini = parse_moses_ini(text)
    ini.set_weights("WordPenalty0", [-0.5])
    out = ini.text()
    assert "WordPenalty0= -0.5 # keep me\n" in out
    assert "Distortion   # distance-based\n" in out
    assert parse_moses_ini(out).weights == {"WordPenalty0": [-0.5], "Distortion0": [0.3]}


def test_default_names_count_per_type():
    ini = parse_moses_ini("[feature]\nDistortion\nKENLM path=a order=3 factor=0\nKENLM name=LMbig path=b order=5 factor=0\n"
                          "KENLM path=c order=4 factor=0\n")
    # FeatureFunction::ParseLine counts only earlier features of the type that had no name=
    assert [f.name for f in ini.features] == ["Distortion0", "KENLM0", "LMbig", "KENLM1"]


def test_new_file_built_in_memory_is_moses_readable():
    ini = MosesIni.new()
    ini.set_section("distortion-limit", ["6"])
    ini.add_feature("UnknownWordPenalty", weights=[1])
    ini.add_feature("PhraseDictionaryMemory", [("name", "TranslationModel0"), ("num-features", "4"),
                                               ("path", "/m/pt.gz"), ("input-factor", "0"), ("output-factor", "0")],
                    weights=[0.2] * 4)
    ini.add_feature("Distortion", weights=[0.3])
    back = parse_moses_ini(ini.text())
    assert [f.name for f in back.features] == ["UnknownWordPenalty0", "TranslationModel0", "Distortion0"]
    assert back.weights == {"UnknownWordPenalty0": [1.0], "TranslationModel0": [0.2] * 4, "Distortion0": [0.3]}
    assert back.get_value("distortion-limit") == "6"
    back.check_weights_match()
    assert "[feature]\nUnknownWordPenalty\nPhraseDictionaryMemory name=TranslationModel0 num-features=4" in ini.text()


def test_old_format_refused_with_conversion_advice():
    with pytest.raises(PhraseRescoreError) as e:
        read_moses_ini(FIX / "old-format.moses.ini")
    msg = str(e.value)
    assert msg.startswith(f"{FIX / 'old-format.moses.ini'}:17: [ttable-file] is the old moses.ini format")
    assert "PhraseDictionaryMemory name=TranslationModel0 num-features=N" in msg
    assert "--first-step 9" in msg


@pytest.mark.parametrize("text, line, expected", [
    ("[feature]\nKENLM name=LM0 order\n", 2, "expected key=value"),
    ("[feature]\nname=LM0\n", 2, "expected a feature function type first"),
    ("[feature]\nKENLM name=LM0 path=\n", 2, "expected key=value"),
    ("[feature]\nKENLM name=LM0 order=3 order=5\n", 2, "order= is given twice"),
    ("[feature]\nPhraseDictionaryMemory num-features=four\n", 2, "non-negative integer for num-features"),
    ("[feature]\nWordPenalty\nWordPenalty name=WordPenalty0\n", 3, "already used on line 2"),
    ("[weight]\nLM0 0.5\n", 2, "expected 'FeatureName= w1 w2 ...'"),
    ("[weight]\nLM0=0.5\n", 2, "expected 'FeatureName= w1 w2 ...'"),
    ("[weight]\nLM0= 0.5 abc\n", 2, "expected a number as weight of LM0"),
    ("[weight]\nLM0= 0.5\n# c\nLM0= 0.4\n", 4, "already given on line 2"),
    ("# x\nWordPenalty\n", 2, "before the value"),
    ("[weight-t]\n0.2\n", 1, "old moses.ini format"),
    ("[feature\n", 1, "expected a section header"),
])
def test_errors_name_the_line(text, line, expected):
    with pytest.raises(PhraseRescoreError) as e:
        parse_moses_ini(text, "x.ini")
    assert e.value.line == line
    assert expected in e.value.message


def test_weight_count_mismatch_is_found_before_moses():
    ini = parse_moses_ini("[feature]\nPhraseDictionaryMemory name=TranslationModel0 num-features=6 path=p\n\n"
                          "[weight]\nTranslationModel0= 0.2 0.2 0.2 0.2\n", "m.ini")
    with pytest.raises(PhraseRescoreError) as e:
        ini.check_weights_match()
    assert e.value.line == 5 and "num-features=6 but 4 weights" in e.value.message


def test_no_final_newline_and_crlf_survive():
    text = "[feature]\r\nWordPenalty\r\n[weight]\r\nWordPenalty0= -1"
    ini = parse_moses_ini(text)
    assert ini.text() == text
    ini.add_feature("Distortion", weights=[0.3])
    back = parse_moses_ini(ini.text())
    assert back.weights == {"WordPenalty0": [-1.0], "Distortion0": [0.3]}


def _system(tmp_path, old_scores: int | None, new_scores: int, declared: int = 4, compact: bool = False):
    """A moses.ini declaring ``declared`` scores whose table has ``old_scores`` (None: no such file), and a
    rescored table with ``new_scores``."""
    old_table = tmp_path / "phrase-table.gz"
    if old_scores is not None:
        write_table(old_table, [b"das ||| the ||| " + b" ".join([b"0.5"] * old_scores) + b" ||| 0-0"])
    text = (FIX / "train-model.moses.ini").read_text().replace(
        "/home/smt/work/train/model/phrase-table.gz", str(old_table))
    text = text.replace("num-features=4 path", f"num-features={declared} path")
    text = text.replace("TranslationModel0= 0.2 0.2 0.2 0.2", "TranslationModel0=" + " 0.2" * declared)
    if compact:
        text = text.replace("PhraseDictionaryMemory name=", "PhraseDictionaryCompact name=")
    ini = tmp_path / "moses.ini"
    ini.write_text(text)
    new_table = tmp_path / "phrase-table.rnn.gz"    # two lines whose added columns differ (none is constant)
    write_table(new_table, [b"das ||| the ||| " + b" ".join([b"0.5"] * new_scores) + b" ||| 0-0",
                            b"haus ||| house ||| " + b" ".join([b"0.5"] * (new_scores - 2) + [b"0.25"] * 2)
                            + b" ||| 0-0"])
    return ini, old_table, new_table


# (scores of the ini's table (None: absent), of the rescored table, num-features, --weights, compact?,
#  what the error says (None: accepted), the message's file)
REWRITE_CASES = [
    (4, 6, 4, None, False, None, None),
    (4, 6, 4, (0.2, -0.2), False, None, None),
    (5, 7, 4, None, False, "num-features=4 here but its table {old} has 5 scores per line", "ini"),
    (5, 7, 4, (0.2, -0.2), False, "num-features=4 here but its table {old} has 5 scores per line", "ini"),
    (3, 6, 4, None, False, "num-features=4 here but its table {old} has 3 scores per line", "ini"),
    (None, 7, 4, (0.2, -0.2), False, "--weights gives 2 values but the table adds 3 column(s) (4 -> 7): the table "
                                     "and num-features=4 of TranslationModel0 in {ini} disagree", "new"),
    (5, 7, 4, (0.2, -0.2), True, "--weights gives 2 values but the table adds 3 column(s)", "new"),
    (None, 6, 4, None, False, None, None),
    (0, 6, 4, None, False, "the phrase table is empty", "old"),
    (4, 4, 4, None, False, "has the 4 score columns TranslationModel0 already declares and no more", "new"),
    (4, 6, 4, (0.2, float("nan")), False, "expected finite numbers", None),
    (4, 6, 4, (float("inf"), 0.2), False, "expected finite numbers", None),
]


@pytest.mark.parametrize("old_scores, new_scores, declared, weights, compact, error, where", REWRITE_CASES, ids=[
    "agree", "agree-weights", "ini-4-table-5", "ini-4-table-5-weights", "ini-4-table-3", "no-table-weights-3-of-2",
    "compact-weights-3-of-2", "no-table-unchecked", "empty-old-table", "no-added-column", "weight-nan",
    "weight-inf"])
def test_moses_ini_counts_only_the_columns_score_added(tmp_path, old_scores, new_scores, declared, weights,
                                                      compact, error, where):
    from phrase_rescore.moses_integration.configs import RewriteConfig
    from phrase_rescore.moses_integration.rewrite import rewrite_moses_ini

    ini, old, new = _system(tmp_path, old_scores, new_scores, declared, compact)
    if old_scores == 0:
        old.write_bytes(b"")
    out = tmp_path / "out.ini"
    cfg = RewriteConfig(ini, new, out, weights=weights, binarize=False)
    if error is None:
        res = rewrite_moses_ini(cfg)
        assert (res.old_count, res.new_count) == (declared, new_scores)
        tm = read_moses_ini(out).feature("TranslationModel0")
        assert tm.num_features == new_scores and len(read_moses_ini(out).weights_for("TranslationModel0")) == new_scores
        assert ("counted from num-features=4 alone" in res.summary()) == (old_scores is None and weights is None)
        return
    with pytest.raises(PhraseRescoreError) as e:
        rewrite_moses_ini(cfg)
    assert error.format(old=old, ini=ini) in e.value.message
    assert e.value.path == (None if where is None else str({"ini": ini, "old": old, "new": new.resolve()}[where]))
    assert not out.exists()


def test_moses_ini_command_refuses_an_ini_that_disagrees_with_its_table(tmp_path):
    from phrase_rescore.app.cli import main

    ini, old, new = _system(tmp_path, 5, 7)
    r = CliRunner().invoke(main, ["moses-ini", str(ini), "--table", str(new), "--out", str(tmp_path / "o.ini")])
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert f"error: {ini}:21: the moses.ini and its phrase table disagree: TranslationModel0 declares " \
           f"num-features=4 here but its table {old} has 5 scores per line" in r.output
    assert not (tmp_path / "o.ini").exists()


def test_invalid_utf8_in_a_moses_ini_names_its_line(tmp_path):
    p = tmp_path / "bad.ini"
    p.write_bytes(b"[feature]\nWordPenalty\n[weight]\nWordPenalty0= -1 # caf\xe9\n")
    with pytest.raises(PhraseRescoreError) as e:
        read_moses_ini(p)
    assert (e.value.path, e.value.line) == (str(p), 4) and "invalid UTF-8" in e.value.message

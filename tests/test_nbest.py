"""Moses n-best lists: exact round trip, grouping by sentence, adding a feature without disturbing others."""
from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.moses_integration.nbest import (
    NBestEntry,
    NBestWriter,
    add_feature_to_nbest,
    parse_nbest_line,
    read_nbest,
    read_nbest_groups,
)

NBEST = Path(__file__).parent / "fixtures" / "moses" / "moses.nbest"


def test_round_trip_is_byte_identical(tmp_path):
    out = tmp_path / "copy.nbest"
    with NBestWriter(out) as w:
        for e in read_nbest(NBEST):
            w.write(e)
    assert out.read_bytes() == NBEST.read_bytes()


def test_fields_of_a_moses_line():
    first = next(read_nbest(NBEST))
    assert (first.sent_id, first.hypothesis, first.total, first.line_no) == (0, "the house is small", -4.71301, 1)
    assert first.feature_names() == ["LexicalReordering0", "Distortion0", "LM0", "WordPenalty0", "PhrasePenalty0",
                                     "TranslationModel0"]
    assert first.feature("TranslationModel0") == [-2.30259, -1.89712, -1.20397, -2.99573]
    assert len(first.dense_vector()) == 6 + 1 + 1 + 1 + 1 + 4
    last = list(read_nbest(NBEST))[-1]
    assert last.extra == [" 0-0 "]


def test_groups_by_sentence():
    groups = [(i, [e.hypothesis for e in es]) for i, es in read_nbest_groups(NBEST)]
    assert groups == [(0, ["the house is small", "the house is little"]), (1, ["it is a small house"]), (2, [""]),
                      (3, ["hello"])]
    full = [(i, len(es)) for i, es in read_nbest_groups(NBEST, num_sentences=4)]
    assert full == [(0, 2), (1, 1), (2, 1), (3, 1)]
    with pytest.raises(PhraseRescoreError, match="only 3 sentences"):
        list(read_nbest_groups(NBEST, num_sentences=3))
    with pytest.raises(PhraseRescoreError, match="ends after sentence 3: no hypotheses for sentence 4,"):
        list(read_nbest_groups(NBEST, num_sentences=5))


@pytest.mark.parametrize("drop, line, message", [
    ("1", 3, "after sentence 0 comes sentence 2: no hypotheses for sentence 1;"),
    ("0", 1, "the list starts at sentence 1: no hypotheses for sentence 0;"),
    ("1 2", 3, "after sentence 0 comes sentence 3: no hypotheses for sentences 1 to 2;"),
])
def test_a_sentence_missing_from_the_list_is_refused_naming_line_and_id(tmp_path, drop, line, message):
    """Moses writes every sentence (an untranslatable one gets the empty hypothesis): a gap is a broken list, and
    an empty 1-best line there would pass for a translation."""
    kept = [x for x in NBEST.read_text().splitlines(keepends=True) if x.split(" ")[0] not in drop.split()]
    cut = tmp_path / "gap.nbest"
    cut.write_text("".join(kept))
    for num in (None, 4):
        with pytest.raises(PhraseRescoreError, match=message) as e:
            list(read_nbest_groups(cut, num_sentences=num))
        assert e.value.path == str(cut) and e.value.line == line


def test_add_feature_appends_exactly_what_moses_would_print(tmp_path):
    out = tmp_path / "rnn.nbest.gz"
    n = add_feature_to_nbest(NBEST, out, "RNN0", [np.float32(-3.5), -2.25, [-7.0, 1.0], 0.5, 0])
    assert n == 5
    got = gzip.open(out, "rt", encoding="utf-8").read().splitlines()
    want = NBEST.read_text().splitlines()
    appended = [" RNN0= -3.5", " RNN0= -2.25", " RNN0= -7 1", " RNN0= 0.5", " RNN0= 0"]
    for g, w, a in zip(got, want, appended, strict=True):
        fields = w.split("|||")
        fields[2] = fields[2].rstrip(" ") + a + " "
        assert g == "|||".join(fields)
    back = list(read_nbest(out))
    assert [e.feature("RNN0") for e in back] == [[-3.5], [-2.25], [-7.0, 1.0], [0.5], [0.0]]
    # the others are untouched
    assert [e.feature("TranslationModel0") for e in back] == [e.feature("TranslationModel0") for e in read_nbest(NBEST)]


@pytest.mark.parametrize("values, expected", [([1.0, 2.0, 3.0], "ran out of values"),
                                              ([1.0] * 6, "more values for feature")])
def test_add_feature_refuses_misaligned_values(tmp_path, values, expected):
    out = tmp_path / "x.nbest"
    with pytest.raises(PhraseRescoreError, match=expected):
        add_feature_to_nbest(NBEST, out, "RNN0", values)
    assert not out.exists()


def test_add_existing_feature_name_is_refused():
    e = next(read_nbest(NBEST))
    with pytest.raises(PhraseRescoreError, match="already has a feature named 'LM0'"):
        e.add_feature("LM0", [1.0])


def test_created_entry_uses_moses_layout():
    e = NBestEntry.create(7, "a b", [("LM0", [-1.5]), ("TranslationModel0", [-1, -2.5])], -3.25)
    line = e.to_line()
    assert line == "7 ||| a b  ||| LM0= -1.5 TranslationModel0= -1 -2.5 ||| -3.25"
    back = parse_nbest_line(line)
    assert (back.sent_id, back.hypothesis, back.features, back.total) == (7, "a b", e.features, -3.25)


@pytest.mark.parametrize("line, expected", [
    (b"0 ||| a ||| LM0= -1", "at least 4 fields"),
    (b"x ||| a ||| LM0= -1 ||| 2", "sentence id"),
    (b"0 ||| a ||| LM0= -1 ||| high", "total score"),
    (b"0 ||| a ||| -1 -2 ||| -3", "feature label"),
    (b"0 ||| a ||| LM0= minus ||| -3", "as a value of feature LM0"),
    (b"0 ||| a ||| LM0= nan ||| -3", "finite number as a value of feature LM0, got 'nan'"),
    (b"0 ||| a ||| LM0= -1 TM0= -inf ||| -3", "finite number as a value of feature TM0, got '-inf'"),
    (b"0 ||| a ||| LM0= 1_0 ||| -3", "got '1_0'"),
    (b"0 ||| a ||| LM0= 1e999 ||| -3", "got '1e999'"),
    (b"0 ||| a ||| LM0= -1 ||| nan", "total score (a finite number) in the fourth field, got 'nan'"),
    (b"0 ||| a ||| LM0= -1 ||| inf", "got 'inf'"),
    (b"0 ||| a ||| LM0= -1 ||| -Infinity", "got '-Infinity'"),
    (b"0 ||| a \xff b ||| LM0= -1 ||| -3", "invalid UTF-8 at byte 8"),
    (b"", "empty line"),
])
def test_bad_lines_name_file_and_line(tmp_path, line, expected):
    p = tmp_path / "bad.nbest"
    p.write_bytes(b"0 ||| ok  ||| LM0= -1 ||| -1\n" + line + b"\n0 ||| c  ||| LM0= -1 ||| -1\n")
    with pytest.raises(PhraseRescoreError) as e:
        list(read_nbest(p))
    assert e.value.line == 2 and e.value.path == str(p) and expected in e.value.message


@pytest.mark.parametrize("data", [
    b"0 ||| a b  ||| LM0= -1 ||| -1\r\n0 ||| a c  ||| LM0= -2 ||| -2\r\n1 ||| d  ||| LM0= -3 ||| -3\r\n",
    b"0 ||| a b  ||| LM0= -1 ||| -1\r\n0 ||| a c  ||| LM0= -2 ||| -2\n1 ||| d  ||| LM0= -3 ||| -3 ||| 0-0 \r\n",
    b"0 ||| a b  ||| LM0= -1 ||| -1\n0 ||| a\rc  ||| LM0= -2 ||| -2\r\n1 ||| d  ||| LM0= -3 ||| -3",
])
def test_each_line_keeps_its_own_line_ending(tmp_path, data):
    src, copy, added = tmp_path / "in.nbest", tmp_path / "copy.nbest", tmp_path / "added.nbest"
    src.write_bytes(data)
    with NBestWriter(copy) as w:
        for e in read_nbest(src):
            w.write(e)
    assert copy.read_bytes() == data
    assert add_feature_to_nbest(src, added, "RNN0", [-0.5, -1.5, -2.5]) == 3
    lines = data.split(b"\n")                                # the part after a final newline stays ""
    for i, v in enumerate([b"-0.5", b"-1.5", b"-2.5"]):
        f = lines[i].split(b"|||")
        f[2] = f[2].rstrip(b" ") + b" RNN0= " + v + b" "
        lines[i] = b"|||".join(f)
    assert added.read_bytes() == b"\n".join(lines)           # only the new feature differs, \r\n kept
    assert len(list(read_nbest(src))) == 3                     # a lone \r does not end a line


def test_an_unterminated_line_written_before_another_gets_a_newline(tmp_path):
    src, out = tmp_path / "in.nbest", tmp_path / "out.nbest"
    src.write_bytes(b"0 ||| a  ||| LM0= -1 ||| -1")
    (e,) = read_nbest(src)
    with NBestWriter(out) as w:
        w.write(e)
        w.write(NBestEntry.create(1, "b", [("LM0", [-2])], -2))
    assert out.read_bytes() == b"0 ||| a  ||| LM0= -1 ||| -1\n1 ||| b  ||| LM0= -2 ||| -2\n"


def test_ids_going_down_is_an_error(tmp_path):
    p = tmp_path / "bad.nbest"
    p.write_text("1 ||| a  ||| LM0= -1 ||| -1\n0 ||| b  ||| LM0= -1 ||| -1\n")
    with pytest.raises(PhraseRescoreError, match="increasing order"):
        list(read_nbest(p))

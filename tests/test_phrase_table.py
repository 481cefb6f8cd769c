"""Phrase-table reading and writing: byte-exact round trips, bad input in both modes."""
import gzip
import os

import pytest
from _tables import write_table as write

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.moses_integration.phrase_table import (
    NEUTRAL_VALUE,
    PhraseTableWriter,
    append_columns,
    check_not_empty,
    num_scores,
    read_phrase_table,
)

# Lines in the shapes Moses writes and accepts: 3 fields, 5 fields with the trailing ``||| |||``,
# sparse features, {{Key value}} properties, odd spacing, non-ASCII text.
GOOD_LINES = [
    b"das Haus ||| the house ||| 0.5 0.25 0.8 0.125",
    b"das Haus ||| the building ||| 0.1 0.2 0.3 0.4 ||| 0-0 1-1 ||| 10 4 2 ||| |||",
    b"der ||| the ||| 1 0.5 1e-05 2.718 ||| 0-0 ||| 3 3 3 ||| dense_feat 1 ||| {{Counts 3 3 3}} {{SpanLength 1,1}}",
    b"  f\xc3\xbcr   ||| for  |||0.1 0.2 0.3 0.4|||0-0|||1 1 1",
    b"\xc3\xa9t\xc3\xa9 ||| summer ||| 0.1 0.2 0.3 0.4 ||| ||| 2 2 1 ||| |||",
]


def read_bytes(path):
    with open(path, "rb") as f:
        data = f.read()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


@pytest.mark.parametrize("suffix_in,suffix_out", [(".txt", ".txt"), (".gz", ".gz"), (".gz", ".txt"), (".txt", ".gz")])
@pytest.mark.parametrize("newline_at_end", [True, False])
def test_round_trip_is_byte_identical(tmp_path, suffix_in, suffix_out, newline_at_end):
    src, dst = tmp_path / f"in{suffix_in}", tmp_path / f"out{suffix_out}"
    data = write(src, GOOD_LINES, newline_at_end)
    with PhraseTableWriter(dst) as w:
        for entry in read_phrase_table(src):
            w.write(entry)
    assert read_bytes(dst) == data
    assert (read_bytes(dst) != open(dst, "rb").read()) == suffix_out.endswith(".gz")


def test_gzip_is_detected_by_content_not_suffix(tmp_path):
    path = tmp_path / "table.txt"  # gzip data under a plain name
    with gzip.open(path, "wb") as f:
        f.write(GOOD_LINES[0] + b"\n")
    assert [e.target for e in read_phrase_table(path)] == ["the house"]


def test_records_are_typed_and_trimmed(tmp_path):
    path = tmp_path / "t.txt"
    write(path, GOOD_LINES)
    entries = list(read_phrase_table(path))
    assert [e.line_no for e in entries] == [1, 2, 3, 4, 5]
    assert entries[3].source == "für" and entries[3].target == "for"
    assert entries[2].scores == (1.0, 0.5, 1e-05, 2.718)
    assert num_scores(path) == 4


@pytest.mark.parametrize("line,expected", [
    (b"a ||| b ||| 0.1 0.2 ||| 0-0 ||| 1 1 1 ||| |||", b"a ||| b ||| 0.1 0.2 0.5 2.718282 ||| 0-0 ||| 1 1 1 ||| |||"),
    (b"a ||| b ||| 0.1 0.2", b"a ||| b ||| 0.1 0.2 0.5 2.718282"),
    (b"a ||| b ||| 0.1 0.2 ", b"a ||| b ||| 0.1 0.2 0.5 2.718282 "),
    (b"a|||b|||0.1 0.2|||0-0", b"a|||b|||0.1 0.2 0.5 2.718282|||0-0"),
    (b"a ||| b |||  ||| 0-0", b"a ||| b ||| 0.5 2.718282  ||| 0-0"),
    (b"only ||| two", b"only ||| two"),
])
def test_append_columns_keeps_every_other_byte(line, expected):
    assert append_columns(line, b"0.5 2.718282") == expected


def test_writer_appends_columns(tmp_path):
    src, dst = tmp_path / "in.gz", tmp_path / "out.gz"
    write(src, GOOD_LINES[:2])
    with PhraseTableWriter(dst) as w:
        for e in read_phrase_table(src):
            w.write(e, [0.5, 2.718281828])
    out = read_bytes(dst).split(b"\n")
    assert out[0] == b"das Haus ||| the house ||| 0.5 0.25 0.8 0.125 0.5 2.718282"
    assert out[1] == b"das Haus ||| the building ||| 0.1 0.2 0.3 0.4 0.5 2.718282 ||| 0-0 1-1 ||| 10 4 2 ||| |||"


# (bad line, words the error message must contain); each is line 2 of a table whose first line is good
BAD_LINES = [
    (b"a ||| b", "at least 3 fields"),
    (b"a ||| b ||| 0.1 zero 0.3 0.4", "'zero' is not a number"),
    (b"a ||| b ||| 0.1 nan 0.3 0.4", "not finite"),
    (b"a ||| b ||| 0.1 inf 0.3 0.4", "not finite"),
    (b"a ||| b ||| 0.1 0.2 0.3", "expected 4 scores"),
    (b"a \xff ||| b ||| 0.1 0.2 0.3 0.4", "invalid UTF-8"),
    (b" ||| b ||| 0.1 0.2 0.3 0.4", "empty source"),
    (b"a |||  ||| 0.1 0.2 0.3 0.4", "empty target"),
    (b"a ||| b ||| 0.1 0.2 0.3 0.4\r", "CRLF"),
    # only what Moses's StringToFloat reads whole, as a finite non-negative float32
    (b"a ||| b ||| -inf inf 0.3 0.4", "'-inf' is not finite"),
    (b"a ||| b ||| 0.1 Infinity 0.3 0.4", "'Infinity' is not finite"),
    (b"a ||| b ||| 1e308 1e308 0.3 0.4", "'1e308' is out of float range"),
    (b"a ||| b ||| 0.1 0.2 1e39 0.4", "'1e39' is out of float range"),
    (b"a ||| b ||| 0.1 0.2 0.3 1e400", "'1e400' is out of float range"),
    (b"a ||| b ||| 1_0 0.2 0.3 0.4", "'1_0' is not a number"),
    (b"a ||| b ||| 0x1p3 0.2 0.3 0.4", "'0x1p3' is not a number"),
    (b"a ||| b ||| 0.1 \xd9\xa3 0.3 0.4", "'\u0663' is not a number"),
    (b"a ||| b ||| 0.1 1e 0.3 0.4", "'1e' is not a number"),
    (b"a ||| b ||| 0.1\x0b0.2 0.3 0.4", "'0.1\\x0b0.2' is not a number"),
    (b"a ||| b ||| 0.1 -0.5 0.3 0.4", "'-0.5' is negative"),
]


@pytest.mark.parametrize("bad,words", BAD_LINES)
def test_bad_line_raises_with_file_and_line(tmp_path, bad, words):
    path = tmp_path / "bad.txt"
    write(path, [GOOD_LINES[0], bad, GOOD_LINES[1]])
    with pytest.raises(PhraseRescoreError) as err:
        list(read_phrase_table(path))
    assert err.value.line == 2 and err.value.path == str(path)
    assert words in str(err.value) and str(err.value).startswith(f"{path}:2: ")


@pytest.mark.parametrize("bad,words", BAD_LINES)
def test_bad_line_kept_in_place_with_keep(tmp_path, bad, words):
    path, out, rejects = tmp_path / "bad.txt", tmp_path / "out.txt", tmp_path / "rejects.txt"
    write(path, [GOOD_LINES[0], bad, GOOD_LINES[1]])
    reader = read_phrase_table(path, on_error="keep", rejects_path=rejects)
    with PhraseTableWriter(out) as w:
        for e in reader:
            w.write(e, [0.5])
    lines = read_bytes(out).split(b"\n")
    assert len(lines) == 4 and lines[3] == b""
    assert lines[0] == GOOD_LINES[0] + b" 0.5"
    assert lines[2] == append_columns(GOOD_LINES[1], b"0.5")
    # the bad line keeps its place and its bytes; where it has a scores field it gets the neutral value
    neutral = f"{NEUTRAL_VALUE:.7g}".encode()
    assert lines[1] == append_columns(bad, neutral)
    assert reader.stats.lines == 3 and reader.stats.rejected == 1
    listed = open(rejects, "rb").read().split(b"\t")
    assert listed[0] == b"2" and words.encode() in listed[1] and listed[2] == bad + b"\n"
    assert "1 rejected" in reader.stats.summary()


def test_truncated_gzip_is_an_error(tmp_path):
    path = tmp_path / "t.gz"
    write(path, GOOD_LINES * 2000)
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2])
    with pytest.raises(PhraseRescoreError, match="truncated"):
        for _ in read_phrase_table(path):
            pass


def test_writer_is_atomic(tmp_path):
    dst = tmp_path / "out.gz"
    with pytest.raises(RuntimeError):
        with PhraseTableWriter(dst) as w:
            w.write_raw([b"x ||| y ||| 1\n"])
            raise RuntimeError("crash mid-write")
    assert not dst.exists() and os.listdir(tmp_path) == []


def test_missing_file(tmp_path):
    with pytest.raises(PhraseRescoreError, match="not found"):
        list(read_phrase_table(tmp_path / "nope.gz"))


def test_scores_moses_reads_are_accepted_as_it_reads_them(tmp_path):
    path = tmp_path / "t.txt"
    write(path, [b"a ||| b ||| 0 -0 +0.5 .5", b"a ||| c |||\t5.\t1E-5 3.4028234e38 1e-50\t"])
    assert [e.scores for e in read_phrase_table(path)] == [(0.0, -0.0, 0.5, 0.5), (5.0, 1e-05, 3.4028234e38, 1e-50)]


def test_negative_scores_with_allow_negative(tmp_path):
    path = tmp_path / "raw.txt"
    write(path, [b"a ||| b ||| -1.5 -250 0", b"a ||| c ||| -0.5 -1e39 0"])
    entries = list(read_phrase_table(path, on_error="keep", allow_negative=True))
    assert entries[0].error is None and entries[0].scores == (-1.5, -250.0, 0.0)
    assert "out of float range" in entries[1].error


@pytest.mark.parametrize("data", [b"", gzip.compress(b"", mtime=0)], ids=["plain", "gzip"])
@pytest.mark.parametrize("on_error", ["raise", "keep"])
def test_empty_table_is_refused(tmp_path, data, on_error):
    path = tmp_path / "empty.gz"
    path.write_bytes(data)
    for read in (lambda: list(read_phrase_table(path, on_error=on_error)), lambda: num_scores(path),
                 lambda: check_not_empty(path)):
        with pytest.raises(PhraseRescoreError) as err:
            read()
        assert str(err.value) == f"{path}: the phrase table is empty: expected at least one line " \
                                 "'source ||| target ||| scores'"


def test_num_scores_is_the_first_good_lines_count(tmp_path):
    path = tmp_path / "t.txt"
    write(path, [b"a ||| b ||| 0.1 0.2 1 1\r", b"a ||| c ||| 0.5 0.5 0.5 0.5 1 2.718282", b"x ||| y ||| 1"])
    assert num_scores(path) == 6
    write(path, [b"a ||| b", b"a ||| c ||| -1"])
    with pytest.raises(PhraseRescoreError, match="no line of the table has valid scores"):
        num_scores(path)

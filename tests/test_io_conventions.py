"""One rule for each I/O convention, whichever command reads or writes: lines end at ``\\n`` only and a bad
byte is named by file and line; ``|`` leaves a corpus as clean-corpus-n.perl removes it; a scored line is
written one way; Moses's numbers are printed one way; a gzip member is the same bytes however it is
written; a temporary file or folder is removed only when its writer is gone."""
from __future__ import annotations

import gzip
import io
import os
import subprocess
import sys
import zlib

import numpy as np
import pyarrow as pa
import pytest

from phrase_rescore.core import reading
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.gzip_writing import GZIP_HEADER, gzip_piece, gzip_trailer, gzip_writer
from phrase_rescore.core.reading import read_text_lines
from phrase_rescore.core.temp_names import HOST_TAG, writer_gone
from phrase_rescore.core.words import words
from phrase_rescore.moses_integration.embedded import decoder
from phrase_rescore.moses_integration.embedded.clean import CleanConfig, clean_pairs
from phrase_rescore.moses_integration.embedded.tokenizer import TokenizeConfig
from phrase_rescore.moses_integration.heldout_text import tokenize_file
from phrase_rescore.moses_integration.moses_values import format_moses_float
from phrase_rescore.moses_integration.phrase_table import scored_line
from phrase_rescore.pipeline import sentences
from phrase_rescore.pipeline.vocab import count_corpus, split_words

# ------------------------------------------------------------------------------------ reading lines

SENTENCE_READERS = {"core": reading.read_sentences, "pipeline.sentences": sentences.read_sentences,
                    "embedded decoder": decoder.read_sentences}

LINE_CASES = [  # (file bytes, lines without their endings)
    (b"a b\n\nc\n", ["a b", "", "c"]),
    (b"a b\r\nc", ["a b", "c"]),                  # CRLF ending, a last line without one
    (b"a\rb\n", ["a\rb"]),                         # a lone \r is inside the line
    (b"a\x0cb\n", ["a\x0cb"]),                     # so are a form feed ...
    ("a\u2028b\n".encode(), ["a\u2028b"]),         # ... and a Unicode line separator
    ("a\u00a0b\t c \n".encode(), ["a\u00a0b\t c "]),
    (b"", []),
]

WORD_CASES = [  # (text, its words as Moses's Tokenize splits them: at runs of spaces and tabs only)
    ("a b", ["a", "b"]),
    ("  a \t\tb\t", ["a", "b"]),
    ("", []),
    (" \t ", []),
    ("a\u00a0b", ["a\u00a0b"]),                    # a no-break space is part of the word
    ("x\u00a0 y", ["x\u00a0", "y"]),               # ... at its end too: "x\u00a0" is not "x"
    ("a\u2028b\u3000c\x0bd\x0ce\x1cf\x85g\rh", ["a\u2028b\u3000c\x0bd\x0ce\x1cf\x85g\rh"]),
]


@pytest.mark.parametrize("text,want", WORD_CASES)
def test_words_are_split_as_moses_splits_them(text, want):
    assert words(text) == want
    flat, offsets = split_words(pa.array([text, "a b", text]))     # the vectorised split agrees
    got = flat.to_pylist()
    assert [got[offsets[i]:offsets[i + 1]] for i in range(3)] == [want, ["a", "b"], want]

BAD_UTF8 = [  # (file bytes, line named in the error)
    (b"fine\nbad \xff byte\n", 2),
    (b"\xc3\n", 1),
    (b"a\rb\nc\n\xe2\x82\n", 3),
]


@pytest.mark.parametrize("data,lines", LINE_CASES)
def test_lines_end_at_newline_only(tmp_path, data, lines):
    path = tmp_path / "f.txt"
    path.write_bytes(data)
    assert read_text_lines(path) == lines
    for name, read in SENTENCE_READERS.items():
        assert read(path) == [words(line) for line in lines], name


@pytest.mark.parametrize("data,line_no", BAD_UTF8)
def test_invalid_utf8_names_file_and_line_for_every_reader(tmp_path, data, line_no):
    path = tmp_path / "bad.txt"
    path.write_bytes(data)
    for read in {"lines": read_text_lines, "vocabulary counts": count_corpus, **SENTENCE_READERS}.values():
        with pytest.raises(PhraseRescoreError, match=rf"bad.txt:{line_no}: invalid UTF-8 .*expected UTF-8 text"):
            read(path)


def test_gzip_input_is_read_by_content(tmp_path):
    path = tmp_path / "f.txt"  # no .gz suffix
    path.write_bytes(gzip.compress(b"a b\r\nc\n"))
    assert read_text_lines(path) == ["a b", "c"]


BAD_GZIP = [  # (file bytes, message naming the file and the line where the data breaks)
    (b"\x1f\x8b\x05 not gzip at all", r"f.gz:1: not a valid gzip file \("),
    (gzip.compress(b"".join(b"line %d\n" % i for i in range(20000)))[:20000],
     r"f.gz:\d+: the file ends too early, truncated\? \(after line \d+: "),
]


@pytest.mark.parametrize("data,message", BAD_GZIP)
def test_broken_gzip_names_file_and_line(tmp_path, data, message):
    path = tmp_path / "f.gz"
    path.write_bytes(data)
    with pytest.raises(PhraseRescoreError, match=message):
        read_text_lines(path)


# ------------------------------------------------------------------------------------ pipes

def test_tokenize_stage_removes_pipes_as_clean_does(tmp_path):
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_bytes(b"a | b|c ||\nx\ry\n")
    assert tokenize_file(src, out, TokenizeConfig(lang="en", case="lower", escape=False), None) == 2
    kept_src, _, stats = clean_pairs([["a", "|", "b", "|", "c", "||"], ["x", "y"]], [["t"], ["t"]], CleanConfig())
    assert out.read_text(encoding="utf-8") == "".join(" ".join(s) + "\n" for s in kept_src) == "a b c\nx y\n"
    assert stats.pairs_with_pipes_removed == 1


# ------------------------------------------------------------------------------------ scored lines

SCORED = [  # (line as read, new columns, line written)
    (b"a ||| b ||| 0.5\n", b"0.25", b"a ||| b ||| 0.5 0.25\n"),
    (b"a ||| b ||| 0.5", b"0.25 1", b"a ||| b ||| 0.5 0.25 1"),                     # last line, no newline
    (b"a ||| b ||| 0.5 1 ||| 0-0 ||| 1 1 1 ||| |||\n", b"2", b"a ||| b ||| 0.5 1 2 ||| 0-0 ||| 1 1 1 ||| |||\n"),
    (b"a ||| b |||  \n", b"1", b"a ||| b ||| 1  \n"),                                 # an empty scores field
    (b"no fields here\n", b"1", b"no fields here\n"),                                # nothing to append to
]


@pytest.mark.parametrize("line,columns,written", SCORED)
def test_scored_line(line, columns, written):
    assert scored_line(line, columns) == written


# ------------------------------------------------------------------------------------ Moses's numbers

FLOATS = [  # (value, what Moses's ostream prints; -0 as 0)
    (0.5, "0.5"), (1.0, "1"), (100.0, "100"), (1234567.0, "1.23457e+06"), (1e-05, "1e-05"),
    (0.000123456789, "0.000123457"), (-1.3862943611198906, "-1.38629"), (-0.0, "0"), (0.0, "0"),
    (np.float32(0.1), "0.1"), (np.float64(2.718281828), "2.71828"),
]


@pytest.mark.parametrize("value,text", FLOATS)
def test_format_moses_float(value, text):
    assert format_moses_float(value) == text


# ------------------------------------------------------------------------------------ deterministic gzip

def test_gzip_member_written_in_pieces_is_one_valid_member():
    data = [b"line %d ||| x\n" % i * 50 for i in range(7)]
    member = (GZIP_HEADER + b"".join(gzip_piece(piece) for piece in data)
              + gzip_trailer(zlib.crc32(b"".join(data)), sum(map(len, data))))
    assert gzip.decompress(member) == b"".join(data)
    assert member[4:8] == b"\0\0\0\0" and not member[3] & 0x08  # mtime 0, no file name
    streamed = io.BytesIO()
    with gzip_writer(streamed) as g:
        g.write(b"x")
    assert streamed.getvalue().startswith(GZIP_HEADER)  # both writers: no name, mtime 0


# ------------------------------------------------------------------------------------ leftovers of killed runs

def test_writer_gone_only_for_a_dead_process_of_this_machine():
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    other_host = "0" * 8 if HOST_TAG != "0" * 8 else "1" * 8
    try:
        cases = [(HOST_TAG, dead, True), (other_host, dead, False), (HOST_TAG, live.pid, False),
                 (HOST_TAG, os.getpid(), False), (HOST_TAG, 0, False), (HOST_TAG, -1, False)]
        assert [writer_gone(host, pid) for host, pid, _ in cases] == [gone for _, _, gone in cases]
    finally:
        live.kill()
        live.wait()

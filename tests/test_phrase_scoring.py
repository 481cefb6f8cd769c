"""Lexical tables and phrase-table scoring against hand-computed numbers, in Moses's exact line format."""
import gzip
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest

from phrase_rescore.moses_integration.embedded.extract import count_phrase_pairs
from phrase_rescore.moses_integration.embedded.phrase_scoring import best_alignments, lexical_tables, score_phrase_table


def _corpus(rows):
    src = [s.split() for s, _, _ in rows]
    tgt = [t.split() for _, t, _ in rows]
    al = [[tuple(map(int, p.split("-"))) for p in a.split()] for _, _, a in rows]
    return src, tgt, al


def _build(rows, tmp_path):
    src, tgt, al = _corpus(rows)
    lex = lexical_tables(src, tgt, al)
    path = tmp_path / "phrase-table.gz"
    stats = score_phrase_table(count_phrase_pairs(src, tgt, al), lex, path)
    lines = gzip.open(path, "rt", encoding="utf-8").read().splitlines()
    return lex, stats, lines


# Averaging over several aligned words, and a product over words.
#   T1 "a b" / "w" (0-0 1-0), T2 "a" / "w" (0-0), T3 "b" / "v" (0-0).
#   word pair counts: (a,w) 2, (b,w) 1, (b,v) 1;  c(a) = 2, c(b) = 2, c(w) = 3, c(v) = 1
#   w(w|a) = 2/2 = 1, w(w|b) = 1/2, w(v|b) = 1/2;  w(a|w) = 2/3 = 0.6666667, w(b|w) = 1/3 = 0.3333333, w(b|v) = 1
#   "a b" ||| "w":  lex(t|s) = mean(w(w|a), w(w|b)) = (1 + 0.5) / 2 = 0.75
#                   lex(s|t) = w(a|w) * w(b|w) = 0.6666667 * 0.3333333 = 0.222222 (6 digits)
#                   c(s,t) = 1, c(t = "w") = 2 ("a b" / "w" and "a" / "w"), c(s = "a b") = 1
#                   p(s|t) = 1/2, p(t|s) = 1/1
AVERAGING = [("a b", "w", "0-0 1-0"), ("a", "w", "0-0"), ("b", "v", "0-0")]

# NULL: unaligned words are explained by NULL.
#   S1 "a b" / "x y" (0-0 1-1), S2 "a c" / "x z" (0-0: c and z unaligned), S3 "a" / "y" (0-0)
#   pair counts: (a,x) 2, (a,y) 1, (b,y) 1, (NULL,z) 1, (c,NULL) 1
#   c(a) = 3, c(NULL src) = 1, c(x) = 2, c(y) = 2, c(z) = 1
#   w(x|a) = 0.6666667, w(y|a) = 0.3333333, w(z|NULL) = 1;  w(a|x) = 1, w(a|y) = 0.5, w(c|NULL) = 1/1 = 1
#   "a c" ||| "x z": lex(t|s) = w(x|a) * w(z|NULL) = 0.666667;  lex(s|t) = w(a|x) * w(c|NULL) = 1
#   "a" ||| "y":     lex(t|s) = w(y|a) = 0.333333;            lex(s|t) = w(a|y) = 0.5
#   extracted: S1 a/x, "a b"/"x y", b/y;  S2 a/x, "a c"/x, a/"x z", "a c"/"x z";  S3 a/y
#   c(s=a) = 2 + 1 + 1 = 4 -> p(t|s): x 2/4, "x z" 1/4, y 1/4;  c(t=y) = 2 (b/y, a/y) -> p(a|y) = 0.5
#   c(s="a c") = 2 ("a c"/x, "a c"/"x z"), c(t="x z") = 2 (a/"x z", "a c"/"x z") -> both p = 1/2
WITH_NULL = [("a b", "x y", "0-0 1-1"), ("a c", "x z", "0-0"), ("a", "y", "0-0")]


def test_lexical_tables_hand_computed():
    src, tgt, al = _corpus(WITH_NULL)
    lex = lexical_tables(src, tgt, al)
    assert lex.t_given_s.prob("a", "x") == pytest.approx(0.6666667, abs=0)
    assert lex.t_given_s.prob("a", "y") == pytest.approx(0.3333333, abs=0)
    assert lex.t_given_s.prob("NULL", "z") == 1.0
    assert lex.s_given_t.prob("x", "a") == 1.0
    assert lex.s_given_t.prob("y", "a") == 0.5
    assert lex.s_given_t.prob("y", "b") == 0.5
    assert lex.s_given_t.prob("NULL", "c") == 1.0


def test_lex_files_in_moses_format(tmp_path):
    src, tgt, al = _corpus(WITH_NULL)
    lex = lexical_tables(src, tgt, al)
    lex.write(tmp_path / "lex.f2e", tmp_path / "lex.e2f")
    f2e = set((tmp_path / "lex.f2e").read_text().splitlines())
    e2f = set((tmp_path / "lex.e2f").read_text().splitlines())
    assert "x a 0.6666667" in f2e and "z NULL 1.0000000" in f2e and "NULL c 1.0000000" in f2e
    assert "a x 1.0000000" in e2f and "a y 0.5000000" in e2f and "b y 0.5000000" in e2f


def test_phrase_lines_hand_computed(tmp_path):
    _, _, lines = _build(AVERAGING, tmp_path)
    assert "a b ||| w ||| 0.5 0.222222 1 0.75 ||| 0-0 1-0 ||| 2 1 1 ||| |||" in lines
    _, _, lines = _build(WITH_NULL, tmp_path)
    assert "a c ||| x z ||| 0.5 1 0.5 0.666667 ||| 0-0 ||| 2 2 1 ||| |||" in lines
    assert "a ||| y ||| 0.5 0.5 0.25 0.333333 ||| 0-0 ||| 2 4 1 ||| |||" in lines
    assert "a ||| x ||| 0.666667 1 0.5 0.666667 ||| 0-0 ||| 3 4 2 ||| |||" in lines


def _parse(lines):
    out = []
    for line in lines:
        f = line.split(" ||| ")
        out.append((f[0], f[1], [float(x) for x in f[2].split()], [float(x) for x in f[4].split()]))
    return out


def test_probabilities_sum_to_one_and_counts_agree(tmp_path):
    rows = [("le chat noir", "the black cat", "0-0 1-2 2-1"), ("le chien", "the dog", "0-0 1-1"),
            ("le chat", "the cat", "0-0 1-1"), ("un chat noir", "a black cat", "0-0 1-2 2-1"),
            ("chat", "cat", "0-0"), ("le petit chien", "the little dog", "0-0 1-1 2-2")]
    _, stats, lines = _build(rows, tmp_path)
    parsed = _parse(lines)
    by_src, by_tgt = defaultdict(float), defaultdict(float)
    for s, t, sc, counts in parsed:
        by_src[s] += sc[2]       # p(t|s)
        by_tgt[t] += sc[0]       # p(s|t)
        c_t, c_s, c_st = counts
        assert sc[2] == pytest.approx(c_st / c_s, rel=1e-5) and sc[0] == pytest.approx(c_st / c_t, rel=1e-5)
    assert all(v == pytest.approx(1.0, abs=2e-5) for v in by_src.values())
    assert all(v == pytest.approx(1.0, abs=2e-5) for v in by_tgt.values())
    assert stats.lines == len(lines) and stats.distinct_sources == len(by_src)
    assert stats.mean_targets_per_source == pytest.approx(len(lines) / len(by_src))


def test_sorted_like_lc_all_c_sort_of_extract_lines(tmp_path):
    rows = [("a b", "x y", "0-0 1-1"), ("a", "x", "0-0"), ("é", "e", "0-0"), ("z", "q", "0-0"),
            ("a", "x y", "0-0 0-1"), ("B", "b", "0-0")]
    _, _, lines = _build(rows, tmp_path)
    keys = [(ln.split(" ||| ")[0] + " ||| " + ln.split(" ||| ")[1] + " |||").encode() for ln in lines]
    assert keys == sorted(keys)
    srcs = [ln.split(" ||| ")[0] for ln in lines]
    assert srcs.index("a b") < srcs.index("a")      # "a b |||" < "a |||": 'b' < '|'
    assert srcs.index("z") < srcs.index("é")        # bytes 0xC3.. after ASCII
    assert srcs.index("B") < srcs.index("a")        # upper case first, as under LC_ALL=C


def test_best_alignment_most_frequent_then_greatest():
    counts = pd.DataFrame({
        "src": ["a b"] * 3 + ["c d"] * 2,
        "tgt": ["x y"] * 3 + ["u v"] * 2,
        "align": ["0-0 1-1", "1-0 0-1", "0-0 0-1", "0-0 1-1", "1-0 0-1"],
        "count": [3, 1, 1, 1, 1]})
    best = {(r.src, r.tgt): (r.align, r.count) for r in best_alignments(counts).itertuples()}
    assert best[("a b", "x y")] == ("0-0 1-1", 5)          # most frequent
    # tie: as vector<set> per target word, [{1},{0}] > [{0},{1}] -> "1-0 0-1" (Moses keeps the greater)
    assert best[("c d", "u v")] == ("1-0 0-1", 2)


def test_readable_by_the_project_phrase_table_reader(tmp_path):
    from phrase_rescore.moses_integration.phrase_table import num_scores, read_phrase_table

    _build(WITH_NULL, tmp_path)
    entries = list(read_phrase_table(tmp_path / "phrase-table.gz"))
    assert len(entries) > 0 and all(len(e.scores) == 4 for e in entries)
    assert num_scores(tmp_path / "phrase-table.gz") == 4


def test_each_direction_breaks_alignment_ties_its_own_way(tmp_path):
    # "a b" / "x y" seen twice, aligned C = {0-0, 0-1} once and D = {1-0, 1-1} once (a tie), plus "a" / "x".
    # Direct scoring compares alignments per target word: C = [{0},{0}] < D = [{1},{1}] -> keeps D
    # (the alignment field, and lex(t|s) = w(x|b) w(y|b) = 1/3 * 1/3 = 0.111111).
    # Inverse scoring compares them per source word: C = [{0,1},{}] > D = [{},{0,1}] -> keeps C, so
    # lex(s|t) = mean(w(a|x), w(a|y)) * w(b|NULL) = (2/3 + 1/2)/2 * 1/2 = 0.291667 (with D: 0.208333).
    rows = [("a b", "x y", "0-0 0-1"), ("a b", "x y", "1-0 1-1"), ("a", "x", "0-0")]
    _, _, lines = _build(rows, tmp_path)
    # c(t = "x y") = 4: "a"/"x y" and "a b"/"x y" from the first sentence, "b"/"x y" and "a b"/"x y" from the second
    assert "a b ||| x y ||| 0.5 0.291667 1 0.111111 ||| 1-0 1-1 ||| 4 2 2 ||| |||" in lines


def test_counts_of_a_million_or_more_are_rounded_as_moses_prints_them():
    from phrase_rescore.moses_integration.embedded.phrase_scoring import _as_printed

    got = _as_printed(np.array([3.0, 999999.0, 1234567.0, 20000001.0]))
    assert got.tolist() == [3.0, 999999.0, 1234570.0, 20000000.0]

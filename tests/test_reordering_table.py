"""build-smt's lexicalized reordering (``reordering = "msd-bidirectional-fe"``): word-based msd orientations
as Moses's ``extract --model wbe-msd``, the table as ``lexical-reordering-score`` (smoothing 0.5), the
moses.ini as ``train-model.perl -reordering msd-bidirectional-fe``; ``reordering = "distance"`` keeps the
distance-only system. With ``MOSES_HOME`` set, the table and the ini equal what Moses's own training writes
on the same word alignment, and ``moses`` decodes the system with the LexicalReordering feature."""
from __future__ import annotations

import gzip
import json
import os

import pandas as pd
import pytest
from _real_moses import moses_decode, moses_home, needs_moses, parse_nbest, run, script, tool
from click.testing import CliRunner

from phrase_rescore.app.cli import main
from phrase_rescore.moses_integration.configs import BuildConfig
from phrase_rescore.moses_integration.embedded.build import LR_TABLE, build_smt, moses_ini_text
from phrase_rescore.moses_integration.embedded.extract import (
    MONO,
    ORIENTATION_COLUMNS,
    OTHER,
    SWAP,
    count_phrase_pairs,
    extract_sentence,
    span_orientations,
)
from phrase_rescore.moses_integration.embedded.phrase_scoring import (
    lexical_tables,
    score_phrase_table,
    score_reordering_table,
)
from phrase_rescore.moses_integration.moses_ini import read_moses_ini

C_ENV = {"LC_ALL": "C", "PATH": "/usr/bin:/bin"}


# ------------------------------------------------------------------------------------------ orientations

def test_orientations_of_a_crossing_alignment():
    # e0 <- f0, e1 <- f2, e2 <- f1: the last two target words swap their source order
    points = [(0, 0), (2, 1), (1, 2)]
    spans = [(0, 0, 0, 0), (2, 2, 1, 1), (1, 1, 2, 2), (1, 2, 1, 2), (0, 2, 0, 2)]
    got = dict(zip(spans, span_orientations(3, 3, points, spans)))
    assert got[(0, 0, 0, 0)] == (MONO, OTHER)    # starts both sentences; e1 comes from f2, not f1
    assert got[(2, 2, 1, 1)] == (OTHER, SWAP)    # e0's f0 is not next to f2; e2's f1 is just left of it
    assert got[(1, 1, 2, 2)] == (SWAP, OTHER)    # e1's f2 is just right; ends the target but not the source
    assert got[(1, 2, 1, 2)] == (MONO, MONO)     # f0 just before it; it ends both sentences
    assert got[(0, 2, 0, 2)] == (MONO, MONO)     # the whole sentence pair


def test_both_corners_aligned_is_other_and_unaligned_extensions_change_the_orientation():
    # f0 and f2 both aligned to e0: the phrase (f1, e1) has aligned points at both top corners
    assert span_orientations(3, 2, [(0, 0), (2, 0), (1, 1)], [(1, 1, 1, 1)]) == [(OTHER, OTHER)]
    # f1 unaligned: (f2, e1) is discontinuous after e0 <- f0, its extension (f1 f2, e1) is monotone
    pts = [(0, 0), (2, 1)]
    assert span_orientations(3, 2, pts, [(2, 2, 1, 1), (1, 2, 1, 1)]) == [(OTHER, MONO), (MONO, MONO)]
    assert span_orientations(3, 2, pts, [(0, 0, 0, 0), (0, 1, 0, 0)]) == [(MONO, OTHER), (MONO, MONO)]


def test_extract_sentence_reports_one_orientation_per_pair_in_order():
    orients: list = []
    pairs = extract_sentence("f0 f1 f2".split(), "e0 e1 e2".split(), [(0, 0), (2, 1), (1, 2)], 7, orients)
    assert len(orients) == len(pairs)
    by_pair = dict(zip(pairs, orients))
    assert by_pair[("f2", "e1", "0-0")] == (OTHER, SWAP)
    assert by_pair[("f1 f2", "e1 e2", "1-0 0-1")] == (MONO, MONO)
    assert extract_sentence("f0 f1 f2".split(), "e0 e1 e2".split(), [(0, 0), (2, 1), (1, 2)], 7) == pairs


def test_counts_sum_orientations_per_triple_across_sentences_and_chunks():
    src = [["a", "b"], ["b", "a"], ["a", "b"]]
    tgt = [["A", "B"], ["A", "B"], ["A", "B"]]
    al = [[(0, 0), (1, 1)], [(1, 0), (0, 1)], [(0, 0), (1, 1)]]
    df = count_phrase_pairs(src, tgt, al, chunk_size=1, orientation=True).set_index(["src", "tgt", "align"])
    assert list(df.columns) == ["count"] + ORIENTATION_COLUMNS
    # ("a", "A") twice starting both sentences (mono, mono); once first on the target side but second on
    # the source side: nothing before it counts as aligned (other), and b follows it from its left (swap)
    assert df.loc[("a", "A", "0-0")].tolist() == [3, 2, 0, 1, 2, 1, 0]
    # ("b", "B") twice ending both sentences (mono, mono); once ending the target but not the source:
    # a precedes it from its right (swap), and nothing after it counts as aligned (other)
    assert df.loc[("b", "B", "0-0")].tolist() == [3, 2, 1, 0, 2, 0, 1]
    # without orientation: the same triples and counts, no further columns
    plain = count_phrase_pairs(src, tgt, al, chunk_size=1).set_index(["src", "tgt", "align"])
    assert list(plain.columns) == ["count"] and plain["count"].to_dict() == df["count"].to_dict()


# ------------------------------------------------------------------------------------------ scoring

def _counts(rows):
    return pd.DataFrame(rows, columns=["src", "tgt", "align", "count"] + ORIENTATION_COLUMNS)


def test_smoothed_probabilities_sum_over_alignments_and_print_as_moses(tmp_path):
    counts = _counts([
        ("a", "A", "0-0", 3, 2, 1, 0, 2, 0, 1),
        ("a", "A", "", 1, 1, 0, 0, 0, 0, 1),          # a second alignment of the same pair: summed
        ("a b", "A", "0-0", 1, 0, 0, 1, 0, 0, 1),
        ("z", "Z", "0-0", 100000, 100000, 0, 0, 100000, 0, 0),
    ])
    path = tmp_path / "rt.gz"
    assert score_reordering_table(counts, path) == 3
    lines = gzip.open(path, "rt", encoding="utf-8").read().split("\n")
    # "a b" before "a" ('b' < '|'): (.5, .5, 1.5) / 2.5 both ways
    # "a": backward (3 + .5, 1 + .5, 0 + .5) / 5.5, forward (2 + .5, 0 + .5, 2 + .5) / 5.5
    # "z": (100000.5, .5, .5) / 100001.5, six significant digits as a C++ ostream prints them
    assert lines == ["a b ||| A ||| 0.2 0.2 0.6 0.2 0.2 0.6",
                     "a ||| A ||| 0.636364 0.272727 0.0909091 0.454545 0.0909091 0.454545",
                     "z ||| Z ||| 0.99999 4.99993e-06 4.99993e-06 0.99999 4.99993e-06 4.99993e-06", ""]
    assert score_reordering_table(counts, tmp_path / "rt2.gz", smoothing=1.0) == 3
    second = gzip.open(tmp_path / "rt2.gz", "rt").read().split("\n")[1]
    assert second == "a ||| A ||| 0.571429 0.285714 0.142857 0.428571 0.142857 0.428571"  # (4, 2, 1) / 7 ...


def test_orientation_columns_leave_the_phrase_table_unchanged(tmp_path):
    src = [s.split() for s in ["the black cat", "a cat", "the cat sees a dog"]]
    tgt = [s.split() for s in ["le chat noir", "un chat", "le chat voit un chien"]]
    al = [[(0, 0), (1, 2), (2, 1)], [(0, 0), (1, 1)], [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4)]]
    lex = lexical_tables(src, tgt, al)
    with_o = count_phrase_pairs(src, tgt, al, orientation=True)
    score_phrase_table(with_o, lex, tmp_path / "a.gz")
    score_phrase_table(count_phrase_pairs(src, tgt, al), lex, tmp_path / "b.gz")
    assert gzip.open(tmp_path / "a.gz").read() == gzip.open(tmp_path / "b.gz").read()
    n = score_reordering_table(with_o, tmp_path / "r.gz")
    pt = [ln.split(" ||| ")[:2] for ln in gzip.open(tmp_path / "a.gz", "rt").read().splitlines()]
    rt = [ln.split(" ||| ")[:2] for ln in gzip.open(tmp_path / "r.gz", "rt").read().splitlines()]
    assert n == len(rt) and rt == pt       # one line per phrase pair, in the phrase table's order


# ------------------------------------------------------------------------------------------ build-smt

DISTANCE_INI = """\
#########################
### MOSES CONFIG FILE ###
#########################

# input factors
[input-factors]
0

# mapping steps
[mapping]
0 T 0

[distortion-limit]
6

# feature functions
[feature]
UnknownWordPenalty
WordPenalty
PhrasePenalty
PhraseDictionaryMemory name=TranslationModel0 num-features=4 path=/s/phrase-table.gz input-factor=0 output-factor=0
Distortion
KENLM name=LM0 factor=0 path=/s/lm.arpa order=3

# dense weights for feature functions
[weight]
# The default weights are NOT optimized for translation quality. You MUST tune the weights.
# Documentation for tuning is here: http://www.statmt.org/moses/?n=FactoredTraining.Tuning 
UnknownWordPenalty0= 1
WordPenalty0= -1
PhrasePenalty0= 0.2
TranslationModel0= 0.2 0.2 0.2 0.2
Distortion0= 0.3
LM0= 0.5
"""

LR_FEATURE = ("LexicalReordering name=LexicalReordering0 num-features=6 type=wbe-msd-bidirectional-fe-allff "
              "input-factor=0 output-factor=0 path=/s/reordering-table.wbe-msd-bidirectional-fe.gz\n")


def test_moses_ini_with_and_without_the_lexicalized_reordering_feature(tmp_path):
    assert moses_ini_text("/s/phrase-table.gz", "/s/lm.arpa", 3) == DISTANCE_INI
    lr = moses_ini_text("/s/phrase-table.gz", "/s/lm.arpa", 3,
                        reordering_table="/s/reordering-table.wbe-msd-bidirectional-fe.gz")
    want = DISTANCE_INI.replace("Distortion\n", LR_FEATURE + "Distortion\n").replace(
        "Distortion0= 0.3\n", "LexicalReordering0= 0.3 0.3 0.3 0.3 0.3 0.3\nDistortion0= 0.3\n")
    assert lr == want
    (tmp_path / "moses.ini").write_text(lr)
    assert read_moses_ini(tmp_path / "moses.ini").weights_for("LexicalReordering0") == [0.3] * 6


def _corpus(d):
    from phrase_rescore.data.demo_corpus import generate

    generate(d, n_train=120, n_dev=2, n_test=2, seed=3)
    return d / "train.en", d / "train.fr"


@pytest.fixture(scope="module")
def two_builds(tmp_path_factory):
    """A system built with msd-bidirectional-fe (CLI), and a copy of its folder rebuilt distance-only."""
    import shutil

    d = tmp_path_factory.mktemp("reordering")
    src, tgt = _corpus(d / "corpus")
    r = CliRunner().invoke(main, ["--quiet", "build-smt", str(src), str(tgt), "--out", str(d / "msd"),
                                  "--lm-order", "3", "--max-phrase-length", "4", "--eflomal-model", "1",
                                  "--reordering", "msd-bidirectional-fe"])
    assert r.exit_code == 0, r.output
    assert "reordering table: " in r.output
    shutil.copytree(d / "msd", d / "smt")
    build_smt(src, tgt, d / "smt", BuildConfig(lm_order=3, max_phrase_length=4, eflomal_model=1,
                                               reordering="distance"))
    return d / "msd", d / "smt"


def test_msd_build_writes_the_table_and_feature_and_keeps_the_phrase_table(two_builds):
    msd, _ = two_builds
    table = msd / LR_TABLE
    manifest = json.loads((msd / "manifest.json").read_text())
    assert manifest["config"]["reordering"] == "msd-bidirectional-fe" and LR_TABLE in manifest["outputs_sha256"]
    assert manifest["stats"]["reordering_table"]["smoothing"] == 0.5 and "reordering" in manifest["timings_s"]
    ini = read_moses_ini(msd / "moses.ini")
    lr = ini.feature("LexicalReordering0")
    assert lr.get("path") == str(table) and lr.get("type") == "wbe-msd-bidirectional-fe-allff"
    assert ini.weights_for("LexicalReordering0") == [0.3] * 6
    # the phrase table is what the same alignment gives without orientations
    src = [s.split() for s in (msd / "corpus" / "clean.src").read_text().splitlines()]
    tgt = [s.split() for s in (msd / "corpus" / "clean.tgt").read_text().splitlines()]
    al = [[tuple(map(int, p.split("-"))) for p in ln.split()]
          for ln in (msd / "model" / "aligned.grow-diag-final-and").read_text().splitlines()]
    plain = msd.parent / "plain.gz"
    score_phrase_table(count_phrase_pairs(src, tgt, al, max_len=4), lexical_tables(src, tgt, al), plain)
    assert gzip.open(plain).read() == gzip.open(msd / "phrase-table.gz").read()
    rt = gzip.open(table, "rt", encoding="utf-8").read().splitlines()
    pt = gzip.open(plain, "rt", encoding="utf-8").read().splitlines()
    assert len(rt) == len(pt) > 500
    assert all(a.split(" ||| ")[:2] == b.split(" ||| ")[:2] for a, b in zip(rt, pt))
    for line in rt:
        v = [float(x) for x in line.split(" ||| ")[2].split()]
        assert len(v) == 6 and abs(sum(v[:3]) - 1) < 1e-5 and abs(sum(v[3:]) - 1) < 1e-5


def test_distance_build_is_the_distance_only_system(two_builds):
    msd, smt = two_builds
    assert not (smt / LR_TABLE).exists()      # the earlier build's table is gone: one system per folder
    manifest = json.loads((smt / "manifest.json").read_text())
    assert manifest["config"]["reordering"] == "distance" and LR_TABLE not in manifest["outputs_sha256"]
    assert "reordering" not in manifest["timings_s"] and "reordering_table" not in manifest["stats"]
    text = (smt / "moses.ini").read_text()
    order = read_moses_ini(smt / "moses.ini").feature("LM0").get("order")
    assert text == DISTANCE_INI.replace("/s/", f"{smt}/").replace("order=3", f"order={order}")


def test_a_file_build_smt_did_not_write_is_not_removed(tmp_path):
    src, tgt = _corpus(tmp_path / "corpus")
    out = tmp_path / "smt"
    out.mkdir()
    (out / LR_TABLE).write_bytes(b"the user's own file")
    build_smt(src, tgt, out, BuildConfig(lm_order=2, max_phrase_length=2, eflomal_model=1, reordering="distance"))
    assert (out / LR_TABLE).read_bytes() == b"the user's own file"


def test_reordering_option_is_checked():
    r = CliRunner().invoke(main, ["--quiet", "build-smt", __file__, __file__, "--out", "x", "--reordering", "msd"])
    assert r.exit_code != 0 and "--reordering" in r.output and "msd-bidirectional-fe" in r.output


# ------------------------------------------------------------------------------------------ real Moses

@pytest.fixture(scope="module")
def moses_training(two_builds, tmp_path_factory):
    """train-model.perl steps 5 (extract ... orientation --model wbe-msd) and 7 (lexical-reordering-score),
    then 9 (moses.ini), with -reordering msd-bidirectional-fe, on build-smt's corpus and alignment."""
    msd, _ = two_builds
    d = tmp_path_factory.mktemp("train-model-lr")
    (d / "corpus").mkdir()
    os.symlink(msd / "corpus" / "clean.src", d / "corpus" / "c.en")
    os.symlink(msd / "corpus" / "clean.tgt", d / "corpus" / "c.fr")
    common = ["--root-dir", d, "--corpus", d / "corpus" / "c", "--f", "en", "--e", "fr",
              "--alignment", "grow-diag-final-and", "--alignment-file", msd / "model" / "aligned",
              "--max-phrase-length", "4", "--external-bin-dir", moses_home() / "tools", "-cores", "1",
              "-reordering", "msd-bidirectional-fe"]
    order = read_moses_ini(msd / "moses.ini").feature("LM0").get("order")
    for first, last, extra in (("5", "5", []), ("7", "7", []), ("9", "9", ["--lm", f"0:{order}:{msd / 'lm.arpa'}:8"])):
        run(["perl", script("training/train-model.perl"), "--first-step", first, "--last-step", last, *common,
             *extra], env=C_ENV, cwd=d)
    return d / "model"


def _sorted_lines(path):
    return sorted(gzip.open(path).read().split(b"\n")[:-1])      # bytewise: the LC_ALL=C sort order


@needs_moses
def test_reordering_table_equals_moses_extract_and_lexical_reordering_score(two_builds, moses_training):
    msd, _ = two_builds
    ours, theirs = _sorted_lines(msd / LR_TABLE), _sorted_lines(moses_training / LR_TABLE)
    assert len(ours) > 500
    diff = [(a, b) for a, b in zip(ours, theirs) if a != b][:5]
    assert len(ours) == len(theirs) and not diff, diff
    assert gzip.open(msd / LR_TABLE).read().split(b"\n")[:-1] == ours     # already in that order


@needs_moses
def test_moses_ini_equals_train_model_step_9(two_builds, moses_training):
    msd, _ = two_builds
    theirs = (moses_training / "moses.ini").read_text().replace(f"{moses_training}/", f"{msd}/")
    assert (msd / "moses.ini").read_text() == theirs


@needs_moses
def test_moses_decodes_the_msd_system_with_its_six_reordering_features(two_builds, tmp_path):
    msd, _ = two_builds
    p = run([tool("moses"), "-f", msd / "moses.ini", "-show-weights"])
    shown = {ln.split("=")[0]: ln.split("=")[1].split() for ln in p.stdout.decode().splitlines() if "=" in ln}
    assert shown["LexicalReordering0"] == ["0.300000"] * 6
    sents = [" ".join(s.split()[:8]) for s in (msd / "corpus" / "clean.src").read_text().splitlines()[:3]]
    out, err = moses_decode(msd / "moses.ini", sents, nbest=tmp_path / "nb", n=5, extra=["-stack", "20"])
    assert len(out) == 3 and all(out)
    entries = parse_nbest(tmp_path / "nb")
    assert entries and all(len(e.features["LexicalReordering0"]) == 6 for e in entries)
    assert any(v != 0 for e in entries for v in e.features["LexicalReordering0"])

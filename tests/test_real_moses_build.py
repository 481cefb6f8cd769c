"""build-smt writes what Moses's own training writes: on build-smt's word alignment, train-model.perl steps
4-6 (get-lexical, extract, score, consolidate) give the same lexical tables and phrase table, line for line
after an LC_ALL=C sort; the ARPA LM gives lmplz's probabilities; the system loads in the real moses.

The lexical weights are rounded to single precision before printing, as Moses's ``score`` does, so they
agree to the last printed digit.
"""
from __future__ import annotations

import gzip
import os

import pytest
from _real_moses import moses_decode, moses_home, needs_moses, run, script, tool  # noqa: F401

pytestmark = needs_moses

C_ENV = {"LC_ALL": "C", "PATH": "/usr/bin:/bin"}


def _sorted_lines(path):
    data = gzip.open(path).read() if open(path, "rb").read(2) == b"\x1f\x8b" else open(path, "rb").read()
    return sorted(data.split(b"\n")[:-1])       # bytewise: the LC_ALL=C sort order


@pytest.fixture(scope="module")
def moses_training(tiny_system, tmp_path_factory):
    """train-model.perl --first-step 4 --last-step 6 on build-smt's corpus and symmetrized alignment."""
    s = tiny_system
    d = tmp_path_factory.mktemp("train-model")
    (d / "corpus").mkdir()
    (d / "model").mkdir()
    os.symlink(s.smt / "corpus" / "clean.src", d / "corpus" / "c.en")
    os.symlink(s.smt / "corpus" / "clean.tgt", d / "corpus" / "c.fr")
    run(["perl", script("training/train-model.perl"), "--first-step", "4", "--last-step", "6",
         "--root-dir", d, "--corpus", d / "corpus" / "c", "--f", "en", "--e", "fr",
         "--alignment", "grow-diag-final-and", "--alignment-file", s.smt / "model" / "aligned",
         "--max-phrase-length", "4", "--external-bin-dir", moses_home() / "tools", "-cores", "1"],
        env=C_ENV, cwd=d)
    return d / "model"


@pytest.mark.parametrize("name", ["lex.f2e", "lex.e2f"])
def test_lexical_tables_equal_moses_get_lexical(tiny_system, moses_training, name):
    ours, theirs = _sorted_lines(tiny_system.smt / "model" / name), _sorted_lines(moses_training / name)
    assert len(ours) > 500
    assert ours == theirs


def test_phrase_table_equals_moses_extract_score_consolidate(tiny_system, moses_training):
    ours = _sorted_lines(tiny_system.table)
    theirs = _sorted_lines(moses_training / "phrase-table.gz")
    assert len(ours) > 3000
    diff = [(a, b) for a, b in zip(ours, theirs) if a != b][:5]
    assert len(ours) == len(theirs) and not diff, diff
    # and build-smt's file is already in that order, as processPhraseTableMin needs
    assert gzip.open(tiny_system.table).read().split(b"\n")[:-1] == ours


def test_arpa_lm_agrees_with_lmplz(tiny_system, tmp_path):
    import kenlm

    s = tiny_system
    arpa = tmp_path / "lmplz.arpa"
    with open(s.smt / "corpus" / "clean.tgt", "rb") as f:
        p = run([tool("lmplz"), "-o", "3", "-S", "10%", "-T", tmp_path, "--discount_fallback"], stdin=f.read())
    arpa.write_bytes(p.stdout)
    ours = s.smt / "lm.arpa"
    head = [ln for ln in ours.read_text().splitlines()[:5] if ln.startswith("ngram ")]
    assert head == [ln for ln in arpa.read_text().splitlines()[:5] if ln.startswith("ngram ")]
    a, b = kenlm.Model(str(ours)), kenlm.Model(str(arpa))
    sents = s.dev_ref.read_text().splitlines() + (s.smt / "corpus" / "clean.tgt").read_text().splitlines()[:100]
    worst = max(abs(a.score(x, bos=True, eos=True) - b.score(x, bos=True, eos=True)) for x in sents)
    assert worst < 1e-3


def test_built_system_loads_in_moses_with_the_real_build_binary_lm(tiny_system, tmp_path):
    s = tiny_system
    binary = s.smt / "lm.binary"               # build-smt found build_binary in $MOSES_HOME/bin
    assert binary.read_bytes()[:14] == b"mmap lm http:/"
    ini_bin = tmp_path / "moses.binary-lm.ini"
    ini_bin.write_text(s.ini.read_text().replace(f"path={s.smt / 'lm.arpa'}", f"path={binary}"))
    src = s.dev_src.read_text().splitlines()
    out_arpa, _ = moses_decode(s.ini, src, nbest=tmp_path / "a.nbest", n=5)
    out_bin, _ = moses_decode(ini_bin, src, nbest=tmp_path / "b.nbest", n=5)
    assert out_arpa == out_bin and all(out_arpa)
    assert (tmp_path / "a.nbest").read_text() == (tmp_path / "b.nbest").read_text()

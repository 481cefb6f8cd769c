"""Rescored phrase tables in the real Moses: they load, Moses's feature values are ln of what we wrote, and
PhraseDictionaryCompact tables binarize with the real processPhraseTableMin and decode."""
from __future__ import annotations

import gzip
import math

import pytest
from _real_moses import cli, moses_decode, moses_log, needs_moses, parse_nbest, read_table, run, tool  # noqa: F401

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.moses_integration.configs import RewriteConfig
from phrase_rescore.moses_integration.moses_ini import read_moses_ini
from phrase_rescore.moses_integration.rewrite import rewrite_moses_ini

pytestmark = needs_moses

RNN, WP = 4, 5          # the two added columns of the rescored table (0-based in the scores field)

# Hand-written values of the RNN column and what Moses must report for them (ln, floored at -100).
EDITS = [
    ("1e-45", -100.0),                    # the score stage's floor text: the smallest float32
    ("0", -100.0),                        # ln 0 = -inf, floored
    ("1e-40", math.log(1e-40)),           # a float32 subnormal, still read (to float32 precision)
    ("1e-50", -100.0),                    # below float range
]


def test_rescored_ini_decodes_and_shows_the_extra_weights(tiny_system):
    s = tiny_system
    p = run([tool("moses"), "-f", s.rescored_ini, "-show-weights"])
    shown = {ln.split("=")[0]: ln.split("=")[1].split() for ln in p.stdout.decode().splitlines() if "=" in ln}
    assert shown["TranslationModel0"] == ["0.200000"] * 6
    assert set(shown) == {"LexicalReordering0", "Distortion0", "LM0", "WordPenalty0", "PhrasePenalty0",
                          "TranslationModel0"}                    # build-smt's default, msd-bidirectional-fe
    src = s.dev_src.read_text().splitlines()
    out, _ = moses_decode(s.rescored_ini, src)
    assert len(out) == len(src) and all(out)


def _edited_system(s, d):
    """A copy of the rescored table with hand-edited RNN values; returns (ini, table, sentences, edited pairs)."""
    lines = gzip.open(s.rescored, "rt", encoding="utf-8").read().splitlines()
    by_src: dict[str, list[int]] = {}
    for i, ln in enumerate(lines):
        by_src.setdefault(ln.split(" ||| ")[0], []).append(i)
    # sources of 2-3 words with 1-3 targets: every target is in the n-best, alone or with sub-phrases
    picked = [src for src, ix in by_src.items() if 2 <= len(src.split()) <= 3 and len(ix) <= 3][:len(EDITS)]
    assert len(picked) == len(EDITS)
    edited = {}
    for src, (text, want) in zip(picked, EDITS):
        i = by_src[src][0]
        f = lines[i].split(" ||| ")
        scores = f[2].split()
        scores[RNN] = text
        f[2] = " ".join(scores)
        lines[i] = " ||| ".join(f)
        edited[(src, f[1])] = want
    table = d / "edited.gz"
    with gzip.open(table, "wt", encoding="utf-8") as g:
        g.write("\n".join(lines) + "\n")
    ini = d / "edited.ini"
    # weight 0 on the new columns: the floored pairs stay in the search, Moses still reports their values
    cli("moses-ini", str(s.ini), "--table", str(table), "--out", str(ini), "--weights", "0,0")
    return ini, table, picked, edited


def test_nbest_feature_values_are_ln_of_the_written_values(tiny_system, tmp_path):
    s = tiny_system
    ini, table, sentences, edited = _edited_system(s, tmp_path)
    sentences = sentences + s.dev_src.read_text().splitlines()[:3]
    nb = tmp_path / "nbest"
    moses_decode(ini, sentences, nbest=nb, n=1000, distinct=False,   # every derivation, not one per string
                 extra=["-include-segmentation-in-n-best", "-beam-threshold", "0", "-stack", "50"])
    scores = read_table(table)
    seen_edits, wp_nonzero, checked = set(), 0, 0
    for e in parse_nbest(nb):
        src = sentences[e.sent].split()
        tgt = e.text.split()
        want = [0.0] * 6
        unknown = 0
        for (s0, s1), (t0, t1) in e.segmentation:
            pair = (" ".join(src[s0:s1 + 1]), " ".join(tgt[t0:t1 + 1]))
            if pair not in scores:          # an unknown word, copied: no phrase-table scores
                assert s0 == s1 and pair[0] == pair[1], (pair, e)
                unknown += 1
                continue
            for k, text in enumerate(scores[pair]):
                want[k] += moses_log(text)
            if pair in edited:
                seen_edits.add(pair)
                assert moses_log(scores[pair][RNN]) == pytest.approx(edited[pair], abs=1e-3)
        got = e.features["TranslationModel0"]
        assert got == pytest.approx(want, rel=1e-5, abs=2e-4), (e, want)
        assert e.features["PhrasePenalty0"] == [len(e.segmentation)]      # copied unknown words count too
        wp_nonzero += got[WP] > 0.5
        checked += 1
    assert seen_edits == set(edited)            # every hand-edited value was seen through Moses
    assert wp_nonzero > 0 and checked > 50      # the unknown-word column was non-zero somewhere


def _compact_ini(s, d):
    text = s.ini.read_text().replace("PhraseDictionaryMemory ", "PhraseDictionaryCompact ")
    ini = d / "compact-base.ini"
    ini.write_text(text)
    return ini


def test_compact_table_binarized_by_the_real_process_phrase_table_min_decodes(tiny_system, tmp_path):
    s = tiny_system
    # processPhraseTableMin needs the LC_ALL=C order; score keeps build-smt's order, which is that order
    plain = tmp_path / "rescored.txt"
    plain.write_bytes(gzip.open(s.rescored).read())
    run(["sort", "-c", plain], env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"})
    ini = tmp_path / "compact.ini"
    r = rewrite_moses_ini(RewriteConfig(_compact_ini(s, tmp_path), s.rescored, ini,
                                        moses_home=str(tool("moses").parent.parent)))
    assert r.binarized
    minphr = read_moses_ini(ini).feature("TranslationModel0").get("path")
    assert minphr.endswith(".minphr") and read_moses_ini(ini).feature("TranslationModel0").num_features == 6
    src = s.dev_src.read_text().splitlines()
    out_c, _ = moses_decode(ini, src, nbest=tmp_path / "c.nbest", n=5)
    out_m, _ = moses_decode(s.rescored_ini, src, nbest=tmp_path / "m.nbest", n=5)
    assert out_c == out_m
    a, b = parse_nbest(tmp_path / "c.nbest"), parse_nbest(tmp_path / "m.nbest")
    assert [(e.text, e.total) for e in a] == [(e.text, e.total) for e in b]


def test_compact_table_out_of_c_order_is_a_clear_error(tiny_system, tmp_path):
    s = tiny_system
    lines = gzip.open(s.rescored, "rt", encoding="utf-8").read().splitlines()
    lines[10], lines[200] = lines[200], lines[10]
    table = tmp_path / "unsorted.gz"
    with gzip.open(table, "wt", encoding="utf-8") as g:
        g.write("\n".join(lines) + "\n")
    with pytest.raises(PhraseRescoreError) as e:
        rewrite_moses_ini(RewriteConfig(_compact_ini(s, tmp_path), table, tmp_path / "o.ini",
                                        moses_home=str(tool("moses").parent.parent)))
    assert e.value.line == 12 and "LC_ALL=C sort" in str(e.value)
    assert not (tmp_path / "unsorted.minphr").exists() and not (tmp_path / "o.ini").exists()

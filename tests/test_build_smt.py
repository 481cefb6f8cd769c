"""End to end: `phrase-rescore build-smt` on a tiny generated corpus, and the moses.ini round trip."""
import gzip
import json
import random

import pytest
from click.testing import CliRunner

from phrase_rescore.app.cli import main
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.moses_integration.embedded.build import build_smt, moses_ini_text
from phrase_rescore.moses_integration.embedded.clean import CleanConfig, clean_pairs
from phrase_rescore.moses_integration.embedded.tokenizer import TokenizeConfig, Tokenizer
from phrase_rescore.moses_integration.moses_ini import read_moses_ini

LEX = {"the": "le", "a": "un", "cat": "chat", "dog": "chien", "black": "noir", "small": "petit",
       "sees": "voit", "eats": "mange", "fish": "poisson", "house": "maison", "big": "grand"}


def _corpus(n, seed):
    """English-like source, French-like target with adjective/noun swapped (a real reordering to learn)."""
    rng = random.Random(seed)
    src, tgt = [], []
    for _ in range(n):
        np1 = [rng.choice(["the", "a"]), rng.choice(["black", "small", "big"]), rng.choice(["cat", "dog"])]
        np2 = [rng.choice(["the", "a"]), rng.choice(["fish", "house"])]
        verb = rng.choice(["sees", "eats"])
        s = np1 + [verb] + np2
        t = [LEX[np1[0]], LEX[np1[2]], LEX[np1[1]], LEX[verb]] + [LEX[w] for w in np2]
        src.append(" ".join(s).capitalize() + ".")
        tgt.append(" ".join(t).capitalize() + ".")
    return src, tgt


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("smt")
    src, tgt = _corpus(40, seed=7)
    src += ["A | cat sees .", " ".join(["cat"] * 81), ""]        # '|' removed; 81 tokens; empty
    tgt += ["Un | chat voit .", " ".join(["chat"] * 81), "Vide ."]
    (d / "train.en").write_text("\n".join(src) + "\n", encoding="utf-8")
    with gzip.open(d / "train.fr.gz", "wt", encoding="utf-8") as f:  # gzip input is read by content
        f.write("\n".join(tgt) + "\n")
    res = CliRunner().invoke(main, ["--quiet", "build-smt", str(d / "train.en"), str(d / "train.fr.gz"),
                                    "--out", str(d / "out"), "--lm-order", "3"])
    assert res.exit_code == 0, res.output
    return d / "out", res.output


def test_outputs_and_summary(built):
    out, text = built
    for name in ["phrase-table.gz", "lm.arpa", "moses.ini", "manifest.json", "corpus/clean.src", "corpus/clean.tgt",
                 "corpus/lines-retained", "model/aligned.grow-diag-final-and", "model/lex.f2e", "model/lex.e2f"]:
        assert (out / name).is_file(), name
    assert "41 kept" in text and "1 too long" in text and "1 empty" in text and "'|' removed in 1" in text
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["version"] == 1 and manifest["paths_in_moses_ini"] == "absolute"
    assert set(manifest["timings_s"]) >= {"tokenize", "clean", "align", "symmetrize", "extract", "score", "lm"}
    assert manifest["stats"]["clean"]["kept"] == 41
    kept = (out / "corpus" / "lines-retained").read_text().split()
    assert kept == [str(i) for i in range(1, 42)]
    src = (out / "corpus" / "clean.src").read_text().splitlines()
    assert len(src) == 41 and src[40] == "a cat sees ."   # lowercased, tokenized, '|' removed


def test_moses_ini_layout_and_round_trip(built):
    out, _ = built
    text = (out / "moses.ini").read_text()
    lr_table = out / "reordering-table.wbe-msd-bidirectional-fe.gz"       # the default: msd-bidirectional-fe
    assert text == moses_ini_text(str(out / "phrase-table.gz"), str(out / "lm.arpa"), 3,
                                  reordering_table=str(lr_table))
    ini = read_moses_ini(out / "moses.ini")
    assert ini.text() == text                                    # the parser gives back the same bytes
    assert [f.name for f in ini.features] == ["UnknownWordPenalty0", "WordPenalty0", "PhrasePenalty0",
                                              "TranslationModel0", "LexicalReordering0", "Distortion0", "LM0"]
    assert ini.weights == {"UnknownWordPenalty0": [1.0], "WordPenalty0": [-1.0], "PhrasePenalty0": [0.2],
                           "TranslationModel0": [0.2] * 4, "LexicalReordering0": [0.3] * 6,
                           "Distortion0": [0.3], "LM0": [0.5]}
    assert ini.feature("LexicalReordering0").get("path") == str(lr_table) and lr_table.is_file()
    ini.check_weights_match()
    tm = ini.feature("TranslationModel0")
    assert tm.num_features == 4 and tm.get("path") == str(out / "phrase-table.gz")
    assert ini.feature("LM0").get("order") == "3" and ini.get_value("distortion-limit") == "6"


def test_phrase_table_and_lm_are_usable(built):
    from phrase_rescore.moses_integration.embedded.lm import load_lm
    from phrase_rescore.moses_integration.phrase_table import read_phrase_table

    out, _ = built
    entries = list(read_phrase_table(out / "phrase-table.gz"))
    assert entries and all(len(e.scores) == 4 for e in entries)
    pairs = {(e.source, e.target) for e in entries}
    # a whole sentence pair of <= 7 words is always a consistent phrase pair, whatever eflomal's
    # (unseeded) alignment is; the tokenized, lowercased corpus is what the table is made of
    src = (out / "corpus" / "clean.src").read_text().splitlines()
    tgt = (out / "corpus" / "clean.tgt").read_text().splitlines()
    whole = [(s, t) for s, t in zip(src, tgt) if len(s.split()) <= 7 and len(t.split()) <= 7]
    assert len(whole) >= 40 and all(p in pairs for p in whole)
    keys = [(e.source + " ||| " + e.target + " |||").encode() for e in entries]
    assert keys == sorted(keys)
    lm = load_lm(out / "lm.arpa")
    assert lm.order == 3
    assert lm.score("le chat noir voit le poisson .") > lm.score("noir le chat poisson voit le .")


def test_mismatched_corpus_is_refused(tmp_path):
    (tmp_path / "a.en").write_text("one\ntwo\n")
    (tmp_path / "a.fr").write_text("un\n")
    res = CliRunner().invoke(main, ["--quiet", "build-smt", str(tmp_path / "a.en"), str(tmp_path / "a.fr"),
                                    "--out", str(tmp_path / "o")])
    assert res.exit_code == 1
    assert "a.en" in res.output and "2 lines" in res.output and "has 1" in res.output


def test_invalid_utf8_names_file_and_line(tmp_path):
    (tmp_path / "bad.en").write_bytes(b"fine\nbad \xff byte\n")
    (tmp_path / "a.fr").write_text("un\ndeux\n")
    with pytest.raises(PhraseRescoreError, match=r"bad.en:2: invalid UTF-8 at byte 4 .*expected UTF-8 text"):
        build_smt(tmp_path / "bad.en", tmp_path / "a.fr", tmp_path / "o")


def test_clean_rules_table():
    cases = [  # (source tokens, target tokens, kept?)
        (["a"], ["b"], True), ([], ["b"], False), (["a"] * 80, ["b"] * 80, True), (["a"] * 81, ["b"] * 80, False),
        (["a"] * 9, ["b"], True), (["a"] * 10, ["b"], False), (["|"], ["b"], False)]
    src, tgt, stats = clean_pairs([c[0] for c in cases], [c[1] for c in cases], CleanConfig())
    assert stats.kept_line_numbers == [i + 1 for i, c in enumerate(cases) if c[2]]
    assert (stats.dropped_empty, stats.dropped_too_long, stats.dropped_ratio) == (2, 1, 1)


def test_tokenizer_escape_off_and_truecaser_round_trip(tmp_path):
    tok = Tokenizer(TokenizeConfig(lang="en", case="truecase"))
    assert tok.split("Tom's cat & dog") == ["Tom", "'s", "cat", "&", "dog"]  # no &amp; / &apos;
    # sentence-initial words are not evidence (truecase.perl); "the" and "Paris" are seen inside sentences
    tok.train_truecaser([["The", "cat", "saw", "the", "dog"], ["We", "saw", "Paris"], ["Cats", "like", "Paris"]])
    tok.save_truecaser(tmp_path / "tc")
    again = Tokenizer(TokenizeConfig(lang="en", case="truecase"), Tokenizer.load_truecaser(tmp_path / "tc"))
    assert again.tokenize("The cat saw Paris.") == ["the", "cat", "saw", "Paris", "."]
    assert again.detokenize(["the", "cat", "'s", "toy", "."]) == "the cat's toy."

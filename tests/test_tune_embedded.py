"""End to end: tune a small generated system with the embedded decoder + MERT; dev BLEU must rise."""
import csv

import numpy as np
import pytest

from phrase_rescore.moses_integration.embedded.bleu_stats import corpus_bleu
from phrase_rescore.moses_integration.embedded.decoder import decode_file
from phrase_rescore.moses_integration.embedded.tune import EmbeddedTuneConfig, tune_embedded
from phrase_rescore.moses_integration.moses_ini import read_moses_ini

N_WORDS = 12


def _system(d, rng):
    """Each source word sI has a right translation gI (the reference's) and a wrong one bI.
    Column 1 prefers the wrong one, column 3 the right one; the start weights trust column 1."""
    lines = []
    for i in range(N_WORDS):
        lines.append(f"s{i} ||| b{i} ||| 0.6 0.5 0.3 0.5 ||| 0-0 ||| 1 1 1")
        lines.append(f"s{i} ||| g{i} ||| 0.4 0.5 0.7 0.5 ||| 0-0 ||| 1 1 1")
    (d / "phrase-table").write_text("\n".join(lines) + "\n")
    words = [f"{p}{i}" for p in "bg" for i in range(N_WORDS)]
    arpa = ["\\data\\", f"ngram 1={len(words) + 3}", "ngram 2=1", "", "\\1-grams:", "-1.0\t<unk>", "-99\t<s>\t0", "-1.0\t</s>"]
    arpa += [f"-1.5\t{w}\t0" for w in words]
    arpa += ["", "\\2-grams:", "-1.5\t<s> b0", "", "\\end\\", ""]   # kenlm needs a bigram; this one is neutral
    (d / "lm.arpa").write_text("\n".join(arpa))
    (d / "moses.ini").write_text(
        "# generated for a test\n[distortion-limit]\n0\n\n[feature]\nUnknownWordPenalty\nWordPenalty\nPhrasePenalty\n"
        f"PhraseDictionaryMemory name=TranslationModel0 num-features=4 path={d / 'phrase-table'} "
        "input-factor=0 output-factor=0\nDistortion\n"
        f"KENLM name=LM0 factor=0 path={d / 'lm.arpa'} order=2\n\n[weight]\nUnknownWordPenalty0= 1\n"
        "WordPenalty0= -1\nPhrasePenalty0= 0.2\nTranslationModel0= 0.5 0.1 0.05 0.1\nDistortion0= 0.3\nLM0= 0.5\n")
    src, ref = [], []
    for _ in range(30):
        ids = rng.integers(0, N_WORDS, rng.integers(4, 8))
        src.append(" ".join(f"s{i}" for i in ids))
        ref.append(" ".join(f"g{i}" for i in ids))
    (d / "dev.src").write_text("\n".join(src) + "\n")
    (d / "dev.ref").write_text("\n".join(ref) + "\n")
    return ref


def test_tuning_raises_dev_bleu(tmp_path):
    ref = _system(tmp_path, np.random.default_rng(0))
    decode_file(tmp_path / "moses.ini", tmp_path / "dev.src", tmp_path / "before.out")
    before = corpus_bleu((tmp_path / "before.out").read_text().splitlines(), ref)
    cfg = EmbeddedTuneConfig(str(tmp_path / "moses.ini"), str(tmp_path / "dev.src"), str(tmp_path / "dev.ref"),
                             str(tmp_path / "work"), nbest=20, max_iterations=4, seed=1, restarts=3, threads=1)
    tuned = tune_embedded(cfg)
    decode_file(tuned, tmp_path / "dev.src", tmp_path / "after.out")
    after = corpus_bleu((tmp_path / "after.out").read_text().splitlines(), ref)
    assert before < 0.05 and after > 0.9
    ini = read_moses_ini(tuned)
    tm = ini.weights["TranslationModel0"]
    assert tm[2] > tm[0]                                        # column 1 (prefers the wrong words) no longer leads
    tuned_w = [v for name, vs in ini.weights.items() if name != "UnknownWordPenalty0" for v in vs]
    assert sum(abs(v) for v in tuned_w) == pytest.approx(1.0)   # L1-normalized like mert
    assert ini.weights["UnknownWordPenalty0"] == [1.0]
    assert ini.get_value("distortion-limit") == "0"             # everything but the weights kept
    with open(tmp_path / "work" / "tune-log.csv") as f:
        rows = list(csv.DictReader(f))
    assert 1 <= len(rows) <= 4 and [int(r["iteration"]) for r in rows] == list(range(1, len(rows) + 1))
    assert float(rows[0]["dev_bleu"]) == pytest.approx(100 * before, abs=1e-6)
    assert max(float(r["dev_bleu"]) for r in rows) > 90
    assert "TranslationModel0_3" in rows[0]

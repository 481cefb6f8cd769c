"""End to end: tune a small generated system with the embedded decoder + MERT; dev BLEU must rise."""
import csv

import numpy as np
import pytest
from _tunable_system import write_tunable_system

from phrase_rescore.moses_integration.embedded.bleu_stats import corpus_bleu
from phrase_rescore.moses_integration.embedded.decoder import decode_file
from phrase_rescore.moses_integration.embedded.tune import EmbeddedTuneConfig, tune_embedded
from phrase_rescore.moses_integration.moses_ini import read_moses_ini


def test_tuning_raises_dev_bleu(tmp_path):
    ref = write_tunable_system(tmp_path, np.random.default_rng(0))
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

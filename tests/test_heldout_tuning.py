"""benchmarks/heldout_tuning.py: MERT tuned on sentences held out from the training corpus, BLEU on all of val.

What a user relies on: the held-out pairs leave the training corpus (every 57th line, both sides alike),
the workflow built from workflows/multi30k.toml tunes on them and scores on the whole validation set with
no split stage, and a finished run is scored on each half of val as split's alternate mode cuts it."""
from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import heldout_tuning  # noqa: E402

from phrase_rescore.app.stages import default_registry  # noqa: E402
from phrase_rescore.app.workflow import load_workflow  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def test_the_held_out_pairs_leave_the_corpus_and_become_the_tuning_set(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for side in ("en", "fr"):
        (data / f"train.{side}.gz").write_bytes(gzip.compress("".join(f"{side} {i}\n" for i in range(120)).encode()))
        (data / f"val.{side}.gz").write_bytes(gzip.compress("".join(f"v{side} {i}\n" for i in range(4)).encode()))
    out = tmp_path / "out"
    heldout_tuning.write_data(data, out, ROOT / "workflows" / "multi30k.toml")
    for side in ("en", "fr"):
        assert (out / f"tune.{side}").read_text() == f"{side} 28\n{side} 85\n"
        kept = gzip.decompress((out / f"train.{side}.gz").read_bytes()).decode().splitlines()
        assert len(kept) == 118 and f"{side} 28" not in kept and kept[:2] == [f"{side} 0", f"{side} 1"]
        assert (out / f"val.{side}").read_text() == "".join(f"v{side} {i}\n" for i in range(4))
    first = (out / "train.en.gz").read_bytes()
    heldout_tuning.write_data(data, out, ROOT / "workflows" / "multi30k.toml")
    assert (out / "train.en.gz").read_bytes() == first                    # the same bytes again
    wf = load_workflow(out / heldout_tuning.WORKFLOW, default_registry())
    assert "split" not in wf.stages and "tune-rnn-wp" in wf.stages
    assert {k: Path(v).name for k, v in wf.inputs.items()} == {
        "train_src": "train.en.gz", "train_tgt": "train.fr.gz", "dev_src": "tune.en", "dev_ref": "tune.fr",
        "test_src": "val.en", "test_ref": "val.fr"}


def test_a_run_is_scored_on_all_of_val_and_on_each_half(tmp_path):
    refs = [f"the {c} dog runs on the {g} grass" for c in ("black", "white", "brown") for g in ("green", "wet")]
    work = tmp_path / "run"
    ref = tmp_path / "val.fr"
    ref.write_text("".join(r + "\n" for r in refs))
    (work).mkdir()
    (work / "real_quality.log.json").write_text(json.dumps({"test_ref": str(ref), "seeds": ["moses-seed1"]}))
    ev = work / "seeds" / "moses-seed1" / "evaluate"
    (ev / "work").mkdir(parents=True)
    (ev / "table1.csv").write_text("configuration,test_bleu\n")
    # +RNN+WP is right on the dev half (odd lines) only; the baseline is wrong everywhere
    (ev / "work" / "test.Baseline.detok").write_text("".join(r.replace("dog", "cat") + "\n" for r in refs))
    (ev / "work" / "test.+RNN+WP.detok").write_text(
        "".join((r if i % 2 == 0 else r.replace("dog", "cat")) + "\n" for i, r in enumerate(refs)))
    rows = heldout_tuning.halves(work, 50)
    assert rows[2].startswith("| all of val (6) |") and rows[3].startswith("| dev half (odd lines) (3) |")
    assert rows[4].startswith("| test half (even lines) (3) |")
    assert "| 100.00 |" in rows[3] and "| +0.00 (+0.00) |" in rows[4]

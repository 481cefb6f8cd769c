"""benchmarks/two_fold.py: two real_quality.py runs, one per fold of the held-out set, joined into one Table.

What a user relies on: each MERT run's outputs on the two halves are scored as one corpus against the two
references in the same order, the Δ is against the baseline's joined runs, and runs that are not two
folds of one set are refused."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from sacrebleu.metrics import BLEU

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import two_fold  # noqa: E402

REFS = [f"the {c} dog runs on the {g} grass" for c in ("black", "white", "brown", "small") for g in ("green", "wet")]
GOOD = dict(enumerate(REFS))          # +RNN+WP gets every sentence right
BAD = {i: r.replace("dog", "cat") for i, r in enumerate(REFS)}


def _fold(tmp_path: Path, name: str, idx: list[int], seeds: dict[str, tuple[dict, dict]]) -> Path:
    work = tmp_path / name
    (work / "split").mkdir(parents=True)
    ref = work / "split" / "test.ref"
    ref.write_text("".join(REFS[i] + "\n" for i in idx), encoding="utf-8")
    (work / "real_quality.log.json").write_text(json.dumps({"test_ref": str(ref)}))
    for key, (base, rnn) in seeds.items():
        ev = work / "seeds" / key / "evaluate"
        (ev / "work").mkdir(parents=True)
        (ev / "table1.csv").write_text("configuration,test_bleu\n")
        for conf, out in (("Baseline", base), ("+RNN+WP", rnn)):
            (ev / "work" / f"test.{conf}.detok").write_text("".join(out[i] + "\n" for i in idx), encoding="utf-8")
    return work


def test_each_run_is_scored_over_both_halves_as_one_corpus(tmp_path):
    mixed = {i: (GOOD if i % 3 else BAD)[i] for i in GOOD}
    first = _fold(tmp_path, "a", [0, 2, 4, 6], {"moses-seed1": (BAD, GOOD), "moses-seed2": (mixed, GOOD)})
    second = _fold(tmp_path, "b", [1, 3, 5, 7], {"moses-seed1": (BAD, GOOD), "moses-seed2": (mixed, mixed),
                                                 "moses-seed3": (BAD, BAD)})   # seed3: not in the first fold
    res = two_fold.join(first, second, n_boot=50)
    order = [0, 2, 4, 6, 1, 3, 5, 7]
    bleu = lambda out: BLEU().corpus_score([out[i] for i in order], [[REFS[i] for i in order]]).score  # noqa: E731
    base = res["rows"]["Baseline"]
    rnn = res["rows"]["+RNN+WP"]
    assert res["sentences"] == 8 and base["runs"] == rnn["runs"] == ["moses-seed1", "moses-seed2"]
    joined2 = {i: (GOOD[i] if i in (0, 2, 4, 6) else mixed[i]) for i in GOOD}
    assert base["bleu"] == pytest.approx([bleu(BAD), bleu(mixed)])
    assert rnn["bleu"] == pytest.approx([100.0, bleu(joined2)])
    assert rnn["delta"] == pytest.approx(((100.0 - bleu(BAD)) + (bleu(joined2) - bleu(mixed))) / 2)
    assert 0 < rnn["p"] <= 1 and base["delta"] is None
    assert "| +RNN+WP | 100.00, " in two_fold.render(res, first, second)


def test_runs_that_are_not_two_folds_are_refused(tmp_path):
    first = _fold(tmp_path, "a", [0, 2, 4, 6], {"moses-seed1": (BAD, GOOD)})
    same = _fold(tmp_path, "b", [0, 2, 4, 6], {"moses-seed1": (BAD, GOOD)})
    with pytest.raises(SystemExit, match="scored the same test sentences"):
        two_fold.join(first, same)
    other = _fold(tmp_path, "c", [1, 3, 5, 7], {"embedded-seed1": (BAD, GOOD)})
    with pytest.raises(SystemExit, match="no finished MERT run in common"):
        two_fold.join(first, other)
    short = _fold(tmp_path, "d", [1, 3, 5, 7], {"moses-seed1": (BAD, GOOD)})
    (short / "seeds" / "moses-seed1" / "evaluate" / "work" / "test.Baseline.detok").write_text("one line\n")
    with pytest.raises(SystemExit, match="1 lines; expected one per test reference"):
        two_fold.join(first, short)


def test_out_replaces_only_its_own_tables(tmp_path, capsys):
    """--out X.md writes X.md and X.json; a file there that this script did not write (a run's own
    real_quality.md and .json, say) is refused before any scoring and left byte for byte as it was."""
    first = _fold(tmp_path, "a", [0, 2, 4, 6], {"moses-seed1": (BAD, GOOD)})
    second = _fold(tmp_path, "b", [1, 3, 5, 7], {"moses-seed1": (BAD, GOOD)})
    out = tmp_path / "two-fold.md"
    argv = [str(first), str(second), "--bootstrap", "20", "--out", str(out)]
    two_fold.main(argv)
    assert out.read_text().startswith("# Table 1 over both folds") and json.loads(out.with_suffix(".json").read_text())["rows"]
    two_fold.main(argv)                                  # its own outputs: replaced
    theirs = first / "real_quality.json"
    theirs.write_text('{"backends": {}}\n')
    with pytest.raises(SystemExit, match="real_quality.json exists and is not a Table this script wrote"):
        two_fold.main([str(first), str(second), "--out", str(first / "real_quality.md")])
    assert theirs.read_text() == '{"backends": {}}\n' and not (first / "real_quality.md").exists()

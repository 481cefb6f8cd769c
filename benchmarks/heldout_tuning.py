"""Table 1 with MERT tuned on sentences held out from the training corpus and BLEU on the whole of val.

Multi30k has one validation set. ``real_quality.py`` splits it into a dev half for MERT and a test half
for BLEU, so each result rests on 507 test sentences, and its two folds (``split.swap``) have differed by
more than MERT's run-to-run spread. This script writes a third arrangement into ``--out``:

- ``train.{en,fr}.gz``: the training corpus without every 57th pair (0-based line i with i % 57 == 28),
  28,491 pairs, from which the system and the models are built;
- ``tune.{en,fr}``: those 509 held-out pairs, MERT's tuning set;
- ``val.{en,fr}``: the whole validation set (1,014 pairs), the test set, which no stage reads before
  ``evaluate``;
- ``multi30k-heldout.toml``: ``workflows/multi30k.toml`` without its ``split`` stage, with these files as
  its ``[inputs]`` (the tuning set as ``dev_src``/``dev_ref``, val as ``test_src``/``test_ref``).

``--halves WORKDIR`` then scores a finished ``real_quality.py`` run of that workflow on each half of val
as ``split``'s ``alternate`` mode cuts it (odd lines: the dev half, even lines: the test half), so its
numbers stand beside those of the runs tuned on one half and scored on the other.

    python benchmarks/heldout_tuning.py --out runs/heldout-data
    MOSES_HOME=../shared/moses nice -n 10 python benchmarks/real_quality.py --workdir runs/heldout \\
        --workflow runs/heldout-data/multi30k-heldout.toml --backends moses --mert-runs 3 --jobs 2 \\
        --job-threads 1 --cslm-runs 0 --no-dev-scores --without tune-rnn --set 'common.backend="moses"'
    python benchmarks/heldout_tuning.py --halves runs/heldout
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_quality  # noqa: E402

from phrase_rescore.core.atomic_write import atomic_open  # noqa: E402
from phrase_rescore.core.reading import read_lines, read_text_lines  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "multi30k-en-fr"
EVERY, OFFSET = 57, 28          # line i of the training corpus is held out when i % EVERY == OFFSET
WORKFLOW = "multi30k-heldout.toml"


def _lines(path: Path) -> list[str]:
    return [text + "\n" for _, text, _ in read_lines(path)]


def write_data(data: Path, out: Path, workflow: Path) -> None:
    """The held-out split of ``data``'s corpus and the workflow that runs on it, into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    n_held = 0
    for side in ("en", "fr"):
        lines = _lines(data / f"train.{side}.gz")
        held = [t for i, t in enumerate(lines) if i % EVERY == OFFSET]
        n_held = len(held)
        with atomic_open(out / f"train.{side}.gz", "w") as f:      # gzip without a name or a time: the same bytes
            f.writelines(t for i, t in enumerate(lines) if i % EVERY != OFFSET)
        with atomic_open(out / f"tune.{side}", "w") as f:
            f.writelines(held)
        with atomic_open(out / f"val.{side}", "w") as f:
            f.writelines(_lines(data / f"val.{side}.gz"))
    text = workflow.read_text(encoding="utf-8")
    inputs = {"train_src": out / "train.en.gz", "train_tgt": out / "train.fr.gz", "dev_src": out / "tune.en",
              "dev_ref": out / "tune.fr", "test_src": out / "val.en", "test_ref": out / "val.fr"}
    head, rest = text.split("[inputs]\n", 1)
    old_inputs, after = rest.split("\n\n", 1)
    stages_old = 'stages = ["split", '
    if stages_old not in head or "[split]\n" not in after:
        raise SystemExit(f"{workflow}: expected a workflow whose stages start with split and a [split] section")
    head = head.replace(stages_old, 'stages = [')
    _, after_split = after.split("[split]\n", 1)[1].split("\n\n", 1)
    after = after.split("[split]\n", 1)[0] + after_split
    new_inputs = "\n".join(f"{k} = {json.dumps(str(v.resolve()))}" for k, v in inputs.items())
    with atomic_open(out / WORKFLOW, "w") as f:
        f.write(f"# {workflow.name} tuned on {n_held} sentences held out from its training corpus, scored on the "
                "whole of val (benchmarks/heldout_tuning.py)\n"
                + head + "[inputs]\n" + new_inputs + "\n\n" + after)


def halves(work: Path, n_boot: int) -> list[str]:
    """BLEU per run, mean Δ and its p-value on all of val and on each of its alternate halves."""
    from sacrebleu.metrics import BLEU

    log = json.loads((work / "real_quality.log.json").read_text())
    ref = read_text_lines(log["test_ref"])
    seeds = sorted(k for k in log["seeds"] if (work / "seeds" / k / "evaluate" / "table1.csv").exists())
    hyp = lambda k, c: read_text_lines(work / "seeds" / k / "evaluate" / "work" / f"test.{c}.detok")  # noqa: E731
    out = []
    for name, part in (("all of val", slice(None)), ("dev half (odd lines)", slice(0, None, 2)),
                       ("test half (even lines)", slice(1, None, 2))):
        r = ref[part]
        base = [hyp(k, "Baseline")[part] for k in seeds]
        system = [hyp(k, "+RNN+WP")[part] for k in seeds]
        b = [BLEU().corpus_score(h, [r]).score for h in base]
        s = [BLEU().corpus_score(h, [r]).score for h in system]
        p = real_quality.mean_delta_p(r, base, system, n_boot)
        out.append(f"| {name} ({len(r)}) | {', '.join(f'{x:.2f}' for x in b)} | {', '.join(f'{x:.2f}' for x in s)} | "
                   f"{statistics.mean(s) - statistics.mean(b):+.2f} ({', '.join(f'{y - x:+.2f}' for x, y in zip(b, s))}) "
                   f"| {p:.3f} |")
    return ["| Scored on | Baseline BLEU per run | +RNN+WP BLEU per run | Δ mean (per run) | p (mean) |",
            "|---|---|---|---|---:|"] + out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="where to write the data and the workflow")
    ap.add_argument("--data", default=str(DATA), help="Multi30k's train.{en,fr}.gz and val.{en,fr}.gz")
    ap.add_argument("--workflow", default=str(ROOT / "workflows" / "multi30k.toml"))
    ap.add_argument("--halves", metavar="WORKDIR", help="score a finished real_quality.py run on val's halves")
    ap.add_argument("--bootstrap", type=int, default=1000)
    args = ap.parse_args(argv)
    if args.halves:
        print("\n".join(halves(Path(args.halves), args.bootstrap)))
    elif args.out:
        write_data(Path(args.data), Path(args.out), Path(args.workflow))
        print(f"wrote {args.out}/{WORKFLOW} and its data")
    else:
        ap.error("expected --out or --halves")


if __name__ == "__main__":
    main()

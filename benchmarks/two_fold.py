"""Table 1 over the whole held-out set: two ``real_quality.py`` runs, one per fold, joined.

A held-out set split into a dev half and a test half gives a BLEU on 507 sentences, and a lever chosen
on that test half is partly chosen on it. The second fold (``--set split.swap=true``: tuned on the test
half, scored on the dev half) scores the other 507; joined, every sentence of the held-out set is
translated by a system that was not tuned on it, a two-fold cross-validated BLEU over all of it.

Run k of one fold is joined with run k of the other (same backend and seed key): its test output on
the first fold's test half followed by that on the second fold's, against the two references in the
same order. The Table gives, per configuration, those joined runs' BLEU, their mean and spread, the mean
Δ against the baseline's joined runs and its paired-bootstrap p-value (``real_quality.mean_delta_p``).

    python benchmarks/two_fold.py runs/nbest200 runs/swap --out runs/two-fold.md
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import real_quality  # noqa: E402


def _fold(work: Path) -> tuple[list[str], dict[str, dict[str, list[str]]]]:
    """A run's test references and, per seed key and configuration, its detokenized test output."""
    from phrase_rescore.core.reading import read_text_lines

    log = work / "real_quality.log.json"
    if not log.exists():
        raise SystemExit(f"{work}: no real_quality.log.json; expected the WORKDIR of a real_quality.py run")
    ref = read_text_lines(json.loads(log.read_text())["test_ref"])
    runs: dict[str, dict[str, list[str]]] = {}
    for d in sorted((work / "seeds").iterdir()) if (work / "seeds").is_dir() else ():
        if not (d / "evaluate" / "table1.csv").exists():
            continue
        for c in real_quality.CONFIGS:
            h = d / "evaluate" / "work" / f"test.{real_quality._safe(c)}.detok"
            if h.exists():
                lines = read_text_lines(h)
                if len(lines) != len(ref):
                    raise SystemExit(f"{h}: {len(lines)} lines; expected one per test reference ({len(ref)})")
                runs.setdefault(d.name, {})[c] = lines
    return ref, runs


def join(first: Path, second: Path, n_boot: int = 1000) -> dict:
    """The joined Table: ``{"sentences": n, "signature": ..., "rows": {config: {...}}}``."""
    from sacrebleu.metrics import BLEU

    (ref1, runs1), (ref2, runs2) = _fold(first), _fold(second)
    if ref1 == ref2:
        raise SystemExit(f"{first} and {second} scored the same test sentences; expected the two folds of one "
                         "held-out set (one of them run with --set split.swap=true)")
    keys = sorted(set(runs1) & set(runs2))
    if not keys:
        raise SystemExit(f"{first} and {second} have no finished MERT run in common (seeds/BACKEND-seedN)")
    ref = ref1 + ref2
    bleu = BLEU()
    rows: dict[str, dict] = {}
    joined = {(k, c): runs1[k][c] + runs2[k][c] for k in keys for c in real_quality.CONFIGS
              if c in runs1[k] and c in runs2[k]}
    score = {kc: bleu.corpus_score(out, [ref]).score for kc, out in joined.items()}
    for c in real_quality.CONFIGS:
        ks = [k for k in keys if (k, c) in joined]
        if not ks:
            continue
        scores = [score[k, c] for k in ks]
        row = {"runs": ks, "bleu": scores, "mean": statistics.mean(scores),
               "sd": statistics.stdev(scores) if len(scores) > 1 else 0.0, "delta": None, "p": None}
        paired = [k for k in ks if (k, "Baseline") in joined]
        if c != "Baseline" and paired:
            row["delta"] = statistics.mean(score[k, c] - score[k, "Baseline"] for k in paired)
            row["p"] = real_quality.mean_delta_p(ref, [joined[k, "Baseline"] for k in paired],
                                                 [joined[k, c] for k in paired], n_boot)
        rows[c] = row
    return {"sentences": len(ref), "signature": str(bleu.get_signature()), "rows": rows}


HEADER = "# Table 1 over both folds"


def render(res: dict, first: Path, second: Path) -> str:
    lines = [f"{HEADER} ({res['sentences']} sentences; {first} + {second})", "",
             "| Configuration | BLEU per MERT run | mean ± sd | Δ mean | p (mean) |", "|---|---|---:|---:|---:|"]
    for c, r in res["rows"].items():
        lines.append(f"| {c} | {', '.join(f'{v:.2f}' for v in r['bleu'])} | {r['mean']:.2f} ± {r['sd']:.2f} | "
                     f"{'–' if r['delta'] is None else format(r['delta'], '+.2f')} | "
                     f"{'–' if r['p'] is None else format(r['p'], '.4f')} |")
    return "\n".join(lines + ["", f"sacrebleu {res['signature']}", ""])


def _ours(path: Path) -> bool:
    """Whether ``path`` is absent or a Table this script wrote (Markdown or JSON), so replacing it loses
    nothing of the user's: ``--out runs/x/real_quality.md`` must not overwrite that run's report."""
    if not path.exists():
        return True
    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".json":
            return set(json.loads(text)) == {"sentences", "signature", "rows"}
        return text.startswith(HEADER)
    except (OSError, UnicodeDecodeError, ValueError, TypeError):
        return False


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("first", help="WORKDIR of the first fold's real_quality.py run")
    ap.add_argument("second", help="WORKDIR of the second fold's (--set split.swap=true)")
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--out", help="also write the Table to this Markdown file (and .json beside it)")
    args = ap.parse_args(argv)
    first, second = Path(args.first), Path(args.second)
    outs = [Path(args.out), Path(args.out).with_suffix(".json")] if args.out else []
    for o in outs:
        if not _ours(o):
            raise SystemExit(f"--out {args.out}: {o} exists and is not a Table this script wrote; "
                             "expected a new path (or an earlier two_fold.py output to replace)")
    res = join(first, second, args.bootstrap)
    text = render(res, first, second)
    print(text)
    if args.out:
        from phrase_rescore.core.atomic_write import atomic_open

        with atomic_open(outs[0], "w") as f:
            f.write(text)
        with atomic_open(outs[1], "w") as f:
            f.write(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()

"""Table 1 on real text: the whole pipeline on Multi30k English-French, several MERT runs, either backend.

Runs ``workflows/multi30k.toml`` (split, build-smt, tokenize, prepare, train, score, moses-ini, tune,
evaluate) in one working directory, then reruns only tune and evaluate for each further MERT run (the
workflow's ``tune.seed``; the embedded MERT is seeded by it, mert-moses.pl draws its random restarts
unseeded) and for each backend. Each run's Table 1 and decoded test output are kept under
``WORKDIR/runs/BACKEND-seedN/``. The report ``WORKDIR/real_quality.md`` (and ``.json``) gives, per
backend and configuration, the test BLEU of every MERT run, their mean and spread, the mean Δ against
the baseline and its p-value, and the wall time of every stage.

The p-value of the mean Δ is sacrebleu's paired bootstrap (``sacrebleu --paired-bs``, the Moses script
bootstrap-hypothesis-difference-significance.pl) with the statistic averaged over the MERT runs, as
Clark et al. (2011) recommend: each of ``--bootstrap`` resamples of the test sentences is scored for
every run of both configurations, and the p-value is the share of resamples whose centred
|mean Δ| exceeds the observed one, (c + 1) / (n + 1).

    export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
    nice -n 10 python benchmarks/real_quality.py --workdir runs/real               # embedded, 3 MERT runs
    MOSES_HOME=../shared/moses nice -n 10 python benchmarks/real_quality.py --workdir runs/real \\
        --backends moses,embedded --train-budget 1200
    python benchmarks/real_quality.py --workdir runs/real --report-only           # rewrite the report

Run it from the project's root (the workflow's [inputs] name ../shared/data/multi30k-en-fr), or give
the data with ``--set inputs.train_src=...``. ``--set SECTION.KEY=VALUE`` goes to the workflow.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / "workflows" / "multi30k.toml"
CONFIGS = ("Baseline", "+RNN", "+RNN+WP")


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_+." else "_" for c in name)


def run_all(args) -> None:
    import torch

    from phrase_rescore.app.stages import default_registry
    from phrase_rescore.app.workflow import load_workflow, run_workflow

    torch.set_num_threads(1)
    registry = default_registry()
    work = Path(args.workdir).resolve()
    log_path = work / "real_quality.log.json"
    log = json.loads(log_path.read_text()) if log_path.exists() else {"runs": {}}
    base = [f"train.time_budget_s={float(args.train_budget)}", f"train.preset={args.preset!r}",
            f"tune.max_iterations={int(args.max_iterations)}"] + list(args.set)
    for backend in args.backends.split(","):
        for seed in range(1, args.mert_runs + 1):
            key = f"{backend}-seed{seed}"
            overrides = base + [f"common.backend={backend!r}", f"tune.seed={seed}"]
            wf = load_workflow(args.workflow, registry, overrides=overrides)
            t0 = time.monotonic()
            results = run_workflow(wf, registry, work, echo=lambda m: print(m, file=sys.stderr, flush=True))
            dest = work / "runs" / key
            if dest.exists():
                shutil.rmtree(dest)
            dest.mkdir(parents=True)
            ev = work / "evaluate"
            for name in ("table1.md", "table1.csv"):
                shutil.copy2(ev / name, dest / name)
            for c in CONFIGS:
                for split in ("dev", "test"):
                    f = ev / "work" / f"{split}.{_safe(c)}.detok"
                    if f.exists():
                        shutil.copy2(f, dest / f.name)
            log["runs"][key] = {"backend": backend, "seed": seed, "wall_s": round(time.monotonic() - t0, 1),
                                "overrides": overrides,
                                "stages": [{"stage": r.name, "status": r.status, "wall_s": round(r.wall_s, 1),
                                            "summary": r.summary if r.name in ("train", "prepare", "score")
                                            else None} for r in results]}
            log["test_ref"] = os.fspath(work / "split" / "split" / "test.ref")
            log["machine"] = {"cpus": os.cpu_count(), "platform": platform.platform(),
                              "processor": platform.processor(), "loadavg_at_end": list(os.getloadavg())}
            log_path.write_text(json.dumps(log, indent=1, default=str))
            write_report(work, args.bootstrap)


def mean_delta_p(ref: list[str], base_runs: list[list[str]], sys_runs: list[list[str]], n: int, seed: int = 12345):
    """The paired bootstrap p-value of mean BLEU over runs (sacrebleu's statistic, averaged over the runs)."""
    from sacrebleu.metrics import BLEU

    bleu = BLEU()
    stats = lambda hyps: np.array(bleu._extract_corpus_statistics(hyps, [ref]), dtype="float32")  # noqa: E731
    b = [stats(h) for h in base_runs]
    s = [stats(h) for h in sys_runs]
    score = lambda st: bleu._compute_score_from_stats(st.sum(0).tolist()).score  # noqa: E731
    obs = abs(np.mean([score(x) for x in s]) - np.mean([score(x) for x in b]))
    idx = np.random.default_rng(seed).choice(len(ref), size=(n, len(ref)), replace=True)
    diffs = np.array([abs(np.mean([score(x[i]) for x in s]) - np.mean([score(x[i]) for x in b])) for i in idx])
    centred = diffs - diffs.mean()
    return (int(np.sum(centred > obs)) + 1) / (n + 1)


def write_report(work: Path, n_boot: int) -> None:
    import pandas as pd

    from phrase_rescore.core.fileio import read_text_lines

    log = json.loads((work / "real_quality.log.json").read_text())
    ref = read_text_lines(log["test_ref"])
    by_backend: dict[str, list[str]] = {}
    for key, r in log["runs"].items():
        by_backend.setdefault(r["backend"], []).append(key)
    lines = ["# Table 1 on Multi30k English-French (benchmarks/real_quality.py)", ""]
    summary = {}
    for backend, keys in by_backend.items():
        tables = {k: pd.read_csv(work / "runs" / k / "table1.csv") for k in keys}
        lines += [f"## Backend {backend}: {len(keys)} MERT run(s)", "",
                  "| Configuration | Test BLEU per run | mean ± sd | Δ mean | p (mean) | Dev BLEU mean |",
                  "|---|---|---:|---:|---:|---:|"]
        hyps = {c: [read_text_lines(work / "runs" / k / f"test.{_safe(c)}.detok") for k in keys
                    if (work / "runs" / k / f"test.{_safe(c)}.detok").exists()] for c in CONFIGS}
        base_mean = None
        summary[backend] = {}
        for c in CONFIGS:
            vals = [float(t.loc[t["configuration"] == c, "test_bleu"].iloc[0]) for t in tables.values()
                    if (t["configuration"] == c).any()]
            devs = [float(t.loc[t["configuration"] == c, "dev_bleu"].iloc[0]) for t in tables.values()
                    if (t["configuration"] == c).any() and "dev_bleu" in t]
            if not vals:
                continue
            mean = statistics.mean(vals)
            sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
            if c == "Baseline":
                base_mean, delta, p = mean, 0.0, None
            else:
                delta = mean - base_mean
                p = mean_delta_p(ref, hyps["Baseline"], hyps[c], n_boot) if len(hyps[c]) == len(hyps["Baseline"]) else None
            summary[backend][c] = {"test_bleu": vals, "mean": mean, "sd": sd, "delta": delta, "p": p,
                                   "dev_mean": statistics.mean(devs) if devs else None}
            lines.append(f"| {c} | {', '.join(f'{v:.2f}' for v in vals)} | {mean:.2f} ± {sd:.2f} | {delta:+.2f} | "
                         f"{'–' if p is None else f'{p:.4f}'} | "
                         f"{'–' if not devs else f'{statistics.mean(devs):.2f}'} |")
        lines += ["", "Per run (Δ and p of each run's own paired bootstrap, sacrebleu):", ""]
        for k, t in tables.items():
            cells = [f"{r['configuration']} {r['test_bleu']:.2f} (Δ {r['test_delta']:+.2f}, p "
                     f"{'–' if pd.isna(r['test_p']) else format(r['test_p'], '.3f')})" for _, r in t.iterrows()]
            lines.append(f"- {k}: " + "; ".join(cells))
        lines.append("")
    lines += ["## Stage wall times (seconds)", "", "| Run | " + " | ".join(
        s["stage"] for s in next(iter(log["runs"].values()))["stages"]) + " | total |", ""]
    lines[-1] = "|---" * (len(next(iter(log["runs"].values()))["stages"]) + 2) + "|"
    for key, r in log["runs"].items():
        lines.append(f"| {key} | " + " | ".join(f"{s['wall_s']:.0f}" if s["status"] == "ran" else "·"
                                                for s in r["stages"]) + f" | {r['wall_s']:.0f} |")
    lines += ["", "· = current, skipped (run by an earlier row).", "",
              f"Machine: {log['machine']['cpus']} CPUs, {log['machine']['platform']}; load average at the end "
              f"{', '.join(f'{x:.1f}' for x in log['machine']['loadavg_at_end'])}.", ""]
    stages = [s["stage"] for s in next(iter(log["runs"].values()))["stages"]]
    manifests = {st: json.loads((work / st / "stage-manifest.json").read_text())
                 for st in stages if (work / st / "stage-manifest.json").exists()}
    lines += ["Wall time of the run that wrote each stage's current outputs (its stage-manifest.json):", "",
              "| " + " | ".join(manifests) + " | total |", "|---" * (len(manifests) + 1) + "|",
              "| " + " | ".join(f"{m['wall_s']:.0f}" for m in manifests.values())
              + f" | {sum(m['wall_s'] for m in manifests.values()):.0f} |", ""]
    for st, m in manifests.items():
        if st == "train" and m.get("summary"):
            t = m["summary"]
            lines.append(f"Training: {t.get('steps')} steps, stopped by {t.get('stop_reason')}, best validation "
                         f"perplexity {float(t.get('best_valid_ppl') or 'nan'):.2f} (unigram "
                         f"{float(t.get('unigram_valid_ppl') or 'nan'):.1f}), "
                         f"{float(t.get('pairs_per_s') or 'nan'):.0f} pairs/s.")
    (work / "real_quality.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (work / "real_quality.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    print("\n".join(lines))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--workflow", default=os.fspath(WORKFLOW))
    ap.add_argument("--backends", default="embedded", help="comma-separated: embedded, moses (MOSES_HOME)")
    ap.add_argument("--mert-runs", type=int, default=3)
    ap.add_argument("--train-budget", type=float, default=1200.0, help="train.time_budget_s")
    ap.add_argument("--preset", default="small")
    ap.add_argument("--max-iterations", type=int, default=5, help="MERT iterations per run")
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args(argv)
    if args.report_only:
        write_report(Path(args.workdir).resolve(), args.bootstrap)
    else:
        run_all(args)


if __name__ == "__main__":
    main()

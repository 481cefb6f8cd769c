"""Table 1 on real text: the whole pipeline on Multi30k English-French, several MERT runs, either backend.

Runs ``workflows/multi30k.toml`` in two layers of workflow runs (``phrase-rescore run`` of files this
script writes under ``WORKDIR/workflows/``, every parameter spelled out so that each stage hashes as in
the main workflow):

- the shared stages once, in WORKDIR: split, build-smt and tokenize (``shared-system``), then prepare,
  train, score and moses-ini (``shared-models``; with ``--reverse`` also prepare-reverse and train-reverse,
  whose p(e|f) column the +RNN tables then end with; with ``--ensemble`` train-ensemble, whose second model's
  log p(f|e) score averages with the first's), then train-cslm (``shared-rest``). With ``--jobs`` above 1
  and two or more encoder-decoders, each trains in a job of its own beside the others (``shared-train``,
  ``shared-train-reverse``, ...; what several need, such as prepare, first), and ``shared-models`` scores
  once they are all done: the workflow's two models train in the time of the longer one;
- per backend and MERT seed, the tuning and evaluation stages in ``WORKDIR/seeds/BACKEND-seedN/``, a
  workflow whose ``[inputs]`` are the shared stages' outputs; ``tune.seed`` = N seeds its MERT's random
  restarts, drawn anew in each iteration (the embedded MERT's, or mert's ``-r`` under mert-moses.pl), so
  the runs differ and repeat.
  Each tuning run is a job of its own, started as soon as the shared stages it reads are done (the
  baseline's needs only the built system, so with ``--jobs`` above 1 it runs beside the training); the
  seed's evaluation follows its three.

With ``--shared-from EARLIER``, the tuning runs and evaluations read the shared stages' outputs of an
earlier run in EARLIER, which must have finished them all. A lever of tuning (``--set tune.batch_mira=true``,
say) is so measured on the same system, models and tables as the run it is compared with. A shared stage
that ran there with other parameters or input files, and what reads from it, runs here instead, unless
it trains a network (then the run is refused): ``--set split.swap=true`` tunes on the test half and
scores on the dev half, with the earlier run's tables and models, a second fold for a result found on
the first. ``--without STAGE`` leaves a stage out (``tune-rnn``: no +RNN row).

The report ``WORKDIR/real_quality.md`` (and ``.json``) gives, per backend and configuration, the test
BLEU of every MERT run, their mean and spread, the mean Δ against the baseline and its p-value, and the
wall time of every stage and job (logs under ``WORKDIR/logs/``).

The p-value of the mean Δ is sacrebleu's paired bootstrap (``sacrebleu --paired-bs``, the Moses script
bootstrap-hypothesis-difference-significance.pl) with the statistic averaged over the MERT runs, as
Clark et al. (2011) recommend: each of ``--bootstrap`` resamples of the test sentences is scored for
every run of both configurations, and the p-value is the share of resamples whose centred
|mean Δ| exceeds the observed one, (c + 1) / (n + 1).

    export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
    nice -n 10 python benchmarks/real_quality.py --workdir runs/real               # embedded, 3 MERT runs
    MOSES_HOME=../shared/moses nice -n 10 python benchmarks/real_quality.py --workdir runs/real \\
        --backends moses --jobs 2 --job-threads 1 --train-budget 3000
    python benchmarks/real_quality.py --workdir runs/real --report-only           # rewrite the report

Run it from the project's root (the workflow's [inputs] name ../shared/data/multi30k-en-fr), or give
the data with ``--set inputs.train_src=...``. ``--set SECTION.KEY=VALUE`` goes to the workflow;
``--dry-run`` writes the workflow files and lists the jobs.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / "workflows" / "multi30k.toml"
ENCODER_DECODERS = ("train", "train-reverse", "train-ensemble")   # the stages --train-budget sets
CONFIGS = ("Baseline", "+RNN", "+CSLM+RNN", "+CSLM+RNN+WP", "+RNN+WP")   # then Sutskever et al.'s rows (--seq2seq)
#: --seq2seq: the stages of Sutskever et al.'s rows, and their CPU-sized settings (workflows/multi30k.toml)
SEQ2SEQ_TRAINERS = ("train-seq2seq", "train-seq2seq-forward")
SEQ2SEQ_STAGES = ("train-seq2seq", "train-seq2seq-forward", "translate-seq2seq", "nbest-baseline", "rerank-seq2seq")
STACK_STAGES = ("nbest-rnn-wp", "rerank-stack")   # --stack: the +RNN+WP system's lists with the CSLM and the LSTM
SEQ2SEQ_CPU = ("train-seq2seq.src_vocab_size=6000", "train-seq2seq.tgt_vocab_size=6500", "train-seq2seq.epochs=0.8",
               "train-seq2seq.decay_start=0.533", "train-seq2seq.decay_every=0.0533", "train-seq2seq.valid_every=0.1")


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_+." else "_" for c in name)


def _per_seed(stage: str) -> bool:
    """Stages that depend on MERT's seed: the tuning runs and what decodes with their weights."""
    return stage.startswith(("tune-", "nbest-", "rerank-")) or stage == "evaluate"


def _toml(v) -> str:
    """A TOML value of a stage parameter (strings, numbers, booleans and lists of them: JSON spells them alike)."""
    if isinstance(v, tuple):
        v = list(v)
    return json.dumps(v, ensure_ascii=False)


def write_workflow(path: Path, name: str, stages: list[str], inputs: dict[str, Path],
                   sections: dict[str, dict]) -> Path:
    """A workflow file naming every parameter explicitly, so that its stages hash as the main workflow's do."""
    lines = ["# written by benchmarks/real_quality.py", "", "[workflow]", f"name = {_toml(name)}",
             f"stages = {_toml(stages)}", "", "[inputs]"]
    lines += [f"{k} = {_toml(os.fspath(v))}" for k, v in sorted(inputs.items())]
    for sec, params in sections.items():
        lines += ["", f"[{sec}]"] + [f"{k} = {_toml(v)}" for k, v in params.items() if v is not None]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _sections(wf, registry, stages: list[str], **fixed) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for s in stages:
        sec = out.setdefault(registry.stages[s].section, {})
        sec.update({k: v for k, v in wf.params[s].items() if v is not None})
        sec.update({k: v for k, v in fixed.items() if k in wf.params[s]})
    return out


def _model_layers(models: list[str], registry, parallel: bool) -> list[tuple[str, list[str], tuple[str, ...]]]:
    """The shared stages between the built system and the tuning runs, as (job, stages, jobs it waits for).

    One job, ``shared-models``, after ``shared-system``; when ``parallel`` and two or more encoder-decoders
    train, each trains in a job of its own (``shared-train``, ``shared-train-reverse``, ...) with the stages
    only it needs, after a ``shared-models-common`` job of the stages several need (``prepare`` for
    ``train`` and ``train-ensemble``), and ``shared-models`` (score, moses-ini) waits for them all.
    """
    trainers = [s for s in models if s in ENCODER_DECODERS]
    if not parallel or len(trainers) < 2:
        return [("shared-models", models, ("shared-system",))]
    branch = {t: set(_ancestors(models, registry, [t])) | {t} for t in trainers}
    common = [s for s in models if sum(s in b for b in branch.values()) > 1]
    first = ("shared-models-common",) if common else ("shared-system",)
    out = [("shared-models-common", common, ("shared-system",))] if common else []
    out += [(f"shared-{t}", [s for s in models if s in branch[t] and s not in common], first) for t in trainers]
    rest = [s for s in models if not any(s in b for b in branch.values())]
    return out + [("shared-models", rest, tuple(f"shared-{t}" for t in trainers))]


def _ancestors(stages: list[str], registry, targets: list[str]) -> list[str]:
    """The stages among ``stages`` that ``targets`` need, transitively (by consumed and produced artifacts)."""
    producer = {a: s for s in stages for a in registry.stages[s].produces}
    need, todo = set(), list(targets)
    while todo:
        for a in registry.stages[todo.pop()].consumes:
            p = producer.get(a)
            if p is not None and p not in need:
                need.add(p)
                todo.append(p)
    return [s for s in stages if s in need]


def _needed(registry, stages: list[str]) -> list[str]:
    """``stages`` less those whose outputs no other of them reads (evaluate, the last, is always needed):
    without tune-rnn, its moses-ini-rnn goes too."""
    stages = list(stages)
    while True:
        read = {a for s in stages for a in registry.stages[s].consumes}
        idle = [s for s in stages if s != "evaluate" and not read & set(registry.stages[s].produces)]
        if not idle:
            return stages
        stages = [s for s in stages if s not in idle]


def _run_here(home: Path, shared: list[str], params: dict[str, dict], registry,
              user_inputs: dict[str, Path]) -> dict[str, str]:
    """The shared stages that ``--shared-from home`` runs in this run's WORKDIR: those that ran in ``home``
    with other parameters or other input files, and those that read from them. Each must be a stage that
    trains no network (a different split, say, is tokenized again, while the tables and models come
    from ``home``), and so is each that has not finished there (a table the earlier run left out, say).
    Returns each such stage with the reason."""
    producer = {a: s for s in shared for a in registry.stages[s].produces}
    here: dict[str, str] = {}
    for s in shared:   # in the workflow's order: a stage's producers come before it
        m = home / s / "stage-manifest.json"
        trains = s in ENCODER_DECODERS or s in SEQ2SEQ_TRAINERS or s == "train-cslm"
        if not m.exists():
            if trains:
                raise SystemExit(f"--shared-from {home}: stage {s} has not finished there (no {m}), and it "
                                 "trains a network; finish it there, or run without --shared-from")
            here[s] = "it has not finished there"
            continue
        m = json.loads(m.read_text())
        theirs, mine = m["params"], json.loads(json.dumps(params[s]))
        differ = [f"{k} = {theirs.get(k)!r} there, {mine.get(k)!r} here"
                  for k in sorted(set(theirs) | set(mine)) if theirs.get(k) != mine.get(k)]
        differ += [f"input {a} = {m['input_paths'][a]} there, {user_inputs[a]} here"
                   for a in sorted(registry.stages[s].consumes) if a in user_inputs
                   and a in m.get("input_paths", {}) and Path(m["input_paths"][a]) != user_inputs[a]]
        upstream = sorted({producer[a] for a in registry.stages[s].consumes if producer.get(a) in here})
        if not differ and not upstream:
            continue
        why = "; ".join(differ) or f"it reads from {', '.join(upstream)}, which run here"
        if trains:
            raise SystemExit(f"--shared-from {home}: stage {s} would have to run again ({why}), and it trains "
                             "a network; run without --shared-from to train it again")
        here[s] = why
    return here


class Job:
    """One ``phrase-rescore run`` of a generated workflow file, started once the jobs it needs have finished."""

    def __init__(self, key: str, toml: Path, workdir: Path, after: tuple = ()):
        self.key, self.toml, self.workdir, self.after = key, toml, workdir, after
        self.proc = None
        self.t0 = self.wall_s = None

    def start(self, exe: str, logs: Path) -> None:
        logs.mkdir(parents=True, exist_ok=True)
        self.log = open(logs / f"{self.key}.log", "w", encoding="utf-8")
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen([exe, "run", os.fspath(self.toml), "--workdir", os.fspath(self.workdir)],
                                     stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        print(f"[{time.strftime('%H:%M:%S')}] started {self.key} (log {logs / (self.key + '.log')})", flush=True)


def run_jobs(jobs: list[Job], slots: int, logs: Path) -> tuple[dict[str, float], list[str]]:
    """Run the jobs, at most ``slots`` at once, each when the jobs in its ``after`` have succeeded. A failed
    job does not stop the others; the jobs after it are not started. Returns the finished jobs' wall
    seconds and the keys of those that failed or were not started."""
    exe = shutil.which("phrase-rescore") or os.fspath(Path(sys.executable).with_name("phrase-rescore"))
    waiting, running, done, failed = list(jobs), [], {}, []
    while waiting or running:
        for j in [j for j in waiting if any(a in failed for a in j.after)]:
            waiting.remove(j)
            failed.append(j.key)
            print(f"[{time.strftime('%H:%M:%S')}] not started {j.key}: a job it needs failed", flush=True)
        for j in [j for j in waiting if all(a in done for a in j.after)][:max(0, slots - len(running))]:
            waiting.remove(j)
            j.start(exe, logs)
            running.append(j)
        time.sleep(2.0)
        for j in [j for j in running if j.proc.poll() is not None]:
            running.remove(j)
            j.log.close()
            if j.proc.returncode != 0:
                failed.append(j.key)
                print(f"[{time.strftime('%H:%M:%S')}] FAILED {j.key} (exit {j.proc.returncode}); see "
                      f"{logs / (j.key + '.log')}", flush=True)
                continue
            done[j.key] = round(time.monotonic() - j.t0, 1)
            print(f"[{time.strftime('%H:%M:%S')}] finished {j.key} in {done[j.key]:.0f} s", flush=True)
    return done, failed


def run_all(args) -> None:
    """The shared stages once in WORKDIR; per backend and MERT seed, the tuning and evaluation stages in
    WORKDIR/seeds/BACKEND-seedN, a workflow whose [inputs] are the shared stages' outputs. With ``--jobs``
    above 1 the baseline's tuning runs start as soon as the system is built, beside the training."""
    from phrase_rescore.app.stages import default_registry
    from phrase_rescore.app.workflow import load_workflow

    registry = default_registry()
    work = Path(args.workdir).resolve()
    base = ([] if args.preset is None else [f"train.preset={args.preset!r}"]) + (
        [] if args.max_iterations is None else [f"tune.max_iterations={int(args.max_iterations)}"])
    stages = load_workflow(args.workflow, registry, overrides=base + list(args.set)).stages
    papers = [s for s in (*SEQ2SEQ_STAGES, *(STACK_STAGES if args.stack else ())) if args.seq2seq or args.stack]
    if papers:   # Sutskever et al.'s rows: their stages and CPU-sized settings (--set overrides them)
        base.append("workflow.stages=" + _toml(stages + [s for s in papers if s not in stages]))
        base += [*SEQ2SEQ_CPU, *([] if args.no_dev_scores else ["translate-seq2seq.dev=true"])]
        stages = load_workflow(args.workflow, registry, overrides=base + list(args.set)).stages
    base += list(args.set)
    more = ([] if not args.reverse or "train-reverse" in stages else ["prepare-reverse", "train-reverse"]) \
        + ([] if not args.ensemble or "train-ensemble" in stages else ["train-ensemble"])
    if more:   # the reverse model's column, p(e|f); the second forward model (the runner orders the stages)
        stages = stages + more
        base.append("workflow.stages=" + _toml(stages))
    if args.train_budget is not None:   # every encoder-decoder's
        base = [f"{st}.time_budget_s={float(args.train_budget)}" for st in ENCODER_DECODERS if st in stages] + base
    wf = load_workflow(args.workflow, registry, overrides=base)
    # no run re-ranks with the CSLM: it is not trained (its optional input of evaluate is then absent)
    without = set(args.without) | ({"train-cslm"} if args.cslm_runs < 1 else set())
    bad = sorted(set(args.without) - (set(wf.stages) - {"tune-baseline", "evaluate"}))
    if bad:
        raise SystemExit(f"--without {', '.join(bad)}: expected a stage of the workflow other than tune-baseline and evaluate "
                         f"({', '.join(s for s in wf.stages if s not in ('tune-baseline', 'evaluate'))})")
    run = _needed(registry, [s for s in wf.stages if s not in without])
    shared = [s for s in run if not _per_seed(s)]
    seeded = [s for s in run if _per_seed(s)]
    user_inputs = {a: p.resolve() for a, p in wf.inputs.items()}
    # the shared stages' outputs: this run's, or those of an earlier run (--shared-from) if it ran them as
    # this one would, so that a tuning lever is measured on the same system and models
    home = Path(args.shared_from).resolve() if args.shared_from else work
    here = _run_here(home, shared, wf.params, registry, user_inputs) if args.shared_from else dict.fromkeys(shared)
    for s, why in here.items() if args.shared_from else ():
        print(f"--shared-from: {s} runs here ({why})", flush=True)
    arts = {a: (work if s in here else home) / s / rel for s in shared for a, rel in registry.stages[s].produces.items()}
    arts.update(user_inputs)
    gen = work / "workflows"
    tunes = [s for s in seeded if s.startswith("tune-")]
    # the shared stages in three runs: what the baseline's tuning needs, what every tuning run needs, the rest;
    # with --jobs above 1, the encoder-decoders of the second train side by side (one core each)
    layers = [("shared-system", _ancestors(shared, registry, ["tune-baseline"]) if "tune-baseline" in tunes else [], ())]
    models = [s for s in _ancestors(shared, registry, tunes) if s not in layers[0][1]]
    layers += _model_layers(models, registry, parallel=args.jobs > 1)
    layers.append(("shared-rest", [s for s in shared if not any(s in st for _, st, _ in layers)], ("shared-models",)))
    jobs, after_stage = [], {}
    for key, stages, after in layers:
        stages = [s for s in stages if s in here]
        after_stage.update({s: key for s in stages})   # a job waits only for the shared stages run here
        if not stages:
            continue
        # a job's workflow names its stages and those they read from (current by then, so skipped), never
        # those of a job that may run beside it; what they read from --shared-from's run is an input
        upto = [s for s in here if s in set(_ancestors(shared, registry, stages)) | set(stages)]
        made = {a for s in upto for a in registry.stages[s].produces}
        jobs.append(Job(key, write_workflow(gen / f"{key}.toml", wf.name, upto, {
            a: p for a, p in arts.items() if a not in made and any(a in registry.stages[s].consumes for s in upto)},
            _sections(wf, registry, upto)), work, after=tuple(k for k in after if any(k == j.key for j in jobs))))
    threads = int(args.job_threads or max(1, (os.cpu_count() or 1) // max(1, args.jobs)))
    baselines, per_seed = [], []
    for backend in args.backends.split(","):
        for seed in range(1, args.mert_runs + 1):
            key = f"{backend}-seed{seed}"
            fixed = {"backend": backend, "seed": seed, "threads": threads}

            def seed_job(name: str, stages: list[str], after: tuple, drop=(), key=key, fixed=fixed) -> Job:
                produced = {a for s in stages for a in registry.stages[s].produces}
                inputs = {a: p for a, p in arts.items() if a not in produced and a not in drop
                          and any(a in registry.stages[s].consumes for s in stages)}
                return Job(name, write_workflow(gen / f"{name}.toml", f"{wf.name}-{key}", stages, inputs,
                                                _sections(wf, registry, stages, **fixed)), work / "seeds" / key, after)
            parts = []
            mine = [t for t in tunes if seed == 1 or t not in args.first_run_only]
            # the re-ranking stages run in the seed's evaluation job; the whole stack re-ranks with the CSLM
            rerank = [s for s in seeded if s.startswith(("nbest-", "rerank-"))
                      and (s not in STACK_STAGES or seed <= args.cslm_runs)]
            for t in mine:    # each tuning run on its own, as soon as the shared stages it reads are done
                needs = {after_stage[s] for s in _ancestors(shared, registry, [t]) if s in after_stage}
                parts.append(seed_job(f"{key}-{t[len('tune-'):]}", [t], tuple(j.key for j in jobs if j.key in needs)))
            baselines += [j for j in parts if j.key.endswith("-baseline")]
            per_seed += [j for j in parts if not j.key.endswith("-baseline")]
            skip = (["cslm"] if seed > args.cslm_runs else []) + (["dev_ref"] if args.no_dev_scores else [])
            # optional inputs of evaluate: without them, no +CSLM rows, no dev column
            final = seed_job(key, [s for s in seeded if s in mine + rerank or not s.startswith(("tune-", "nbest-", "rerank-"))],
                             tuple(j.key for j in parts) + ((jobs[-1].key,) if jobs else ()), drop=skip)
            per_seed.append(final)
    # the baselines first (they can start beside the training), then seed by seed its tuning runs and evaluation
    jobs += baselines + per_seed
    if args.dry_run:
        for j in jobs:
            print(f"{j.key}: {j.toml} in {j.workdir}" + (f", after {', '.join(j.after)}" if j.after else ""))
        return
    log_path = work / "real_quality.log.json"
    log = json.loads(log_path.read_text()) if log_path.exists() else {}
    log.update({"workflow": os.fspath(Path(args.workflow).resolve()), "overrides": base, "jobs": args.jobs,
                "shared_from": os.fspath(home), "shared_here": [s for s in here if home != work],
                "job_threads": threads, "test_ref": os.fspath(arts["test_ref"]),
                "seeds": sorted({j.workdir.name for j in jobs if j.workdir != work})})
    # counted before the jobs start, so that an invocation stopped part way is counted too
    log["invocations"] = log.get("invocations", 0) + 1
    _save_log(log_path, log)
    t0 = time.monotonic()
    finished, failed = run_jobs(jobs, max(1, args.jobs), work / "logs")
    log["job_wall_s"] = {**log.get("job_wall_s", {}), **finished}
    log["failed_jobs"] = failed
    log["wall_s"] = round(time.monotonic() - t0, 1)
    log["machine"] = {"cpus": os.cpu_count(), "platform": platform.platform(),
                      "processor": platform.processor(), "loadavg_at_end": list(os.getloadavg())}
    _save_log(log_path, log)
    write_report(work, args.bootstrap)
    if failed:
        raise SystemExit(f"{len(failed)} job(s) failed or were not started: {', '.join(failed)}; the report "
                         "has the runs that finished (rerun this command to redo only what is missing)")


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


def _save_log(path: Path, log: dict) -> None:
    """Write the run's log atomically: a run stopped while writing it leaves the last complete one."""
    from phrase_rescore.core.atomic_write import atomic_open

    with atomic_open(path, "w") as f:
        f.write(json.dumps(log, indent=1, default=str))


def _wall(d: Path, stage: str) -> tuple[float, bool] | None:
    """A stage's wall seconds from its manifest and whether it resumed an interrupted attempt (then the
    seconds are that attempt's only); None when it has not run."""
    m = d / stage / "stage-manifest.json"
    if not m.exists():
        return None
    m = json.loads(m.read_text())
    return m.get("wall_s", float("nan")), bool(m.get("resumed"))


def _cell(wall: tuple[float, bool] | None) -> str:
    """A table cell for :func:`_wall`'s result: "–" when the stage has not run, "*" marks a resumed one."""
    return "–" if wall is None else f"{wall[0]:.0f}" + ("*" if wall[1] else "")


def _total(walls) -> float:
    return sum(w[0] for w in walls if w is not None)


def write_report(work: Path, n_boot: int) -> None:
    """WORKDIR/real_quality.md and .json from the seed runs' Table 1 files and the stages' manifests."""
    import pandas as pd

    from phrase_rescore.core.reading import read_text_lines

    log = json.loads((work / "real_quality.log.json").read_text())
    ref = read_text_lines(log["test_ref"])
    seeds = [k for k in log["seeds"] if (work / "seeds" / k / "evaluate" / "table1.csv").exists()]
    by_backend: dict[str, list[str]] = {}
    for key in seeds:
        by_backend.setdefault(key.rsplit("-seed", 1)[0], []).append(key)
    lines = ["# Table 1 on Multi30k English-French (benchmarks/real_quality.py)", ""]
    summary = {}
    for backend, keys in by_backend.items():
        ev = {k: work / "seeds" / k / "evaluate" for k in keys}
        tables = {k: pd.read_csv(ev[k] / "table1.csv") for k in keys}
        lines += [f"## Backend {backend}: {len(keys)} MERT run(s)", "",
                  "Δ and p are against the baseline's runs with the same MERT seeds (the mean over those pairs).", "",
                  "| Configuration | Test BLEU per run | mean ± sd | Δ mean | p (mean) | Dev BLEU mean |",
                  "|---|---|---:|---:|---:|---:|"]
        hyp = lambda k, c, ev=ev: ev[k] / "work" / f"test.{_safe(c)}.detok"  # noqa: E731
        summary[backend] = {}
        names = dict.fromkeys([*CONFIGS, *(c for t in tables.values() for c in t["configuration"])])
        bleu_of = {(k, c): float(t.loc[t["configuration"] == c, "test_bleu"].iloc[0])
                   for k, t in tables.items() for c in names if (t["configuration"] == c).any()}
        for c in names:
            runs = [k for k in keys if (k, c) in bleu_of]
            if not runs:
                continue
            vals = [bleu_of[k, c] for k in runs]
            devs = [float(tables[k].loc[tables[k]["configuration"] == c, "dev_bleu"].iloc[0]) for k in runs
                    if "dev_bleu" in tables[k] and not pd.isna(
                        tables[k].loc[tables[k]["configuration"] == c, "dev_bleu"].iloc[0])]
            mean = statistics.mean(vals)
            sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
            # against the baseline's runs with the same seeds: the p-value of the mean over those pairs
            paired = [k for k in runs if (k, "Baseline") in bleu_of and hyp(k, c).exists() and hyp(k, "Baseline").exists()]
            if c == "Baseline" or not paired:
                delta, p = (0.0 if c == "Baseline" else None), None
            else:
                delta = statistics.mean(bleu_of[k, c] - bleu_of[k, "Baseline"] for k in paired)
                p = mean_delta_p(ref, [read_text_lines(hyp(k, "Baseline")) for k in paired],
                                 [read_text_lines(hyp(k, c)) for k in paired], n_boot)
            summary[backend][c] = {"runs": runs, "test_bleu": vals, "mean": mean, "sd": sd, "delta": delta, "p": p,
                                   "dev_mean": statistics.mean(devs) if devs else None}
            lines.append(f"| {c} | {', '.join(f'{v:.2f}' for v in vals)} | {mean:.2f} ± {sd:.2f} | "
                         f"{'–' if delta is None else f'{delta:+.2f}'} | {'–' if p is None else f'{p:.4f}'} | "
                         f"{'–' if not devs else f'{statistics.mean(devs):.2f}'} |")
        lines += ["", "Per run (Δ and p of each run's own paired bootstrap, sacrebleu):", ""]
        for k, t in tables.items():
            cells = [f"{r['configuration']} {r['test_bleu']:.2f} (Δ {r['test_delta']:+.2f}, p "
                     f"{'–' if pd.isna(r['test_p']) else format(r['test_p'], '.3f')})" for _, r in t.iterrows()]
            lines.append(f"- {k}: " + "; ".join(cells))
        lines.append("")
    home = Path(log.get("shared_from") or work)
    here = set(log.get("shared_here", []))
    at = lambda s: work if s in here else home  # noqa: E731
    shared = sorted({d.name for d in home.iterdir() if (d / "stage-manifest.json").exists()} | here)
    order = {s: i for i, s in enumerate(("split", "build-smt", "tokenize", "prepare", "prepare-reverse", "train",
                                         "train-reverse", "train-ensemble", "score", "train-cslm", "moses-ini-rnn",
                                         "moses-ini-rnn-wp"))}
    shared.sort(key=lambda s: order.get(s, len(order)))
    walls = {s: _wall(at(s), s) for s in shared}
    lines += ["## Stage wall times (seconds)", "",
              "Shared stages (once; each manifest's wall time):", "",
              "| " + " | ".join(shared) + " | total |", "|---" * (len(shared) + 1) + "|",
              "| " + " | ".join(_cell(walls[s]) for s in shared) + f" | {_total(walls.values()):.0f} |", "",
              "Per MERT run:", ""]
    seed_stages = ["tune-baseline", "tune-rnn", "tune-rnn-wp", "evaluate"]
    lines += ["| Run | " + " | ".join(seed_stages) + " | total |", "|---" * (len(seed_stages) + 2) + "|"]
    every = list(walls.values())
    for k in seeds:
        w = [_wall(work / "seeds" / k, s) for s in seed_stages]
        every += w
        lines.append(f"| {k} | " + " | ".join(map(_cell, w)) + f" | {_total(w):.0f} |")
    if any(w is not None and w[1] for w in every):
        lines += ["", "\\* resumed after an interruption: the time of its last attempt only."]
    n = log.get("invocations", 1)
    took = (f"the whole run took {log.get('wall_s', float('nan')):.0f} s of wall time" if n <= 1 else
            f"the last of the run's {n} invocations took {log.get('wall_s', float('nan')):.0f} s of wall time "
            "(the earlier ones, stopped or finished, are not counted)")
    lines += ["", f"{log.get('jobs', 1)} job(s) at once, {log.get('job_threads', 1)} decoder thread(s) each; "
              f"{took}.", "",
              f"Machine: {log['machine']['cpus']} CPUs, {log['machine']['platform']}; load average at the end "
              f"{', '.join(f'{x:.1f}' for x in log['machine']['loadavg_at_end'])}.", ""]
    for st in ("train", "train-reverse", "train-ensemble", "train-cslm"):
        m = at(st) / "stage-manifest.json"
        t = json.loads(m.read_text()).get("summary") if m.exists() else None
        if t:
            lines.append(f"{st}: {t.get('steps')} steps, stopped by {t.get('stop_reason')}, best validation "
                         f"perplexity {float(t.get('best_valid_ppl') or 'nan'):.2f}"
                         + (f" (unigram {float(t['unigram_valid_ppl']):.1f})" if t.get("unigram_valid_ppl") else "")
                         + (f", n-gram LM {float(t['ngram_valid_ppl']):.2f}" if t.get("ngram_valid_ppl") else "")
                         + ".")
    (work / "real_quality.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (work / "real_quality.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    print("\n".join(lines))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--workflow", default=os.fspath(WORKFLOW))
    ap.add_argument("--backends", default="embedded", help="comma-separated: embedded, moses (MOSES_HOME)")
    ap.add_argument("--mert-runs", type=int, default=3)
    ap.add_argument("--train-budget", type=float, default=None, help="time_budget_s of each encoder-decoder, "
                    "[train], [train-reverse] and [train-ensemble] (default: the workflow's)")
    ap.add_argument("--preset", default=None, help="[train] preset (default: the workflow's; a workflow "
                    "without a train stage takes none)")
    ap.add_argument("--max-iterations", type=int, default=None, help="MERT iterations per run, a cap "
                    "(default: the workflow's [tune] max_iterations)")
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=1, help="workflow runs at once (the shared stages, and the "
                    "MERT runs: the baseline's start beside the training)")
    ap.add_argument("--job-threads", type=int, default=0, help="decoder threads of each MERT run "
                    "(default: CPUs / jobs)")
    ap.add_argument("--cslm-runs", type=int, default=1_000_000, help="the +CSLM rows (their n-best lists are the "
                    "evaluation's costliest decoding) in the first K MERT runs only; 0: none, and the CSLM is not trained")
    ap.add_argument("--first-run-only", action="append", default=[], metavar="STAGE",
                    help="a tuning stage run in the first MERT run only (e.g. tune-rnn: its row then has one run)")
    ap.add_argument("--without", action="append", default=[], metavar="STAGE",
                    help="leave a stage of the workflow out, and the stages only it reads from (e.g. tune-rnn: no "
                    "+RNN row, and no moses-ini-rnn)")
    ap.add_argument("--no-dev-scores", action="store_true", help="evaluate decodes the test half only "
                    "(no dev BLEU column; the tuning logs have dev BLEU per iteration)")
    ap.add_argument("--reverse", action="store_true", help="add prepare-reverse and train-reverse to the workflow: "
                    "the +RNN rows get the reverse model's log p(e|f) column too")
    ap.add_argument("--ensemble", action="store_true", help="add train-ensemble to the workflow: the log p(f|e) "
                    "column is the mean of two forward models' (seeds [train]'s and the next)")
    ap.add_argument("--seq2seq", action="store_true", help="Sutskever et al.'s rows: train the deep LSTM (source "
                    "reversed, and forward), translate the test half with it, re-rank the tuned baseline's n-best lists")
    ap.add_argument("--stack", action="store_true", help="and re-rank the tuned +RNN+WP system's lists with the CSLM "
                    "and the LSTM together (rerank-stack)")
    ap.add_argument("--shared-from", metavar="WORKDIR", help="use the shared stages (system, models, tables) of "
                    "an earlier run in WORKDIR; the tuning runs and evaluations run here (a lever of tuning, on "
                    "the same system and models), and any shared stage that ran there with other parameters or "
                    "inputs, unless it trains a network (e.g. --set split.swap=true: the halves swapped)")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--dry-run", action="store_true", help="write the workflow files, list the jobs, run nothing")
    args = ap.parse_args(argv)
    if Path(args.workdir).exists() and not Path(args.workdir).is_dir():
        ap.error(f"--workdir {args.workdir} is a file; expected a folder (new, or one of an earlier run)")
    if args.report_only:
        write_report(Path(args.workdir).resolve(), args.bootstrap)
    else:
        run_all(args)


if __name__ == "__main__":
    main()

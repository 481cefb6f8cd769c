"""Levers on the real-text benchmark: extra neural columns measured against the same baseline runs.

Works in the working directory of ``benchmarks/real_quality.py`` (its shared stages' artifacts, and each
MERT run's tuned baseline and test outputs under ``seeds/BACKEND-seedN/``) and writes under
``WORKDIR/levers/``:

- ``reverse``: a model trained in the other direction (``prepare`` on the swapped table, the vocabulary
  counted from the swapped corpus), its log p(e|f) appended as a third column to +RNN+WP
  (``score --reverse-model``), tuned with ``moses-ini --weights RNN,WP,0.2``;
- ``ensemble``: a second model trained on the same pairs with another seed; the +RNN+WP table's
  log p(f|e) column becomes the mean of the two models' log-probabilities (``score --ensemble-model``), its
  reverse column (when it has one) kept;
- ``longer``: the main run's model trained on (resumed) to a larger time budget, its patience still
  able to stop it: training nearer convergence instead of the main run's cap; it scores the table beside
  the main run's reverse model (when it has one);
- ``shortlist-pairs``: the forward model again, its shortlists counted from the table's unique phrase pairs
  (``prepare --no-vocab-from-corpus``) instead of from the training corpus (the paper's choice), trained for
  as many updates as the main run's forward model made (the machine's load then does not change what it
  learns); it too scores beside the main run's reverse model;
- ``rare-unigram``: no new model: the main run's models (the reverse one too, when it has one) score the
  table with ``score --rare-words unigram``, each word outside a shortlist scored with its corpus share of
  ``<unk>``'s probability (:mod:`phrase_rescore.pipeline.rare_words`), the WP column kept.

Each lever's model trains with the main run's settings (preset, time budget, patience); each lever is
tuned with the same MERT seeds as the main run and scored on the test half with the p-value of the
mean over runs (``real_quality.mean_delta_p``) against the main run's baseline, and against its +RNN+WP
(what the lever adds to the configuration it changes).

    nice -n 10 python benchmarks/real_levers.py --workdir runs/real --lever reverse --stage train
    nice -n 10 python benchmarks/real_levers.py --workdir runs/real --lever reverse --stage eval --backend moses
    nice -n 10 python benchmarks/real_levers.py --workdir runs/real --lever rare-unigram --stage eval --backend moses
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, os.fspath(Path(__file__).resolve().parent))

from real_quality import _safe, mean_delta_p  # noqa: E402

FORWARD_LEVERS = ("longer", "shortlist-pairs")   # levers whose model takes the forward model's place


def _manifest_params(work: Path, stage: str) -> dict:
    """The parameters a stage of the main run ran with (its attempt record while it is still running)."""
    done = work / stage / "stage-manifest.json"
    return json.loads((done if done.exists() else work / stage / ".attempt.json").read_text())["params"]


def _seed_dir(work: Path, backend: str, seed: int) -> Path:
    """Where the main run keeps one MERT run's stages (its tuned baseline and evaluation)."""
    return work / "seeds" / f"{backend}-seed{seed}"


def train_models(work: Path, lever: str, budget: float | None = None) -> dict:
    """Prepare and train the lever's extra model (skipped when its model.pt exists)."""
    import torch

    from phrase_rescore.moses_integration.table_columns import swap_table
    from phrase_rescore.pipeline.configs import PrepareConfig, TrainConfig
    from phrase_rescore.pipeline.prepare import prepare
    from phrase_rescore.pipeline.train import train

    torch.set_num_threads(1)
    out = work / "levers" / lever
    out.mkdir(parents=True, exist_ok=True)
    table = work / "build-smt" / "smt" / "phrase-table.gz"
    src_tok, tgt_tok = work / "build-smt" / "smt" / "corpus" / "clean.src", work / "build-smt" / "smt" / "corpus" / "clean.tgt"
    pp = {k: v for k, v in _manifest_params(work, "prepare").items() if k in ("vocab_size", "valid_fraction", "seed")}
    tp = {k: v for k, v in _manifest_params(work, "train").items()
          if k in ("preset", "max_steps", "time_budget_s", "patience", "valid_every", "batch_size", "seed")}
    if (out / "model" / "model.pt").exists() and (out / "train-summary.json").exists():
        return {"model": os.fspath(out / "model" / "model.pt"), "skipped": True}
    if lever == "reverse":
        swapped = out / "phrase-table.swapped.gz"
        if not swapped.exists():
            swap_table(table, swapped)
        pairs = out / "pairs"
        if not (pairs / "vocab.json").exists():
            prepare(swapped, pairs, PrepareConfig(**pp, src_corpus=os.fspath(tgt_tok), tgt_corpus=os.fspath(src_tok)))
    elif lever == "ensemble":
        pairs = work / "prepare" / "pairs"
        tp["seed"] = int(tp.get("seed", 1)) + 1
    elif lever == "longer":
        import shutil

        pairs = work / "prepare" / "pairs"
        if not (out / "model" / "last.pt").exists():
            shutil.copytree(work / "train" / "model", out / "model")
        tp["time_budget_s"] = float(budget)
    elif lever == "shortlist-pairs":
        pairs = out / "pairs"
        if not (pairs / "vocab.json").exists():
            prepare(table, pairs, PrepareConfig(**pp, vocab_from_corpus=False))
        tp["max_steps"] = int(json.loads((work / "train" / "stage-manifest.json").read_text())["summary"]["steps"])
        tp["time_budget_s"] = None
    else:
        raise SystemExit(f"unknown lever {lever}")
    s = train(pairs, out / "model", TrainConfig(**tp, resume=(out / "model" / "last.pt").exists()))
    summary = {"steps": s.steps, "stop_reason": s.stop_reason, "best_valid_ppl": s.best_valid_ppl,
               "pairs_per_s": s.pairs_per_s, "model": s.model}
    (out / "train-summary.json").write_text(json.dumps(summary, indent=1, default=str))
    return summary


def evaluate_lever(work: Path, lever: str, backend: str, seeds: list[int]) -> dict:
    """Score, write the moses.ini, tune once per seed and decode the test half; compare with the baseline runs."""
    from phrase_rescore.core.reading import read_text_lines
    from phrase_rescore.moses_integration.configs import EvaluateConfig, RewriteConfig, SystemSpec, TuneConfig
    from phrase_rescore.moses_integration.report import evaluate
    from phrase_rescore.moses_integration.rewrite import rewrite_moses_ini
    from phrase_rescore.moses_integration.tuning import tune
    from phrase_rescore.pipeline.configs import ScoreConfig
    from phrase_rescore.pipeline.score import score_table
    from phrase_rescore.pipeline.score_columns import score_ensemble, score_reverse, score_with_extras

    out = work / "levers" / lever
    out.mkdir(parents=True, exist_ok=True)
    model = out / "model" / "model.pt"
    table_wp = work / "score" / "phrase-table.rnn-wp.gz"
    table = out / "phrase-table.lever.gz"
    # the baseline's tuning settings, so that the lever is tuned as the configurations it is compared with
    tune_params = _manifest_params(_seed_dir(work, backend, seeds[0]), "tune-baseline")
    threads = int(tune_params.get("threads", 1))
    smt = work / "build-smt" / "smt"
    reverse_model = work / "train-reverse" / "model" / "model.pt"
    main_has_reverse = reverse_model.exists()   # then the main +RNN+WP table ends ... log p(f|e), WP, log p(e|f)
    with_reverse = lever == "reverse" or (lever in ("rare-unigram", "ensemble") + FORWARD_LEVERS and main_has_reverse)
    if lever == "reverse" and main_has_reverse:
        raise SystemExit("--lever reverse: the main run's tables already have the reverse column (train-reverse)")
    if not table.exists():
        cfg = ScoreConfig(columns=("logprob",), threads=threads)
        if lever == "rare-unigram":
            cfg = ScoreConfig(columns=("logprob", "unk"), threads=threads, rare_words="unigram",
                              rare_counts=os.fspath(smt / "corpus" / "clean.tgt"),
                              rare_counts_reverse=os.fspath(smt / "corpus" / "clean.src"))
            if with_reverse:
                score_with_extras(work / "train" / "model" / "model.pt", smt / "phrase-table.gz", table, cfg,
                                  reverse_model=reverse_model)
            else:
                score_table(work / "train" / "model" / "model.pt", smt / "phrase-table.gz", table, cfg)
        elif lever in FORWARD_LEVERS and with_reverse:
            score_with_extras(model, smt / "phrase-table.gz", table, ScoreConfig(columns=("logprob", "unk"),
                              threads=threads), reverse_model=reverse_model)
        elif lever == "reverse":
            score_reverse(model, work / "build-smt" / "smt" / "phrase-table.gz", table_wp, table, cfg, out / "tmp")
        elif lever == "ensemble":
            score_ensemble(model, work / "build-smt" / "smt" / "phrase-table.gz", table_wp, table, cfg, out / "tmp",
                           column=-3 if main_has_reverse else -2)
        else:
            score_table(model, work / "build-smt" / "smt" / "phrase-table.gz", table,
                        ScoreConfig(columns=("logprob", "unk"), threads=threads))
    done = (work / "moses-ini-rnn-wp" / "stage-manifest.json").exists()
    mi = _manifest_params(work, "moses-ini-rnn-wp") if done else {"rnn_weight": 0.2, "wp_weight": -0.2}
    weights = (mi["rnn_weight"], mi["wp_weight"]) + ((mi.get("reverse_weight", mi["rnn_weight"]),) if with_reverse else ())
    ini = out / "moses.ini"
    if not ini.exists():
        rewrite_moses_ini(RewriteConfig(old_ini=smt / "moses.ini", table=table, out=ini, weights=weights,
                                        binarize=mi.get("binarize", False), threads=threads,
                                        moses_home=mi.get("moses_home") or None))
    ref = read_text_lines(work / "split" / "split" / "test.ref")
    base_runs, lever_runs, bleus, main_runs = [], [], [], []
    names = {f.name for f in dataclasses.fields(TuneConfig)}
    for seed in seeds:
        base = _seed_dir(work, backend, seed) / "evaluate" / "work" / "test.Baseline.detok"
        d = out / f"{backend}-seed{seed}"
        # each run tuned as the main run's baselines are (their every tuning setting), with this seed
        params = {k: v for k, v in tune_params.items()
                  if k in names and k not in ("ini", "dev_src", "dev_ref", "workdir", "out", "seed")}
        params["seed"] = seed
        tcfg = TuneConfig(**params, ini=ini, dev_src=work / "tokenize" / "dev.tok.src",
                          dev_ref=work / "tokenize" / "dev.tok.ref", workdir=d / "tune", out=d / "moses.tuned.ini")
        tcfg.moses_home = params.get("moses_home") or None
        if not (d / "moses.tuned.ini").exists():
            tune(tcfg)
        name = f"+RNN+WP+{lever}"
        ev = EvaluateConfig(systems=[SystemSpec(name, d / "moses.tuned.ini")], test_src=work / "tokenize" / "test.tok.src",
                            test_ref=work / "split" / "split" / "test.ref", workdir=d / "eval", backend=backend,
                            target_lang=_manifest_params(work, "tokenize")["target_lang"],
                            case=_manifest_params(work, "tokenize")["case"], threads=threads)
        df = evaluate(ev)
        if not base.exists():  # the main run has not finished this seed: compare later (rerun this command)
            print(f"seed {seed}: {name} test BLEU {float(df['test_bleu'].iloc[0]):.2f}; no baseline run yet")
            continue
        bleus.append(float(df["test_bleu"].iloc[0]))
        base_runs.append(read_text_lines(base))
        lever_runs.append(read_text_lines(d / "eval" / f"test.{_safe(name)}.detok"))
        rnn_wp = base.with_name(f"test.{_safe('+RNN+WP')}.detok")   # the main run's +RNN+WP, same seed
        main_runs.append(read_text_lines(rnn_wp) if rnn_wp.exists() else None)
    import pandas as pd

    tables = [_seed_dir(work, backend, s) / "evaluate" / "table1.csv" for s in seeds]
    found = [pd.read_csv(p) for p in tables if p.exists()]
    base_bleu = [float(t.loc[t["configuration"] == "Baseline", "test_bleu"].iloc[0]) for t in found]
    main_bleu = [float(t.loc[t["configuration"] == "+RNN+WP", "test_bleu"].iloc[0]) for t in found
                 if (t["configuration"] == "+RNN+WP").any()]
    # against the main run's +RNN+WP (the lever's own effect), when every seed has one
    against = bleus and None not in main_runs and len(main_bleu) == len(bleus)
    res = {"lever": lever, "backend": backend, "test_bleu": bleus, "baseline_test_bleu": base_bleu,
           "mean": statistics.mean(bleus) if bleus else None,
           "delta": statistics.mean(bleus) - statistics.mean(base_bleu) if bleus else None,
           "p": mean_delta_p(ref, base_runs, lever_runs, 1000) if bleus else None,
           "rnn_wp_test_bleu": main_bleu,
           "delta_vs_rnn_wp": statistics.mean(bleus) - statistics.mean(main_bleu) if against else None,
           "p_vs_rnn_wp": mean_delta_p(ref, main_runs, lever_runs, 1000) if against else None}
    (out / f"result-{backend}.json").write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))
    return res


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--lever", required=True,
                    choices=("reverse", "ensemble", "longer", "shortlist-pairs", "rare-unigram"))
    ap.add_argument("--train-budget", type=float, default=2700.0,
                    help="longer: the total training time, the main run's included (train.time_budget_s)")
    ap.add_argument("--stage", required=True, choices=("train", "eval"))
    ap.add_argument("--backend", default="embedded")
    ap.add_argument("--seeds", default="1,2,3")
    args = ap.parse_args(argv)
    work = Path(args.workdir).resolve()
    if args.stage == "train":
        print(json.dumps(train_models(work, args.lever, args.train_budget), indent=1, default=str))
    else:
        evaluate_lever(work, args.lever, args.backend, [int(s) for s in args.seeds.split(",")])


if __name__ == "__main__":
    main()

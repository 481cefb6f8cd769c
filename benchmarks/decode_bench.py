"""Benchmark the embedded decoder and MERT on the multi30k en-fr system that ``build_smt`` makes.

Measures, in one process:

* decoding speed (sentences/s) for 1-best and 100-best at Moses's default stack size (200) and at a
  smaller stack, with ratios against the 1-best/stack-200 baseline;
* tuning on val with ``tune_embedded``: wall time per iteration (decode and MERT separately);
* val BLEU (sacrebleu, tokenized text, ``tokenize="none"``) with the default weights and the tuned ones;
* with ``MOSES_HOME`` set (a real Moses build), the same-run baseline: ``moses -threads 1`` 1-best on the
  same sentences and ini at the same stack sizes, its sentences/s taken from the per-sentence
  "Translation took" times it logs (loading excluded, as for the embedded decoder), and the ratio
  embedded / Moses.

Usage::

    python benchmarks/decode_bench.py [--quick] [--system DIR] [--workdir DIR] [--threads N]

``--system DIR`` reuses a built system (``DIR/moses.ini``); otherwise ``build_smt`` builds one from
``../shared/data/multi30k-en-fr/train`` into ``WORKDIR/system``. ``--quick`` uses 2,000 training pairs,
40 val sentences and 2 tuning iterations.
"""
from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import time

import sacrebleu

HERE = os.path.dirname(os.path.abspath(__file__))

from phrase_rescore.moses_integration.embedded.decoder import Decoder, DecoderConfig  # noqa: E402
from phrase_rescore.moses_integration.embedded.tokenizer import TokenizeConfig, Tokenizer  # noqa: E402
from phrase_rescore.moses_integration.embedded.tune import EmbeddedTuneConfig, tune_embedded  # noqa: E402

DATA = os.path.join(os.path.dirname(HERE), "..", "shared", "data", "multi30k-en-fr")


def read_gz(path, limit=None):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    return lines if limit is None else lines[:limit]


def build_system(workdir, quick):
    from phrase_rescore.moses_integration.embedded.build import BuildConfig, build_smt

    src, tgt = os.path.join(DATA, "train.en.gz"), os.path.join(DATA, "train.fr.gz")
    if quick:
        os.makedirs(workdir, exist_ok=True)
        s, t = os.path.join(workdir, "train.2k.en"), os.path.join(workdir, "train.2k.fr")
        with open(s, "w") as f:
            f.write("\n".join(read_gz(src, 2000)) + "\n")
        with open(t, "w") as f:
            f.write("\n".join(read_gz(tgt, 2000)) + "\n")
        src, tgt = s, t
    t0 = time.time()
    res = build_smt(src, tgt, os.path.join(workdir, "system"), BuildConfig())
    return res.moses_ini, time.time() - t0


def moses_speed(ini, sents, stack, workdir):
    """Real ``moses -threads 1`` 1-best on ``sents`` (token lists): (sentences/s of decoding, wall seconds)."""
    import re
    import subprocess

    moses = os.path.join(os.environ["MOSES_HOME"], "bin", "moses")
    inp = "".join(" ".join(s) + "\n" for s in sents).encode("utf-8")
    t0 = time.time()
    p = subprocess.run([moses, "-f", ini, "-threads", "1", "-stack", str(stack), "-v", "1"], input=inp,
                       capture_output=True)
    wall = time.time() - t0
    if p.returncode != 0:
        raise SystemExit(f"moses failed ({p.returncode}): {p.stderr.decode(errors='replace')[-1000:]}")
    took = [float(x) for x in re.findall(rb"Translation took ([0-9.]+) seconds total", p.stderr)]
    if len(took) != len(sents):
        raise SystemExit(f"moses logged {len(took)} translation times for {len(sents)} sentences")
    with open(os.path.join(workdir, f"moses.stack{stack}.out"), "wb") as f:
        f.write(p.stdout)
    return len(sents) / max(sum(took), 1e-9), wall


def decode_speed(dec, sents, nbest, stack):
    dec.config.stack_size = stack
    dec.set_weights(dec.weights)
    t0 = time.time()
    out = [dec.translate(s, nbest) for s in sents]
    return len(sents) / (time.time() - t0), out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--system", help="directory with a built system's moses.ini (skips building)")
    ap.add_argument("--workdir", default="/tmp/decode_bench")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--speed-sentences", type=int, default=None)
    ap.add_argument("--tune-sentences", type=int, default=None)
    ap.add_argument("--tune-stack", type=int, default=50)
    ap.add_argument("--iterations", type=int, default=None)
    ap.add_argument("--restarts", type=int, default=20)
    ap.add_argument("--speed-only", action="store_true", help="measure decoding speed only (no tuning)")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    report = {"quick": args.quick}

    if args.system:
        ini, build_s = os.path.join(args.system, "moses.ini"), None
    else:
        ini, build_s = build_system(args.workdir, args.quick)
    report["system"] = ini
    report["build_seconds"] = build_s

    tok_src = Tokenizer(TokenizeConfig("en", "lower"))
    tok_tgt = Tokenizer(TokenizeConfig("fr", "lower"))
    n_val = 40 if args.quick else None
    val_src = [tok_src.tokenize(x) for x in read_gz(os.path.join(DATA, "val.en.gz"), n_val)]
    val_ref = [" ".join(tok_tgt.tokenize(x)) for x in read_gz(os.path.join(DATA, "val.fr.gz"), n_val)]
    n_tune = args.tune_sentences or len(val_src)
    n_speed = args.speed_sentences or (20 if args.quick else 100)
    src_path, ref_path = os.path.join(args.workdir, "val.tok.en"), os.path.join(args.workdir, "val.tok.fr")
    with open(src_path, "w") as f:
        f.write("".join(" ".join(s) + "\n" for s in val_src[:n_tune]))
    with open(ref_path, "w") as f:
        f.write("".join(r + "\n" for r in val_ref[:n_tune]))

    # --- decoding speed ------------------------------------------------------------------------
    t0 = time.time()
    dec = Decoder.from_ini(ini, DecoderConfig(), val_src, progress=False)
    report["load_seconds"] = round(time.time() - t0, 2)
    speed_set = val_src[:n_speed]
    speeds = {}
    for stack in (200, args.tune_stack):
        for nb in (0, 100):
            speeds[f"stack{stack}_{'1best' if nb == 0 else '100best'}"], _ = decode_speed(dec, speed_set, nb, stack)
    base = speeds["stack200_1best"]
    report["speed_sentences"] = len(speed_set)
    report["sent_per_s"] = {k: round(v, 3) for k, v in speeds.items()}
    report["ratio_vs_stack200_1best"] = {k: round(v / base, 3) for k, v in speeds.items()}
    if os.environ.get("MOSES_HOME"):
        report["moses_sent_per_s"], report["moses_wall_seconds"], report["embedded_vs_moses"] = {}, {}, {}
        for stack in (200, args.tune_stack):
            sps, wall = moses_speed(ini, speed_set, stack, args.workdir)
            key = f"stack{stack}_1best"
            report["moses_sent_per_s"][key] = round(sps, 3)
            report["moses_wall_seconds"][key] = round(wall, 2)
            report["embedded_vs_moses"][key] = round(speeds[key] / sps, 4)

    if args.speed_only:
        print(json.dumps(report, indent=2))
        return

    # --- BLEU before tuning (default weights) ----------------------------------------------------
    dec.config.stack_size = args.tune_stack
    dec.set_weights(dec.spec.weights)
    hyps = [r.best.text for r in dec.translate_all(val_src, 0, args.threads, desc="val (initial weights)")]
    report["val_bleu_initial"] = round(sacrebleu.corpus_bleu(hyps, [val_ref], tokenize="none").score, 2)

    # --- tuning ------------------------------------------------------------------------------------
    cfg = EmbeddedTuneConfig(ini, src_path, ref_path, os.path.join(args.workdir, "tune"), nbest=100,
                             max_iterations=args.iterations or (2 if args.quick else 25), seed=1234,
                             threads=args.threads, restarts=args.restarts,
                             decoder=DecoderConfig(stack_size=args.tune_stack))
    t0 = time.time()
    tuned_ini = tune_embedded(cfg)
    report["tune_seconds"] = round(time.time() - t0, 1)
    with open(os.path.join(cfg.workdir, "tune-log.csv")) as f:
        rows = list(csv.DictReader(f))
    report["tune_iterations"] = len(rows)
    report["tune_sentences"] = n_tune
    report["decode_seconds_per_iteration"] = round(sum(float(r["seconds_decode"]) for r in rows) / len(rows), 2)
    report["mert_seconds_per_iteration"] = round(sum(float(r["seconds_mert"]) for r in rows) / len(rows), 2)
    report["dev_bleu_per_iteration"] = [float(r["dev_bleu"]) for r in rows]
    report["pool_candidates_last"] = int(rows[-1]["candidates"])

    # --- BLEU after tuning -------------------------------------------------------------------------
    from phrase_rescore.moses_integration.embedded.features import load_decoder_spec

    dec.set_weights(load_decoder_spec(tuned_ini).weights)
    hyps = [r.best.text for r in dec.translate_all(val_src, 0, args.threads, desc="val (tuned weights)")]
    report["val_bleu_tuned"] = round(sacrebleu.corpus_bleu(hyps, [val_ref], tokenize="none").score, 2)
    report["tuned_ini"] = tuned_ini
    print(json.dumps(report, indent=2))
    with open(os.path.join(args.workdir, "report.json"), "w") as f:
        json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()

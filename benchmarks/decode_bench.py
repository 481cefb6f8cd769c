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

``--compare`` measures instead, each implementation in its own process from start to end (loading
counted and not), 1-best and 100-best (distinct) at stacks 200 and 50, with the ini's weights:

* the decoder as installed ("new");
* with ``--old-tree DIR`` (a checkout of an earlier commit, e.g. ``git worktree add /tmp/olddec REV``),
  the decoder of that checkout ("old"), imported through a ``phrase_rescore`` folder of links to it;
* with ``MOSES_HOME``, ``moses -threads 1`` on the same ini, stack and n-best size, and once with empty
  input (its loading alone). Its decoding seconds are the sum of its "Translation took" lines (wall).

The three run side by side (the machine is shared: the numbers to read are the ratios, and CPU seconds,
user + system of each process, are steadier than wall seconds under load). It reports sentences/s, the
share of 1-best translations equal to Moses's at the same stack (Moses's trailing space ignored), and
whether old and new wrote the same bytes (1-best and n-best).

Usage::

    python benchmarks/decode_bench.py [--quick] [--system DIR] [--workdir DIR] [--threads N]
    python benchmarks/decode_bench.py --compare --system DIR --input FILE [--old-tree DIR] [--sentences N]

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
    from phrase_rescore.moses_integration.configs import BuildConfig
    from phrase_rescore.moses_integration.embedded.build import build_smt

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


CONFIGS = [(200, 0), (200, 100), (50, 0), (50, 100)]


def _cpu_children():
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def worker(impl, ini, input_path, outdir):
    """One implementation, in this process: load once, then every (stack, n-best) of CONFIGS.

    Writes ``outdir/IMPL.json`` with load and per-configuration wall/CPU seconds, and the 1-best /
    n-best outputs as ``IMPL.stackS.nbestN.out`` / ``.nbest``.
    """
    import re
    import subprocess

    res = {"impl": impl, "configs": {}}
    with open(input_path, encoding="utf-8") as f:
        sents = [line.split() for line in f]
    res["sentences"] = len(sents)
    if impl == "moses":
        moses = os.path.join(os.environ["MOSES_HOME"], "bin", "moses")
        base = [moses, "-f", ini, "-threads", "1", "-v", "1"]
        c0, t0 = _cpu_children(), time.time()
        p = subprocess.run(base, input=b"", capture_output=True)
        if p.returncode != 0:
            raise SystemExit(f"moses failed ({p.returncode}): {p.stderr.decode(errors='replace')[-1000:]}")
        res["load_wall"], res["load_cpu"] = time.time() - t0, _cpu_children() - c0
        data = "".join(" ".join(s) + "\n" for s in sents).encode("utf-8")
        for stack, nb in CONFIGS:
            name = f"{impl}.stack{stack}.nbest{nb}"
            cmd = base + ["-stack", str(stack)]
            if nb:
                cmd += ["-n-best-list", os.path.join(outdir, name + ".nbest"), str(nb), "distinct"]
            c0, t0 = _cpu_children(), time.time()
            p = subprocess.run(cmd, input=data, capture_output=True)
            wall, cpu = time.time() - t0, _cpu_children() - c0
            if p.returncode != 0:
                raise SystemExit(f"moses failed ({p.returncode}): {p.stderr.decode(errors='replace')[-1000:]}")
            took = [float(x) for x in re.findall(rb"Translation took ([0-9.]+) seconds total", p.stderr)]
            with open(os.path.join(outdir, name + ".out"), "wb") as f:
                f.write(p.stdout)
            res["configs"][name] = {"wall": wall, "cpu": cpu, "decode_wall": sum(took)}
    else:
        from phrase_rescore.moses_integration.embedded import decoder as dm

        res["module"] = dm.__file__
        c0, t0 = time.process_time(), time.time()
        dec = dm.Decoder.from_ini(ini, dm.DecoderConfig(), sents, progress=False)
        res["load_wall"], res["load_cpu"] = time.time() - t0, time.process_time() - c0
        for stack, nb in CONFIGS:
            name = f"{impl}.stack{stack}.nbest{nb}"
            dec.config.stack_size = stack
            dec.set_weights(dec.weights)
            c0, t0 = time.process_time(), time.time()
            out = [dec.translate(s, nb) for s in sents]
            wall, cpu = time.time() - t0, time.process_time() - c0
            with open(os.path.join(outdir, name + ".out"), "w", encoding="utf-8") as f:
                f.writelines(r.best.text + "\n" for r in out)
            if nb:
                with open(os.path.join(outdir, name + ".nbest"), "w", encoding="utf-8") as f:
                    for i, r in enumerate(out):
                        f.writelines(line + "\n" for line in dec.nbest_lines(i, r.nbest))
            res["configs"][name] = {"decode_wall": wall, "decode_cpu": cpu, "wall": res["load_wall"] + wall,
                                    "cpu": res["load_cpu"] + cpu}
    with open(os.path.join(outdir, impl + ".json"), "w") as f:
        json.dump(res, f, indent=2)


def _old_package(tree, workdir):
    """A folder whose ``phrase_rescore`` package is ``tree``'s sources (pyproject's package-dir, as links)."""
    root = os.path.join(workdir, "oldpkg")
    pkg = os.path.join(root, "phrase_rescore")
    os.makedirs(pkg, exist_ok=True)
    with open(os.path.join(tree, "phrase_rescore", "__init__.py"), "rb") as f, \
            open(os.path.join(pkg, "__init__.py"), "wb") as g:
        g.write(f.read())
    for d in ("core", "moses_integration", "data", "pipeline", "plots", "app"):
        link = os.path.join(pkg, d)
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(os.path.abspath(os.path.join(tree, d)), link)
    return root


def compare(args):
    import subprocess
    import sys

    outdir = os.path.join(args.workdir, "compare")
    os.makedirs(outdir, exist_ok=True)
    ini = os.path.abspath(os.path.join(args.system, "moses.ini"))
    with open(args.input, encoding="utf-8") as f:
        lines = f.readlines()[:args.sentences]
    inp = os.path.join(outdir, "input.txt")
    with open(inp, "w", encoding="utf-8") as f:
        f.writelines(lines)
    impls = {"new": None}
    if args.old_tree:
        impls["old"] = _old_package(args.old_tree, args.workdir)
    if os.environ.get("MOSES_HOME"):
        impls["moses"] = None
    procs = []
    for impl, pythonpath in impls.items():
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PHRASE_RESCORE_QUIET="1")
        if pythonpath:
            env["PYTHONPATH"] = pythonpath
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", impl, "--system", args.system,
               "--input", inp, "--workdir", args.workdir]
        procs.append(subprocess.Popen(cmd, env=env, cwd=args.workdir))
    for p in procs:
        if p.wait() != 0:
            raise SystemExit(f"a worker failed: {p.args}")
    res = {}
    for impl in impls:
        with open(os.path.join(outdir, impl + ".json")) as f:
            res[impl] = json.load(f)
    n = len(lines)
    rows = []
    for stack, nb in CONFIGS:
        for impl in impls:
            r = res[impl]
            c = r["configs"][f"{impl}.stack{stack}.nbest{nb}"]
            dec_cpu = c.get("decode_cpu", c["cpu"] - r["load_cpu"])
            rows.append({"impl": impl, "stack": stack, "nbest": nb,
                         "sps_cpu_with_load": n / c["cpu"], "sps_wall_with_load": n / c["wall"],
                         "sps_cpu_no_load": n / max(dec_cpu, 1e-9), "sps_wall_no_load": n / c["decode_wall"]})
    report = {"sentences": n, "system": ini, "load": {k: {"wall": round(v["load_wall"], 2),
                                                        "cpu": round(v["load_cpu"], 2)} for k, v in res.items()},
              "rows": rows}

    def read(name):
        with open(os.path.join(outdir, name), encoding="utf-8") as f:
            return f.read()

    if "old" in impls:
        report["old_equals_new"] = {
            f"stack{s}.nbest{nb}.{ext}": read(f"old.stack{s}.nbest{nb}.{ext}") == read(f"new.stack{s}.nbest{nb}.{ext}")
            for s, nb in CONFIGS for ext in (("out", "nbest") if nb else ("out",))}
    if "moses" in impls:
        agree = {}
        for s, nb in CONFIGS:
            a = [x.rstrip(" ") for x in read(f"moses.stack{s}.nbest{nb}.out").splitlines()]
            b = read(f"new.stack{s}.nbest{nb}.out").splitlines()
            agree[f"stack{s}.nbest{nb}"] = sum(x == y for x, y in zip(a, b)) / n
        report["one_best_equal_to_moses"] = agree
    head = "| impl | stack | n-best | sent/s CPU, load counted | wall, load counted | CPU, load not counted | " \
           "wall, load not counted |"
    table = [head, "|" + "---|" * 7]
    for r in rows:
        table.append(f"| {r['impl']} | {r['stack']} | {r['nbest']} | {r['sps_cpu_with_load']:.2f} | "
                     f"{r['sps_wall_with_load']:.2f} | {r['sps_cpu_no_load']:.2f} | {r['sps_wall_no_load']:.2f} |")
    report["table"] = table
    print("\n".join(table))
    print(json.dumps({k: v for k, v in report.items() if k not in ("rows", "table")}, indent=2))
    with open(os.path.join(args.workdir, "compare.json"), "w") as f:
        json.dump(report, f, indent=2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--compare", action="store_true", help="moses vs old vs new, one process each (see above)")
    ap.add_argument("--old-tree", help="with --compare: a checkout whose decoder is the 'old' one")
    ap.add_argument("--input", help="with --compare: tokenized input, one sentence a line")
    ap.add_argument("--sentences", type=int, default=200, help="with --compare: the first N lines of --input")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
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
    if args.worker:
        return worker(args.worker, os.path.abspath(os.path.join(args.system, "moses.ini")), args.input,
                      os.path.join(args.workdir, "compare"))
    if args.compare:
        if not (args.system and args.input):
            raise SystemExit("--compare needs --system and --input")
        return compare(args)
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

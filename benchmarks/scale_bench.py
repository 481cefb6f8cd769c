"""Wall time, CPU time and peak memory of the stages on generated tables of 10^6, 10^7 (and 10^8) lines.

For each size: a table of the real shape (:mod:`gen_table`), then, each as a subprocess of its own,

* ``prepare`` of the whole table (and the peak disk use of its partitions, polled every second);
* ``train --preset small`` for a fixed number of steps (one validation, at the end);
* ``score`` of a fixed slice of the table (its first ``--score-lines`` lines) with that model;
* one tuning decode: the table filtered to a dev set of ``--dev-sentences`` sentences made of the table's
  own source phrases (:mod:`phrase_rescore.moses_integration.table_filter`), then the embedded decoder's
  100-best decode of the dev set with the filtered ini (a 4-score table, a 2-gram LM of no words).

A stage's peak RSS is ``ru_maxrss`` of ``RUSAGE_CHILDREN`` in a small wrapper process that runs only
that stage; its CPU seconds are the user + system time of the same. Run it as

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/scale_bench.py --lines 1e6 1e7 --out benchmarks/out/scale

and it prints one Markdown table (and writes ``OUT/results.json``; ``--tables`` takes tables generated before). ``--keep`` keeps the generated files
(about 165 bytes a line of table text, plus the pairs folder), which are deleted otherwise.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CLI = [str(Path(sys.executable).parent / "phrase-rescore")]

WRAPPER = """
import json, resource, subprocess, sys
argv, out = json.loads(sys.argv[1]), sys.argv[2]
r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
u = resource.getrusage(resource.RUSAGE_CHILDREN)
json.dump({"rc": r.returncode, "cpu_s": u.ru_utime + u.ru_stime, "peak_rss_mb": u.ru_maxrss / 1024,
           "stderr_tail": r.stderr.decode("utf-8", "replace")[-2000:]}, open(out, "w"))
"""

TUNE_DECODE = """
import json, sys, time
from phrase_rescore.core.reading import read_sentences
from phrase_rescore.moses_integration.embedded.decoder import Decoder
from phrase_rescore.moses_integration.table_filter import filtered_ini
ini, dev, folder = sys.argv[1:4]
t0 = time.monotonic()
f = filtered_ini(ini, [dev], folder)
t1 = time.monotonic()
src = read_sentences(dev)
dec = Decoder.from_ini(f.ini, sentences=src, progress=False)
res = dec.translate_all(src, 100)
print(json.dumps({"filter_s": t1 - t0, "decode_s": time.monotonic() - t1, "kept": sum(t["kept"] for t in f.tables.values()),
                  "translations": len(res)}))
"""

ARPA = ("\\data\\\nngram 1=3\nngram 2=1\n\n\\1-grams:\n-1.0\t<unk>\n-99\t<s>\t0\n-1.0\t</s>\n\n\\2-grams:\n"
        "-0.5\t<s> </s>\n\n\\end\\\n")    # kenlm needs a bigram

INI = """[input-factors]
0

[mapping]
0 T 0

[distortion-limit]
6

[feature]
UnknownWordPenalty
WordPenalty
PhrasePenalty
PhraseDictionaryMemory name=TranslationModel0 num-features=4 path={pt} input-factor=0 output-factor=0
Distortion
KENLM name=LM0 factor=0 path={lm} order=2

[weight]
UnknownWordPenalty0= 1
WordPenalty0= -1
PhrasePenalty0= 0.2
TranslationModel0= 0.2 0.2 0.2 0.2
Distortion0= 0.3
LM0= 0.5
"""


def measure(argv: list[str], work: Path, env: dict) -> dict:
    """Run ``argv`` under the wrapper: wall seconds, CPU seconds and peak RSS of it alone."""
    out = work / "rusage.json"
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-c", WRAPPER, json.dumps(argv), str(out)], check=True, env=env)
    res = json.loads(out.read_text())
    res["wall_s"] = time.monotonic() - t0
    if res["rc"] != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({res['rc']}):\n{res['stderr_tail']}")
    return res


def _du(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


def prepare_with_disk(table: Path, pairs: Path, work: Path, env: dict) -> dict:
    """``prepare``, polling the size of its temporary folder (the partitions, then the parts)."""
    peak, stop = [0], threading.Event()

    def poll():
        while not stop.wait(1.0):
            if pairs.exists():
                peak[0] = max(peak[0], sum(_du(d) for d in pairs.glob(".prepare-*.tmp")))

    t = threading.Thread(target=poll, daemon=True)
    t.start()
    try:
        res = measure(CLI + ["prepare", str(table), "--out", str(pairs)], work, env)
    finally:
        stop.set()
        t.join()
    res["temp_disk_mb"] = peak[0] / 2**20
    res["pairs_dir_mb"] = _du(pairs) / 2**20
    return res


def dev_set(table: Path, out: Path, n: int, seed: int = 1) -> None:
    """``n`` dev sentences of 2 to 4 source phrases each, drawn from the table's first 10^5 lines."""
    sources = []
    with open(table, "rb") as f:
        for i, line in enumerate(f):
            if i >= 100_000:
                break
            sources.append(line.split(b" ||| ", 1)[0].decode("utf-8"))
    rng = random.Random(seed)
    with open(out, "w", encoding="utf-8") as f:
        for _ in range(n):
            f.write(" ".join(rng.choice(sources) for _ in range(rng.randint(2, 4))) + "\n")


def bench_size(n_lines: int, work: Path, args, env: dict, table: Path | None = None) -> dict:
    t0 = time.monotonic()
    if table is None:       # generated in a process of its own: gen_table holds every line in memory
        table = work / "table.txt"
        subprocess.run([sys.executable, str(HERE / "gen_table.py"), str(table), "--lines", str(n_lines)], check=True,
                       env=env, stdout=subprocess.DEVNULL)
    row = {"lines": n_lines, "table_mb": table.stat().st_size / 2**20, "generate_s": time.monotonic() - t0}
    pairs, model = work / "pairs", work / "model"
    row["prepare"] = prepare_with_disk(table, pairs, work, env)
    row["train"] = measure(CLI + ["train", str(pairs), "--out", str(model), "--preset", "small", "--device", "cpu",
                                  "--max-steps", str(args.steps), "--valid-every", str(args.steps),
                                  "--valid-max-pairs", str(args.valid_pairs)], work, env)
    head = work / "slice.txt"
    with open(table, "rb") as src, open(head, "wb") as dst:
        for i, line in enumerate(src):
            if i >= args.score_lines:
                break
            dst.write(line)
    row["score"] = measure(CLI + ["score", str(model / "model.pt"), str(head), "--out", str(work / "scored.txt")],
                           work, env)
    (work / "lm.arpa").write_text(ARPA)
    (work / "moses.ini").write_text(INI.format(pt=table, lm=work / "lm.arpa"))
    dev_set(table, work / "dev.txt", args.dev_sentences)
    row["tune_decode"] = measure([sys.executable, "-c", TUNE_DECODE, str(work / "moses.ini"), str(work / "dev.txt"),
                                  str(work / "filtered")], work, env)
    return row


def markdown(rows: list[dict]) -> str:
    stages = ("prepare", "train", "score", "tune_decode")
    out = ["| lines | stage | wall s | CPU s | peak RSS MB |", "|---:|---|---:|---:|---:|"]
    for r in rows:
        for s in stages:
            m = r[s]
            out.append(f"| {r['lines']:.0e} | {s} | {m['wall_s']:.1f} | {m['cpu_s']:.1f} | {m['peak_rss_mb']:.0f} |")
    for r in rows:
        p = r["prepare"]
        out.append(f"\n{r['lines']:.0e} lines: table {r['table_mb']:.0f} MB, prepare's temporary folder peaked at "
                   f"{p['temp_disk_mb']:.0f} MB, the pairs folder is {p['pairs_dir_mb']:.0f} MB")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", nargs="+", type=float, default=[1e6, 1e7], help="table sizes (1e8 on request)")
    ap.add_argument("--out", type=Path, default=HERE / "out" / "scale")
    ap.add_argument("--steps", type=int, default=50, help="training steps")
    ap.add_argument("--valid-pairs", type=int, default=2000, help="validation pairs of the one validation")
    ap.add_argument("--score-lines", type=int, default=20_000)
    ap.add_argument("--dev-sentences", type=int, default=20)
    ap.add_argument("--keep", action="store_true", help="keep the generated tables and folders")
    ap.add_argument("--tables", nargs="+", type=Path, help="tables already generated, one per --lines size")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    rows = []
    if args.tables and len(args.tables) != len(args.lines):
        ap.error("give one --tables file per --lines size")
    for i, n in enumerate(args.lines):
        work = Path(tempfile.mkdtemp(prefix=f"scale-{int(n)}-", dir=args.out))
        try:
            rows.append(bench_size(int(n), work, args, env, args.tables[i] if args.tables else None))
        finally:
            if not args.keep:
                shutil.rmtree(work, ignore_errors=True)
        (args.out / "results.json").write_text(json.dumps(rows, indent=1) + "\n")
        print(markdown(rows[-1:]), flush=True)
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

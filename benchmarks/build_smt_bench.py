"""Benchmark ``build_smt``: time per phase, peak RSS and the phrase table's shape.

Corpora:
- the real multi30k en-fr training set (29k pairs, ``../shared/data/multi30k-en-fr``) when present;
- 100k generated pairs from the project's demo-corpus generator (``data/demo_corpus.py``); when it
  cannot produce them, 100k pairs sampled with replacement from multi30k with a fixed seed.

Each build runs in its own subprocess so that its peak RSS (the Python process, and separately the
eflomal binary it starts) is its own. In the parent process, as a baseline, the vectorized phrase
scorer is timed against a plain per-phrase-dictionary scorer on the same extracted counts (and their
outputs compared line by line), and the 100k build's time is compared with linear scaling from 29k.

With ``MOSES_HOME`` set (a real Moses build with mgiza in ``tools/``), the multi30k build (the generated one
when multi30k is absent) is also compared with Moses's own ``train-model.perl`` steps 1-6 (mgiza in both
directions, grow-diag-final-and, lexical tables, extract, score, consolidate; one core) on build-smt's
cleaned corpus: wall time against build-smt's matching phases (align to score) and its whole build.

    python benchmarks/build_smt_bench.py            # both corpora (minutes; run it niced, in the background)
    python benchmarks/build_smt_bench.py --quick    # 3k multi30k pairs (or 3k generated) only
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MULTI30K = ROOT.parent / "shared" / "data" / "multi30k-en-fr"

CHILD = r"""
import json, resource, sys
from phrase_rescore.moses_integration.configs import BuildConfig
from phrase_rescore.moses_integration.embedded.build import build_smt
from phrase_rescore.core import progress
progress.set_quiet(True)
res = build_smt(sys.argv[1], sys.argv[2], sys.argv[3], BuildConfig(source_lang="en", target_lang="fr"))
print(json.dumps({"timings": res.timings, "stats": res.stats,
                  "rss_self_mb": res.stats["peak_rss"]["self_mb"],
                  "rss_children_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def _read_gz(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def _write(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def corpus_multi30k(work: Path, n: int | None) -> tuple[Path, Path] | None:
    if not (MULTI30K / "train.en.gz").exists():
        return None
    en, fr = _read_gz(MULTI30K / "train.en.gz"), _read_gz(MULTI30K / "train.fr.gz")
    if n is not None:
        en, fr = en[:n], fr[:n]
    _write(work / "m30k.en", en)
    _write(work / "m30k.fr", fr)
    return work / "m30k.en", work / "m30k.fr"


def corpus_generated(work: Path, n: int) -> tuple[tuple[Path, Path], str]:
    from phrase_rescore.data.demo_corpus import generate

    try:
        paths = generate(work / "demo", n_train=n, n_dev=0, n_test=0, seed=1)
        return (paths["train.en"], paths["train.fr"]), "data/demo_corpus.py (seed 1)"
    except Exception as e:
        first_error = e
    try:  # the generator's noise step has failed on large corpora: try it without noise
        paths = generate(work / "demo0", n_train=n, n_dev=0, n_test=0, seed=1, noise_rate=0.0)
        return (paths["train.en"], paths["train.fr"]), f"data/demo_corpus.py (seed 1, noise 0: with noise: {first_error!r})"
    except Exception as e:  # the generator may not reach n distinct sentences: sample multi30k instead
        if not (MULTI30K / "train.en.gz").exists():
            raise
        rng = random.Random(12345)
        en, fr = _read_gz(MULTI30K / "train.en.gz"), _read_gz(MULTI30K / "train.fr.gz")
        idx = [rng.randrange(len(en)) for _ in range(n)]
        _write(work / "gen.en", [en[i] for i in idx])
        _write(work / "gen.fr", [fr[i] for i in idx])
        return (work / "gen.en", work / "gen.fr"), f"multi30k sampled with replacement, seed 12345 ({e})"


def run_build(src: Path, tgt: Path, out: Path) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, str(src), str(tgt), str(out)], capture_output=True,
                          text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    res["wall_s"] = time.perf_counter() - t0
    return res


def naive_score(out_dir: Path) -> tuple[float, float, bool]:
    """Baseline: per-phrase dictionaries on the same counts; returns (vectorized s, naive s, same output)."""
    from phrase_rescore.core import progress
    from phrase_rescore.moses_integration.embedded.extract import count_phrase_pairs
    from phrase_rescore.moses_integration.embedded.phrase_scoring import (
        _alignment_sort_key,
        lexical_tables,
        score_phrase_table,
    )

    progress.set_quiet(True)
    src = [s.split() for s in (out_dir / "corpus" / "clean.src").read_text(encoding="utf-8").splitlines()]
    tgt = [s.split() for s in (out_dir / "corpus" / "clean.tgt").read_text(encoding="utf-8").splitlines()]
    al = [[tuple(map(int, p.split("-"))) for p in line.split()] for line in
          (out_dir / "model" / "aligned.grow-diag-final-and").read_text().splitlines()]
    lex = lexical_tables(src, tgt, al)
    counts = count_phrase_pairs(src, tgt, al)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        score_phrase_table(counts, lex, Path(tmp) / "pt.gz")
        t_vec = time.perf_counter() - t0
        fast = gzip.open(Path(tmp) / "pt.gz", "rt", encoding="utf-8").read().splitlines()

    t0 = time.perf_counter()
    w_ts = {(s, t): p for s, t, p in _pairs(lex.t_given_s)}
    w_st = {(t, s): p for t, s, p in _pairs(lex.s_given_t)}
    aligns: dict = defaultdict(dict)
    for s, t, a, c in zip(counts["src"], counts["tgt"], counts["align"], counts["count"]):
        aligns[(s, t)][a] = aligns[(s, t)].get(a, 0) + int(c)
    c_s: dict = defaultdict(int)
    c_t: dict = defaultdict(int)
    rows = []
    for (s, t), al_counts in aligns.items():
        n = sum(al_counts.values())
        best = max(al_counts, key=lambda a: (al_counts[a], _alignment_sort_key(a)))
        best_inv = max(al_counts, key=lambda a: (al_counts[a], _alignment_sort_key(a, inverse=True)))
        c_s[s] += n
        c_t[t] += n
        rows.append((s, t, best, best_inv, n))
    lines = []
    for s, t, a, a_inv, n in rows:
        sw, tw = s.split(), t.split()
        pts = [tuple(map(int, p.split("-"))) for p in a.split()]
        pts_inv = [tuple(map(int, p.split("-"))) for p in a_inv.split()]
        lex_ts = 1.0
        for j, w in enumerate(tw):
            al_s = [i for i, jj in pts if jj == j]
            lex_ts *= (sum(w_ts.get((sw[i], w), 1.0) for i in al_s) / len(al_s)) if al_s else w_ts.get(("NULL", w), 1.0)
        lex_st = 1.0
        for i, w in enumerate(sw):
            al_t = [j for ii, j in pts_inv if ii == i]
            lex_st *= (sum(w_st.get((tw[j], w), 1.0) for j in al_t) / len(al_t)) if al_t else w_st.get(("NULL", w), 1.0)
        lex_ts, lex_st = float(np.float32(lex_ts)), float(np.float32(lex_st))   # score prints them as float
        pst = float(np.float32(n) / np.float32(c_t[t]))
        pts_ = float(np.float32(n) / np.float32(c_s[s]))
        lines.append((f"{s} ||| {t} |||".encode(), f"{s} ||| {t} ||| {pst:.6g} {lex_st:.6g} {pts_:.6g} {lex_ts:.6g} "
                      f"||| {a} ||| {c_t[t]:.6g} {c_s[s]:.6g} {n:.6g} ||| |||"))
    lines.sort(key=lambda x: x[0])
    t_naive = time.perf_counter() - t0
    return t_vec, t_naive, [ln for _, ln in lines] == fast


def moses_train_model(out_dir: Path, work: Path) -> float:
    """Wall seconds of train-model.perl steps 1-6 (mgiza, one core) on build-smt's cleaned corpus in ``out_dir``."""
    home = Path(os.environ["MOSES_HOME"])
    for tool in ("mgiza", "mkcls", "snt2cooc"):   # train-model.perl exits 0 even when mgiza cannot start
        ldd = subprocess.run(["ldd", str(home / "tools" / tool)], capture_output=True, text=True).stdout
        missing = [ln.split()[0] for ln in ldd.splitlines() if "not found" in ln]
        if missing:
            raise RuntimeError(f"{home / 'tools' / tool} cannot start here: missing {', '.join(missing)}")
    root = work / "train-model"
    (root / "corpus").mkdir(parents=True, exist_ok=True)
    for side, lang in (("src", "en"), ("tgt", "fr")):
        (root / "corpus" / f"c.{lang}").write_bytes((out_dir / "corpus" / f"clean.{side}").read_bytes())
    argv = ["perl", str(home / "scripts" / "training" / "train-model.perl"), "--first-step", "1", "--last-step", "6",
            "--root-dir", str(root), "--corpus", str(root / "corpus" / "c"), "--f", "en", "--e", "fr",
            "--alignment", "grow-diag-final-and", "--max-phrase-length", "7", "--external-bin-dir",
            str(home / "tools"), "-mgiza", "-mgiza-cpus", "1", "-cores", "1"]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=root,
                          env={**os.environ, "LC_ALL": "C"})
    wall = time.perf_counter() - t0
    pt = root / "model" / "phrase-table.gz"
    if proc.returncode != 0 or not pt.is_file() or not gzip.open(pt).read(1):
        raise RuntimeError(f"train-model.perl failed ({proc.returncode}): {proc.stderr[-3000:]}")
    return wall


def _pairs(table):
    n_out = len(table.out_vocab)
    for k, p in zip(table.keys.tolist(), table.probs.tolist()):
        yield table.given_vocab[k // n_out], table.out_vocab[k % n_out], p


def report(name: str, pairs: int, res: dict) -> None:
    pt, lm = res["stats"]["phrase_table"], res["stats"]["lm"]
    print(f"\n## {name}: {pairs} input pairs, {res['stats']['clean']['kept']} kept")
    print("phase times (s): " + ", ".join(f"{k} {v:.1f}" for k, v in res["timings"].items())
          + f"; total {sum(res['timings'].values()):.1f} (wall incl. start-up {res['wall_s']:.1f})")
    print(f"peak RSS: python {res['rss_self_mb']:.0f} MB, eflomal (child) {res['rss_children_mb']:.0f} MB; "
          "python peak so far after each phase (MB): "
          + ", ".join(f"{k} {v:.0f}" for k, v in res["stats"].get("peak_rss_after_phase_mb", {}).items()))
    print(f"phrase table: {pt['lines']} lines, {pt['distinct_sources']} distinct sources, "
          f"{pt['mean_targets_per_source']:.2f} targets/source, mean lengths src {pt['mean_source_length']:.2f} "
          f"tgt {pt['mean_target_length']:.2f}; extracted instances {res['stats']['extracted_instances']}")
    print(f"LM: order {lm['order']}, n-grams {lm['ngrams']}, fallback orders {lm['fallback_orders']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3k pairs only")
    ap.add_argument("--work", help="working directory (default: a temporary one)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="build_smt_bench.") as tmp:
        work = Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        results = {}
        m = corpus_multi30k(work, 3000 if args.quick else None)
        if m is not None:
            n = 3000 if args.quick else 29000
            results["multi30k"] = (n, run_build(*m, work / "out-m30k"))
            report("multi30k en-fr", n, results["multi30k"][1])
        else:
            print("multi30k not found: skipped")
        n_gen = 3000 if args.quick else 100_000
        (g_src, g_tgt), how = corpus_generated(work, n_gen)
        results["generated"] = (n_gen, run_build(g_src, g_tgt, work / "out-gen"))
        report(f"generated ({how})", n_gen, results["generated"][1])
        if os.environ.get("MOSES_HOME"):
            key = "multi30k" if "multi30k" in results else "generated"
            n, r = results[key]
            t_moses = moses_train_model(work / ("out-m30k" if key == "multi30k" else "out-gen"), work)
            phases = sum(r["timings"].get(k, 0.0) for k in ("align", "symmetrize", "lexical", "extract", "score"))
            print(f"\nMoses baseline ({key}, {n} pairs): train-model.perl steps 1-6 with mgiza {t_moses:.1f}s vs "
                  f"build-smt align..score {phases:.1f}s -> {t_moses / phases:.2f}x; whole build-smt "
                  f"{r['wall_s']:.1f}s -> {t_moses / r['wall_s']:.2f}x")
        if "multi30k" in results:  # last: the baseline grows this process, and children inherit ru_maxrss
            t_vec, t_naive, same = naive_score(work / "out-m30k")
            print(f"\nbaseline (same process, same counts, multi30k): vectorized scoring {t_vec:.1f}s vs "
                  f"per-phrase dicts {t_naive:.1f}s -> {t_naive / t_vec:.2f}x; identical output: {same}")
            (n1, r1), (n2, r2) = results["multi30k"], results["generated"]
            t1, t2 = sum(r1["timings"].values()), sum(r2["timings"].values())
            print(f"\nscaling: {n2 / n1:.2f}x the pairs took {t2 / t1:.2f}x the time (different corpora)")


if __name__ == "__main__":
    main()

"""Speed of the embedded MERT optimiser (``moses_integration/embedded/mert.py``) against the implementation
it replaced (``tests/_mert_reference.py``), on the same pools in one process, with the same results checked.

Each pool is optimized as ``tune`` does it (20 random restarts, 3 random directions per pass, the tuning
run's seed) by both implementations; the weights, the score and every start's score must be identical.
CPU seconds (``time.process_time``) are reported, so that other jobs on the machine inflate both sides
alike. Pools:

* by default a synthetic pool shaped like the demo's (``demo_like_pool``: 500 sentences, 3 iterations of
  50-best lists, about 75,000 candidates); ``--quick``: 100 sentences;
* ``--tune-dir DIR``: a tuning run's work folder (``runs/demo/tune-rnn/work``): its pool after each
  iteration, rebuilt from ``run{i}.candidates.npz``, started from the weights that iteration decoded with
  and seeded as it was (``--iterations 5`` for the last only).

Usage::

    python benchmarks/mert_bench.py
    python benchmarks/mert_bench.py --tune-dir runs/demo/tune-rnn/work --iterations 1 5
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import _mert_reference as reference  # noqa: E402

from phrase_rescore.moses_integration.embedded.mert import NBestPool, optimize  # noqa: E402


def tune_dir_pools(workdir: str, iterations):
    """(name, pool, start weights, tuned mask, seed) after each finished iteration of a tuning run."""
    with open(os.path.join(workdir, "tune-state.json"), encoding="utf-8") as f:
        state = json.load(f)
    pool = None
    for it, rec in enumerate(state["iterations"], start=1):
        with np.load(os.path.join(workdir, rec["candidates"])) as z:
            sent, feats, stats = z["sent"], z["features"], z["stats"]
        if pool is None:
            n = sum(1 for _ in open(os.path.join(workdir, rec["files"][0]), encoding="utf-8"))
            pool = NBestPool(n, feats.shape[1])
        for i, f, s in zip(sent.tolist(), feats, stats):
            pool.add(i, f, s)
        if iterations and it not in iterations:
            continue
        tuned = np.ones(pool.dim, dtype=bool)
        tuned[-1] = False          # UnknownWordPenalty, last in the embedded decoder's order, is untuneable
        yield f"{os.path.basename(os.path.dirname(os.path.abspath(workdir)))} iteration {it}", pool, \
            np.asarray(rec["weights"], dtype=np.float64), tuned, state["inputs"]["seed"] + it


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tune-dir", action="append", default=[], help="a tuning run's work folder (repeatable)")
    ap.add_argument("--iterations", type=int, nargs="*", default=[], help="only these iterations of --tune-dir")
    ap.add_argument("--quick", action="store_true", help="a 100-sentence synthetic pool")
    ap.add_argument("--restarts", type=int, default=20)
    ap.add_argument("--random-directions", type=int, default=3)
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.tune_dir:
        # one at a time: a pool grows in place from one iteration to the next
        pools = itertools.chain.from_iterable(tune_dir_pools(d, set(args.iterations)) for d in args.tune_dir)
    else:
        pool, init = reference.demo_like_pool(1, sentences=100 if args.quick else 500)
        pools = [("synthetic demo-like pool", pool, init, np.arange(10) < 9, 2)]
    total_old = total_new = 0.0
    count = 0
    print("| pool | candidates | reference CPU s | new CPU s | ratio | same result |")
    print("|---|---:|---:|---:|---:|---|")
    for name, pool, init, tuned, seed in pools:
        kw = dict(restarts=args.restarts, random_directions=args.random_directions, seed=seed)
        t0 = time.process_time()
        new = optimize(pool, init, tuned, **kw)
        t1 = time.process_time()
        old = reference.optimize(pool, init, tuned, **kw)
        t2 = time.process_time()
        same = (np.array_equal(new.weights, old.weights) and new.score == old.score
                and new.start_scores == old.start_scores)
        count += 1
        total_old += t2 - t1
        total_new += t1 - t0
        print(f"| {name} | {pool.num_candidates()} | {t2 - t1:.2f} | {t1 - t0:.2f} | {(t2 - t1) / (t1 - t0):.2f} "
              f"| {'yes' if same else 'NO'} |", flush=True)
        if not same:
            print(f"different results: {new.weights.tolist()} against {old.weights.tolist()}", file=sys.stderr)
            return 1
    if count > 1:
        print(f"| all | | {total_old:.2f} | {total_new:.2f} | {total_old / total_new:.2f} | yes |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""n-best list throughput: parsing and adding a feature, against a bare split-the-line loop in the same run.

A synthetic n-best list in Moses's exact layout (14 dense features in 6 named groups, as a phrase-based
system with a 4-score table and lexicalized reordering prints) is written once; then, in one process:

(a) baseline: read lines and ``split("|||")`` only (the least any reader must do);
(b) ``read_nbest``: typed entries (id, hypothesis, named feature values, total), ids checked;
(c) ``read_nbest_groups``: the same grouped by sentence;
(d) ``add_feature_to_nbest``: read, append ``RNN0= v`` to every hypothesis, write atomically (plain, then gzip
    level 6, where zlib dominates).

Reported as lines/s and as ratios to (a). ``--quick`` uses 20k lines instead of 200k.
"""
from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from pathlib import Path

from phrase_rescore.moses_integration.nbest import add_feature_to_nbest, read_nbest, read_nbest_groups

WORDS = [f"w{i}" for i in range(5000)]


def make_nbest(path: Path, n_sent: int, per_sent: int, seed: int = 1) -> int:
    rng = random.Random(seed)
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for s in range(n_sent):
            length = rng.randint(5, 40)
            for _ in range(per_sent):
                hyp = " ".join(rng.choice(WORDS) for _ in range(length))
                lr = " ".join(f"{-rng.random() * 3:.6g}" for _ in range(6))
                tm = " ".join(f"{-rng.random() * 10:.6g}" for _ in range(4))
                f.write(f"{s} ||| {hyp}  ||| LexicalReordering0= {lr} Distortion0= {-rng.randint(0, 12)} "
                        f"LM0= {-rng.random() * 80:.6g} WordPenalty0= {-length} PhrasePenalty0= {rng.randint(1, length)} "
                        f"TranslationModel0= {tm} ||| {-rng.random() * 30:.6g}\n")
                n += 1
    return n


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="20k lines instead of 200k")
    args = ap.parse_args()
    n_sent, per = (200, 100) if args.quick else (2000, 100)
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "run.nbest"
        n = make_nbest(src, n_sent, per)
        mb = os.path.getsize(src) / 1e6

        def baseline():
            with open(src, encoding="utf-8") as f:
                for line in f:
                    line.split("|||")

        def typed():
            for _ in read_nbest(src):
                pass

        def grouped():
            for _ in read_nbest_groups(src):
                pass

        def add():
            add_feature_to_nbest(src, Path(d) / "out.nbest", "RNN0", (-(i % 97) / 7.0 for i in range(n)))

        def add_gz():
            add_feature_to_nbest(src, Path(d) / "out.nbest.gz", "RNN0", (-(i % 97) / 7.0 for i in range(n)))

        baseline()  # warm the page cache
        t = {name: timed(fn) for name, fn in (("split", baseline), ("read_nbest", typed),
                                              ("read_nbest_groups", grouped), ("add_feature", add),
                                              ("add_feature(gz)", add_gz))}
    print(f"n-best list: {n} lines, {mb:.1f} MB, {n_sent} sentences x {per}")
    for name, secs in t.items():
        print(f"  {name:18s} {n / secs:12,.0f} lines/s   {secs:7.2f} s   x{t['split'] / secs:6.3f} of split-only")


if __name__ == "__main__":
    main()

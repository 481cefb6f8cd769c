"""Phrase-table read+write speed against a plain gzip copy loop, and peak memory.

Generates a table with a real Moses table's shape (benchmarks/gen_table.py), then in one process times:

* baseline: ``for line in gzip.open(src): out.write(line)`` into a gzip file (same compression level);
* this project: ``read_phrase_table`` (parse + validate every line into a typed record) and
  ``PhraseTableWriter`` writing every line back (byte-identical output, checked).

Peak RSS is measured in a child process per table size (1M and, with --sizes, others), so that the
numbers show whether memory grows with the table. Usage::

    python benchmarks/table_io_bench.py              # 1M lines
    python benchmarks/table_io_bench.py --quick      # 100k lines
    python benchmarks/table_io_bench.py --sizes 250000 1000000
"""
from __future__ import annotations

import argparse
import gzip
import os
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from gen_table import generate_table  # noqa: E402

from phrase_rescore.moses_integration.phrase_table import PhraseTableWriter, read_phrase_table  # noqa: E402

LEVEL = 6


def plain_copy(src: str, dst: str) -> int:
    n = 0
    with gzip.open(src, "rb") as f, gzip.open(dst, "wb", compresslevel=LEVEL) as out:
        for line in f:
            out.write(line)
            n += 1
    return n


def project_copy(src: str, dst: str) -> int:
    reader = read_phrase_table(src)
    with PhraseTableWriter(dst, compresslevel=LEVEL) as w:
        for entry in reader:
            w.write(entry)
    return reader.stats.lines


def _peak_rss_mb() -> int:
    """VmHWM of this process (ru_maxrss would include the parent's peak: Linux keeps it across exec)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def _child(src: str, dst: str) -> None:
    project_copy(src, dst)
    print(_peak_rss_mb())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100k lines instead of 1M")
    ap.add_argument("--sizes", type=int, nargs="*", help="table sizes (lines) for the memory check")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(*args.child)
        return 0
    n = 100_000 if args.quick else 1_000_000
    sizes = args.sizes or [n]
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "table.gz")
        generate_table(src, n, seed=1)
        times = {"plain gzip copy loop": [], "read_phrase_table + PhraseTableWriter": []}
        for _ in range(args.repeat):  # interleaved, best of N: the machine is shared and noisy
            for name, fn in (("plain gzip copy loop", plain_copy), ("read_phrase_table + PhraseTableWriter", project_copy)):
                t0 = time.perf_counter()
                lines = fn(src, os.path.join(tmp, "out.gz"))
                times[name].append(time.perf_counter() - t0)
                assert lines == n, (name, lines)
        with gzip.open(src, "rb") as a, gzip.open(os.path.join(tmp, "out.gz"), "rb") as b:
            assert a.read() == b.read(), "round trip is not byte-identical"
        base = min(times["plain gzip copy loop"])
        print(f"table: {n} lines, gzip level {LEVEL}, best of {args.repeat}")
        for name, ts in times.items():
            t = min(ts)
            print(f"  {name:40s} {n / t:12,.0f} lines/s  ({base / t:.2f}x the plain loop)")
        print("peak RSS of a read+write run, by table size:")
        for size in sizes:
            path = src if size == n else os.path.join(tmp, f"t{size}.gz")
            if size != n:
                generate_table(path, size, seed=1)
            out = subprocess.run([sys.executable, __file__, "--child", path, os.path.join(tmp, "o.gz")],
                                 check=True, capture_output=True, text=True).stdout.split()[-1]
            print(f"  {size:>10,} lines: {out} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())

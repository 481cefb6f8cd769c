"""Sharded `score` under torchrun on this machine's CPUs: 1 rank against N ranks in the same run, and the
I/O rates of the split and the join.

1. **Scaling.** One generated table (:mod:`gen_table`), one untrained model per preset (speed does not
   depend on training); ``phrase-rescore score`` as one process pinned to one core (its worker, reader
   and writer threads share it), then under ``torchrun --nproc-per-node N`` on all cores (each rank
   cores / N workers: one core each with N = cores). pairs/s
   as the command reports it: the one process's from its scoring loop, the job's from the ranks' pairs
   over rank 0's time from after the model is loaded to OUT joined (the split and the join included).
   Start-up (imports, the model) is not counted in either. Also the pairs per CPU-second (the
   processes' CPU time over the same span): on a machine that others load, the wall-clock ratio says
   little, while the ratio of pairs per CPU-second is the parallel efficiency (1.0: no work added by
   sharding), and N x efficiency the speed-up on N otherwise idle cores. The two outputs must be the
   same bytes.
2. **Split and join rates** on a table of ``--io-lines`` lines (at least 1M), plain and gzip: the split
   pass (:func:`~phrase_rescore.pipeline.scoring.sharded.chunk_offsets`), the skip of a gzip rank to its
   range (decompressing up to the last rank's start), and the join of 8 parts
   (:func:`~phrase_rescore.pipeline.scoring.sharded.join_parts`), in lines/s and lines per CPU-second
   (the join's copy runs in the kernel: little of its CPU time is the process's).

    nice -n 10 python benchmarks/score_distributed_bench.py              # 2 ranks, paper + small
    python benchmarks/score_distributed_bench.py --quick                 # smaller tables
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_table import generate_table  # noqa: E402
from score_bench import untrained_checkpoint  # noqa: E402

from phrase_rescore.core.reading import open_binary_read  # noqa: E402
from phrase_rescore.moses_integration.phrase_table import read_phrase_table  # noqa: E402
from phrase_rescore.pipeline.scoring.chunked import ChunkedOutput  # noqa: E402
from phrase_rescore.pipeline.scoring.sharded import chunk_offsets, join_parts, plan  # noqa: E402

# what one process (or each rank) runs: score_table, and rank 0 prints its summary
RUNNER = """\
import json, sys
from phrase_rescore.pipeline.score import ScoreConfig, score_table
model, table, out, chunk_lines, threads = sys.argv[1:6]
s = score_table(model, table, out, ScoreConfig(chunk_lines=int(chunk_lines), threads=int(threads) or None,
                                               restart=True))
if s.rank == 0:
    print("SUMMARY " + json.dumps(s.as_dict(), default=str))
"""


def _score(cmd: list[str], env: dict, cores: set | None = None) -> tuple[dict, float]:
    """Run one scoring command (on ``cores`` only, when given): (score_table's summary, wall seconds)."""
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tempfile.gettempdir(),
                          preexec_fn=None if cores is None else lambda: os.sched_setaffinity(0, cores))
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{done.stderr[-3000:]}")
    line = next(l for l in done.stdout.splitlines() if l.startswith("SUMMARY "))
    return json.loads(line[len("SUMMARY "):]), wall


def _plain(path: Path) -> bytes:
    with open_binary_read(path) as f:
        return f.read()


def bench_scaling(preset: str, table: Path, work: Path, ranks: int, chunk_lines: int) -> dict:
    _, _, ckpt = untrained_checkpoint(preset, table, work)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PHRASE_RESCORE_QUIET": "1"}
    env.pop("WORLD_SIZE", None)
    one, many = work / f"{preset}.one.gz", work / f"{preset}.many.gz"
    runner = work / "runner.py"
    runner.write_text(RUNNER)
    s1, w1 = _score([sys.executable, str(runner), str(ckpt), str(table), str(one), str(chunk_lines), "1"], env,
                    cores={0})
    load1 = os.getloadavg()[0]
    sn, wn = _score([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks),
                     str(runner), str(ckpt), str(table), str(many), str(chunk_lines), "0"], env)
    load_n = os.getloadavg()[0]
    same = _plain(one) == _plain(many) and one.read_bytes() == many.read_bytes()
    r1, rn = s1["pairs_per_s"], sn["pairs_per_s"]
    c1, cn = s1["pairs_done"] / s1["cpu_seconds"], sn["pairs"] / sn["cpu_seconds"]
    print(f"{preset}: {s1['pairs']} pairs; 1 rank on 1 core: {r1:,.0f} pairs/s, {c1:,.0f} per CPU-second "
          f"({s1['seconds']:.1f} s, {w1:.1f} s with start-up, load {load1:.1f}); {ranks} ranks: {rn:,.0f} "
          f"pairs/s, {cn:,.0f} per CPU-second ({sn['seconds']:.1f} s, {wn:.1f} s with start-up, load "
          f"{load_n:.1f}): {rn / r1:.2f}x wall, efficiency {cn / c1:.3f}; outputs identical: {same}", flush=True)
    return {"preset": preset, "one": r1, "many": rn, "speedup": rn / r1, "efficiency": cn / c1,
            "same": same and s1["pairs"] == sn["pairs"]}


def bench_io(work: Path, lines: int, chunk_lines: int, parts: int = 8, table: Path | None = None) -> None:
    plain, gz = work / "io.txt", work / "io.txt.gz"
    t0 = time.perf_counter()
    if table is None:
        generate_table(plain, lines, seed=2)
    else:                                   # a plain table generated before (generating 1M lines takes minutes)
        shutil.copyfile(table, plain)
        lines = chunk_offsets(plain, chunk_lines)[1]
    print(f"\nI/O table: {lines:,} lines, {plain.stat().st_size / 1e6:.0f} MB plain "
          f"(made in {time.perf_counter() - t0:.0f} s)", flush=True)
    with open(plain, "rb") as src, open(gz, "wb") as dst:
        with gzip.GzipFile(fileobj=dst, mode="wb", compresslevel=6, mtime=0) as z:
            shutil.copyfileobj(src, z, 1 << 24)
    mb = plain.stat().st_size / 1e6
    for path in (plain, gz):
        t, c = min(_timed(lambda path=path: chunk_offsets(path, chunk_lines)) for _ in range(2))
        print(f"split pass, {'gzip' if path is gz else 'plain'}: {lines / t:,.0f} lines/s, {lines / c:,.0f} per "
              f"CPU-second ({mb / t:.0f} MB/s uncompressed, {mb / c:.0f} per CPU-second)", flush=True)
    last = plan(gz, chunk_lines, parts)[-1]
    t, c = _timed(lambda: next(iter(read_phrase_table(gz, span=last.span))))   # the reader's skip, one line
    print(f"gzip rank's skip to its range (the last of {parts}): {last.lines_before / t:,.0f} lines/s, "
          f"{last.lines_before / c:,.0f} per CPU-second", flush=True)
    data = plain.read_bytes()
    for compressed in (False, True):
        shards = plan(plain, chunk_lines, parts)
        outs, states = [], []
        for s in shards:          # parts as the ranks write them: one piece per chunk (not timed)
            out = ChunkedOutput(work / f"join.part-{s.index}", {}, part=True, gzip=compressed)
            out.open(restart=True)
            chunk = data[s.start:s.stop].splitlines(keepends=True)
            for a in range(0, len(chunk), chunk_lines):
                out.write_chunk(b"".join(chunk[a:a + chunk_lines]), len(chunk[a:a + chunk_lines]))
            out.finish()
            outs.append(out)
            states.append(out.finished())
        target = work / ("joined.gz" if compressed else "joined")
        t, c = _timed(lambda target=target, outs=outs, states=states, compressed=compressed:
                      join_parts(target, outs, states, compressed))
        ok = (zlib.decompress(target.read_bytes(), 31) if compressed else target.read_bytes()) == data
        print(f"join of {parts} parts, {'gzip' if compressed else 'plain'}: {lines / t:,.0f} lines/s, "
              f"{lines / c:,.0f} per CPU-second ({target.stat().st_size / t / 1e6:.0f} MB/s written); "
              f"content equal: {ok}", flush=True)
        for out in outs:
            out.path.unlink()
            out.done_path.unlink()
        target.unlink()


def _timed(fn) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of ``fn()``."""
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller tables")
    ap.add_argument("--lines", type=int, help="lines of the scaling table [paper: 12000, small: 40000]")
    ap.add_argument("--io-lines", type=int, help="lines of the split/join table [1,000,000; --quick 200,000]")
    ap.add_argument("--presets", default="paper,small")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--chunk-lines", type=int, default=2000, help="lines per chunk of the scaling runs")
    ap.add_argument("--io-table", type=Path, help="a plain table for the split/join rates instead of generating one "
                    "(python benchmarks/gen_table.py T --lines 1000000)")
    ap.add_argument("--skip-io", action="store_true")
    ap.add_argument("--skip-scaling", action="store_true")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}", flush=True)
    ok = True
    with tempfile.TemporaryDirectory(prefix="score_distributed_bench.") as tmp:
        work = Path(tmp)
        for preset in [] if args.skip_scaling else args.presets.split(","):
            n = args.lines or {"paper": 12_000, "small": 40_000}[preset] // (4 if args.quick else 1)
            table = work / f"{preset}.table.gz"
            generate_table(table, n, seed=1)
            ok &= bench_scaling(preset, table, work, args.ranks, args.chunk_lines)["same"]
        if not args.skip_io:
            bench_io(work, args.io_lines or (200_000 if args.quick else 1_000_000), 10_000, table=args.io_table)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Sharded `score` under torchrun on this machine's CPUs: 1 rank against N ranks in the same run, and the
I/O rates of the split and the join.

1. **Scaling.** One generated table (:mod:`gen_table`), one untrained model per preset (speed does not
   depend on training); ``phrase-rescore score`` as one process pinned to one core (its worker, reader
   and writer threads share it), then under ``torchrun --nproc-per-node N`` on all cores (each rank
   cores / N workers: one core each with N = cores). pairs/s
   as the command reports it: the one process's from its scoring loop, the job's from the ranks' pairs
   over rank 0's time from after the model is loaded to OUT joined (the split and the join included).
   Start-up (imports, the model) is not counted in either. The two outputs must be the same bytes.
2. **Split and join rates** on a table of ``--io-lines`` lines (at least 1M), plain and gzip: the split
   pass (:func:`~phrase_rescore.pipeline.scoring.sharded.chunk_offsets`), the skip of a gzip rank to its
   range (decompressing up to the last rank's start), and the join of 8 parts
   (:func:`~phrase_rescore.pipeline.scoring.sharded.join_parts`), in lines/s.

    nice -n 10 python benchmarks/score_distributed_bench.py              # 2 ranks, paper + small
    python benchmarks/score_distributed_bench.py --quick                 # smaller tables
"""
from __future__ import annotations

import argparse
import collections
import gzip
import os
import re
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

from phrase_rescore.core.fileio import gzip_piece, open_binary_read  # noqa: E402
from phrase_rescore.moses_integration.phrase_table import read_phrase_table  # noqa: E402
from phrase_rescore.pipeline.model.checkpoint import save_checkpoint  # noqa: E402
from phrase_rescore.pipeline.model.encdec import EncDecConfig, RNNEncoderDecoder  # noqa: E402
from phrase_rescore.pipeline.scoring.chunked import ChunkedOutput  # noqa: E402
from phrase_rescore.pipeline.scoring.sharded import chunk_offsets, join_parts, plan  # noqa: E402
from phrase_rescore.pipeline.vocab import Vocabularies, build_vocab  # noqa: E402

RATE = re.compile(r"\((\d+) pairs, (\d+) pairs/s on")


def _cli() -> list[str]:
    """The installed ``phrase-rescore`` script beside this Python."""
    return [str(Path(sys.executable).with_name("phrase-rescore"))]


def _score(cmd: list[str], env: dict, cores: set | None = None) -> tuple[int, float, float]:
    """Run one scoring command (on ``cores`` only, when given): (pairs, pairs/s as it reports them, wall seconds)."""
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tempfile.gettempdir(),
                          preexec_fn=None if cores is None else lambda: os.sched_setaffinity(0, cores))
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{done.stderr[-3000:]}")
    m = RATE.search(done.stdout)
    return int(m.group(1)), float(m.group(2)), wall


def _plain(path: Path) -> bytes:
    with open_binary_read(path) as f:
        return f.read()


def bench_scaling(preset: str, table: Path, work: Path, ranks: int, chunk_lines: int) -> dict:
    cs, ct = collections.Counter(), collections.Counter()
    for e in read_phrase_table(table):
        cs.update(e.source.split())
        ct.update(e.target.split())
    vocabs = Vocabularies(build_vocab(cs, 15000), build_vocab(ct, 15000))
    torch.manual_seed(0)
    cfg = EncDecConfig.preset(preset, len(vocabs.source), len(vocabs.target))
    ckpt = work / f"{preset}.pt"
    save_checkpoint(ckpt, RNNEncoderDecoder(cfg), vocabs)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PHRASE_RESCORE_QUIET": "1"}
    env.pop("WORLD_SIZE", None)
    one, many = work / f"{preset}.one.gz", work / f"{preset}.many.gz"
    common = ["score", str(ckpt), str(table), "--chunk-lines", str(chunk_lines), "--restart"]
    pairs, r1, w1 = _score(_cli() + common + ["--out", str(one), "--threads", "1"], env, cores={0})
    load1 = os.getloadavg()[0]
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks),
                "--no-python"]
    pairs_n, rn, wn = _score(launcher + _cli() + common + ["--out", str(many)], env)
    load_n = os.getloadavg()[0]
    same = _plain(one) == _plain(many) and one.read_bytes() == many.read_bytes()
    print(f"{preset}: {pairs} pairs; 1 rank (1 core) {r1:,.0f} pairs/s ({w1:.1f} s wall, load {load1:.1f}); "
          f"{ranks} ranks {rn:,.0f} pairs/s ({wn:.1f} s wall with start-up, load {load_n:.1f}): "
          f"{rn / r1:.2f}x; outputs identical: {same}", flush=True)
    return {"preset": preset, "one": r1, "many": rn, "speedup": rn / r1, "same": same and pairs == pairs_n}


def bench_io(work: Path, lines: int, chunk_lines: int, parts: int = 8) -> None:
    plain, gz = work / "io.txt", work / "io.txt.gz"
    t0 = time.perf_counter()
    generate_table(plain, lines, seed=2)
    print(f"\nI/O table: {lines:,} lines, {plain.stat().st_size / 1e6:.0f} MB plain "
          f"(generated in {time.perf_counter() - t0:.0f} s)", flush=True)
    with open(plain, "rb") as src, open(gz, "wb") as dst:
        with gzip.GzipFile(fileobj=dst, mode="wb", compresslevel=6, mtime=0) as z:
            shutil.copyfileobj(src, z, 1 << 24)
    for path in (plain, gz):
        best = min(_timed(lambda: chunk_offsets(path, chunk_lines)) for _ in range(2))
        print(f"split pass, {'gzip' if path is gz else 'plain'}: {lines / best:,.0f} lines/s "
              f"({plain.stat().st_size / best / 1e6:.0f} MB/s uncompressed)", flush=True)
    last = plan(gz, chunk_lines, parts)[-1]

    t = _timed(lambda: next(iter(read_phrase_table(gz, span=last.span))))   # the reader's skip, one line
    print(f"gzip rank's skip to its range (the last of {parts}): {last.lines_before / t:,.0f} lines/s", flush=True)
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
        t = _timed(lambda: join_parts(target, outs, states, compressed))
        ok = (zlib.decompress(target.read_bytes(), 31) if compressed else target.read_bytes()) == data
        print(f"join of {parts} parts, {'gzip' if compressed else 'plain'}: {lines / t:,.0f} lines/s "
              f"({target.stat().st_size / t / 1e6:.0f} MB/s written); content equal: {ok}", flush=True)
        for out in outs:
            out.path.unlink()
            out.done_path.unlink()
        target.unlink()


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller tables")
    ap.add_argument("--lines", type=int, help="lines of the scaling table [paper: 12000, small: 40000]")
    ap.add_argument("--io-lines", type=int, help="lines of the split/join table [1,000,000; --quick 200,000]")
    ap.add_argument("--presets", default="paper,small")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--chunk-lines", type=int, default=2000, help="lines per chunk of the scaling runs")
    ap.add_argument("--skip-io", action="store_true")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}", flush=True)
    ok = True
    with tempfile.TemporaryDirectory(prefix="score_distributed_bench.") as tmp:
        work = Path(tmp)
        for preset in args.presets.split(","):
            n = args.lines or {"paper": 12_000, "small": 40_000}[preset] // (4 if args.quick else 1)
            table = work / f"{preset}.table.gz"
            generate_table(table, n, seed=1)
            ok &= bench_scaling(preset, table, work, args.ranks, args.chunk_lines)["same"]
        if not args.skip_io:
            bench_io(work, args.io_lines or (200_000 if args.quick else 1_000_000), 10_000)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

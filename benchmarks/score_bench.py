"""Speed of the `score` stage against the obvious ways to score a phrase table, in one run.

For each preset (``paper``, ``small``; an untrained model with random weights: speed does not depend
on training) on a generated table with a real table's shape (:mod:`gen_table`):

* (a) one pair at a time: ``model.log_prob`` on batches of one (model/reference.py's ``log_p`` loop, in torch);
* (b) file-order batches of 64 without sorting or sharing, padded (how GroundHog's ``score.py`` batches);
* (c) this stage: ``phrase_rescore.pipeline.score.score_table`` end to end (read, score, format, gzip, resumable chunks).

(a) and (b) run on the table's first lines (a sample; pairs/s does not depend on the table's length),
(c) on the whole table; the scores (c) wrote for the sample must equal (a)'s and (b)'s within 1e-4.
Also reported: FLOPs per pair (matrix products, 2 per multiply-add) for (b) as it runs (padding
included) and for (c) (the GRU steps of its prefix tries, counted as the stage cuts the table; no
padding), the machine's dense fp32 matmul FLOP/s measured in the same run, and (c)'s effective FLOP/s
= (b)'s FLOPs per pair x (c)'s pairs/s, as a fraction of it ("real": (c)'s own FLOPs); the scorer
alone on (b)'s sample, on one core as each of the stage's workers runs, with either BLAS, with and
without ``--precompute-vocab`` and prefix sharing, and bf16 autocast's effect on speed and scores.
Exits 1 if an fp32 score differs by more than 1e-4.

    python benchmarks/score_bench.py --threads 2 # 200k lines, both presets (~8 min on 2 cores)
    python benchmarks/score_bench.py --quick     # 20k lines
    python benchmarks/score_bench.py --device cuda --lines 1000000    # on a GPU
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_table import generate_table  # noqa: E402

from phrase_rescore.moses_integration.phrase_table import read_phrase_table  # noqa: E402
from phrase_rescore.pipeline.batching import pad_batch  # noqa: E402
from phrase_rescore.pipeline.configs import ScoreConfig
from phrase_rescore.pipeline.model.checkpoint import save_checkpoint  # noqa: E402
from phrase_rescore.pipeline.model.encdec import EncDecConfig, RNNEncoderDecoder  # noqa: E402
from phrase_rescore.pipeline.score import score_table
from phrase_rescore.pipeline.scoring.chunk_pairs import PairCollector  # noqa: E402
from phrase_rescore.pipeline.scoring.fast import FastScorer, one_thread_each, pair_flops, work_flops  # noqa: E402
from phrase_rescore.pipeline.vocab import EOS_ID, Vocabularies, build_vocab  # noqa: E402


def matmul_flops(device: torch.device, n: int = 2048, reps: int = 6) -> dict:
    """Best-of dense fp32 matmul FLOP/s (n x n x n) on ``device``: torch's, and on a CPU numpy's BLAS
    too (the score stage uses whichever is faster, so the machine's figure is the larger)."""
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    libs = {"torch": lambda: torch.mm(a, b)}
    if device.type == "cpu":
        an, bn = a.numpy(), b.numpy()
        libs["numpy"] = lambda: an @ bn
    best = dict.fromkeys(libs, 0.0)
    for _ in range(reps):
        for name, f in libs.items():
            _sync(device)
            t = time.perf_counter()
            f()
            _sync(device)
            best[name] = max(best[name], 2 * n ** 3 / (time.perf_counter() - t))
    return best


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def read_sample(table: Path, vocabs, n: int):
    """The first ``n`` pairs as (src ids, tgt ids) lists, eos-terminated."""
    pairs = []
    for e in read_phrase_table(table):
        if len(pairs) == n:
            break
        pairs.append((vocabs.source.encode(e.source.split()) + [EOS_ID],
                      vocabs.target.encode(e.target.split()) + [EOS_ID]))
    return pairs


def file_order_batches(model, pairs, device, batch=64) -> tuple[np.ndarray, float]:
    """(b): model.log_prob over consecutive batches of ``batch`` pairs, padded, nothing shared."""
    out = np.zeros(len(pairs))
    _sync(device)
    t = time.perf_counter()
    with torch.inference_mode():
        for s in range(0, len(pairs), batch):
            chunk = pairs[s:s + batch]
            a, am = pad_batch([p[0] for p in chunk], device=device)
            b, bm = pad_batch([p[1] for p in chunk], device=device)
            out[s:s + len(chunk)] = model.log_prob(a, am, b, bm).double().cpu().numpy()
    _sync(device)
    return out, time.perf_counter() - t


def baseline_b_flops(cfg, table: Path, batch=64) -> tuple[float, float]:
    """FLOPs per pair that (b) performs on the whole table (padding to each batch's longest row
    included), and targets per source."""
    sl, tl, src = [], [], []
    for e in read_phrase_table(table):
        sl.append(len(e.source.split()) + 1)
        tl.append(len(e.target.split()) + 1)
        src.append(e.source)
    sl, tl = np.array(sl), np.array(tl)
    total_b = 0.0
    for s in range(0, len(sl), batch):
        rows = min(batch, len(sl) - s)
        total_b += rows * pair_flops(cfg, int(sl[s:s + batch].max()), int(tl[s:s + batch].max()))
    n_sources = sum(1 for i in range(len(src)) if i == 0 or src[i] != src[i - 1])
    return total_b / len(sl), len(src) / n_sources


def stage_work(scorer: FastScorer, table: Path, vocabs, chunk_lines: int) -> dict:
    """What (c) computes on the whole table, chunk by chunk and group by group as the stage cuts it:
    GRU steps of the encoder and decoder tries, and sources (c and its terms)."""
    work = {"pairs": 0, "sources": 0, "encoder_steps": 0, "decoder_steps": 0, "source_tokens": 0,
            "target_tokens": 0}

    def count(chunk):
        for idx in scorer.groups(chunk):
            enc, dec, tgt, _ = scorer.tries(chunk, idx)
            work["sources"] += len(enc.lengths)
            work["encoder_steps"] += enc.n_nodes
            work["decoder_steps"] += dec.n_nodes
            work["source_tokens"] += int(enc.lengths.sum())
            work["target_tokens"] += int(dec.lengths.sum())
        work["pairs"] += len(chunk)

    pc = PairCollector(vocabs)
    for i, e in enumerate(read_phrase_table(table)):
        if i and i % chunk_lines == 0:
            count(pc.reset())
        pc.add(i % chunk_lines, e.source, e.target)
    count(pc.reset())
    return work


def untrained_checkpoint(preset: str, table: Path, work: Path):
    """An untrained ``preset`` model (seed 0; speed does not depend on training) with 15,000-word
    shortlists counted from ``table``, saved as ``work/PRESET.pt``: (model, vocabs, checkpoint path)."""
    cs, ct = collections.Counter(), collections.Counter()
    for e in read_phrase_table(table):
        cs.update(e.source.split())
        ct.update(e.target.split())
    vocabs = Vocabularies(build_vocab(cs, 15000), build_vocab(ct, 15000))
    torch.manual_seed(0)
    cfg = EncDecConfig.preset(preset, len(vocabs.source), len(vocabs.target))
    model = RNNEncoderDecoder(cfg).eval()
    ckpt = work / f"{preset}.pt"
    save_checkpoint(ckpt, model, vocabs)
    return model, vocabs, ckpt


def bench_preset(preset, table, work, device, n_a, n_b, threads) -> dict:
    print(f"\n== preset {preset} ==", flush=True)
    model, vocabs, ckpt = untrained_checkpoint(preset, table, work)
    cfg = model.cfg
    model = model.to(device)

    sample = read_sample(table, vocabs, max(n_a, n_b))
    # (a) one pair at a time, (b) GroundHog's way: best of 2 rounds (the machine is shared)
    t_a = t_b = math.inf
    for _ in range(2):
        lp_a, t = file_order_batches(model, sample[:n_a], device, batch=1)
        t_a = min(t_a, t)
        lp_b, t = file_order_batches(model, sample[:n_b], device, batch=64)
        t_b = min(t_b, t)
    # (c) the stage, end to end on the whole table
    peak_before = matmul_flops(device)
    out = work / f"{preset}.scored.gz"
    s = score_table(ckpt, table, out, ScoreConfig(device=str(device), threads=threads, restart=True))
    written = []
    for e in read_phrase_table(out):
        if len(written) == len(sample):
            break
        written.append(math.log(e.scores[-2]))
    written = np.array(written)
    err_a = float(np.abs(written[:n_a] - lp_a).max())
    err_b = float(np.abs(written[:n_b] - lp_b).max())
    err_ab = float(np.abs(lp_a - lp_b[:n_a]).max())

    # the scorer alone on the sample, with and without per-vocabulary precomputation, and bf16 autocast
    pc = PairCollector(vocabs)
    for i, e in enumerate(read_phrase_table(table)):
        if i == n_b:
            break
        pc.add(i, e.source, e.target)
    chunk = pc.reset()
    # the precision check needs scores that vary as a trained model's do: scale the output embeddings
    # G_l until the mean per-token log p is about -4 (perplexity ~50) instead of -log(Vt)
    spread = RNNEncoderDecoder(cfg).eval().to(device)
    spread.load_state_dict(model.state_dict())
    n_tok = int(chunk.tgt.lengths.sum())
    for _ in range(12):
        ref_spread = FastScorer(spread, device, precision="fp32").score(chunk)
        if ref_spread.sum() / n_tok > -4.0 or not np.isfinite(ref_spread).all():
            break
        with torch.no_grad():
            spread.decoder.G_l.mul_(2.0)
    mm = {"matmul": s.matmul}                                  # the BLAS the stage chose
    variants = [(f"fp32 {s['matmul']} BLAS", mm, model), ("fp32 precompute on", {**mm, "precompute_vocab": True}, model),
                ("fp32 precompute off", {**mm, "precompute_vocab": False}, model),
                ("fp32 no prefix sharing", {**mm, "share_prefixes": False}, model),
                ("bf16 autocast", {"precision": "bf16"}, model)]
    if device.type == "cpu":
        other = "torch" if s.matmul == "numpy" else "numpy"
        variants.insert(1, (f"fp32 {other} BLAS", {"matmul": other}, model))
    if device.type == "cuda":
        variants.append(("fp16 autocast", {"precision": "fp16"}, model))
    timings = {}
    # on a CPU one scorer on one core, as each of the stage's workers runs
    for name, kw, m in variants:
        scorer = FastScorer(m, device, **kw)
        with one_thread_each() if device.type == "cpu" else contextlib.nullcontext():
            scorer.score(chunk)                                   # warm-up
            _sync(device)
            t = time.perf_counter()
            lp = scorer.score(chunk)
            _sync(device)
            pps = len(chunk) / (time.perf_counter() - t)
        err = float(np.abs(FastScorer(spread, device, **kw).score(chunk) - ref_spread).max()) \
            if "precision" in kw else float(np.abs(lp - lp_b).max())
        timings[name] = (pps, err)

    peaks = {k: max(v, peak_before[k]) for k, v in matmul_flops(device).items()}
    peak = max(peaks.values())
    flops_b, tps = baseline_b_flops(cfg, table)
    scorer = FastScorer(model, device)
    w = stage_work(scorer, table, vocabs, ScoreConfig().chunk_lines)
    flops_c = work_flops(cfg, w, scorer.precompute_vocab) / w["pairs"]
    r = {"preset": preset, "lines": s.lines, "pairs_a": n_a / t_a, "pairs_b": n_b / t_b,
         "pairs_c": s.pairs_per_s, "err_a": err_a, "err_b": err_b, "err_ab": err_ab,
         "flops_b": flops_b, "flops_c": flops_c, "flops_5x5": pair_flops(cfg, 5, 5), "peak": peak,
         "targets_per_source": tps, "timings": timings, "work": w}
    r["effective"] = flops_b * r["pairs_c"]
    r["real"] = flops_c * r["pairs_c"]
    print(f"(a) one pair at a time        {r['pairs_a']:10.0f} pairs/s   ({n_a} pairs)")
    print(f"(b) file-order batches of 64   {r['pairs_b']:10.0f} pairs/s   ({n_b} pairs)")
    print(f"(c) score stage, end to end   {r['pairs_c']:10.0f} pairs/s   ({s['lines']} lines, "
          f"{s['sources']} distinct sources per chunk summed)")
    print(f"    (c)/(b) = {r['pairs_c'] / r['pairs_b']:.2f}x   (c)/(a) = {r['pairs_c'] / r['pairs_a']:.2f}x")
    print(f"    max |log p difference|: (c)-(a) {err_a:.2e}, (c)-(b) {err_b:.2e}, (a)-(b) {err_ab:.2e}")
    print(f"FLOPs per pair: 5+5 tokens as (b) runs {r['flops_5x5'] / 1e6:.1f} M; as (b) runs on this table "
          f"{flops_b / 1e6:.1f} M; as (c) runs {flops_c / 1e6:.1f} M ({tps:.2f} targets per source)")
    print(f"(c)'s GRU steps: encoder {w['encoder_steps']} for {w['source_tokens']} source tokens "
          f"({w['encoder_steps'] / w['source_tokens']:.2f}), decoder {w['decoder_steps']} for "
          f"{w['target_tokens']} target tokens ({w['decoder_steps'] / w['target_tokens']:.3f})")
    print(f"dense fp32 matmul on {device}: " + ", ".join(f"{k} {v / 1e9:.1f}" for k, v in peaks.items())
          + f" GFLOP/s; the stage's products ran on {s['matmul']}'s")
    print(f"(c) effective {r['effective'] / 1e9:.1f} GFLOP/s = {100 * r['effective'] / peak:.0f}% of matmul; "
          f"real {r['real'] / 1e9:.1f} GFLOP/s = {100 * r['real'] / peak:.0f}%")
    for name, (pps, err) in timings.items():
        what = f"vs fp32 (G_l scaled: {ref_spread.sum() / n_tok:.2f}/token)" if "autocast" in name else "vs (b)"
        print(f"    scorer alone, one core, {name:24s} {pps:9.0f} pairs/s   max |Δ log p| {what} {err:.2e}", flush=True)
    r["exact"] = max(err_a, err_b, err_ab, *(e for n, (_, e) in timings.items() if "autocast" not in n)) <= 1e-4
    if not r["exact"]:
        print("MISMATCH: fp32 scores differ by more than 1e-4", flush=True)
    return r


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="20k lines and smaller samples")
    ap.add_argument("--lines", type=int, help="table lines (default 200000, --quick 20000)")
    ap.add_argument("--presets", default="small,paper")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--threads", type=int, help="torch CPU threads")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    lines = args.lines or (20_000 if args.quick else 200_000)
    device = torch.device(args.device)
    with tempfile.TemporaryDirectory(prefix="score_bench.") as tmp:
        work = Path(tmp)
        table = work / "table.gz"
        stats = generate_table(table, lines, args.seed)
        print("table: " + " ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in stats.items()))
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {device}, "
              f"load average {os.getloadavg()[0]:.1f}")
        exact = []
        for preset in args.presets.split(","):
            n_a = {"paper": 100, "small": 400}[preset] // (2 if args.quick else 1)
            n_b = {"paper": 2048, "small": 8192}[preset] // (2 if args.quick else 1)
            if device.type == "cuda":
                n_a, n_b = n_a * 4, n_b * 8
            exact.append(bench_preset(preset, table, work, device, n_a, n_b, args.threads)["exact"])
        print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0 if all(exact) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Training throughput of the RNN Encoder-Decoder: pairs/s for both GRU forms x both presets.

Each configuration is measured against a baseline in the same process: the same encoder-decoder
sizes driven by ``torch.nn.GRU`` (encoder: nn.GRU over packed source embeddings; decoder: nn.GRU
whose input is [e(y_{j-1}); c], which holds exactly W_x and C; the same maxout and rank-R output
layer and loss). One step = forward, backward, global-norm clip, Adadelta update, on a batch of 64
random phrase pairs of 1-7 words (+ eos), lengths like a real phrase table (mean about 4 words).

    python benchmarks/train_bench.py            # CPU (or CUDA when present), full step counts
    python benchmarks/train_bench.py --quick    # a few steps each
    python benchmarks/train_bench.py --device cuda --presets paper
    python benchmarks/train_bench.py --presets small --threads 1,2   # torch threads: 2 against 1
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from phrase_rescore.pipeline.batching import pad_batch
from phrase_rescore.pipeline.model.encdec import EncDecConfig, RNNEncoderDecoder

VOCAB = {"small": 4_000, "paper": 15_001}
LENGTH_P = np.array([0.17, 0.17, 0.17, 0.16, 0.13, 0.11, 0.09])  # words 1..7, mean about 3.8


class NNGRUEncDec(nn.Module):
    """The same sizes and output layer, with torch.nn.GRU doing both recurrences (the baseline)."""

    def __init__(self, cfg: EncDecConfig):
        super().__init__()
        E, H, P = cfg.emb_dim, cfg.hidden_dim, cfg.maxout_units * cfg.maxout_pieces
        self.M, self.pieces = cfg.maxout_units, cfg.maxout_pieces
        self.E_src = nn.Embedding(cfg.src_vocab_size, E)
        self.E_tgt = nn.Embedding(cfg.tgt_vocab_size, E)
        self.enc = nn.GRU(E, H, batch_first=True)
        self.V = nn.Linear(H, H, bias=False)
        self.V_dec = nn.Linear(H, H, bias=False)
        self.dec = nn.GRU(E + H, H, batch_first=True)
        self.O_h, self.O_y, self.O_c = nn.Linear(H, P, bias=False), nn.Linear(E, P, bias=False), nn.Linear(H, P, bias=False)
        self.G_r = nn.Linear(cfg.maxout_units, cfg.rank, bias=False)
        self.G_l = nn.Linear(cfg.rank, cfg.tgt_vocab_size, bias=False)

    def log_prob(self, s, sm, t, tm):
        B, T = t.shape
        packed = pack_padded_sequence(self.E_src(s), sm.sum(1).cpu(), batch_first=True, enforce_sorted=False)
        _, h = self.enc(packed)                                             # (1, B, H)
        c = torch.tanh(self.V(h[0]))                                        # (B, H)
        y_prev = torch.cat([c.new_zeros(B, 1, self.E_tgt.embedding_dim), self.E_tgt(t[:, :-1])], 1)  # (B, T, E)
        inp = torch.cat([y_prev, c[:, None].expand(B, T, c.shape[1])], -1)
        packed = pack_padded_sequence(inp, tm.sum(1).cpu(), batch_first=True, enforce_sorted=False)
        out, _ = self.dec(packed, torch.tanh(self.V_dec(c))[None].contiguous())
        states, _ = pad_packed_sequence(out, batch_first=True, total_length=T)  # (B, T, H)
        pre = self.O_h(states) + self.O_y(y_prev) + self.O_c(c)[:, None]
        m = pre.unflatten(-1, (self.M, self.pieces)).amax(-1)
        logp = torch.log_softmax(self.G_l(self.G_r(m)), -1)
        return (logp.gather(-1, t[..., None]).squeeze(-1) * tm).sum(1)


def random_batches(n_batches, vocab, batch=64, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_batches):
        seqs = [[np.append(rng.integers(1, vocab, rng.choice(7, p=LENGTH_P) + 1), 0) for _ in range(batch)]
                for _side in range(2)]
        out.append((pad_batch(seqs[0]), pad_batch(seqs[1])))
    return out


def time_training(model, batches, device, warmup=1):
    opt = torch.optim.Adadelta(model.parameters(), lr=1.0, rho=0.95, eps=1e-6)
    params = list(model.parameters())

    def step(b):
        (s, sm), (t, tm) = b
        s, sm, t, tm = s.to(device), sm.to(device), t.to(device), tm.to(device)
        loss = -model.log_prob(s, sm, t, tm).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()

    for b in batches[:warmup]:
        step(b)
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for b in batches[warmup:]:
        step(b)
    if device.type == "cuda":
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    return sum(len(b[0][0]) for b in batches[warmup:]) / dt


def compare_threads(args, counts: list[int], device) -> None:
    """pairs/s of the encoder-decoder (the paper's GRU) at each torch thread count, rounds interleaved."""
    torch.set_flush_denormal(True)
    print(f"device {device}, torch {torch.__version__}, thread counts {counts}, batch 64")
    print(f"{'preset':<7} {'threads':>7} {'pairs/s':>9} {'steps/s':>8} {'ratio':>6}")
    for preset in args.presets.split(","):
        steps = {"small": 6 if args.quick else 40, "paper": 3 if args.quick else 12}[preset]
        batches = random_batches(steps + 1, VOCAB[preset])
        torch.manual_seed(0)
        model = RNNEncoderDecoder(EncDecConfig.preset(preset, VOCAB[preset], VOCAB[preset])).to(device)
        best = {n: 0.0 for n in counts}
        for _ in range(args.rounds):
            for n in counts:
                torch.set_num_threads(n)
                best[n] = max(best[n], time_training(model, batches, device))
        for n in counts:
            print(f"{preset:<7} {n:>7} {best[n]:>9.1f} {best[n] / 64:>8.2f} {best[n] / best[counts[0]]:>6.2f}",
                  flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a few steps per configuration")
    ap.add_argument("--presets", default="small,paper")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved measurements per model; the best counts")
    ap.add_argument("--threads", default="0",
                    help="torch threads (0: torch's default); a list (1,2) compares thread counts instead, "
                         "interleaved in this process, each against the first")
    args = ap.parse_args()
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          "cpu" if args.device == "auto" else args.device)
    counts = [int(x) for x in args.threads.split(",")]
    if len(counts) > 1:
        return compare_threads(args, counts, device)
    if counts[0]:
        torch.set_num_threads(counts[0])
    torch.set_flush_denormal(True)  # as phrase_rescore.pipeline.train does
    print(f"device {device}, torch {torch.__version__}, {torch.get_num_threads()} threads, batch 64")
    print(f"{'preset':<7} {'gru':<6} {'pairs/s':>9} {'nn.GRU pairs/s':>15} {'ratio':>6}")
    for preset in args.presets.split(","):
        steps = {"small": 6 if args.quick else 40, "paper": 3 if args.quick else 12}[preset]
        batches = random_batches(steps + 1, VOCAB[preset])
        models = {}
        for gru in ("nn.GRU", "paper", "cudnn"):
            torch.manual_seed(0)
            cfg = EncDecConfig.preset(preset, VOCAB[preset], VOCAB[preset], gru="cudnn" if gru == "nn.GRU" else gru)
            models[gru] = (NNGRUEncDec(cfg) if gru == "nn.GRU" else RNNEncoderDecoder(cfg)).to(device)
        # Interleave the three models over several rounds and keep each one's best round, so that load
        # from other processes on a shared machine hits all of them alike.
        best = {k: 0.0 for k in models}
        for _ in range(args.rounds):
            for k, m in models.items():
                best[k] = max(best[k], time_training(m, batches, device))
        for gru in ("paper", "cudnn"):
            print(f"{preset:<7} {gru:<6} {best[gru]:>9.1f} {best['nn.GRU']:>15.1f} {best[gru] / best['nn.GRU']:>6.2f}",
                  flush=True)

if __name__ == "__main__":
    main()

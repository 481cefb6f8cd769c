"""The fast scorer equals the seed's pair-at-a-time log_p (numpy float64) within 1e-4 in float32.

The chunk mixes source and target lengths 1-7 (+eos), repeats sources (some on non-adjacent lines),
and contains unknown words (id 1); batches are cut both so that each holds one length (no mask) and
so that lengths are merged under a mask.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from pipeline.model.encdec import EncDecConfig, RNNEncoderDecoder
from pipeline.model.reference import log_p, reference_params
from pipeline.scoring.batching import ChunkPairs, length_batches, pad, prefix_levels
from pipeline.scoring.fast import FastScorer, pair_flops

VS, VT = 40, 50


pytestmark = pytest.mark.usefixtures("one_thread")


def _model(gru: str, bias: bool) -> RNNEncoderDecoder:
    torch.manual_seed(3)
    cfg = EncDecConfig(VS, VT, emb_dim=8, hidden_dim=24, maxout_units=12, rank=6, gru=gru, bias=bias,
                       init_std=0.3)
    m = RNNEncoderDecoder(cfg).eval()
    if bias:
        with torch.no_grad():
            for p in m.parameters():
                if p.dim() == 1:
                    p.normal_(0.0, 0.3)
    return m


def _chunk() -> ChunkPairs:
    rng = np.random.default_rng(7)
    cp = ChunkPairs()
    for L in range(1, 8):                                 # every source length 1..7, twice
        for _ in range(2):
            ids = rng.integers(1, VS, size=L).tolist()    # id 1 = <unk> appears
            cp.src.append(ids + [0])
    cp.src[3][0] = 1                                      # make sure unknown words are in
    order = list(range(len(cp.src))) * 3 + [0, 5, 0]      # repeats, adjacent and not
    for k, s in enumerate(order):
        T = 1 + (k % 7)                                   # every target length 1..7
        t = rng.integers(1, VT, size=T).tolist()
        if k % 5 == 0:
            t[0] = 1
        cp.pair_src.append(s)
        cp.tgt.append(t + [0])
        cp.pair_line.append(k)
        cp.n_unk.append(0)
    return cp


@pytest.mark.parametrize("gru,bias,precompute,max_tokens,share", [
    ("paper", False, False, 4096, True),    # one length per batch: no mask
    ("paper", True, True, 24, True),        # small batches, lengths merged under a mask
    ("paper", True, False, 24, False),      # sources encoded whole, padded and masked
    ("cudnn", False, True, 4096, False),
    ("cudnn", True, False, 24, True),
])
def test_fast_scores_equal_reference_log_p(gru, bias, precompute, max_tokens, share):
    model = _model(gru, bias)
    cp = _chunk()
    got = FastScorer(model, "cpu", precompute_vocab=precompute, max_tokens=max_tokens, softmax_tokens=5,
                     share_prefixes=share).score(cp)
    P = reference_params(model)
    ref = np.array([log_p(cp.src[cp.pair_src[k]], cp.tgt[k], P, reset=gru) for k in range(len(cp))])
    assert got.shape == ref.shape == (len(cp),)
    assert np.isfinite(ref).all() and ref.min() < -5.0     # non-trivial values
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-4)
    # and the model's own batched log_prob (teacher forcing, torch) agrees with both
    with torch.inference_mode():
        k = np.arange(len(cp))
        src = [cp.src[s] for s in cp.pair_src]
        sl = np.array([len(s) for s in src]); tl = np.array([len(t) for t in cp.tgt])
        a, b = torch.from_numpy(pad(src, k, sl)), torch.from_numpy(pad(cp.tgt, k, tl))
        am = torch.arange(a.shape[1])[None] < torch.from_numpy(sl)[:, None]
        bm = torch.arange(b.shape[1])[None] < torch.from_numpy(tl)[:, None]
        np.testing.assert_allclose(model.log_prob(a, am, b, bm).double().numpy(), ref, atol=1e-4)


def test_large_logits_take_the_stable_logsumexp_path():
    model = _model("paper", True)
    with torch.no_grad():
        model.decoder.G_l.mul_(200.0)                     # logits far beyond the direct-exp bound
    cp = _chunk()
    got = FastScorer(model, "cpu").score(cp)
    P = reference_params(model)
    ref = np.array([log_p(cp.src[cp.pair_src[k]], cp.tgt[k], P) for k in range(len(cp))])
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("lengths,max_tokens,min_rows,expected", [
    ([3, 1, 3, 2, 1], 100, 1, [[1, 4], [3], [0, 2]]),           # one batch per length, stable order
    ([2, 2, 2, 2, 2], 4, 1, [[0, 1], [2, 3], [4]]),             # cut by tokens: 4 // 2 = 2 rows
    ([1, 5, 5, 5], 100, 2, [[0, 1, 2, 3]]),                     # a lone length-1 row rides with length 5
    ([9], 4, 1, [[0]]),                                         # a row longer than the budget still goes
])
def test_length_batches(lengths, max_tokens, min_rows, expected):
    got = length_batches(np.array(lengths), max_tokens, min_rows=min_rows)
    assert [b.tolist() for b in got] == expected
    assert sorted(np.concatenate(got).tolist()) == list(range(len(lengths)))  # every index exactly once


def test_prefix_levels_share_prefixes():
    seqs = [[4, 0], [4, 5, 0], [4, 5, 6, 0], [7, 0], [4, 5, 0]]       # sorted-table sources (+ a repeat)
    lv = prefix_levels(seqs)
    assert [t.tolist() for t in lv.tokens] == [[4, 7], [0, 5, 0], [0, 6], [0]]
    assert [p.tolist() for p in lv.parents] == [[-1, -1], [0, 0, 1], [1, 1], [1]]
    assert lv.n_nodes == 8 < sum(map(len, seqs))                      # 8 GRU steps instead of 13
    assert lv.end_level.tolist() == [1, 2, 3, 1, 2] and lv.end_pos.tolist() == [0, 0, 0, 2, 0]


def test_pad_fills_rows_in_order():
    seqs = [[5, 6, 0], [7, 0], [8, 9, 10, 0]]
    lens = np.array([3, 2, 4])
    assert pad(seqs, np.array([2, 1]), lens).tolist() == [[8, 9, 10, 0], [7, 0, 0, 0]]


def test_pair_flops_paper_size():
    cfg = EncDecConfig.preset("paper", 15001, 15001)
    # encoder 5 x 3.3M + c 1M; once per pair V_dec c 1M, C c 3M, O_c c 1M;
    # decoder 5 x (W_x 0.3M + U 3M + O_h 1M + O_y 0.1M + G_r 0.05M + G_l 1.5001M): about 52M multiply-adds
    assert pair_flops(cfg, 5, 5) == pytest.approx(2 * 52.2505e6)
    assert pair_flops(cfg, 5, 5, shared=True, targets_per_source=1.24) == pytest.approx(
        2 * (22.5e6 / 1.24 + 29.7505e6))


@pytest.mark.parametrize("precision,tol", [("bf16", 0.2), ("fp16", 0.05)])
def test_autocast_precisions_run_and_stay_close(precision, tol):
    model = _model("paper", True)
    cp = _chunk()
    fp32 = FastScorer(model, "cpu").score(cp)
    low = FastScorer(model, "cpu", precision=precision).score(cp)
    assert np.isfinite(low).all()
    assert np.abs(low - fp32).max() < tol

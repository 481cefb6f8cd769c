"""The fast scorer equals model/reference.py's pair-at-a-time log_p (numpy float64) within 1e-4 in float32.

The chunk mixes source and target lengths 1-7 (+eos), repeats sources (some on non-adjacent lines),
and contains unknown words (id 1); groups are cut both wide (the whole chunk) and narrow (a source or
two), and the softmax's blocks both cover the vocabulary and cut it unevenly.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

from phrase_rescore.pipeline.batching import pad_batch
from phrase_rescore.pipeline.model.encdec import EncDecConfig, RNNEncoderDecoder
from phrase_rescore.pipeline.model.reference import log_p, reference_params
from phrase_rescore.pipeline.pairs import RaggedIds
from phrase_rescore.pipeline.scoring.chunk_pairs import ChunkPairs
from phrase_rescore.pipeline.scoring.fast import FastScorer, pair_flops, work_flops
from phrase_rescore.pipeline.scoring.trie import build_trie

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
    src, pair_src, tgt = [], [], []
    for L in range(1, 8):                                 # every source length 1..7, twice
        for _ in range(2):
            src.append(rng.integers(1, VS, size=L).tolist() + [0])   # id 1 = <unk> appears
    src[3][0] = 1                                         # make sure unknown words are in
    order = list(range(len(src))) * 3 + [0, 5, 0]         # repeats, adjacent and not
    for k, s in enumerate(order):
        T = 1 + (k % 7)                                   # every target length 1..7
        t = rng.integers(1, VT, size=T).tolist()
        if k % 5 == 0:
            t[0] = 1
        if k % 6 == 0 and k:                              # targets of a source that start alike
            same = min(2, T, len(tgt[k - 1]) - 1)
            t[:same] = tgt[k - 1][:same]
            pair_src.append(pair_src[-1])
        else:
            pair_src.append(s)
        tgt.append(t + [0])
    return ChunkPairs.from_lists(src, pair_src, tgt)


def _pairs(cp: ChunkPairs) -> list[tuple[list[int], list[int]]]:
    return [(cp.src[cp.pair_src[k]].tolist(), cp.tgt[k].tolist()) for k in range(len(cp))]


@pytest.mark.parametrize("gru,bias,precompute,max_tokens,share", [
    ("paper", False, False, 4096, True),    # one group: every prefix shared
    ("paper", True, True, 24, True),        # small groups
    ("paper", True, False, 24, False),      # nothing shared: every sequence its own root
    ("cudnn", False, True, 4096, False),
    ("cudnn", True, False, 24, True),
])
@pytest.mark.parametrize("matmul", ["torch", "numpy"])
def test_fast_scores_equal_reference_log_p(gru, bias, precompute, max_tokens, share, matmul):
    model = _model(gru, bias)
    cp = _chunk()
    kw = dict(precompute_vocab=precompute, max_tokens=max_tokens, softmax_rows=5, vocab_block=16,
              share_prefixes=share, matmul=matmul)
    got = FastScorer(model, "cpu", **kw).score(cp)
    P = reference_params(model)
    ref = np.array([log_p(x, y, P, reset=gru) for x, y in _pairs(cp)])
    assert got.shape == ref.shape == (len(cp),)
    with ThreadPoolExecutor(2) as pool:                    # groups on worker threads: the same numbers
        np.testing.assert_array_equal(FastScorer(model, "cpu", **kw).score(cp, pool), got)
    assert np.isfinite(ref).all() and ref.min() < -5.0     # non-trivial values
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-4)
    # and the model's own batched log_prob (teacher forcing, torch) agrees with both
    with torch.inference_mode():
        a, am = pad_batch([cp.src[s] for s in cp.pair_src])
        b, bm = pad_batch([cp.tgt[k] for k in range(len(cp))])
        np.testing.assert_allclose(model.log_prob(a, am, b, bm).double().numpy(), ref, atol=1e-4)


@pytest.mark.parametrize("scale,vocab_block", [
    (20.0, 16),       # beyond the direct bound: rows shifted by the first block's maxima
    (200.0, 1024),    # one block: its maxima are the rows' maxima
    (2000.0, 16),     # later blocks overflow the shifted sum: the rows' maxima over all blocks first
])
def test_large_logits_take_the_shifted_and_stable_paths(scale, vocab_block):
    model = _model("paper", True)
    with torch.no_grad():
        model.decoder.G_l.mul_(scale)                     # logits beyond the direct-exp bound
    cp = _chunk()
    got = FastScorer(model, "cpu", vocab_block=vocab_block).score(cp)
    P = reference_params(model)
    ref = np.array([log_p(x, y, P) for x, y in _pairs(cp)])
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-3)


def test_trie_shares_prefixes_per_root():
    seqs = [[4, 0], [4, 5, 0], [4, 5, 6, 0], [7, 0], [4, 5, 0]]       # sorted-table sources (+ a repeat)
    ids, lens = RaggedIds.from_lists(seqs).padded(np.arange(5))
    t = build_trie(ids, lens)
    assert t.n_nodes == 8 < lens.sum()                                # 8 GRU steps instead of 13
    assert t.starts.tolist() == [0, 2, 5, 7, 8]
    assert t.token.tolist() == [4, 7, 0, 5, 0, 0, 6, 0]
    assert t.parent.tolist() == [0, 0, 0, 0, 1, 3, 3, 6]              # level 0: the root
    assert t.path.tolist() == [[0, 2, -1, -1], [0, 3, 5, -1], [0, 3, 6, 7], [1, 4, -1, -1], [0, 3, 5, -1]]
    # the same sequences under two roots share only within a root (the decoder: one root per source)
    t2 = build_trie(ids, lens, roots=np.array([1, 0, 1, 0, 0]))
    assert t2.n_nodes == 10 and t2.starts.tolist() == [0, 3, 7, 9, 10]
    assert t2.root.tolist() == [0, 0, 1, 0, 0, 1, 1, 0, 1, 1]
    for k, q in enumerate(seqs):                                      # each path spells its sequence
        nodes = t2.path[k, :len(q)]
        assert t2.token[nodes].tolist() == q
        assert (t2.root[nodes] == [1, 0, 1, 0, 0][k]).all()
        assert t2.parent[nodes[1:]].tolist() == nodes[:-1].tolist()


@pytest.mark.parametrize("max_tokens,expected", [
    (100, [[0, 1, 2, 3, 4, 5]]),                  # everything fits
    (6, [[0, 1], [2, 3], [4, 5]]),                # cut at source boundaries, 6 tokens at most
    (3, [[0, 1], [2, 3], [4, 5]]),                # a source over the budget forms its own group
    (9, [[0, 1, 2, 3], [4, 5]]),
])
def test_groups_cut_at_source_boundaries(max_tokens, expected):
    cp = ChunkPairs.from_lists([[5, 0], [6, 0], [7, 0]], [0, 1, 0, 2, 1, 2], [[1, 0]] * 6)
    model = _model("paper", False)
    got = FastScorer(model, "cpu", max_tokens=max_tokens).groups(cp)
    # pairs come source by source (0: pairs 0, 2; 1: 1, 4; 2: 3, 5), in table order within a source
    order = [0, 2, 1, 4, 3, 5]
    assert [[order.index(int(k)) for k in g] for g in got] == expected


def test_ragged_padded_rows_in_order():
    r = RaggedIds.from_lists([[5, 6, 0], [7, 0], [8, 9, 10, 0]])
    ids, lens = r.padded(np.array([2, 1]))
    assert ids.tolist() == [[8, 9, 10, 0], [7, 0, 0, 0]] and lens.tolist() == [4, 2]
    assert r.padded(np.array([1]), pad_id=-1)[0].tolist() == [[7, 0]]
    assert r.padded(np.array([], dtype=np.int64))[0].shape == (0, 0)


def test_pair_flops_paper_size():
    cfg = EncDecConfig.preset("paper", 15001, 15001)
    # encoder 5 x 3.3M + c 1M; once per pair V_dec c 1M, C c 3M, O_c c 1M;
    # decoder 5 x (W_x 0.3M + U 3M + O_h 1M + O_y 0.1M + G_r 0.05M + G_l 1.5001M): about 52M multiply-adds
    assert pair_flops(cfg, 5, 5) == pytest.approx(2 * 52.2505e6)
    assert pair_flops(cfg, 5, 5, shared=True, targets_per_source=1.24) == pytest.approx(
        2 * (22.5e6 / 1.24 + 29.7505e6))


def test_work_without_sharing_is_the_unshared_pair_flops():
    model = _model("paper", False)
    cp = _chunk()
    scorer = FastScorer(model, "cpu", share_prefixes=False, precompute_vocab=False, max_tokens=50)
    work = {"sources": 0, "encoder_steps": 0, "decoder_steps": 0}
    for idx in scorer.groups(cp):
        enc, dec, tgt, root_src = scorer.tries(cp, idx)
        work["sources"] += len(enc.lengths)
        work["encoder_steps"] += enc.n_nodes
        work["decoder_steps"] += dec.n_nodes
    # every source of a group once; every target token one decoder step
    expected = sum(pair_flops(model.cfg, len(x), len(y)) for x, y in _pairs(cp))
    expected -= sum(pair_flops(model.cfg, len(cp.src[s]), 0) for s in cp.pair_src)   # per pair ...
    src_once = work_flops(model.cfg, {"sources": work["sources"], "encoder_steps": work["encoder_steps"],
                                      "decoder_steps": 0}, False)
    assert work["decoder_steps"] == cp.tgt.lengths.sum()
    assert work_flops(model.cfg, work, False) == pytest.approx(expected + src_once)   # ... or per source
    shared = FastScorer(model, "cpu", max_tokens=50)
    steps = sum(shared.tries(cp, idx)[1].n_nodes for idx in shared.groups(cp))
    assert steps < cp.tgt.lengths.sum()                    # targets of a source share their first step


@pytest.mark.parametrize("precision,tol", [("bf16", 0.2), ("fp16", 0.05)])
def test_autocast_precisions_run_and_stay_close(precision, tol):
    model = _model("paper", True)
    cp = _chunk()
    fp32 = FastScorer(model, "cpu").score(cp)
    low = FastScorer(model, "cpu", precision=precision).score(cp)
    assert np.isfinite(low).all()
    assert np.abs(low - fp32).max() < tol


# (device, precision, numpy's BLAS, torch has MKL, CPU vendor) -> what matmul="auto" runs on
AUTO_MATMUL = [
    ("cpu", "fp32", "openblas", True, "AuthenticAMD", "numpy"),
    ("cpu", "fp32", "openblas", True, "GenuineIntel", "torch"),
    ("cpu", "fp32", "openblas", True, "", "numpy"),
    ("cpu", "fp32", "openblas", False, "AuthenticAMD", "torch"),     # torch on OpenBLAS itself (e.g. ARM builds)
    ("cpu", "fp32", "mkl", True, "AuthenticAMD", "torch"),
    ("cpu", "bf16", "openblas", True, "AuthenticAMD", "torch"),
    ("cuda", "fp32", "openblas", True, "AuthenticAMD", "torch"),
]


@pytest.mark.parametrize("device, precision, blas, mkl, vendor, expected", AUTO_MATMUL)
def test_auto_matmul_is_a_function_of_the_machine(monkeypatch, device, precision, blas, mkl, vendor, expected):
    from phrase_rescore.pipeline.scoring import fast
    monkeypatch.setattr(fast, "numpy_blas", lambda: blas)
    monkeypatch.setattr(fast, "cpu_vendor", lambda: vendor)
    monkeypatch.setattr(torch.backends.mkl, "is_available", lambda: mkl)
    assert all(fast.choose_matmul(device, precision) == expected for _ in range(3))


def test_numpy_blas_is_the_one_numpy_was_built_with():
    from phrase_rescore.pipeline.scoring.fast import numpy_blas
    built = np.show_config(mode="dicts")["Build Dependencies"]["blas"]["name"]      # e.g. "scipy-openblas"
    assert numpy_blas() and numpy_blas() in built

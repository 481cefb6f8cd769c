"""The fast scorer: log p(target | source) for many phrase pairs, sharing all per-source work.

Same function as :meth:`phrase_rescore.pipeline.model.encdec.RNNEncoderDecoder.log_prob` (and :func:`~phrase_rescore.pipeline.model.reference.log_p`);
it reads the model's weights and reorganises the arithmetic:

1. **Prefix tries, no padding** (:mod:`.trie`). The encoder runs once per distinct source PREFIX
   (a sorted table puts "das", "das haus", "das haus ist" together); the decoder once per distinct
   (source, target prefix): all targets of a source share the first step and its softmax normaliser,
   and targets that start alike share more. Both run level by level -- a node's GRU step reads its
   parent's state -- so a level holds exactly the sequences still running: no padding, no masks.
2. **c-dependent terms once per source**, in ONE matmul: the decoder start ``tanh(V_dec c)``, the
   context terms of both gates and the candidate ``C c`` (3H) and the output layer's ``O_c c``
   (2M); the decoder adds ``C c`` instead of multiplying by C at every step.
3. **Input-side products of a word** (``W_x e(x)`` in both GRUs, ``O_y e(y)`` in the output layer)
   are one matmul per level, or, with ``precompute_vocab=True``, rows of per-vocabulary tables
   ``E W_x^T`` (Vs x 3H) and ``E_tgt [W_x; O_y]^T`` (Vt+1 x (3H+2M)) built once at start-up.
4. **The softmax normaliser in base 2, in cache-sized blocks.** ``log sum_j exp(l_j)`` equals
   ``log sum_j 2^(l_j log2 e)``: with ``G_l`` and ``b_g`` scaled by ``log2 e`` once, the logits come
   out in base 2 and torch's ``exp2`` (about 4x faster than ``exp`` on a CPU, same float32 accuracy)
   replaces ``exp``. On a CPU the logits are made in blocks of ``softmax_rows`` x ``vocab_block``
   that stay in cache, exponentiated and summed in place; no (tokens x Vt) matrix is ever stored.
   When a bound on the logits allows it (|u| max_j |G_l[j]| + max |b_g| <= 60) the sum needs no
   shift; otherwise each row is shifted by its maximum over the first block (one more pass over each
   block, still in cache), and only when a later logit exceeds that by 2^127 (the sum overflows) are
   the row maxima over the whole vocabulary taken first, as on CUDA, where the checks would cost a
   sync. The true word's logit is a row dot product.
5. **Groups bound memory**: pairs are taken source by source in groups of at most ``max_tokens``
   target tokens; a group's sources are encoded, their context rows made and its pairs decoded.
6. Everything under ``torch.inference_mode``; optional autocast (``precision="bf16"``/``"fp16"``) on
   CUDA, whose effect on scores the benchmark measures: the matrix products run in low precision,
   while the recurrent state, the gates and the softmax normaliser stay float32 (``.float()`` after
   each product is a no-op in fp32).
7. **The faster BLAS on a CPU.** Nearly all the time goes into float32 matrix products, and torch's
   MKL is not the fastest library on every CPU: on the 2-core AMD EPYC this was tuned on, numpy's
   OpenBLAS runs the scorer's products 13-15% faster. ``matmul="numpy"`` sends them through numpy
   (zero-copy views of the same memory); :func:`choose_matmul` picks one from the libraries and the CPU.

Shapes: n_d nodes at a level, H hidden, E embedding, M maxout units (2M pre-activations), R rank,
Vs/Vt vocabularies.
"""
from __future__ import annotations

import contextlib
import math
import os
import platform

import numpy as np
import torch
import torch.nn.functional as F
from threadpoolctl import threadpool_limits

from ..configs import MATMULS, PRECISIONS
from .chunk_pairs import ChunkPairs
from .trie import PrefixTrie, build_trie

LOG2E = 1.0 / math.log(2.0)
PRECOMPUTE_MAX_BYTES = 1 << 30


class FastScorer:
    """Batched, prefix-sharing log p(y|x) over an :class:`~phrase_rescore.pipeline.model.encdec.RNNEncoderDecoder`.

    :param model: the encoder-decoder (its weights are copied to ``device`` in float32).
    :param device: ``"cpu"``, ``"cuda"``... (default: CUDA when present).
    :param precision: ``"fp32"`` (default) or ``"bf16"``/``"fp16"`` autocast (meant for CUDA).
    :param precompute_vocab: look input-side products up in per-vocabulary tables; None (auto): when
        the tables take at most 1 GiB (420 MB for the ``paper`` preset with 15k-word vocabularies).
        On 2 CPU cores it made both presets 1-6% faster; see benchmarks/score_bench.py.
    :param max_tokens: target tokens per group (see 5. above); None (auto): 4,096,000 / H, i.e.
        4096 for the paper's H=1000 and 16000 for ``small`` (H=256), so that a level's (n_d, H)
        tensors have about the same size whatever the model.
    :param share_prefixes: share prefixes (1. above); False: every source and every pair its own
        root (each sequence still runs without padding) -- to measure what sharing saves.
    :param softmax_rows, vocab_block: the softmax's block shape on a CPU (defaults: 512 x 1024, the
        best of a sweep on 2 cores); on CUDA one block spans the vocabulary, with 4096 rows.
    :param matmul: the BLAS of the matrix products (7. above): ``"torch"`` or, on a CPU in float32,
        ``"numpy"`` (:func:`choose_matmul` picks one). ``"numpy"`` is meant for scorers on one
        thread each (:func:`one_thread_each`): with torch's and numpy's thread pools both spinning on the
        same cores, it measured 20x slower.
    """

    def __init__(self, model, device: str | torch.device | None = None, precision: str = "fp32",
                 precompute_vocab: bool | None = None, max_tokens: int | None = None,
                 share_prefixes: bool = True, softmax_rows: int = 512, vocab_block: int = 1024,
                 matmul: str = "torch"):
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        if matmul not in MATMULS:
            raise ValueError(f"matmul must be one of {MATMULS}, got {matmul!r}")
        cfg = model.cfg
        self.device = torch.device(device if device is not None else
                                   ("cuda" if torch.cuda.is_available() else "cpu"))
        self.precision = precision
        if matmul == "numpy" and (self.device.type != "cpu" or precision != "fp32"):
            raise ValueError("matmul='numpy' is for float32 on a CPU")
        self.matmul = matmul
        self.reset = cfg.gru
        H, E = cfg.hidden_dim, cfg.emb_dim
        self.max_tokens = int(max_tokens) if max_tokens else max(256, 4_096_000 // H)
        self.share_prefixes = share_prefixes
        cpu = self.device.type == "cpu"
        self.softmax_rows = int(softmax_rows) if cpu else max(int(softmax_rows), 4096)
        self.H, self.E = H, E
        self.M, self.pieces = cfg.maxout_units, cfg.maxout_pieces
        self.P = self.M * self.pieces
        if precompute_vocab is None:              # 420 MB for the paper's sizes and 15k-word vocabularies
            table_bytes = 4 * (cfg.src_vocab_size * 3 * H + (cfg.tgt_vocab_size + 1) * (3 * H + self.P))
            precompute_vocab = table_bytes <= PRECOMPUTE_MAX_BYTES
        self.precompute_vocab = precompute_vocab
        sd = {k: v.detach().to(self.device, torch.float32) for k, v in model.state_dict().items()}
        zeros = lambda n: torch.zeros(n, device=self.device)  # noqa: E731

        # encoder
        self.E_src = sd["encoder.E_src"]                                   # (Vs, E)
        self.enc_Wx = sd["encoder.cell.W_x"]                               # (3H, E)
        self.enc_b = sd.get("encoder.cell.b", zeros(3 * H))                # (3H,)
        self.enc_U = sd["encoder.cell.U"]                                  # (3H, H)
        self.V = sd["encoder.V"]                                           # (H, H)
        # decoder: c-dependent terms stacked into one matrix, applied once per source
        self.ctx_W = torch.cat([sd["decoder.V_dec"], sd["decoder.cell.C"], sd["decoder.O_c"]], 0)  # (4H+2M, H)
        self.ctx_b = torch.cat([zeros(4 * H), sd.get("decoder.b_o", zeros(self.P))])              # (4H+2M,)
        # input-side terms of the previous target word: [W_x; O_y] stacked, row Vt = e(y_0) = 0
        E_tgt = sd["decoder.E_tgt"]
        self.Vt = E_tgt.shape[0]
        self.E_tgt0 = torch.cat([E_tgt, E_tgt.new_zeros(1, E)], 0)        # (Vt+1, E)
        self.in_W = torch.cat([sd["decoder.cell.W_x"], sd["decoder.O_y"]], 0)  # (3H+2M, E)
        self.in_b = torch.cat([sd.get("decoder.cell.b", zeros(3 * H)), zeros(self.P)])
        self.dec_U = sd["decoder.cell.U"]                                  # (3H, H)
        self.O_h = sd["decoder.O_h"]                                       # (2M, H)
        self.G_r = sd["decoder.G_r"]                                       # (R, M)
        self.G_l = sd["decoder.G_l"]                                       # (Vt, R)
        self.b_g = sd.get("decoder.b_g")                                   # (Vt,) or None
        # the softmax in base 2 (4. above), cut into vocabulary blocks
        block = int(vocab_block) if cpu else self.Vt
        G2 = self.G_l * LOG2E
        b2 = self.b_g * LOG2E if self.b_g is not None else None
        self._blocks = [(G2[a:a + block], None if b2 is None else b2[a:a + block])
                        for a in range(0, self.Vt, block)]
        # the paper's form needs U split: [U_r; U_z] before the gates, U after (r * h)
        self.enc_U_rz, self.enc_U_c = self.enc_U[:2 * H].contiguous(), self.enc_U[2 * H:].contiguous()
        self.dec_U_rz, self.dec_U_c = self.dec_U[:2 * H].contiguous(), self.dec_U[2 * H:].contiguous()
        self._gl_norm = float(self.G_l.norm(dim=1).max())
        self._bg_max = float(self.b_g.abs().max()) if self.b_g is not None else 0.0
        self._tanh_ = self._tanh_cpu if cpu else torch.tanh_
        self.enc_table = self.dec_table = None
        if precompute_vocab:
            with torch.inference_mode():
                self.enc_table = F.linear(self.E_src, self.enc_Wx, self.enc_b)     # (Vs, 3H)
                self.dec_table = F.linear(self.E_tgt0, self.in_W, self.in_b)       # (Vt+1, 3H+2M)

    # ------------------------------------------------------------------ helpers
    def _autocast(self):
        if self.precision == "fp32":
            return contextlib.nullcontext()
        dtype = torch.bfloat16 if self.precision == "bf16" else torch.float16
        return torch.autocast(device_type=self.device.type, dtype=dtype)

    @staticmethod
    def _tanh_cpu(x: torch.Tensor) -> torch.Tensor:
        """tanh in place as 2 sigmoid(2x) - 1 (within 2e-7): torch's CPU tanh is ~6x slower than its sigmoid."""
        return x.mul_(2.0).sigmoid_().mul_(2.0).sub_(1.0)

    def _linear(self, x: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        return linear(x, W, b, self.matmul)

    def _tensor(self, a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a)).to(self.device, non_blocking=True)

    def _gru_step(self, a: torch.Tensor, h: torch.Tensor, U: torch.Tensor, U_rz: torch.Tensor,
                  U_c: torch.Tensor) -> torch.Tensor:
        """a: (n, 3H) input (+ context) terms, h: (n, H) -> new h (n, H).

        z multiplies the old state (eq 7); r acts before U (eq 8, ``"paper"``) or after (``"cudnn"``).
        """
        H = self.H
        if self.reset == "paper":
            rz = self._linear(h, U_rz, a[:, :2 * H]).sigmoid_()                      # (n, 2H): (5), (6)
            r, z = rz[:, :H], rz[:, H:]
            cand = self._tanh_(self._linear(r * h, U_c, a[:, 2 * H:]))              # (n, H): (8)
        else:
            g = self._linear(h, U)                                          # (n, 3H): one matmul
            rz = torch.add(a[:, :2 * H], g[:, :2 * H]).sigmoid_()
            r, z = rz[:, :H], rz[:, H:]
            cand = self._tanh_(torch.addcmul(a[:, 2 * H:], r, g[:, 2 * H:]))  # r after U
        return torch.lerp(cand, h, z)                                       # z*h + (1-z)*cand (7)

    def _enc_inputs(self, tok: torch.Tensor) -> torch.Tensor:
        """W_x e(x) + b for source tokens: (n,) -> (n, 3H)."""
        if self.enc_table is not None:
            return F.embedding(tok, self.enc_table)
        return self._linear(F.embedding(tok, self.E_src), self.enc_Wx, self.enc_b)

    def _dec_inputs(self, tok: torch.Tensor) -> torch.Tensor:
        """[W_x e(y) + b | O_y e(y)] for previous target words (Vt = y_0): (n,) -> (n, 3H+2M)."""
        if self.dec_table is not None:
            return F.embedding(tok, self.dec_table)
        return self._linear(F.embedding(tok, self.E_tgt0), self.in_W, self.in_b)

    # ------------------------------------------------------------------ encoder
    def encode(self, trie: PrefixTrie) -> torch.Tensor:
        """Summaries c (n, H) of the trie's sequences (roots: the zero state), one GRU step per node."""
        H = self.H
        last = torch.empty(len(trie.lengths), H, device=self.device)       # h_N of each sequence
        prev = None
        for d in range(trie.n_levels):
            lv = trie.level(d)
            x = self._enc_inputs(self._tensor(trie.token[lv]))             # (n_d, 3H)
            h = x.new_zeros(x.shape[0], H) if d == 0 else \
                prev.index_select(0, self._tensor(trie.parent[lv] - trie.starts[d - 1]))  # parents' states
            cur = self._gru_step(x, h, self.enc_U, self.enc_U_rz, self.enc_U_c)
            ends = np.flatnonzero(trie.lengths == d + 1)
            if len(ends):
                last[self._tensor(ends)] = cur.index_select(0, self._tensor(trie.path[ends, d] - lv.start))
            prev = cur
        return self._tanh_(self._linear(last, self.V))                     # c = tanh(V h_N): (n, H)

    def contexts(self, c: torch.Tensor) -> torch.Tensor:
        """(n, H) summaries -> (n, 4H+2M) rows [s0 | C c | O_c c + b_o], one matmul per source."""
        ctx = self._linear(c, self.ctx_W, self.ctx_b)
        self._tanh_(ctx[:, :self.H])                                       # h'_0 = tanh(V_dec c)
        return ctx

    # ------------------------------------------------------------------ decoder
    def log_normalizer(self, u: torch.Tensor) -> torch.Tensor:
        """log sum_j exp(u G_l[j] + b_g[j]) for the rows of u (n, R) -> (n,), in base 2 (4. above)."""
        n = u.shape[0]
        out = torch.empty(n, device=u.device)
        cpu = self.device.type == "cpu"
        direct = cpu and float(u.float().norm(dim=1).max()) * self._gl_norm + self._bg_max <= 60.0
        for a in range(0, n, self.softmax_rows):
            us = u[a:a + self.softmax_rows]
            if direct:          # |logits| small: sum 2^l directly, block by block, in cache
                acc = None
                for G2, b2 in self._blocks:
                    s = self._linear(us, G2, b2).exp2_().sum(1)
                    acc = s if acc is None else acc.add_(s)
                out[a:a + self.softmax_rows] = acc.log_()               # ln sum 2^(l log2 e) = ln sum e^l
                continue
            if cpu:             # shifted by the first block's row maxima: one more pass, still in cache
                shift = acc = None
                for G2, b2 in self._blocks:
                    l2 = self._linear(us, G2, b2)
                    if shift is None:
                        shift = l2.amax(1, keepdim=True)                   # (rows, 1); the sum is >= 1
                    s = l2.sub_(shift).exp2_().sum(1)
                    acc = s if acc is None else acc.add_(s)
                if bool(torch.isfinite(acc).all()):                       # no logit 2^127 above the shift
                    out[a:a + self.softmax_rows] = (shift.squeeze(1) + acc.log2_()) / LOG2E
                    continue
            l2 = torch.cat([self._linear(us, G2, b2) for G2, b2 in self._blocks], 1)  # the row maxima first
            m = l2.amax(1, keepdim=True)
            out[a:a + self.softmax_rows] = (m.squeeze(1) + l2.sub_(m).exp2_().sum(1).log2_()) / LOG2E
        return out

    def decode(self, ctx: torch.Tensor, trie: PrefixTrie, tgt: np.ndarray) -> torch.Tensor:
        """log p of the targets (n, T) padded (row k: ``trie.lengths[k]`` tokens), given the context
        rows (n_roots, 4H+2M) that the trie's roots index; the trie is over ``<bos> y_1 .. y_{T-1}``."""
        H = self.H
        lp = torch.zeros(len(trie.lengths), device=self.device)
        tail = ctx[:, H:].contiguous()                                      # (n_roots, 3H+2M): [C c | O_c c + b_o]
        prev = None
        for d in range(trie.n_levels):
            lv = trie.level(d)
            x = self._dec_inputs(self._tensor(trie.token[lv]))             # (n_d, 3H+2M) [W_x e + b | O_y e]
            if d == 0 and lv.stop - lv.start == len(ctx):                   # one node per root, in order
                x.add_(tail)
                h = ctx[:, :H]                                              # h'_0 = tanh(V_dec c)
            else:
                root = self._tensor(trie.root[lv])
                x.add_(tail.index_select(0, root))                          # + its source's terms
                h = ctx[:, :H].index_select(0, root) if d == 0 else \
                    prev.index_select(0, self._tensor(trie.parent[lv] - trie.starts[d - 1]))
            s = self._gru_step(x[:, :3 * H], h, self.dec_U, self.dec_U_rz, self.dec_U_c)
            # the output layer (maxout, rank-R softmax) at every node of the level
            pre = self._linear(s, self.O_h, x[:, 3 * H:])                   # (n_d, 2M)
            u = self._linear(pre.unflatten(1, (self.M, self.pieces)).amax(2), self.G_r)  # (n_d, R)
            lse = self.log_normalizer(u)                                    # (n_d,)
            # the words read at this level: y_{d+1} of every target longer than d
            rows = np.flatnonzero(trie.lengths > d)
            node = self._tensor(trie.path[rows, d] - lv.start)
            words = self._tensor(tgt[rows, d])
            true = (u.index_select(0, node) * self.G_l.index_select(0, words)).sum(1)
            if self.b_g is not None:
                true = true + self.b_g.index_select(0, words)
            lp.index_add_(0, self._tensor(rows), true - lse.index_select(0, node))
            prev = s
        return lp

    # ------------------------------------------------------------------ a chunk
    def groups(self, pairs: ChunkPairs) -> list[np.ndarray]:
        """The chunk's pair indices, source by source, cut into groups of <= ``max_tokens`` target
        tokens at source boundaries (a source with more tokens forms a group of its own)."""
        n = len(pairs)
        order = np.argsort(pairs.pair_src, kind="stable")
        src_sorted = pairs.pair_src[order]
        cum = np.cumsum(pairs.tgt.lengths[order])
        bounds = np.flatnonzero(np.r_[True, src_sorted[1:] != src_sorted[:-1], True])  # source starts + n
        out, a = [], 0
        while a < n:
            b = int(np.searchsorted(cum, (cum[a - 1] if a else 0) + self.max_tokens, side="right"))
            b = int(bounds[np.searchsorted(bounds, b, side="right") - 1])   # back to a source boundary
            if b <= a:
                b = int(bounds[np.searchsorted(bounds, a, side="right")])   # one whole source
            out.append(order[a:b])
            a = b
        return out

    def tries(self, pairs: ChunkPairs, idx: np.ndarray):
        """The work of group ``idx``: (encoder trie over its distinct sources, decoder trie over
        ``<bos> y_1 .. y_{T-1}`` rooted at each pair's source, targets (n_g, T) padded, and without
        sharing the source row of each root -- a root per pair -- else None)."""
        srcs, local = np.unique(pairs.pair_src[idx], return_inverse=True)
        src_ids, src_len = pairs.src.padded(srcs)
        enc = build_trie(src_ids, src_len, None if self.share_prefixes else np.arange(len(srcs)))
        tgt, tgt_len = pairs.tgt.padded(idx)                                         # (n_g, T)
        dec_in = np.concatenate([np.full((len(idx), 1), self.Vt, dtype=np.int64), tgt[:, :-1]], 1)
        if self.share_prefixes:
            return enc, build_trie(dec_in, tgt_len, local), tgt, None
        return enc, build_trie(dec_in, tgt_len, np.arange(len(idx))), tgt, local

    def score_group(self, pairs: ChunkPairs, idx: np.ndarray) -> np.ndarray:
        """log p(tgt | src) of the pairs ``idx`` (one of :meth:`groups`): (len(idx),) float64.

        Worker threads may score different groups at once (torch releases the GIL).
        """
        enc, dec, tgt, root_src = self.tries(pairs, idx)
        with torch.inference_mode(), self._autocast():
            ctx = self.contexts(self.encode(enc))                  # 1. each source: c, c-dependent terms
            if root_src is not None:                                # no sharing: a root per pair
                ctx = ctx.index_select(0, self._tensor(root_src))
            return self.decode(ctx, dec, tgt).double().cpu().numpy()   # 2. its pairs

    def score(self, pairs: ChunkPairs, pool=None) -> np.ndarray:
        """log p(tgt | src) for every pair of a chunk: (len(pairs),) float64, in pair order; groups
        run on ``pool`` (a :class:`concurrent.futures.Executor`) when given."""
        out = np.zeros(len(pairs), dtype=np.float64)
        groups = self.groups(pairs)
        if pool is None:
            results = (self.score_group(pairs, idx) for idx in groups)
        else:
            results = pool.map(lambda idx: self.score_group(pairs, idx), groups)
        for idx, lp in zip(groups, results):
            out[idx] = lp
        return out


def linear(x: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None, matmul: str = "torch") -> torch.Tensor:
    """x W^T (+ b: a vector, or an (n, out) matrix) as float32, through torch's BLAS or numpy's."""
    if matmul == "numpy":
        out = np.matmul(x.numpy(), W.numpy().T)            # views: no copies of x or W
        if b is not None:
            np.add(out, b.numpy(), out=out)
        return torch.from_numpy(out)
    return (torch.mm(x, W.t()) if b is None else torch.addmm(b, x, W.t())).float()


@contextlib.contextmanager
def one_thread_each():
    """Run torch and every BLAS (numpy's too) on one thread, as each of the stage's workers does;
    restored on exit. Process-wide: enter it once, around all the workers, never per worker."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1, user_api="blas"):
            yield
    finally:
        torch.set_num_threads(before)


def cpu_vendor() -> str:
    """The CPU's vendor string (``"GenuineIntel"``, ``"AuthenticAMD"``...), or ``""`` when unknown."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    name = platform.processor()                    # Windows: "Intel64 Family 6 ..., GenuineIntel"
    return next((v for v in ("GenuineIntel", "AuthenticAMD") if v in name), "")


def numpy_blas() -> str:
    """numpy's BLAS library as threadpoolctl names it (``"openblas"``, ``"mkl"``, ``"blis"``...), or ``""``."""
    from threadpoolctl import threadpool_info

    blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    own = [i for i in blas if "numpy" in os.path.basename(os.path.dirname(i.get("filepath", "")))]  # numpy.libs/
    return (own or blas or [{}])[0].get("internal_api", "")


def choose_matmul(device: torch.device | str, precision: str = "fp32") -> str:
    """The BLAS that ``matmul="auto"`` runs the matrix products on: a function of the device, the
    precision and the libraries present, never of a timing, so that the same command writes the same
    bytes on a busy machine as on an idle one (the two BLAS round float32 sums differently).

    ``"numpy"`` on a CPU in float32 when numpy's BLAS is OpenBLAS, torch's is MKL and the CPU is not
    Intel's (MKL's fastest kernels are for Intel CPUs: on the 2-core AMD EPYC this was tuned on,
    OpenBLAS ran the scorer's products 13-15% faster, while on an Intel Xeon MKL was the faster);
    otherwise ``"torch"``.
    """
    if torch.device(device).type != "cpu" or precision != "fp32":
        return "torch"
    if numpy_blas() == "openblas" and torch.backends.mkl.is_available() and cpu_vendor() != "GenuineIntel":
        return "numpy"
    return "torch"


def pair_flops(cfg, src_len: int, tgt_len: int, shared: bool = False, targets_per_source: float = 1.0) -> float:
    """Floating-point operations (2 per multiply-add) of the model's matrix products for one pair.

    Unshared (``shared=False``): what ``RNNEncoderDecoder.log_prob`` does per row of a batch (as
    GroundHog does): the encoder over S tokens, c, and once per pair the decoder start, ``C c`` and
    ``O_c c``; then at each of the T steps the GRU, the output layer and the full softmax.
    ``shared=True`` divides the per-source part by ``targets_per_source``, as :class:`FastScorer` does.
    """
    E, H, P, R, V = cfg.emb_dim, cfg.hidden_dim, cfg.maxout_units * cfg.maxout_pieces, cfg.rank, cfg.tgt_vocab_size
    per_source = src_len * (3 * H * E + 3 * H * H) + H * H                 # GRU steps + c = tanh(V h)
    per_source += H * H + 3 * H * H + P * H                                 # V_dec c, C c, O_c c
    dec = tgt_len * (3 * H * E + 3 * H * H + P * H + P * E + R * cfg.maxout_units + V * R)
    return 2.0 * (per_source / (targets_per_source if shared else 1.0) + dec)


def work_flops(cfg, work: dict, precompute_vocab: bool) -> float:
    """Floating-point operations of the matrix products :class:`FastScorer` performs for ``work``
    (``encoder_steps``, ``sources``, ``decoder_steps``, as counted by the score benchmark): per
    encoder step the GRU, per source ``c = tanh(V h)`` and the c-dependent terms, per decoder step the
    GRU, the output layer and the full softmax; the word-input products only without ``precompute_vocab``."""
    E, H, P, R, V = cfg.emb_dim, cfg.hidden_dim, cfg.maxout_units * cfg.maxout_pieces, cfg.rank, cfg.tgt_vocab_size
    inputs = 0 if precompute_vocab else 1
    enc = 3 * H * H + inputs * 3 * H * E
    src = H * H + (4 * H + P) * H
    dec = 3 * H * H + P * H + R * cfg.maxout_units + V * R + inputs * (3 * H + P) * E
    return 2.0 * (work["encoder_steps"] * enc + work["sources"] * src + work["decoder_steps"] * dec)

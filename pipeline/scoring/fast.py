"""The fast scorer: log p(target | source) for many phrase pairs, sharing all per-source work.

Same function as :meth:`pipeline.model.encdec.RNNEncoderDecoder.log_prob` (and seed 000's ``log_p``);
it reads the model's weights and reorganises the arithmetic:

1. **Each distinct source is encoded once**, and more: each distinct source PREFIX (a sorted table
   puts "das", "das haus", "das haus ist" together; the encoder state after a prefix depends only on
   it), level by level with no padding; then
   every c-dependent term is computed once per source in ONE matmul: the decoder start
   ``tanh(V_dec c)``, the context terms of both gates and the candidate ``C c`` (3H) and the output
   layer's ``O_c c`` (2M). The decoder loop then only adds ``C c`` (pre-added to the input terms)
   instead of multiplying by C at every step.
2. **Input-side products of a word** (``W_x e(x)`` in both GRUs and ``O_y e(y)`` in the output
   layer) are computed for all positions of a batch in one matmul before the loop, or, with
   ``precompute_vocab=True``, looked up in per-vocabulary tables ``E W_x^T`` (Vs x 3H) and
   ``E_tgt [W_x; O_y]^T`` (Vt+1 x (3H+2M)), built once at start-up.
3. **Batches** are length-bucketed and sized in tokens (:func:`.batching.length_batches`); the loop
   runs time-major so each step reads contiguous rows; the recurrence needs no mask when a batch has
   one length (the common case) and uses one ``where`` per step otherwise.
4. **The output layer and softmax run after the recurrence on the real target positions only**
   (padding is skipped), in slabs of ``softmax_tokens`` rows so the (tokens x Vt) logits stay small;
   the true word's logit is a row dot product, the normaliser a ``logsumexp``.
5. Everything under ``torch.inference_mode``; optional autocast (``precision="bf16"``/``"fp16"``) on
   CUDA, whose effect on scores the benchmark measures: the matrix products run in low precision,
   while the recurrent state, the gates and the softmax normaliser stay float32 (``.float()`` after each
   product is a no-op in fp32).

Shapes: S/T source/target length, B batch, N real target tokens, H hidden, E embedding,
M maxout units (2M pre-activations), R rank, Vs/Vt vocabularies.
"""
from __future__ import annotations

import contextlib

import numpy as np
import torch
import torch.nn.functional as F

from .batching import ChunkPairs, PrefixLevels, length_batches, lengths_of, pad, prefix_levels

PRECISIONS = ("fp32", "bf16", "fp16")


class FastScorer:
    """Batched, source-sharing log p(y|x) over an :class:`~pipeline.model.encdec.RNNEncoderDecoder`.

    :param model: the encoder-decoder (its weights are copied to ``device`` in float32).
    :param device: ``"cpu"``, ``"cuda"``... (default: CUDA when present).
    :param precision: ``"fp32"`` (default) or ``"bf16"``/``"fp16"`` autocast (meant for CUDA).
    :param precompute_vocab: look input-side products up in per-vocabulary tables; None (auto): only
        when H <= 512. On 2 CPU cores it made the ``small`` preset faster (its E=64 input products
        are thin matmuls) and the ``paper`` preset slower (420 MB of tables gathered at random);
        see benchmarks/score_bench.py.
    :param max_tokens: padded target tokens per batch (sources: the same budget); None (auto):
        4,096,000 / H, i.e. 4096 for the paper's H=1000 and 16000 for ``small`` (H=256), so that a
        step's (B, H) tensors have the same size whatever the model.
    :param share_prefixes: encode each distinct source PREFIX once (:func:`.batching.prefix_levels`);
        False: each distinct source once, in length-bucketed padded batches (:meth:`encode`).
    :param softmax_tokens: target positions per output-layer slab (bounds the logits' memory; at
        least 4096 on CUDA, where bigger launches pay).
    """

    def __init__(self, model, device: str | torch.device | None = None, precision: str = "fp32",
                 precompute_vocab: bool | None = None, max_tokens: int | None = None, softmax_tokens: int = 256,
                 share_prefixes: bool = True):
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        cfg = model.cfg
        self.device = torch.device(device if device is not None else
                                   ("cuda" if torch.cuda.is_available() else "cpu"))
        self.precision = precision
        self.reset = cfg.gru
        H, E = cfg.hidden_dim, cfg.emb_dim
        self.max_tokens = int(max_tokens) if max_tokens else max(256, 4_096_000 // H)
        self.share_prefixes = share_prefixes
        self.softmax_tokens = int(softmax_tokens) if self.device.type == "cpu" else max(int(softmax_tokens), 4096)
        if precompute_vocab is None:
            precompute_vocab = H <= 512
        self.precompute_vocab = precompute_vocab
        self.H, self.E = H, E
        self.M, self.pieces = cfg.maxout_units, cfg.maxout_pieces
        self.P = self.M * self.pieces
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
        # the paper's form needs U split: [U_r; U_z] before the gates, U after (r * h)
        self.enc_U_rz, self.enc_U_c = self.enc_U[:2 * H].contiguous(), self.enc_U[2 * H:].contiguous()
        self.dec_U_rz, self.dec_U_c = self.dec_U[:2 * H].contiguous(), self.dec_U[2 * H:].contiguous()
        self._gl_norm = float(self.G_l.norm(dim=1).max())
        self._bg_max = float(self.b_g.abs().max()) if self.b_g is not None else 0.0
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

    def _gru_step(self, a: torch.Tensor, h: torch.Tensor, U: torch.Tensor, U_rz: torch.Tensor,
                  U_c: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """a: (B, 3H) input (+ context) terms, h: (B, H) -> new h (B, H), written to ``out`` if given.

        z multiplies the old state (eq 7); r acts before U (eq 8, ``"paper"``) or after (``"cudnn"``).
        """
        H = self.H
        if self.reset == "paper":
            rz = torch.addmm(a[:, :2 * H], h, U_rz.t()).float().sigmoid_()          # (B, 2H): (5), (6)
            r, z = rz[:, :H], rz[:, H:]
            cand = torch.addmm(a[:, 2 * H:], r * h, U_c.t()).float().tanh_()        # (B, H): (8)
        else:
            g = torch.mm(h, U.t()).float()                                  # (B, 3H): one matmul
            rz = torch.add(a[:, :2 * H], g[:, :2 * H]).sigmoid_()
            r, z = rz[:, :H], rz[:, H:]
            cand = torch.addcmul(a[:, 2 * H:], r, g[:, 2 * H:]).tanh_()     # r after U
        return torch.lerp(cand, h, z, out=out)                              # z*h + (1-z)*cand (7)

    # ------------------------------------------------------------------ encoder
    def encode(self, ids: torch.Tensor, lengths: torch.Tensor, uniform: bool | None = None) -> torch.Tensor:
        """Padded source ids (B, S) with their lengths (B,) -> summaries c (B, H).

        ``uniform``: every length is S (no mask needed); computed when not given (a device sync).
        """
        B, S = ids.shape
        ids_t = ids.t()                                                    # (S, B) time-major
        if self.enc_table is not None:
            x = F.embedding(ids_t, self.enc_table)                         # (S, B, 3H)
        else:
            x = F.linear(F.embedding(ids_t, self.E_src), self.enc_Wx, self.enc_b).float()  # (S, B, 3H)
        h = x.new_zeros(B, self.H)                                         # h<0> = 0
        if uniform is None:
            uniform = bool((lengths == S).all())
        for t in range(S):
            h_new = self._gru_step(x[t], h, self.enc_U, self.enc_U_rz, self.enc_U_c)
            h = h_new if uniform else torch.where((t < lengths)[:, None], h_new, h)
        return torch.tanh(torch.mm(h, self.V.t()).float())                         # c = tanh(V h_N): (B, H)

    def encode_prefixes(self, levels: PrefixLevels) -> torch.Tensor:
        """Summaries c (n_seqs, H) of every sequence of ``levels``, each distinct prefix run once.

        Level by level: the GRU step of a prefix reads its parent prefix's state, so there is no
        padding and no mask, and a prefix shared by many sources costs one step.
        """
        dev, H = self.device, self.H
        n = len(levels.end_level)
        h_last = torch.empty(n, H, device=dev)
        rows = max(1, self.max_tokens)
        prev = None                                                          # states of level d-1
        for d, (tok, par) in enumerate(zip(levels.tokens, levels.parents)):
            tok_t = torch.from_numpy(tok).to(dev)
            cur = torch.empty(len(tok), H, device=dev)                       # (n_d, H)
            for a in range(0, len(tok), rows):
                sl = slice(a, a + rows)
                if self.enc_table is not None:
                    x = F.embedding(tok_t[sl], self.enc_table)               # (b, 3H)
                else:
                    x = F.linear(F.embedding(tok_t[sl], self.E_src), self.enc_Wx, self.enc_b).float()
                h = x.new_zeros(x.shape[0], H) if prev is None else \
                    prev.index_select(0, torch.from_numpy(par[sl]).to(dev))  # parents' states
                self._gru_step(x, h, self.enc_U, self.enc_U_rz, self.enc_U_c, out=cur[sl])
            ends = np.flatnonzero(levels.end_level == d)
            if len(ends):
                h_last[torch.from_numpy(ends).to(dev)] = cur.index_select(
                    0, torch.from_numpy(levels.end_pos[ends]).to(dev))
            prev = cur
        return torch.tanh(torch.mm(h_last, self.V.t()).float())              # c = tanh(V h_N): (n, H)

    def contexts(self, c: torch.Tensor) -> torch.Tensor:
        """(B, H) summaries -> (B, 4H+2M) rows [s0 | C c | O_c c + b_o], one matmul per source."""
        ctx = torch.addmm(self.ctx_b, c, self.ctx_W.t()).float()
        ctx[:, :self.H] = torch.tanh(ctx[:, :self.H])                      # h'_0 = tanh(V_dec c)
        return ctx

    # ------------------------------------------------------------------ decoder
    def decode(self, ctx: torch.Tensor, tgt: torch.Tensor, lengths: torch.Tensor,
               uniform: bool | None = None) -> torch.Tensor:
        """Per-pair context rows (B, 4H+2M), padded targets (B, T), lengths (B,) -> log p (B,)."""
        H, P = self.H, self.P
        B, T = tgt.shape
        prev = torch.cat([tgt.new_full((B, 1), self.Vt), tgt[:, :-1]], 1).t()  # (T, B); Vt = e(y_0)=0
        if self.dec_table is not None:
            xin = F.embedding(prev, self.dec_table)                        # (T, B, 3H+2M)
        else:
            xin = F.linear(F.embedding(prev, self.E_tgt0), self.in_W, self.in_b).float()  # (T, B, 3H+2M)
        a = xin[..., :3 * H] + ctx[None, :, H:4 * H]                       # (T, B, 3H): W_x e + C c
        s = ctx[:, :H]                                                     # (B, H) start state
        states = a.new_empty(T, B, H)
        for t in range(T):                                                 # past a row's end: unused
            s = self._gru_step(a[t], s, self.dec_U, self.dec_U_rz, self.dec_U_c, out=states[t])
        # the output layer on real positions only, time-major flattening: position k = t*B + b
        if uniform is None:
            uniform = bool((lengths == T).all())
        if uniform:
            pos = None
            rows = torch.arange(B, device=tgt.device).repeat(T)            # (N,) pair of each token
            words = tgt.t().reshape(-1)                                    # (N,)
            s_n = states.reshape(T * B, H)
            y_n = xin[..., 3 * H:].reshape(T * B, P)
        else:
            valid = (torch.arange(T, device=tgt.device)[:, None] < lengths[None, :]).reshape(-1)
            pos = valid.nonzero().squeeze(1)                               # (N,)
            rows = pos % B
            words = tgt.t().reshape(-1)[pos]
            s_n = states.reshape(T * B, H)[pos]
            y_n = xin[..., 3 * H:].reshape(T * B, P)[pos]
        out_c = ctx[:, 4 * H:]                                             # (B, 2M)
        token_lp = torch.empty(rows.shape[0], device=tgt.device)
        for k in range(0, rows.shape[0], self.softmax_tokens):
            sl = slice(k, k + self.softmax_tokens)
            pre = torch.addmm(y_n[sl] + out_c[rows[sl]], s_n[sl], self.O_h.t()).float()  # (n, 2M)
            m = pre.unflatten(1, (self.M, self.pieces)).amax(2)            # maxout: (n, M)
            u = torch.mm(m, self.G_r.t())                                  # (n, R)
            if self.b_g is None:
                logits = torch.mm(u, self.G_l.t())                         # (n, Vt)
                true = (u * self.G_l[words[sl]]).sum(1)                    # (n,)
            else:
                logits = torch.addmm(self.b_g, u, self.G_l.t())
                true = (u * self.G_l[words[sl]]).sum(1) + self.b_g[words[sl]]
            logits = logits.float()
            # |logit| <= |u| max_j |G_l[j]| + max |b_g|: when that bound is small, sum(exp) can neither
            # overflow nor lose the sum, so one exp pass replaces logsumexp's max/subtract passes.
            # On CUDA the check would cost a device sync per slab, and logsumexp is cheap there.
            if self.device.type == "cpu" and \
                    float(u.float().norm(dim=1).max()) * self._gl_norm + self._bg_max <= 60.0:
                lse = logits.exp_().sum(1).log_()
            else:
                lse = torch.logsumexp(logits, 1)
            token_lp[sl] = true.float() - lse
        return torch.zeros(B, device=tgt.device, dtype=torch.float32).index_add_(0, rows, token_lp)

    # ------------------------------------------------------------------ a chunk
    def score(self, pairs: ChunkPairs) -> np.ndarray:
        """log p(tgt | src) for every pair of a chunk: (len(pairs),) float64, in pair order."""
        n = len(pairs)
        out = np.zeros(n, dtype=np.float64)
        if n == 0:
            return out
        dev = self.device
        with torch.inference_mode(), self._autocast():
            # 1. every distinct source once: c and all c-dependent terms
            if self.share_prefixes:
                c_all = self.encode_prefixes(prefix_levels(pairs.src))        # (n_src, H)
                ctx_all = torch.cat([self.contexts(c_all[a:a + self.max_tokens])
                                     for a in range(0, c_all.shape[0], self.max_tokens)])
            else:
                src_len = lengths_of(pairs.src)
                ctx_all = torch.empty(len(pairs.src), 4 * self.H + self.P, device=dev)
                for idx in length_batches(src_len, self.max_tokens):
                    ids = torch.from_numpy(pad(pairs.src, idx, src_len)).to(dev, non_blocking=True)
                    lens = torch.from_numpy(src_len[idx]).to(dev)
                    c = self.encode(ids, lens, uniform=bool((src_len[idx] == src_len[idx].max()).all()))
                    ctx_all[torch.from_numpy(idx).to(dev)] = self.contexts(c).float()
            # 2. the pairs, bucketed by target length, reading their source's context rows
            tgt_len = lengths_of(pairs.tgt)
            pair_src = torch.from_numpy(np.asarray(pairs.pair_src, dtype=np.int64)).to(dev)
            for idx in length_batches(tgt_len, self.max_tokens):
                ids = torch.from_numpy(pad(pairs.tgt, idx, tgt_len)).to(dev, non_blocking=True)
                lens = torch.from_numpy(tgt_len[idx]).to(dev)
                idx_t = torch.from_numpy(idx).to(dev)
                ctx = ctx_all.index_select(0, pair_src.index_select(0, idx_t))
                lp = self.decode(ctx, ids, lens, uniform=bool((tgt_len[idx] == tgt_len[idx].max()).all()))
                out[idx] = lp.double().cpu().numpy()
        return out


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

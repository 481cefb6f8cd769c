"""The RNN Encoder-Decoder of Cho et al. (2014), readable top to bottom.

Order: :class:`EncDecConfig`, :class:`Encoder`, :class:`DecoderContext`, :class:`Decoder`,
:class:`RNNEncoderDecoder`. The GRU cell is :class:`phrase_rescore.pipeline.model.gru.GRUCell`. The numpy
:func:`phrase_rescore.pipeline.model.reference.log_p` is the reference semantics; ``tests/test_encdec.py``
holds this module to it.

Shapes: B batch, S source length, T target length (both counting the final eos),
E embedding (100), H hidden (1000), M maxout units (500; pre-activations M*pieces = 1000),
R output rank (100), Vs/Vt vocabulary sizes. Ids: eos = 0, unk = 1 (phrase_rescore.pipeline.vocab).

Parameter names (``model.state_dict()`` keys), for code that reads the weights directly
(e.g. a scorer that precomputes every c-dependent term once per source phrase):

=============================  ============  ==============================================
key                            shape         role (name in model/reference.py)
=============================  ============  ==============================================
encoder.E_src                  (Vs, E)       source embeddings ``E_src``
encoder.cell.W_x               (3H, E)       ``[W_r; W_z; W]`` input projections
encoder.cell.U                 (3H, H)       ``[U_r; U_z; U]`` recurrent matrices
encoder.cell.b                 (3H,)         biases, only when ``bias=True``
encoder.V                      (H, H)        c = tanh(V h_N)
decoder.E_tgt                  (Vt, E)       target embeddings ``E_tgt``
decoder.V_dec                  (H, H)        h'_0 = tanh(V_dec c)
decoder.cell.W_x / U / b       as encoder    decoder GRU, input = previous target embedding
decoder.cell.C                 (3H, H)       ``[C_r; C_z; C]``: c into both gates and candidate
decoder.O_h                    (M*2, H)      output layer: state term
decoder.O_y                    (M*2, E)      output layer: previous-word term
decoder.O_c                    (M*2, H)      output layer: context term
decoder.b_o                    (M*2,)        only when ``bias=True``
decoder.G_r                    (R, M)        logits = G_l (G_r maxout(...))
decoder.G_l                    (Vt, R)
decoder.b_g                    (Vt,)         only when ``bias=True``
=============================  ============  ==============================================

Per target step j (y_0's embedding is the zero vector; teacher forcing feeds the true y_{j-1}):
  s_j   = GRU(e(y_{j-1}), s_{j-1}, c)                                     (eqs 5-8 with c)
  pre_j = O_h s_j + O_y e(y_{j-1}) + O_c c                                (appendix A)
  m_j   = max over adjacent pairs of pre_j                                (maxout)
  log p(y_j | y_<j, x) = log_softmax(G_l G_r m_j)[y_j]                    (eq 2, rank-R G)
Only ``C c`` (3H) and ``O_c c`` (2M) depend on c: compute them once per source
(:meth:`Decoder.init` does, in :class:`DecoderContext`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelConfig
from .gru import GRUCell
from .presets import ENCDEC_PRESETS, RESET_FORMS


@dataclass
class EncDecConfig(ModelConfig):
    """All sizes and options of the encoder-decoder. Defaults are the paper's (appendix A)."""

    src_vocab_size: int                 # 15,000 words + eos in the paper (+ unk here)
    tgt_vocab_size: int
    emb_dim: int = 100                  # "maps to 100 numbers"
    hidden_dim: int = 1000              # encoder state, c and decoder state
    maxout_units: int = 500             # 1000 pre-activations -> 500 by max over pairs
    maxout_pieces: int = 2
    rank: int = 100                     # G = G_l G_r, rank 100
    gru: str = "paper"                  # "paper": r before U (eq 8); "cudnn": r after U
    bias: bool = False                  # the listing has no biases
    init_std: float = 0.01              # weights ~ N(0, 0.01^2) (section 3.1)
    orthogonal_recurrent: bool = True   # recurrent matrices orthogonal (section 3.1)

    PRESETS = ENCDEC_PRESETS

    def __post_init__(self):
        if self.gru not in RESET_FORMS:
            raise ValueError(f"gru must be one of {RESET_FORMS}, got {self.gru!r}")
        for name in ("src_vocab_size", "tgt_vocab_size", "emb_dim", "hidden_dim", "maxout_units",
                     "maxout_pieces", "rank"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")


def _normal(*shape, std):
    return nn.Parameter(torch.randn(*shape) * std)


class Encoder(nn.Module):
    """Reads the source phrase (eos-terminated) and returns the summary c = tanh(V h_N)."""

    def __init__(self, cfg: EncDecConfig):
        super().__init__()
        self.E_src = _normal(cfg.src_vocab_size, cfg.emb_dim, std=cfg.init_std)
        self.cell = GRUCell(cfg.emb_dim, cfg.hidden_dim, reset=cfg.gru, bias=cfg.bias)
        self.cell.reset_parameters(cfg.init_std, cfg.orthogonal_recurrent)
        self.V = _normal(cfg.hidden_dim, cfg.hidden_dim, std=cfg.init_std)

    def forward(self, src_ids: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """src_ids, src_mask: (B, S) -> c: (B, H)."""
        x = F.embedding(src_ids, self.E_src)                            # (B, S, E)
        h0 = x.new_zeros(src_ids.shape[0], self.cell.hidden_dim)        # h<0> = 0
        _, h_last = self.cell.run(self.cell.input_terms(x), src_mask, h0)  # (B, H)
        return torch.tanh(torch.matmul(h_last, self.V.t()))             # c = tanh(V h_N)


class DecoderContext(NamedTuple):
    """Everything the decoder needs from c, computed once per source phrase. All rows align."""

    c: torch.Tensor          # (B, H)
    s0: torch.Tensor         # (B, H)   h'_0 = tanh(V_dec c)
    gate_c: torch.Tensor     # (B, 3H)  C c: context terms of both gates and the candidate
    out_c: torch.Tensor      # (B, 2M)  O_c c (+ b_o): context term of the output layer

    def select(self, index: torch.Tensor) -> "DecoderContext":
        """Rows ``index`` of every field (for beams and samples: repeat/reorder sources)."""
        return DecoderContext(*(t.index_select(0, index) for t in self))


class Decoder(nn.Module):
    """The conditional GRU language model over target phrases, fed c at every step."""

    def __init__(self, cfg: EncDecConfig):
        super().__init__()
        E, H, P, s = cfg.emb_dim, cfg.hidden_dim, cfg.maxout_units * cfg.maxout_pieces, cfg.init_std
        self.maxout_units, self.maxout_pieces = cfg.maxout_units, cfg.maxout_pieces
        self.E_tgt = _normal(cfg.tgt_vocab_size, E, std=s)
        self.V_dec = _normal(H, H, std=s)
        self.cell = GRUCell(E, H, ctx_dim=H, reset=cfg.gru, bias=cfg.bias)
        self.cell.reset_parameters(s, cfg.orthogonal_recurrent)
        self.O_h = _normal(P, H, std=s)
        self.O_y = _normal(P, E, std=s)
        self.O_c = _normal(P, H, std=s)
        self.G_r = _normal(cfg.rank, cfg.maxout_units, std=s)
        self.G_l = _normal(cfg.tgt_vocab_size, cfg.rank, std=s)
        self.b_o = nn.Parameter(torch.zeros(P)) if cfg.bias else None
        self.b_g = nn.Parameter(torch.zeros(cfg.tgt_vocab_size)) if cfg.bias else None

    def init(self, c: torch.Tensor) -> DecoderContext:
        """(B, H) summary -> the per-source terms (start state, C c, O_c c)."""
        s0 = torch.tanh(torch.matmul(c, self.V_dec.t()))                # (B, H)
        out_c = torch.matmul(c, self.O_c.t())                           # (B, 2M)
        if self.b_o is not None:
            out_c = out_c + self.b_o
        return DecoderContext(c, s0, self.cell.context_terms(c), out_c)

    def embed_prev(self, prev_ids: torch.Tensor | None, batch: int | None = None) -> torch.Tensor:
        """e(y_{j-1}): (B,) ids -> (B, E); ``None`` means the first step (zero vector, needs ``batch``)."""
        if prev_ids is None:
            return self.E_tgt.new_zeros(batch, self.E_tgt.shape[1])
        return F.embedding(prev_ids, self.E_tgt)

    def step(self, y_prev_emb: torch.Tensor, s: torch.Tensor, ctx: DecoderContext) -> torch.Tensor:
        """One recurrence step: (B, E), (B, H) -> new state (B, H)."""
        return self.cell.step(self.cell.input_terms(y_prev_emb), s, ctx.gate_c)

    def output_logprobs(self, s: torch.Tensor, y_prev_emb: torch.Tensor, ctx: DecoderContext) -> torch.Tensor:
        """log p(. | y_<j, x): s (B, [T,] H), y_prev_emb (B, [T,] E) -> (B, [T,] Vt)."""
        out_c = ctx.out_c if s.dim() == 2 else ctx.out_c.unsqueeze(1)   # broadcast over T
        pre = torch.matmul(s, self.O_h.t()) + torch.matmul(y_prev_emb, self.O_y.t()) + out_c  # (.., 2M)
        m = pre.unflatten(-1, (self.maxout_units, self.maxout_pieces)).amax(-1)           # (.., M)
        logits = torch.matmul(torch.matmul(m, self.G_r.t()), self.G_l.t())                # (.., Vt)
        if self.b_g is not None:
            logits = logits + self.b_g
        return torch.log_softmax(logits, dim=-1)

    def forward(self, tgt_ids: torch.Tensor, tgt_mask: torch.Tensor, ctx: DecoderContext) -> torch.Tensor:
        """Teacher-forced log p(y_j | y_<j, x) of every true target word: (B, T) -> (B, T), 0 on padding."""
        B, T = tgt_ids.shape
        y_prev = torch.cat([self.embed_prev(None, B).unsqueeze(1),                 # e(y_0) = 0
                            F.embedding(tgt_ids[:, :-1], self.E_tgt)], dim=1)      # (B, T, E)
        states, _ = self.cell.run(self.cell.input_terms(y_prev), tgt_mask, ctx.s0, ctx.gate_c)  # (B, T, H)
        logp = self.output_logprobs(states, y_prev, ctx)                           # (B, T, Vt)
        tok = logp.gather(-1, tgt_ids.unsqueeze(-1)).squeeze(-1)                   # (B, T)
        return tok.masked_fill(~tgt_mask, 0.0)


class RNNEncoderDecoder(nn.Module):
    """Cho et al. (2014): p(y | x) for phrase pairs, by an encoder GRU, c, and a decoder GRU."""

    def __init__(self, cfg: EncDecConfig):
        super().__init__()
        self.cfg = cfg
        self.encoder = Encoder(cfg)
        self.decoder = Decoder(cfg)

    @staticmethod
    def _check(ids: torch.Tensor, mask: torch.Tensor, what: str) -> None:
        if ids.dim() != 2 or mask.shape != ids.shape:
            raise ValueError(f"{what}: expected ids and mask of the same shape (B, T), got "
                             f"{tuple(ids.shape)} and {tuple(mask.shape)}")
        if mask.dtype != torch.bool:
            raise ValueError(f"{what}: mask must be bool, got {mask.dtype}")

    def encode(self, src_ids: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """Source (B, S) ids and mask -> summary c (B, H)."""
        self._check(src_ids, src_mask, "source")
        return self.encoder(src_ids, src_mask)

    def decoder_init(self, c: torch.Tensor) -> DecoderContext:
        """Per-source decoder terms from c (B, H); see :class:`DecoderContext`."""
        return self.decoder.init(c)

    @property
    def device(self) -> torch.device:
        return self.encoder.E_src.device

    @property
    def vocab_sizes(self) -> tuple[int, int]:
        """(source, target) vocabulary sizes, read from the embeddings."""
        return self.encoder.E_src.shape[0], self.decoder.E_tgt.shape[0]

    def encode_sources(self, src_ids: torch.Tensor, src_mask: torch.Tensor) -> DecoderContext:
        """What scoring many targets per source keeps of each source: its decoder terms, one row per source."""
        return self.decoder_init(self.encode(src_ids, src_mask))

    def score_targets(self, enc: DecoderContext, rows: torch.Tensor, tgt_ids: torch.Tensor,
                      tgt_mask: torch.Tensor) -> torch.Tensor:
        """log p(y | x) (b,) of each target (b, T), its source being row ``rows[i]`` of :meth:`encode_sources`."""
        self._check(tgt_ids, tgt_mask, "target")
        return self.decoder(tgt_ids, tgt_mask, enc.select(rows)).sum(dim=1)

    def decoder_step(self, prev_ids: torch.Tensor | None, s: torch.Tensor, ctx: DecoderContext
                     ) -> tuple[torch.Tensor, torch.Tensor]:
        """Advance one target position and score the next word.

        :param prev_ids: (B,) the previous target ids, or None at the first position.
        :param s: (B, H) the previous decoder state (``ctx.s0`` at the first position).
        :returns: (new state (B, H), log p(. | y_<j, x) (B, Vt)).
        """
        y_prev = self.decoder.embed_prev(prev_ids, s.shape[0])
        s = self.decoder.step(y_prev, s, ctx)
        return s, self.decoder.output_logprobs(s, y_prev, ctx)

    def output_logprobs(self, s: torch.Tensor, y_prev_emb: torch.Tensor, ctx: DecoderContext) -> torch.Tensor:
        """The output layer alone; see :meth:`Decoder.output_logprobs`."""
        return self.decoder.output_logprobs(s, y_prev_emb, ctx)

    def token_logprobs(self, src_ids, src_mask, tgt_ids, tgt_mask) -> torch.Tensor:
        """log p(y_j | y_<j, x) per target position: (B, T), zero on padding."""
        self._check(tgt_ids, tgt_mask, "target")
        return self.decoder(tgt_ids, tgt_mask, self.decoder_init(self.encode(src_ids, src_mask)))

    def log_prob(self, src_ids, src_mask, tgt_ids, tgt_mask) -> torch.Tensor:
        """log p(y | x) per pair (B,): the sum over target positions, eos included (eq 3)."""
        return self.token_logprobs(src_ids, src_mask, tgt_ids, tgt_mask).sum(dim=1)

    forward = log_prob


def count_weight_parameters(model: nn.Module) -> int:
    """Number of weight-matrix entries (biases excluded), as the paper counts them."""
    return sum(p.numel() for p in model.parameters() if p.dim() >= 2)

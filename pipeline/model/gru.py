"""The gated recurrent unit of Cho et al. (2014), in the two conventions the project uses.

Both conventions put the update gate ``z`` on the OLD state (the paper's equation 7,
``h = z * h_prev + (1 - z) * h_cand``; torch.nn.GRU does the same). They differ in where the
reset gate ``r`` acts (the paper's two arXiv versions differ here):

* ``"paper"``: equation (8), ``h_cand = tanh(W x + U (r * h_prev))`` -- r scales the state
  BEFORE the recurrent matrix, so the candidate's product waits for the gates.
* ``"cudnn"``: ``h_cand = tanh(W x + r * (U h_prev))`` -- r scales AFTER the matrix (first arXiv
  version, cuDNN, torch.nn.GRU), so all three recurrent products are one matmul.

Parameters, with rows stacked in the order [reset r; update z; candidate] (each block H rows):

* ``W_x`` (3H, D): input projections ``[W_r; W_z; W]`` of equations (5)-(8).
* ``U``   (3H, H): recurrent matrices ``[U_r; U_z; U]``.
* ``C``   (3H, Hc): context projections ``[C_r; C_z; C]`` (decoder only, ``ctx_dim > 0``).
* ``b``   (3H,): optional biases ``[b_r; b_z; b]`` (the paper's listing has none).

Input and context terms are computed once per sequence (:meth:`GRUCell.input_terms`,
:meth:`GRUCell.context_terms`) and the loop only adds the recurrent part.
"""
from __future__ import annotations

import torch
from torch import nn

from .presets import RESET_FORMS


class GRUCell(nn.Module):
    """One GRU step, optionally conditioned on a fixed context vector (the decoder's ``c``).

    :param input_dim: D, size of x.
    :param hidden_dim: H, size of h.
    :param ctx_dim: Hc, size of the context fed to both gates and the candidate (0: none).
    :param reset: ``"paper"`` (r before U) or ``"cudnn"`` (r after U).
    :param bias: add a bias vector to the gate and candidate pre-activations.
    """

    def __init__(self, input_dim: int, hidden_dim: int, ctx_dim: int = 0, reset: str = "paper",
                 bias: bool = False):
        super().__init__()
        if reset not in RESET_FORMS:
            raise ValueError(f"reset must be one of {RESET_FORMS}, got {reset!r}")
        self.input_dim, self.hidden_dim, self.ctx_dim, self.reset = input_dim, hidden_dim, ctx_dim, reset
        H = hidden_dim
        self.W_x = nn.Parameter(torch.empty(3 * H, input_dim))
        self.U = nn.Parameter(torch.empty(3 * H, H))
        self.C = nn.Parameter(torch.empty(3 * H, ctx_dim)) if ctx_dim else None
        self.b = nn.Parameter(torch.zeros(3 * H)) if bias else None
        self.reset_parameters()

    def reset_parameters(self, std: float = 0.01, orthogonal: bool = True,
                         generator: torch.Generator | None = None) -> None:
        """Cho et al. 3.1: weights ~ N(0, std^2); each recurrent block orthogonal (the left
        singular vectors of a Gaussian matrix). Biases start at zero."""
        with torch.no_grad():
            self.W_x.normal_(0.0, std, generator=generator)
            if self.C is not None:
                self.C.normal_(0.0, std, generator=generator)
            H = self.hidden_dim
            for k in range(3):
                block = self.U[k * H:(k + 1) * H]
                if orthogonal:
                    g = torch.randn(H, H, generator=generator, dtype=block.dtype, device=block.device)
                    u, _, _ = torch.linalg.svd(g)                         # (H, H) orthogonal
                    block.copy_(u)
                else:
                    block.normal_(0.0, std, generator=generator)
            if self.b is not None:
                self.b.zero_()

    def input_terms(self, x: torch.Tensor) -> torch.Tensor:
        """W_x x (+ b) for every position at once: (..., D) -> (..., 3H)."""
        out = torch.matmul(x, self.W_x.t())
        return out + self.b if self.b is not None else out

    def context_terms(self, c: torch.Tensor) -> torch.Tensor:
        """C c, computed once per sequence: (B, Hc) -> (B, 3H)."""
        assert self.C is not None, "this cell has no context input"
        return torch.matmul(c, self.C.t())

    def recurrent_weights(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """U transposed, split as the step needs it: paper (U_rz^T (H, 2H), U^T (H, H)); cudnn (U^T (H, 3H), None).

        Taken once per sequence by :meth:`run`: slicing a parameter inside the loop would make
        backward build a full-size gradient per slice per step.
        """
        H = self.hidden_dim
        if self.reset == "paper":
            return self.U[:2 * H].t(), self.U[2 * H:].t()
        return self.U.t(), None

    def step(self, x_terms: torch.Tensor, h: torch.Tensor, ctx_terms: torch.Tensor | None = None,
             weights: tuple | None = None) -> torch.Tensor:
        """One step. x_terms: (B, 3H) from :meth:`input_terms`; h: (B, H); ctx_terms: (B, 3H) or None;
        ``weights``: :meth:`recurrent_weights` when the caller loops (taken here when None).

        Returns the new state (B, H).
        """
        H = self.hidden_dim
        U_a, U_b = self.recurrent_weights() if weights is None else weights
        a = x_terms if ctx_terms is None else x_terms + ctx_terms           # (B, 3H)
        if self.reset == "paper":
            g = torch.matmul(h, U_a)                                        # (B, 2H): U_r h, U_z h
            r = torch.sigmoid(a[:, :H] + g[:, :H])                          # (5)
            z = torch.sigmoid(a[:, H:2 * H] + g[:, H:])                     # (6)
            h_cand = torch.tanh(a[:, 2 * H:] + torch.matmul(r * h, U_b))    # (8)
        else:
            g = torch.matmul(h, U_a)                                        # (B, 3H): one matmul
            r = torch.sigmoid(a[:, :H] + g[:, :H])
            z = torch.sigmoid(a[:, H:2 * H] + g[:, H:2 * H])
            h_cand = torch.tanh(a[:, 2 * H:] + r * g[:, 2 * H:])            # r after U
        return z * h + (1.0 - z) * h_cand                                   # (7)

    def run(self, x_terms: torch.Tensor, mask: torch.Tensor, h0: torch.Tensor,
            ctx_terms: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Unroll over a padded batch.

        :param x_terms: (B, T, 3H) input terms; :param mask: (B, T) bool, True on real positions
            (a prefix of each row); :param h0: (B, H); :param ctx_terms: (B, 3H) or None.
        :returns: (states (B, T, H), last real state (B, H)). Padding steps leave the state unchanged.
        """
        B, T, _ = x_terms.shape
        assert mask.shape == (B, T), (mask.shape, x_terms.shape)
        h = h0
        states = []
        weights = self.recurrent_weights()
        for t in range(T):
            h_new = self.step(x_terms[:, t], h, ctx_terms, weights)
            h = torch.where(mask[:, t, None], h_new, h)                     # (B, H)
            states.append(h)
        return torch.stack(states, dim=1), h

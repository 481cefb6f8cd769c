"""Numpy references: the paper's equations written out plainly, one phrase pair (or one sequence) at a time.

* :class:`GRU` -- the common textbook GRU network: stacked weights of shape (H, H+D) over
  ``[h; x]``, reset gate before the recurrent matrix, the update gate on the CANDIDATE
  (``h = (1 - z) h_prev + z h_cand``), an output projection at every step.
* :func:`gru_step`, :func:`gru_step_ctx`, :func:`log_p` -- the encoder-decoder of Cho et al. (2014),
  equations (1)-(8) and appendix A (the paper's form: reset before U, z on the old state), plus the cuDNN-form
  steps (reset after U) used when a model is configured with ``gru="cudnn"``.
  The sizes come from the parameter dict (the paper's are 1000/100), and optional bias keys
  (``b_r``, ``b_z``, ``b``, ``b_o``, ``b_g``) are added when present; with no bias keys the
  arithmetic is exactly the paper's equations, which have none.
* :func:`reference_params` extracts such a parameter dict (float64) from a torch
  :class:`~phrase_rescore.pipeline.model.encdec.RNNEncoderDecoder`.

These are slow on purpose: they exist so tests can hold the fast code to the paper's semantics.
"""
from __future__ import annotations

import numpy as np


def sigmoid(a):
    return 1.0 / (1.0 + np.exp(-np.clip(a, -500, 500)))


class GRU:
    """A textbook GRU network over (N, T, D) float64 input, with an output projection.

    ``W_r``, ``W_z``, ``W_h``: (H, H+D) acting on ``[h; x]``; biases (H,); ``W_y``: (O, H); ``b_y``: (O,).
    """

    def __init__(self, input_dim: int, hidden_dim: int, output_dim: int, seed: int | None = None):
        rng = np.random.default_rng(seed)
        self.hidden_dim = hidden_dim
        scale = np.sqrt(2.0 / (input_dim + hidden_dim))
        self.W_r = rng.standard_normal((hidden_dim, hidden_dim + input_dim)) * scale
        self.W_z = rng.standard_normal((hidden_dim, hidden_dim + input_dim)) * scale
        self.W_h = rng.standard_normal((hidden_dim, hidden_dim + input_dim)) * scale
        self.b_r = np.zeros(hidden_dim)
        self.b_z = np.zeros(hidden_dim)
        self.b_h = np.zeros(hidden_dim)
        self.W_y = rng.standard_normal((output_dim, hidden_dim)) * np.sqrt(2.0 / (hidden_dim + output_dim))
        self.b_y = np.zeros(output_dim)

    def forward(self, X: np.ndarray) -> dict:
        """X: (N, T, D). Returns {"outputs": (N, T, O), "final_hidden_state": (N, H)}, float64."""
        X = np.asarray(X, dtype=np.float64)
        N, T, _ = X.shape
        H = self.hidden_dim
        h = np.zeros((N, H), dtype=np.float64)                       # h_0 = 0
        outputs = []
        for t in range(T):
            x = X[:, t, :]                                           # (N, D)
            hx = np.concatenate([h, x], axis=1)                      # (N, H+D)
            z = sigmoid(hx @ self.W_z.T + self.b_z)                  # update gate
            r = sigmoid(hx @ self.W_r.T + self.b_r)                  # reset gate
            rhx = np.concatenate([r * h, x], axis=1)
            h_cand = np.tanh(rhx @ self.W_h.T + self.b_h)            # reset BEFORE the matrix
            h = (1.0 - z) * h + z * h_cand                           # z on the candidate
            outputs.append(h @ self.W_y.T + self.b_y)                # (N, O)
        return {"outputs": np.stack(outputs, axis=1), "final_hidden_state": h}


def _b(P, key):
    return P.get(key, 0.0)


def gru_step(x, h_prev, P):
    """Encoder step, equations (5)-(8) of the paper. x: (D,), h_prev: (H,)."""
    r = sigmoid(P["W_r"] @ x + P["U_r"] @ h_prev + _b(P, "b_r"))          # (5) reset gate
    z = sigmoid(P["W_z"] @ x + P["U_z"] @ h_prev + _b(P, "b_z"))          # (6) update gate
    h_cand = np.tanh(P["W"] @ x + P["U"] @ (r * h_prev) + _b(P, "b"))     # (8) candidate
    return z * h_prev + (1.0 - z) * h_cand                                # (7) mix


def gru_step_ctx(y, h_prev, c, P):
    """Decoder step (the paper's appendix A): the summary c enters both gates and the candidate."""
    r = sigmoid(P["W_r"] @ y + P["U_r"] @ h_prev + P["C_r"] @ c + _b(P, "b_r"))
    z = sigmoid(P["W_z"] @ y + P["U_z"] @ h_prev + P["C_z"] @ c + _b(P, "b_z"))
    h_cand = np.tanh(P["W"] @ y + P["U"] @ (r * h_prev) + P["C"] @ c + _b(P, "b"))
    return z * h_prev + (1.0 - z) * h_cand


def gru_step_cudnn(x, h_prev, P):
    """Encoder step with the reset gate AFTER the recurrent matrix (cuDNN / torch.nn.GRU)."""
    r = sigmoid(P["W_r"] @ x + P["U_r"] @ h_prev + _b(P, "b_r"))
    z = sigmoid(P["W_z"] @ x + P["U_z"] @ h_prev + _b(P, "b_z"))
    h_cand = np.tanh(P["W"] @ x + r * (P["U"] @ h_prev) + _b(P, "b"))
    return z * h_prev + (1.0 - z) * h_cand


def gru_step_ctx_cudnn(y, h_prev, c, P):
    """Decoder step with the reset gate after the recurrent matrix."""
    r = sigmoid(P["W_r"] @ y + P["U_r"] @ h_prev + P["C_r"] @ c + _b(P, "b_r"))
    z = sigmoid(P["W_z"] @ y + P["U_z"] @ h_prev + P["C_z"] @ c + _b(P, "b_z"))
    h_cand = np.tanh(P["W"] @ y + r * (P["U"] @ h_prev) + P["C"] @ c + _b(P, "b"))
    return z * h_prev + (1.0 - z) * h_cand


def log_p(src_ids, tgt_ids, P, reset: str = "paper") -> float:
    """log p(y | x) for one phrase pair (the paper's equations (2)-(4) and appendix A). Both id lists end with eos.

    ``P`` is a dict as returned by :func:`reference_params`; ``reset`` picks the GRU form.
    """
    enc_step, dec_step = (gru_step, gru_step_ctx) if reset == "paper" else (gru_step_cudnn, gru_step_ctx_cudnn)
    H = P["V"].shape[0]
    E = P["E_tgt"].shape[1]
    M = P["G_r"].shape[1]                                   # maxout units
    h = np.zeros(H)                                         # h<0> = 0
    for i in src_ids:
        h = enc_step(P["E_src"][i], h, P["enc"])
    c = np.tanh(P["V"] @ h)                                 # summary c, (H,)
    s = np.tanh(P["V_dec"] @ c)                             # decoder start h'<0>
    y_prev = np.zeros(E)                                    # e(y_0) = 0
    total = 0.0
    for j in tgt_ids:
        s = dec_step(y_prev, s, c, P["dec"])
        pre = P["O_h"] @ s + P["O_y"] @ y_prev + P["O_c"] @ c + _b(P, "b_o")   # (2M,)
        m = pre.reshape(M, -1).max(axis=1)                  # maxout over adjacent pieces: (M,)
        logits = P["G_l"] @ (P["G_r"] @ m) + _b(P, "b_g")   # (V,) via the rank-R factorisation
        total += logits[j] - np.logaddexp.reduce(logits)    # log softmax
        y_prev = P["E_tgt"][j]                              # the TRUE word is fed back
    return float(total)


def _cell_params(cell) -> dict:
    H = cell.hidden_dim
    f = lambda t: t.detach().cpu().double().numpy().copy()  # noqa: E731
    W, U = f(cell.W_x), f(cell.U)
    P = {"W_r": W[:H], "W_z": W[H:2 * H], "W": W[2 * H:],
         "U_r": U[:H], "U_z": U[H:2 * H], "U": U[2 * H:]}
    if cell.C is not None:
        C = f(cell.C)
        P.update({"C_r": C[:H], "C_z": C[H:2 * H], "C": C[2 * H:]})
    if cell.b is not None:
        b = f(cell.b)
        P.update({"b_r": b[:H], "b_z": b[H:2 * H], "b": b[2 * H:]})
    return P


def reference_params(model) -> dict:
    """The float64 parameter dict :func:`log_p` takes, read from an ``RNNEncoderDecoder``."""
    f = lambda t: t.detach().cpu().double().numpy().copy()  # noqa: E731
    enc, dec = model.encoder, model.decoder
    P = {"E_src": f(enc.E_src), "enc": _cell_params(enc.cell), "V": f(enc.V),
         "E_tgt": f(dec.E_tgt), "V_dec": f(dec.V_dec), "dec": _cell_params(dec.cell),
         "O_h": f(dec.O_h), "O_y": f(dec.O_y), "O_c": f(dec.O_c),
         "G_r": f(dec.G_r), "G_l": f(dec.G_l)}
    if dec.b_o is not None:
        P["b_o"] = f(dec.b_o)
        P["b_g"] = f(dec.b_g)
    return P

"""Sequence to Sequence (Sutskever, Vinyals and Le, 2014): a deep LSTM encoder-decoder.

Read top to bottom: :class:`Seq2SeqConfig`, :func:`reverse_source`, :class:`Encoder`,
:class:`Decoder`, :class:`Seq2Seq`.  Section numbers refer to Sutskever et al. (2014).

* The encoder is an L-layer LSTM over the source, **reversed by default** (Sec. 3.3): the words
  ``a b c <eos>`` are read as ``c b a <eos>``; padding is never moved.
* The decoder is a *separate* L-layer LSTM (own weights, Sec. 2) whose (h, c) in every layer starts
  from the encoder's final (h, c) of that layer: v = 2 * L * H numbers, 8000 for the paper's model.
* Its first input is ``<eos>`` (id 0), then the previous target word; a softmax over the target
  vocabulary gives p(y_t | v, y_<t) (Eq. 1), and the output ends with ``<eos>``.

The LSTM cell is torch's ``nn.LSTM`` (Graves' formulation without the peephole terms, which the
paper's equations include): peepholes would rule out cuDNN and add only 3 * H weights per layer.
Every sequence tensor here is batch-first, ids ``(B, T)`` with a boolean mask ``(B, T)`` that is
True on real tokens (the trailing ``<eos>`` included) and False on padding, which is right-aligned.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from .config import ModelConfig

EOS_ID = 0  # phrase_rescore.pipeline.vocab.EOS; also the decoder's first input (the paper's pseudocode, Sec. 3.2)


@dataclass
class Seq2SeqConfig(ModelConfig):
    """Hyper-parameters that rebuild a :class:`Seq2Seq` (saved with every checkpoint).

    :param src_vocab_size: source vocabulary size (``<eos>``=0, ``<unk>``=1 included).
    :param tgt_vocab_size: target vocabulary size.
    :param emb_dim: word embedding size (paper: 1000).
    :param hidden_dim: LSTM cells per layer (paper: 1000).
    :param num_layers: LSTM layers in the encoder and, separately, in the decoder (paper: 4).
    :param reverse: read the source reversed (paper: True; False is the forward baseline).
    :param init_range: parameters start uniform in [-init_range, init_range] (paper: 0.08).
    """

    src_vocab_size: int
    tgt_vocab_size: int
    emb_dim: int = 1000
    hidden_dim: int = 1000
    num_layers: int = 4
    reverse: bool = True
    init_range: float = 0.08

    PRESETS = {
        # Sec. 3.4: 4 layers of 1000 cells, 1000-dim embeddings (384M weights with its vocabularies).
        "paper": dict(emb_dim=1000, hidden_dim=1000, num_layers=4),
        # A CPU-sized model: 2 layers of 256 cells, 128-dim embeddings.
        "small": dict(emb_dim=128, hidden_dim=256, num_layers=2),
    }

    @property
    def state_size(self) -> int:
        """Numbers in the sentence vector v: (h, c) of every layer."""
        return 2 * self.num_layers * self.hidden_dim


def reverse_source(ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Reverse the words of each padded source row, keeping its final ``<eos>`` and the padding.

    ``[a, b, c, <eos>, pad, pad]`` becomes ``[c, b, a, <eos>, pad, pad]`` (Sec. 3.3: the model reads
    "c, b, a" for "a, b, c": "the cat sleeps" is fed as "sleeps cat the <EOS>").

    :param ids: (B, T) token ids, each row's real tokens ending with ``<eos>``.
    :param mask: (B, T) True on real tokens.
    :returns: (B, T) ids with each row's first ``len - 1`` tokens reversed.
    """
    B, T = ids.shape
    lengths = mask.sum(1, keepdim=True)  # (B, 1)
    pos = torch.arange(T, device=ids.device).unsqueeze(0).expand(B, T)  # (B, T)
    n_words = lengths - 1  # the words before <eos>
    src_pos = torch.where(pos < n_words, n_words - 1 - pos, pos)  # mirror inside [0, n_words)
    return ids.gather(1, src_pos)


class Encoder(nn.Module):
    """An L-layer LSTM over the (reversed) source; returns its final (h, c) of every layer."""

    def __init__(self, cfg: Seq2SeqConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.src_vocab_size, cfg.emb_dim)
        self.lstm = nn.LSTM(cfg.emb_dim, cfg.hidden_dim, cfg.num_layers, batch_first=True)

    def forward(self, src: torch.Tensor, src_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, T) ids and mask -> v = (h, c), each (L, B, H): the state after each row's last real token."""
        assert src.shape == src_mask.shape and src.dim() == 2, (src.shape, src_mask.shape)
        if self.cfg.reverse:
            src = reverse_source(src, src_mask)
        lengths = src_mask.sum(1).cpu()  # (B,)
        x = self.embed(src)  # (B, T, E)
        # Packing stops each row at its own length, so padding never enters the state.
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        _, (h, c) = self.lstm(packed)  # (L, B, H) each, in the input's row order
        return h, c


class Decoder(nn.Module):
    """A separate L-layer LSTM language model started from v, with a softmax over the target vocabulary."""

    def __init__(self, cfg: Seq2SeqConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.tgt_vocab_size, cfg.emb_dim)
        self.lstm = nn.LSTM(cfg.emb_dim, cfg.hidden_dim, cfg.num_layers, batch_first=True)
        self.out = nn.Linear(cfg.hidden_dim, cfg.tgt_vocab_size)  # z = W_out h_top + b (Sec. 2)

    def forward(self, prev: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]):
        """Run the decoder over (B, T) previous-word ids from ``state``.

        :returns: log-probabilities (B, T, V) of the next word, and the new state ((L, B, H) twice).
        """
        y, state = self.lstm(self.embed(prev), state)  # y: (B, T, H), the top layer
        return torch.log_softmax(self.out(y), dim=-1), state


class Seq2Seq(nn.Module):
    """The encoder-decoder of Sutskever et al. (2014): log p(T | S) = sum_t log p(y_t | v, y_<t) (Eq. 1)."""

    def __init__(self, cfg: Seq2SeqConfig):
        super().__init__()
        self.cfg = cfg
        self.encoder = Encoder(cfg)
        self.decoder = Decoder(cfg)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every parameter uniform in [-init_range, init_range] (Sec. 3.4); seed torch before calling."""
        for p in self.parameters():
            nn.init.uniform_(p, -self.cfg.init_range, self.cfg.init_range)

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    @property
    def vocab_sizes(self) -> tuple[int, int]:
        """(source, target) vocabulary sizes, read from the embeddings."""
        return self.encoder.embed.num_embeddings, self.decoder.embed.num_embeddings

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, S) source ids and mask -> v = (h, c), each (L, B, H)."""
        return self.encoder(src, src_mask)

    def encode_sources(self, src: torch.Tensor, src_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """What scoring many targets per source keeps of each source: v = (h, c), one column per source."""
        return self.encode(src, src_mask)

    def score_targets(self, state, rows: torch.Tensor, tgt: torch.Tensor, tgt_mask: torch.Tensor) -> torch.Tensor:
        """log p(T | S) (b,) of each target (b, T), its source being row ``rows[i]`` of :meth:`encode_sources`."""
        h, c = state
        return self.token_log_probs((h.index_select(1, rows), c.index_select(1, rows)), tgt, tgt_mask).sum(1)

    def decode_step(self, prev: torch.Tensor, state):
        """One decoder step: (N,) previous ids and state (L, N, H) x 2 -> ((N, V) log-probs, new state)."""
        logp, state = self.decoder(prev.unsqueeze(1), state)  # (N, 1, V)
        return logp.squeeze(1), state

    @staticmethod
    def shift_right(tgt: torch.Tensor) -> torch.Tensor:
        """Teacher-forced decoder inputs: ``<eos>`` then the target without its last position. (B, T)"""
        start = torch.full_like(tgt[:, :1], EOS_ID)
        return torch.cat([start, tgt[:, :-1]], dim=1)

    def token_log_probs(self, state, tgt: torch.Tensor, tgt_mask: torch.Tensor) -> torch.Tensor:
        """log p(y_t | v, y_<t) of every target token given v; 0 on padding. Returns (B, T)."""
        assert tgt.shape == tgt_mask.shape, (tgt.shape, tgt_mask.shape)
        logp, _ = self.decoder(self.shift_right(tgt), state)  # (B, T, V)
        tok = logp.gather(2, tgt.unsqueeze(2)).squeeze(2)  # (B, T)
        return tok.masked_fill(~tgt_mask, 0.0)

    def forward(self, src, src_mask, tgt, tgt_mask) -> torch.Tensor:
        """Teacher-forced log p(T | S) of each pair: (B,) sums over the target's real tokens (eos included)."""
        assert src.shape[0] == tgt.shape[0], (src.shape, tgt.shape)
        return self.token_log_probs(self.encode(src, src_mask), tgt, tgt_mask).sum(1)

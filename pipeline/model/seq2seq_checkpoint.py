"""Seq2Seq checkpoints: weights + config dict + vocabulary JSON text + training state, in one file.

Same conventions as the phrase-level model's checkpoints: a checkpoint rebuilds its own model
(``Seq2SeqConfig.from_dict``), nothing but plain tensors, dicts, lists, numbers and strings is saved,
it is loaded with ``torch.load(weights_only=True)`` and written atomically (temp file, then rename).
A training run keeps ``last.pt`` (for resuming) and ``best.pt`` (lowest validation perplexity).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import torch

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.fileio import atomic_path

from ..vocab import Vocabularies
from .checkpoint import check_finite_weights, read_checkpoint
from .seq2seq import Seq2Seq, Seq2SeqConfig

FORMAT = "phrase-rescore-seq2seq"
VERSION = 1


@dataclass
class Seq2SeqCheckpoint:
    """A loaded checkpoint: the model (in eval mode), its vocabularies and its training state."""

    model: Seq2Seq
    vocabs: Vocabularies
    train_state: dict = field(default_factory=dict)
    path: str = ""


def save_checkpoint(path: str | os.PathLike, model: Seq2Seq, vocabs: Vocabularies,
                    train_state: dict | None = None) -> None:
    """Write ``model`` (weights moved to CPU), its config, ``vocabs`` and ``train_state`` atomically."""
    payload = {
        "format": FORMAT,
        "version": VERSION,
        "config": model.cfg.to_dict(),
        "weights": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "vocab": vocabs.to_json(),
        "train_state": train_state or {},
    }
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)


def load_checkpoint(path: str | os.PathLike, device: str | torch.device = "cpu") -> Seq2SeqCheckpoint:
    """Rebuild the model saved in ``path`` on ``device`` (eval mode) with its vocabularies."""
    path = os.fspath(path)
    payload = read_checkpoint(path, "cpu", fmt=FORMAT, version=VERSION, kind="a Seq2Seq")
    for key in ("config", "weights"):
        if not isinstance(payload.get(key), dict):
            raise PhraseRescoreError(f"damaged checkpoint: it has no {key!r} entry", path)
    try:
        cfg = Seq2SeqConfig.from_dict(payload["config"])
    except (TypeError, ValueError) as e:
        raise PhraseRescoreError(f"bad model config in checkpoint: {e}", path) from None
    model = Seq2Seq(cfg)
    try:
        model.load_state_dict(payload["weights"])
    except RuntimeError as e:
        raise PhraseRescoreError(f"checkpoint weights do not fit its config: {str(e)[:300]}", path) from None
    check_finite_weights(payload["weights"], path)
    vocabs = Vocabularies.from_json(payload["vocab"], path)
    if (len(vocabs.source), len(vocabs.target)) != (cfg.src_vocab, cfg.tgt_vocab):
        raise PhraseRescoreError(f"vocabulary sizes {len(vocabs.source)}/{len(vocabs.target)} do not match "
                                 f"the model's {cfg.src_vocab}/{cfg.tgt_vocab}", path)
    model.to(device).eval()
    return Seq2SeqCheckpoint(model, vocabs, payload.get("train_state", {}), path)

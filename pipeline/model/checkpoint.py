"""Checkpoints of the encoder-decoder: weights, config, vocabulary and training state in one file.

A checkpoint rebuilds its own model (nanoGPT's ``model_args``): a plain dict of tensors, numbers,
strings and lists, saved with ``torch.save`` through a temporary file renamed into place, loaded with
``torch.load(weights_only=True)`` (no pickled classes).

==============  =====================================================================
key             value
==============  =====================================================================
format          ``"phrase-rescore-encdec"``
version         :data:`VERSION`
config          :meth:`EncDecConfig.to_dict`
state_dict      the model's parameters (CPU tensors; names in :mod:`pipeline.model.encdec`)
vocab_json      :meth:`pipeline.vocab.Vocabularies.to_json` text, or None
train_state     the trainer's state for an exact resume (optimizer, sampler, step, ...), or None
==============  =====================================================================

A training directory holds ``model.pt`` (best validation perplexity), ``last.pt`` (latest, with
training state) and ``train_log.csv``; :func:`resolve_checkpoint` maps a directory to its ``model.pt``.
"""
from __future__ import annotations

import os
from pathlib import Path

import torch

from ..errors import PhraseRescoreError
from ..fileio import atomic_path
from ..vocab import Vocabularies
from .encdec import EncDecConfig, RNNEncoderDecoder

FORMAT = "phrase-rescore-encdec"
VERSION = 1


def save_checkpoint(path: str | os.PathLike, model: RNNEncoderDecoder, vocabs: Vocabularies | None,
                    train_state: dict | None = None) -> None:
    """Write ``model`` (+ vocabulary, + training state) to ``path`` atomically."""
    ckpt = {
        "format": FORMAT,
        "version": VERSION,
        "config": model.cfg.to_dict(),
        "state_dict": {k: v.detach().cpu().clone() for k, v in model.state_dict().items()},
        "vocab_json": None if vocabs is None else vocabs.to_json(),
        "train_state": train_state,
    }
    with atomic_path(path) as tmp:
        torch.save(ckpt, tmp)


def resolve_checkpoint(path: str | os.PathLike) -> Path:
    """A ``.pt`` file as given, or ``DIR/model.pt`` for a training directory."""
    p = Path(path)
    if p.is_dir():
        p = p / "model.pt"
        if not p.exists():
            raise PhraseRescoreError("no model.pt in this directory (expected a training output "
                                     "directory or a .pt checkpoint)", path)
    elif not p.exists():
        raise PhraseRescoreError("model checkpoint not found", path)
    return p


def read_checkpoint(path: str | os.PathLike, device="cpu", fmt: str | None = FORMAT, version: int = VERSION,
                    kind: str = "an encoder-decoder") -> dict:
    """The raw checkpoint dict, checked for format and version (``weights_only=True``).

    ``fmt``/``version``/``kind`` name the expected checkpoint (the encoder-decoder's by default; Seq2Seq
    passes its own); ``fmt=None`` accepts any project checkpoint, for callers that dispatch on ``"format"``.
    """
    p = resolve_checkpoint(path)
    try:
        ckpt = torch.load(p, map_location=device, weights_only=True)
    except Exception as e:  # torch raises assorted errors for truncated or foreign files
        raise PhraseRescoreError(f"cannot read checkpoint ({type(e).__name__}: {str(e).splitlines()[0][:200]})",
                                 p) from None
    if not isinstance(ckpt, dict) or not isinstance(ckpt.get("format"), str):
        raise PhraseRescoreError("not a phrase-rescore checkpoint: it has no \"format\" entry", p)
    if fmt is None:
        return ckpt
    if ckpt["format"] != fmt:
        raise PhraseRescoreError(f"not {kind} checkpoint: expected format {fmt!r}, found {ckpt['format']!r}", p)
    if ckpt.get("version") != version:
        raise PhraseRescoreError(f"checkpoint version {ckpt.get('version')} is not supported (expected {version})", p)
    return ckpt


def load_checkpoint(path: str | os.PathLike, device="cpu") -> tuple[RNNEncoderDecoder, Vocabularies | None, dict]:
    """Rebuild the model from a checkpoint file or training directory.

    :returns: ``(model in eval mode on device, vocabularies or None, the checkpoint dict)``.
    """
    p = resolve_checkpoint(path)
    ckpt = read_checkpoint(p, device)
    try:
        cfg = EncDecConfig.from_dict(ckpt["config"])
    except (TypeError, ValueError) as e:
        raise PhraseRescoreError(f"bad model config in checkpoint: {e}", p) from None
    model = RNNEncoderDecoder(cfg)
    try:
        model.load_state_dict(ckpt["state_dict"])
    except RuntimeError as e:
        raise PhraseRescoreError(f"checkpoint weights do not fit its config: {str(e)[:300]}", p) from None
    model.to(device).eval()
    vocabs = None
    if ckpt.get("vocab_json"):
        vocabs = Vocabularies.from_json(ckpt["vocab_json"], f"{p} (vocabulary)")
        if (len(vocabs.source), len(vocabs.target)) != (cfg.src_vocab_size, cfg.tgt_vocab_size):
            raise PhraseRescoreError(f"vocabulary sizes {len(vocabs.source)}/{len(vocabs.target)} differ from the "
                                     f"model's {cfg.src_vocab_size}/{cfg.tgt_vocab_size}", p)
    return model, vocabs, ckpt

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
state_dict      the model's parameters (CPU tensors; names in :mod:`phrase_rescore.pipeline.model.encdec`)
vocab_json      :meth:`phrase_rescore.pipeline.vocab.Vocabularies.to_json` text, or None
train_state     the trainer's state for an exact resume (optimizer, sampler, step, ...), or None
==============  =====================================================================

A training directory holds ``model.pt`` (best validation perplexity), ``last.pt`` (latest, with
training state) and ``train_log.csv``; :func:`resolve_checkpoint` maps a directory to its ``model.pt``.
"""
from __future__ import annotations

import os
from pathlib import Path

import torch

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.fileio import atomic_path

from ..vocab import Vocabularies
from .encdec import EncDecConfig, RNNEncoderDecoder

FORMAT = "phrase-rescore-encdec"
VERSION = 1
ZIP_MAGIC = b"PK\x03\x04"   # torch.save writes a zip archive


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
    ckpt = _torch_load(p, device)
    if not isinstance(ckpt, dict) or not isinstance(ckpt.get("format"), str):
        what = "a dict without a \"format\" entry" if isinstance(ckpt, dict) else f"a {type(ckpt).__name__}"
        raise PhraseRescoreError(f"not a phrase-rescore checkpoint: it holds {what}", p)
    if fmt is None:
        return ckpt
    if ckpt["format"] != fmt:
        raise PhraseRescoreError(f"not {kind} checkpoint: expected format {fmt!r}, found {ckpt['format']!r}", p)
    if ckpt.get("version") != version:
        raise PhraseRescoreError(f"checkpoint version {ckpt.get('version')} is not supported (expected {version})", p)
    return ckpt


def _torch_load(p: Path, device):
    """``torch.load(weights_only=True)`` with its assorted errors (EOFError, IndexError, RuntimeError from
    the zip reader, UnpicklingError...) turned into one message that says what the file looks like."""
    size = p.stat().st_size
    if size == 0:
        raise PhraseRescoreError("not a phrase-rescore checkpoint: empty file (0 bytes)", p)
    try:
        return torch.load(p, map_location=device, weights_only=True)
    except Exception as e:
        detail = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        with open(p, "rb") as f:
            zipped = f.read(4) == ZIP_MAGIC
        what = (f"truncated or damaged file ({size} bytes)" if zipped else
                "not a file written by torch.save")
        raise PhraseRescoreError(f"not a phrase-rescore checkpoint: {what} ({type(e).__name__}: {detail})",
                                 p) from None


def check_finite_weights(weights: dict, path: str | os.PathLike) -> None:
    """Refuse weights with a NaN or an infinity: such a model scores every pair NaN."""
    for name, t in weights.items():
        if torch.is_tensor(t) and t.is_floating_point() and not bool(torch.isfinite(t).all()):
            bad = int((~torch.isfinite(t)).sum())
            raise PhraseRescoreError(f"the model's weights contain NaN or inf ({bad} of {t.numel()} values of "
                                     f"{name}): it cannot score or sample; use a checkpoint saved before "
                                     "training diverged", path)


def load_checkpoint(path: str | os.PathLike, device="cpu") -> tuple[RNNEncoderDecoder, Vocabularies | None, dict]:
    """Rebuild the model from a checkpoint file or training directory.

    :returns: ``(model in eval mode on device, vocabularies or None, the checkpoint dict)``.
    """
    p = resolve_checkpoint(path)
    ckpt = read_checkpoint(p, device)
    for key in ("config", "state_dict"):
        if not isinstance(ckpt.get(key), dict):
            raise PhraseRescoreError(f"damaged checkpoint: it has no {key!r} entry", p)
    try:
        cfg = EncDecConfig.from_dict(ckpt["config"])
    except (TypeError, ValueError) as e:
        raise PhraseRescoreError(f"bad model config in checkpoint: {e}", p) from None
    model = RNNEncoderDecoder(cfg)
    try:
        model.load_state_dict(ckpt["state_dict"])
    except RuntimeError as e:
        raise PhraseRescoreError(f"checkpoint weights do not fit its config: {str(e)[:300]}", p) from None
    check_finite_weights(ckpt["state_dict"], p)
    model.to(device).eval()
    vocabs = None
    if ckpt.get("vocab_json"):
        vocabs = Vocabularies.from_json(ckpt["vocab_json"], f"{p} (vocabulary)")
        if (len(vocabs.source), len(vocabs.target)) != (cfg.src_vocab_size, cfg.tgt_vocab_size):
            raise PhraseRescoreError(f"vocabulary sizes {len(vocabs.source)}/{len(vocabs.target)} differ from the "
                                     f"model's {cfg.src_vocab_size}/{cfg.tgt_vocab_size}", p)
    return model, vocabs, ckpt

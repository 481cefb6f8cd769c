"""Checkpoints of both neural models: weights, config, vocabulary and training state in one file.

A checkpoint rebuilds its own model (nanoGPT's ``model_args``): a plain dict of tensors, numbers,
strings and lists, saved with ``torch.save`` through a temporary file renamed into place, loaded with
``torch.load(weights_only=True)`` (no pickled classes). The RNN Encoder-Decoder and Seq2Seq share the
layout, and so does the target-language CSLM; ``format`` says which model the file holds (:data:`ENCDEC`,
:data:`SEQ2SEQ`, :data:`CSLM_KIND`).

==============  =====================================================================
key             value
==============  =====================================================================
format          ``"phrase-rescore-encdec"``, ``"phrase-rescore-seq2seq"`` or ``"phrase-rescore-cslm"``
version         :data:`VERSION`
config          the model config's ``to_dict()`` (:class:`EncDecConfig`, :class:`Seq2SeqConfig`, :class:`CSLMConfig`)
state_dict      the model's parameters (CPU tensors)
vocab_json      :meth:`phrase_rescore.pipeline.vocab.Vocabularies.to_json` text (a CSLM:
                :meth:`CSLMVocab.to_json`), or None
train_state     the trainer's state for an exact resume (optimizer, sampler, step, ...), or None
==============  =====================================================================

A training directory holds :data:`BEST` (``model.pt``, best validation perplexity), :data:`LAST`
(``last.pt``, latest, with training state) and the trainer's log; :func:`resolve_checkpoint` maps a
directory to its ``model.pt``.
"""
from __future__ import annotations

import os
import pickle
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from phrase_rescore.core.atomic_write import atomic_path
from phrase_rescore.core.errors import PhraseRescoreError

from ..vocab import Vocabularies
from .cslm import CSLM, CSLMConfig, CSLMVocab
from .encdec import EncDecConfig, RNNEncoderDecoder
from .seq2seq import Seq2Seq, Seq2SeqConfig

VERSION = 1
BEST, LAST = "model.pt", "last.pt"      # a training directory's best and latest checkpoints
ZIP_MAGIC = b"PK\x03\x04"               # torch.save writes a zip archive


@dataclass(frozen=True)
class ModelKind:
    """One of the two models: its checkpoint format, its classes and how messages call it."""

    name: str                   # "encdec" or "seq2seq"
    format: str                 # the checkpoint's "format" entry
    description: str            # for messages: "not an encoder-decoder checkpoint"
    model_cls: type
    config_cls: type


ENCDEC = ModelKind("encdec", "phrase-rescore-encdec", "an encoder-decoder", RNNEncoderDecoder, EncDecConfig)
SEQ2SEQ = ModelKind("seq2seq", "phrase-rescore-seq2seq", "a Seq2Seq", Seq2Seq, Seq2SeqConfig)
CSLM_KIND = ModelKind("cslm", "phrase-rescore-cslm", "a CSLM", CSLM, CSLMConfig)   # vocab_json: CSLMVocab's
KINDS = {k.format: k for k in (ENCDEC, SEQ2SEQ, CSLM_KIND)}


@dataclass
class Checkpoint:
    """A loaded checkpoint: the model (in eval mode), its vocabularies and its training state."""

    model: RNNEncoderDecoder | Seq2Seq | CSLM
    vocabs: Vocabularies | CSLMVocab | None
    train_state: dict | None
    path: Path
    kind: ModelKind


def model_kind(model: torch.nn.Module) -> ModelKind:
    """The kind of ``model``, by its class."""
    for kind in KINDS.values():
        if type(model) is kind.model_cls:
            return kind
    raise TypeError(f"no checkpoint format for a {type(model).__name__}")


def save_checkpoint(path: str | os.PathLike, model: RNNEncoderDecoder | Seq2Seq | CSLM,
                    vocabs: Vocabularies | CSLMVocab | None,
                    train_state: dict | None = None) -> None:
    """Write ``model`` (+ vocabulary, + training state) to ``path`` atomically."""
    ckpt = {
        "format": model_kind(model).format,
        "version": VERSION,
        "config": model.cfg.to_dict(),
        "state_dict": {k: v.detach().cpu().clone() for k, v in model.state_dict().items()},
        "vocab_json": None if vocabs is None else vocabs.to_json(),
        "train_state": train_state,
    }
    with atomic_path(path) as tmp, open(tmp, "wb", buffering=0) as raw:
        out = _Writer(raw)
        try:
            torch.save(ckpt, out)
        except RuntimeError:
            if out.error is not None:       # torch reports a failed write as "unexpected pos": the write's error
                raise out.error from None
            raise


class _Writer:
    """The file torch.save writes a checkpoint into: every write whole (a short write continued), and the
    first OSError (a full disk) kept, since torch turns it into a RuntimeError that names no cause."""

    def __init__(self, raw):
        self.raw = raw
        self.error: OSError | None = None

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        try:
            while view:
                view = view[self.raw.write(view):]
        except OSError as e:
            self.error = self.error or e
            raise
        return len(data)

    def flush(self) -> None:
        self.raw.flush()


def resolve_checkpoint(path: str | os.PathLike) -> Path:
    """A ``.pt`` file as given, or ``DIR/model.pt`` for a training directory."""
    p = Path(path)
    if p.is_dir():
        p = p / BEST
        if not p.exists():
            raise PhraseRescoreError(f"no {BEST} in this directory (expected a training output "
                                     "directory or a .pt checkpoint)", path)
    elif not p.exists():
        raise PhraseRescoreError("model checkpoint not found", path)
    return p


def read_checkpoint(path: str | os.PathLike, device="cpu", kind: ModelKind | None = None) -> dict:
    """The raw checkpoint dict, checked for format and version (``weights_only=True``).

    :param kind: the model expected (:data:`ENCDEC`, :data:`SEQ2SEQ`); None accepts either.
    """
    p = resolve_checkpoint(path)
    ckpt = _torch_load(p, device)
    if not isinstance(ckpt, dict) or not isinstance(ckpt.get("format"), str):
        what = "a dict without a \"format\" entry" if isinstance(ckpt, dict) else f"a {type(ckpt).__name__}"
        raise PhraseRescoreError(f"not a phrase-rescore checkpoint: it holds {what}", p)
    if kind is not None and ckpt["format"] != kind.format:
        raise PhraseRescoreError(f"not {kind.description} checkpoint: expected format {kind.format!r}, "
                                 f"found {ckpt['format']!r}", p)
    if ckpt["format"] not in KINDS:
        raise PhraseRescoreError(f"not a phrase-rescore checkpoint: unknown format {ckpt['format']!r} (expected "
                                 f"one of {sorted(KINDS)})", p)
    if ckpt.get("version") != VERSION:
        raise PhraseRescoreError(f"checkpoint version {ckpt.get('version')} is not supported (expected {VERSION})", p)
    return ckpt


def _torch_load(p: Path, device):
    """``torch.load(weights_only=True)``, its assorted errors (EOFError, IndexError, RuntimeError from the
    zip reader, UnpicklingError...) turned into one short message that says what the file looks like."""
    size = p.stat().st_size
    if size == 0:
        raise PhraseRescoreError("not a phrase-rescore checkpoint: empty file (0 bytes)", p)
    try:
        with warnings.catch_warnings():         # e.g. about the pickle protocol of a file that is no checkpoint
            warnings.simplefilter("ignore")
            return torch.load(p, map_location=device, weights_only=True)
    except Exception as e:
        with open(p, "rb") as f:
            head = f.read(len(ZIP_MAGIC))
        if head != ZIP_MAGIC:
            what = "not a file written by torch.save"
        elif isinstance(e, pickle.UnpicklingError) and "weights only" in str(e).lower():
            what = "a torch file with objects other than tensors and plain values, which weights-only loading refuses"
        else:
            what = f"truncated or damaged file ({size} bytes)"
        raise PhraseRescoreError(f"not a phrase-rescore checkpoint: {what}", p) from None


def check_finite_weights(weights: dict, path: str | os.PathLike) -> None:
    """Refuse weights with a NaN or an infinity: such a model scores every pair NaN."""
    for name, t in weights.items():
        if torch.is_tensor(t) and t.is_floating_point() and not bool(torch.isfinite(t).all()):
            bad = int((~torch.isfinite(t)).sum())
            raise PhraseRescoreError(f"the model's weights contain NaN or inf ({bad} of {t.numel()} values of "
                                     f"{name}): it cannot score or sample; use a checkpoint saved before "
                                     "training diverged", path)


def load_checkpoint(path: str | os.PathLike, device="cpu", kind: ModelKind | None = None) -> Checkpoint:
    """Rebuild the model from a checkpoint file or training directory, on ``device`` in eval mode.

    :param kind: the model expected (:data:`ENCDEC`, :data:`SEQ2SEQ`); None accepts either.
    """
    p = resolve_checkpoint(path)
    ckpt = read_checkpoint(p, "cpu", kind)
    kind = KINDS[ckpt["format"]]
    for key in ("config", "state_dict"):
        if not isinstance(ckpt.get(key), dict):
            raise PhraseRescoreError(f"damaged checkpoint: it has no {key!r} entry", p)
    try:
        cfg = kind.config_cls.from_dict(ckpt["config"])
    except (TypeError, ValueError, PhraseRescoreError) as e:
        raise PhraseRescoreError(f"bad model config in checkpoint: {getattr(e, 'message', e)}", p) from None
    model = kind.model_cls(cfg)
    try:
        model.load_state_dict(ckpt["state_dict"])
    except RuntimeError as e:
        raise PhraseRescoreError(f"checkpoint weights do not fit its config: {str(e)[:300]}", p) from None
    check_finite_weights(ckpt["state_dict"], p)
    model.to(device).eval()
    vocabs = None
    if ckpt.get("vocab_json") and kind is CSLM_KIND:
        vocabs = CSLMVocab.from_json(ckpt["vocab_json"], f"{p} (vocabulary)")
        if len(vocabs) != cfg.vocab_size:
            raise PhraseRescoreError(f"vocabulary size {len(vocabs)} differs from the model's {cfg.vocab_size}", p)
    elif ckpt.get("vocab_json"):
        vocabs = Vocabularies.from_json(ckpt["vocab_json"], f"{p} (vocabulary)")
        if (len(vocabs.source), len(vocabs.target)) != model.vocab_sizes:
            raise PhraseRescoreError(f"vocabulary sizes {len(vocabs.source)}/{len(vocabs.target)} differ from the "
                                     "model's {}/{}".format(*model.vocab_sizes), p)
    return Checkpoint(model, vocabs, ckpt.get("train_state") or None, p, kind)


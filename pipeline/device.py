"""Choosing the torch device: CUDA when present, else the CPU, with a clear error for an impossible request."""
from __future__ import annotations

import torch

from phrase_rescore.core.errors import PhraseRescoreError


def resolve_device(name: str | None = "auto") -> torch.device:
    """``None`` or ``"auto"`` -> CUDA when present, else CPU; other names as torch understands them."""
    if name is None or name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except RuntimeError:
        raise PhraseRescoreError(f"unknown device {name!r}: expected auto, cpu, cuda or cuda:N") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise PhraseRescoreError(f"device {name!r} was asked for but torch sees no CUDA device")
    return dev


def check_device(values: dict, name) -> None:
    """A config's ``device`` setting names a device this machine has (``name(key)`` names it in the message)."""
    if "device" not in values:
        return
    try:
        resolve_device(values["device"])
    except PhraseRescoreError as e:
        raise PhraseRescoreError(f"{name('device')}: {e.message}") from None

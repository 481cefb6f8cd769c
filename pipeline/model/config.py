"""What the configs of both models share: vocabulary sizes by one name, presets by name, plain dicts.

:class:`ModelConfig` is the base of :class:`EncDecConfig` and :class:`Seq2SeqConfig` (both dataclasses
whose first fields are ``src_vocab_size`` and ``tgt_vocab_size``); a checkpoint keeps ``to_dict()``.
"""
from __future__ import annotations

import dataclasses
from typing import ClassVar

from phrase_rescore.core.errors import PhraseRescoreError


class ModelConfig:
    """Named presets and the checkpoint dict of a model config dataclass.

    ``PRESETS`` maps each preset's name to the sizes it sets.
    """

    PRESETS: ClassVar[dict[str, dict]] = {}

    @classmethod
    def preset(cls, name: str, src_vocab_size: int, tgt_vocab_size: int, **overrides):
        """The sizes of preset ``name`` for the given vocabularies; keyword overrides win.

        :raises PhraseRescoreError: ``name`` is no preset (the message lists the presets).
        """
        if name not in cls.PRESETS:
            raise PhraseRescoreError(f"unknown model preset {name!r}; expected one of {sorted(cls.PRESETS)}")
        return cls(src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size,
                   **{**cls.PRESETS[name], **overrides})

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict):
        """The config of ``to_dict()`` output; unknown keys raise ValueError."""
        unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"unknown {cls.__name__} keys {sorted(unknown)}")
        return cls(**d)

"""Moses tokenization (sacremoses) and casing, as a Moses baseline preprocesses its corpus.

Named ``tokenizer`` rather than ``tokenize`` so it can never shadow the standard library module.

Escaping is OFF by default: Moses's ``tokenizer.perl`` turns ``& | < > ' " [ ]`` into XML entities
(``&amp;`` ...) because the Moses decoder reads ``|`` as a factor separator and ``<...>`` as XML
markup. We keep the characters as they are so that phrase tables, n-best lists and BLEU are on the
text the user gave; the one character that would break Moses's formats, ``|``, is removed by
:mod:`.clean` exactly as ``clean-corpus-n.perl`` does (and counted). Pass ``escape=True`` to get
``tokenizer.perl``'s default behaviour instead.

Casing (``case``):

- ``"lower"``: lowercase every token (Python's ``str.lower``; what ``lowercase.perl`` does).
- ``"truecase"``: a simple truecaser trained on the corpus (sacremoses' port of Moses's
  ``train-truecaser.perl`` / ``truecase.perl``): a sentence-initial word takes its most frequent
  casing seen elsewhere. The model is saved beside the system so new text is cased the same way.
- ``"none"``: keep the text's casing.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable, Sequence

from sacremoses import MosesDetokenizer, MosesTokenizer, MosesTruecaser

from phrase_rescore.core.errors import PhraseRescoreError

from ..configs import CASES


@dataclass
class TokenizeConfig:
    """How one side of the corpus is tokenized and cased."""

    lang: str = "en"                   # sacremoses language code (selects non-breaking prefixes)
    case: str = "lower"                # one of CASES
    escape: bool = False               # tokenizer.perl's XML escaping (off: see the module docstring)
    aggressive_dash_splits: bool = False  # tokenizer.perl -a

    def __post_init__(self):
        if self.case not in CASES:
            raise PhraseRescoreError(f"unknown case '{self.case}', expected one of: {', '.join(CASES)}")


class Tokenizer:
    """Tokenize, case and detokenize one language's text the way the system was built.

    :param config: the language, casing and escaping settings.
    :param truecaser: a trained truecaser (only with ``case="truecase"``); see :meth:`train_truecaser`.
    """

    def __init__(self, config: TokenizeConfig, truecaser: MosesTruecaser | None = None):
        self.config = config
        self._tok = MosesTokenizer(lang=config.lang)
        self._detok = MosesDetokenizer(lang=config.lang)
        self.truecaser = truecaser

    def split(self, line: str) -> list[str]:
        """Moses-tokenize one line (no casing). Returns the tokens."""
        return self._tok.tokenize(line.strip(), escape=self.config.escape,
                                  aggressive_dash_splits=self.config.aggressive_dash_splits)

    def case(self, tokens: Sequence[str]) -> list[str]:
        """Apply the configured casing to tokenized text."""
        if self.config.case == "lower":
            return [t.lower() for t in tokens]
        if self.config.case == "truecase":
            if self.truecaser is None:
                raise PhraseRescoreError("case='truecase' needs a trained truecaser (Tokenizer.train_truecaser)")
            if not tokens:
                return []
            return self.truecaser.truecase(" ".join(tokens))
        return list(tokens)

    def tokenize(self, line: str) -> list[str]:
        """Tokenize and case one line of raw text, as the training corpus was."""
        return self.case(self.split(line))

    def detokenize(self, tokens: Sequence[str]) -> str:
        """Moses-detokenize tokens back to text (unescaping only when escaping was on)."""
        return self._detok.detokenize(list(tokens), unescape=self.config.escape)

    def train_truecaser(self, tokenized: Iterable[Sequence[str]]) -> MosesTruecaser:
        """Train the truecaser on tokenized (uncased) sentences and keep it on this tokenizer."""
        tc = MosesTruecaser()
        tc.train([list(s) for s in tokenized], save_to=None)
        self.truecaser = tc
        return tc

    def save_truecaser(self, path: str | os.PathLike) -> None:
        """Write the truecasing model in Moses's truecase-model format (sacremoses writes it atomically)."""
        assert self.truecaser is not None
        self.truecaser._save_model_from_casing(self.truecaser.model["casing"], os.fspath(path))

    @staticmethod
    def load_truecaser(path: str | os.PathLike) -> MosesTruecaser:
        """Read a truecase model written by :meth:`save_truecaser` (or by Moses's train-truecaser.perl)."""
        if not os.path.exists(path):
            raise PhraseRescoreError("truecase model not found", path)
        return MosesTruecaser(load_from=os.fspath(path))

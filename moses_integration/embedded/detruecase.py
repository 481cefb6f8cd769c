"""Detruecasing, as Moses's ``scripts/recaser/detruecase.perl`` does it before detokenization.

A truecased system writes a sentence's first word in its most frequent casing (``a dog runs .``);
Moses's recipe restores the sentence-initial capital before detokenizing and scoring cased BLEU. The
rules are the script's, token by token on whitespace-split text:

- the first token of a line, and the first token after a sentence end (``.`` ``:`` ``?`` ``!``, the
  whole token), get their first character uppercased; every other token is left as it is;
- tokens of the delayed-sentence-start set (``(`` ``[`` ``"`` ``'`` and their escaped forms
  ``&quot;`` ``&apos;`` ``&#91;`` ``&#93;``) keep a pending sentence start pending, so
  ``" the dog`` becomes ``" The dog``;
- factors are not split: in ``word|POS`` the first character of the whole token is uppercased, and
  ``.|PUNC`` is not a sentence end (the script compares whole tokens);
- leading and trailing whitespace is removed and tokens are joined by single spaces.

The script's ``--headline`` option (title-casing SGML headline segments) is not implemented.
"""
from __future__ import annotations

import re
from typing import Iterable

#: detruecase.perl's %SENTENCE_END
SENTENCE_END = frozenset({".", ":", "?", "!"})
#: detruecase.perl's %DELAYED_SENTENCE_START
DELAYED_SENTENCE_START = frozenset({"(", "[", '"', "'", "&quot;", "&apos;", "&#91;", "&#93;"})

# Perl's \s on character strings (Unicode White_Space). Python's str.split() also splits at
# \x1c-\x1f, which Perl keeps inside a token.
_SPACE = ("\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200b)))
          + "\u2028\u2029\u202f\u205f\u3000")
_SPLIT = re.compile(f"[{re.escape(_SPACE)}]+")


def _uppercase_first(token: str) -> str:
    """``uc(substr($w, 0, 1)) . substr($w, 1)``: Perl's uc is the full uppercase mapping, as str.upper."""
    return token[:1].upper() + token[1:]


def detruecase_tokens(tokens: Iterable[str]) -> list[str]:
    """Uppercase the first character of each sentence-initial token (see the module docstring)."""
    out = []
    sentence_start = True
    for tok in tokens:
        out.append(_uppercase_first(tok) if sentence_start else tok)
        if tok in SENTENCE_END:
            sentence_start = True
        elif tok not in DELAYED_SENTENCE_START:
            sentence_start = False
    return out


def detruecase_line(line: str) -> str:
    """One line as ``detruecase.perl`` prints it (without the newline)."""
    line = line.removesuffix("\n").strip(_SPACE)
    return " ".join(detruecase_tokens(_SPLIT.split(line))) if line else ""


def detruecase_lines(lines: Iterable[str]) -> list[str]:
    """:func:`detruecase_line` of each line."""
    return [detruecase_line(x) for x in lines]

"""Truecasing, as Moses's ``scripts/recaser/truecase.perl`` does it with a ``train-truecaser.perl`` model.

A Moses system trained by the tutorial's recipe (``tokenizer.perl``, ``train-truecaser.perl``,
``truecase.perl --model truecase-model.LANG``) expects its input cased by that script: this module
follows it rule for rule, so dev and test text reach the decoder as the training text reached the
aligner.

The model (one line per lowercased word, ``best (n/total) other (n) other (n) ...``) is read as the
script reads it: each line is split at whitespace; ``BEST[lc(first)] = first`` (a later line for the same
lowercased word wins) and the first word and every second field after it are *known* words. With ``asr``
nothing is known.

Each input line is split as the script's ``split_xml`` splits it (XML-like tags ``<x ...>`` are kept
as markup between words; a tag glued to a word that ends with ``|`` becomes part of that word), then
each word is cased:

- a word's factors (from its first ``|`` on) are set aside and put back after it;
- at a sentence start (the line's start, or after a whole-word ``.`` ``:`` ``?`` ``!``), a word whose
  lowercased form is in the model takes its best form;
- elsewhere a known word stays as it is, and an unknown word whose lowercased form is in the model
  takes the best form; any other word stays as it is;
- the delayed-sentence-start words (``(`` ``[`` ``"`` ``'`` and their escapes) keep a pending sentence
  start pending.

Words are joined by single spaces, a tag is printed with the space after it and none before it (the
script's spacing), and whitespace is Perl's ``\\s`` on character strings (Unicode White_Space). Perl's
``lc`` is the full lowercase mapping without the final-sigma rule that Python's ``str.lower`` applies.

One deliberate difference: the script ``chop``s every line, so a last line without a newline loses its
last character there; here a line is given without its newline and nothing else is removed.
The script's ``-b`` (unbuffered output) has no meaning here.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Iterable

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.reading import open_binary_read

from .detruecase import _SPACE, DELAYED_SENTENCE_START, SENTENCE_END

_S = f"[{re.escape(_SPACE)}]"
_NOT_S = f"[^{re.escape(_SPACE)}]"
_HAS_TEXT = re.compile(_NOT_S)
_TAG = re.compile(f"^{_S}*(<{_NOT_S}[^>]*>)(.*)$", re.DOTALL)
_WORD = re.compile(f"^{_S}*([^{re.escape(_SPACE)}<>]+)(.*)$", re.DOTALL)
_ANY = re.compile(f"^{_S}*({_NOT_S}+)(.*)$", re.DOTALL)
_STARTS_WITH_TEXT = re.compile(f"^{_NOT_S}")
_PIPES = re.compile(r"^(\|+)(.*)$", re.DOTALL)
_FACTORS = re.compile(r"^([^|]+)(.*)$", re.DOTALL)
_FIELDS = re.compile(f"{_S}+")


def perl_lc(text: str) -> str:
    """Perl's ``lc``: the full lowercase mapping, but a capital sigma is always ``σ`` (no final-sigma rule)."""
    return text.replace("\u03a3", "\u03c3").lower()


@dataclass
class TruecaseModel:
    """A ``train-truecaser.perl`` model as ``truecase.perl`` holds it.

    :ivar best: lowercased word -> its best form (``%BEST``).
    :ivar known: the forms seen in the model (``%KNOWN``; empty with ``asr``).
    :ivar asr: ``truecase.perl -a``: input is lowercased first and no word counts as known.
    """

    best: dict[str, str] = field(default_factory=dict)
    known: set[str] = field(default_factory=set)
    asr: bool = False


def parse_truecase_model(lines: Iterable[str], asr: bool = False) -> TruecaseModel:
    """A model from its lines (see the module docstring)."""
    model = TruecaseModel(asr=asr)
    for line in lines:
        fields = [f for f in _FIELDS.split(line) if f]
        if not fields:
            continue            # the script stores lc(undef) = "", which no word can look up
        word, options = fields[0], fields[1:]
        model.best[perl_lc(word)] = word
        if not asr:
            model.known.add(word)
            model.known.update(options[i] for i in range(1, len(options) - 1, 2))  # for($i=1;$i<$#OPTIONS;$i+=2)
    return model


def load_truecase_model(path: str | os.PathLike, asr: bool = False) -> TruecaseModel:
    """Read a truecase model file (UTF-8, plain or gzip).

    :raises PhraseRescoreError: the file is missing or is not UTF-8 text.
    """
    if not os.path.isfile(path):
        raise PhraseRescoreError("truecase model not found", path)
    with open_binary_read(path) as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PhraseRescoreError(f"the truecase model is not UTF-8 text ({e.reason} at byte {e.start})", path,
                                 data.count(b"\n", 0, e.start) + 1) from None
    return parse_truecase_model(text.split("\n"), asr=asr)


def split_xml(line: str) -> tuple[list[str], list[str]]:
    """``truecase.perl``'s ``split_xml``: the words of ``line`` and the markup before each (and after the last)."""
    words: list[str] = []
    markup = [""]
    while _HAS_TEXT.search(line):
        m = _TAG.match(line)
        if m:
            tag, rest = m.group(1), m.group(2)
            if _STARTS_WITH_TEXT.match(line) and words and words[-1].endswith("|"):
                words[-1] += tag            # a factor that is an XML tag
                p = _PIPES.match(rest)
                if p:
                    words[-1] += p.group(1)
                    rest = p.group(2)
            else:
                markup[len(words)] += tag + " "
            line = rest
            continue
        m = _WORD.match(line) or _ANY.match(line)    # the second: a word holding '<' or '>', not a tag
        assert m is not None, line                   # the loop only runs while the line holds a non-space
        words.append(m.group(1))
        markup.append("")
        line = m.group(2)
    markup[-1] = markup[-1][:-1]                     # chop($MARKUP[$#MARKUP])
    return words, markup


def truecase_line(line: str, model: TruecaseModel) -> str:
    """One line (without its newline) as ``truecase.perl --model MODEL`` prints it (without the newline)."""
    words, markup = split_xml(line)
    out: list[str] = []
    sentence_start = True
    for i, token in enumerate(words):
        if i and markup[i] == "":
            out.append(" ")
        out.append(markup[i])
        m = _FACTORS.match(token)
        word, factors = (m.group(1), m.group(2)) if m else (token, "")
        if model.asr:
            word = perl_lc(word)
        best = model.best.get(perl_lc(word))
        if sentence_start and best is not None:
            out.append(best)
        elif word in model.known:
            out.append(word)
        elif best is not None:
            out.append(best)
        else:
            out.append(word)
        out.append(factors)
        if word in SENTENCE_END:
            sentence_start = True
        elif word not in DELAYED_SENTENCE_START:
            sentence_start = False
    out.append(markup[-1])
    return "".join(out)


def truecase_lines(lines: Iterable[str], model: TruecaseModel) -> list[str]:
    """:func:`truecase_line` of each line."""
    return [truecase_line(x, model) for x in lines]

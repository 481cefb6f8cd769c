"""Moses's numbers: how Moses reads a score, the floor on log scores, how scores, floats and weights are
printed, and how the model's log p(f|e) and the unknown-word count become phrase-table feature values.

Moses reads every phrase-table score as a C ``float`` and stores ``FloorScore(TransformScore(x))``:
``TransformScore`` is the natural log (moses/Util.h) and ``FloorScore`` clamps it at
``LOWEST_SCORE = -100.0f`` (moses/TypeDef.h); the loader (moses/TranslationModel/RuleTable/
LoaderStandard.cpp) parses each score with ``StringToFloat`` and applies both. So a feature whose
log-linear value should be ``v`` is written as ``exp(v)``; writing ``v`` itself (a negative number)
would make Moses take the log of a negative number (NaN).

Conventions of this module (the project's documented floor):

* **log p column**: ``exp(log p)`` with 7 significant digits (:func:`format_score`).
  For ``log p >= -87.3`` the value is a normal float32 and Moses recovers log p to float precision.
  Between -87.3 and -100 it is a float32 subnormal, which Moses still reads, with a rounding error
  in log p that grows towards -100 (about 1e-4 at -95, 0.02 at -100).
  For ``log p < -100`` (including -inf) the text is :data:`FLOOR_TEXT` (``1e-45``): it parses to the
  smallest positive float32 (or to 0 where subnormals are flushed), whose log is at most -103.3 or
  -inf, so Moses stores exactly its floor, -100. Nothing written is ever 0 or negative.
* **unknown-word column**: ``exp(min(n, 88))`` for ``n`` words outside the networks' shortlists (source
  words outside the source shortlist plus target words outside the target shortlist), so Moses's log
  gives ``n`` (the convention of the old 2.718 phrase-penalty column). The count is clamped at
  :data:`UNK_COUNT_MAX` = 88, the largest integer whose exp is a finite float32 (exp(88) = 1.65e38,
  exp(89) = 4.5e38 > FLT_MAX = 3.4e38): a longer phrase pair (89 or more unknown words) is written as
  ``1.651636e+38`` and counts as 88 unknown words, never as a value that Moses reads as ``inf``.
* ``raw=True`` (``--raw-logprob``, for consumers other than Moses) writes the log-domain values
  themselves: log p (no floor; -inf, which only an underflowing model gives, as :data:`RAW_LOGPROB_MIN`,
  the lowest float32 in 7 digits) and the count ``n`` (not clamped).
* A line rejected by the reader (``--on-error keep``) gets neutral values that add 0 to the
  log-linear score: :data:`NEUTRAL_VALUE` (1) in Moses form, 0 in raw form.

Every text written in Moses form is one that Moses's loader reads as a finite, positive float32
(:func:`moses_reads` mirrors it, and the tests check every column against it).
"""
from __future__ import annotations

import math
import re
import struct

import numpy as np

from phrase_rescore.core.errors import PhraseRescoreError

#: Moses's floor on the log of any phrase-table score (moses/TypeDef.h ``LOWEST_SCORE``).
LOWEST_SCORE = -100.0
#: Written for ``log p < LOWEST_SCORE``: parses to the smallest float32 subnormal (log -103.3) or 0
#: (log -inf); either way Moses's FloorScore turns it into exactly -100.
FLOOR_TEXT = "1e-45"
#: Below this log value exp() is a float32 subnormal (log of FLT_MIN = 1.17549435e-38).
FLOAT32_NORMAL_LOG_MIN = math.log(1.17549435e-38)
#: The largest unknown-word count written as exp(n): exp(88) = 1.65e38 is a finite float32, exp(89) is not.
UNK_COUNT_MAX = 88
#: A raw log p of -inf is written as the lowest float32 in 7 significant digits (finite for every reader).
RAW_LOGPROB_MIN = "-3.402823e+38"

#: The value written in a new column of a rejected line: Moses takes its log, so it adds 0 to the
#: log-linear score and the line neither gains nor loses by the new feature.
NEUTRAL_VALUE = 1.0
#: One score as double-conversion's ``StringToFloat`` reads it whole (Moses's phrase-table loader):
#: an optional sign, digits with at most one point (``5.``, ``.5``), an optional exponent.
SCORE_TOKEN = r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
SCORE_TOKEN_RE = re.compile(SCORE_TOKEN)
#: A count as Moses's ``Scan<size_t>`` reads it whole and as Python's ``int`` reads it alike: ASCII digits only
#: (``int`` also takes ``4_0``, full-width ``４`` and Arabic-Indic ``٤``, which Moses reads otherwise or not at all).
COUNT_TOKEN_RE = re.compile(r"[0-9]+")
#: The smallest magnitude a float32 rounds to infinity (2**128 - 2**103, half-way past FLT_MAX).
FLOAT32_OVERFLOW = 2.0 ** 128 - 2.0 ** 103


def floor_log(p: float) -> float:
    """Moses's ``FloorScore(TransformScore(p))``: ``max(ln p, -100)``, and -100 for p <= 0."""
    if p <= 0.0:
        return LOWEST_SCORE
    return max(math.log(p), LOWEST_SCORE)


def moses_float32(token: str) -> float | None:
    """The float32 Moses reads for one score token (as a Python float), or None when Moses rejects it
    ("Bad score") or reads it as infinite."""
    if SCORE_TOKEN_RE.fullmatch(token) is None:
        return None
    x = float(token)
    return struct.unpack("f", struct.pack("f", x))[0] if abs(x) < FLOAT32_OVERFLOW else None


def format_score(x: float) -> str:
    """A score as text: 7 significant digits, enough for a float32 (Moses stores scores as float)."""
    return f"{x:.7g}"


def format_moses_float(x: float) -> str:
    """A float as a C++ ostream prints it by default (6 significant digits, ``%g``), as Moses does, but
    0 for -0 (a sum or product that rounds to zero from below; Moses's own scores of a phrase table,
    probabilities and counts, are never negative, so that is the one difference there can be)."""
    s = f"{x:.6g}"
    return "0" if s == "-0" else s


def format_weight(x: float) -> str:
    """A weight or feature value as Moses and mert-moses.pl accept it: integers bare (``0``, ``-3``), others
    the shortest decimal that reads back as the same double."""
    x = float(x)
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return repr(x)


def logprob_texts(logp: np.ndarray, raw: bool = False) -> list[str]:
    """Text of the log p column for each pair (see the module docstring for the floor)."""
    logp = np.asarray(logp, dtype=np.float64)
    if np.isnan(logp).any():
        raise PhraseRescoreError("the model produced NaN log-probabilities: the checkpoint is broken")
    logp = np.minimum(logp, 0.0)  # a log-probability; rounding can leave +1e-8
    if raw:
        return [format_score(v) if v != -math.inf else RAW_LOGPROB_MIN for v in logp.tolist()]
    probs = np.exp(np.maximum(logp, LOWEST_SCORE))
    floor = logp < LOWEST_SCORE
    out = [format_score(v) for v in probs.tolist()]
    if floor.any():
        for i in np.flatnonzero(floor).tolist():
            out[i] = FLOOR_TEXT
    return out


def unk_texts(n_unk: np.ndarray, raw: bool = False) -> list[str]:
    """Text of the unknown-word column: ``exp(min(n, UNK_COUNT_MAX))`` (Moses) or ``n`` (raw)."""
    n = np.asarray(n_unk, dtype=np.int64)
    if raw:
        return [str(v) for v in n.tolist()]
    return [format_score(v) for v in np.exp(np.minimum(n, UNK_COUNT_MAX).astype(np.float64)).tolist()]


def neutral_text(raw: bool) -> str:
    """The value of every new column on a rejected line (adds 0 to the log-linear score)."""
    return "0" if raw else format_score(NEUTRAL_VALUE)


def moses_reads(text: str) -> float:
    """What Moses stores for a score written as ``text``: FloorScore(log(float32(text))).

    For tests and documentation; mirrors LoaderStandard.cpp (parse the whole token as a float, log in
    float, floor at -100): NaN for a negative number, and an error for a text that Moses refuses ("Bad
    score") or reads as an infinite float32.
    """
    x = moses_float32(text)
    if x is None:
        raise PhraseRescoreError(f"Moses does not read {text!r} as a finite float32")
    if x < 0:
        return math.nan
    with np.errstate(divide="ignore"):
        v = np.log(np.float32(x)) if x > 0 else np.float32(-np.inf)
    return float(max(np.float32(v), np.float32(LOWEST_SCORE)))

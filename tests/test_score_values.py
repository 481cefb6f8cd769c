"""Moses's view of the new columns: it reads a float, takes its log and floors at -100."""
from __future__ import annotations

import math

import numpy as np
import pytest

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.moses_integration.moses_values import (
    FLOOR_TEXT,
    RAW_LOGPROB_MIN,
    UNK_COUNT_MAX,
    logprob_texts,
    moses_reads,
    neutral_text,
    unk_texts,
)
from phrase_rescore.pipeline.configs import parse_columns


@pytest.mark.parametrize("logp,moses_value,tol", [
    (0.0, 0.0, 1e-7),
    (-1e-9, 0.0, 1e-7),
    (-0.5, -0.5, 1e-6),
    (-12.345678, -12.345678, 1e-5),
    (-80.0, -80.0, 1e-4),             # still a normal float32
    (-95.0, -95.0, 1e-3),             # a float32 subnormal: Moses's own rounding, documented
    (-100.0, -100.0, 0.05),
    (-100.5, -100.0, 0.0),            # below the floor: exactly the floor
    (-1234.0, -100.0, 0.0),
    (-math.inf, -100.0, 0.0),
])
def test_logprob_column_reads_back_as_log_p_or_the_floor(logp, moses_value, tol):
    (text,) = logprob_texts(np.array([logp]))
    assert float(text) > 0, "Moses must never see 0 or a negative number"
    assert abs(moses_reads(text) - moses_value) <= tol


def test_floor_text_is_positive_and_floors():
    assert float(FLOOR_TEXT) > 0 and np.float32(float(FLOOR_TEXT)) > 0
    assert moses_reads(FLOOR_TEXT) == -100.0


def test_raw_logprob_writes_log_p():
    assert logprob_texts(np.array([-1.5, -250.0]), raw=True) == ["-1.5", "-250"]


def test_nan_is_an_error():
    with pytest.raises(PhraseRescoreError, match="NaN"):
        logprob_texts(np.array([-1.0, math.nan]))


@pytest.mark.parametrize("n,text,moses_value", [
    (0, "1", 0), (1, "2.718282", 1), (2, "7.389056", 2), (14, "1202604", 14),
    (88, "1.651636e+38", 88),          # the largest count whose exp is a finite float32
    (89, "1.651636e+38", 88),          # clamped: exp(89) is a float32 infinity
    (200, "1.651636e+38", 88),         # a 200-word phrase pair, all words unknown
    (10 ** 6, "1.651636e+38", 88),
])
def test_unknown_word_column_is_exp_count(n, text, moses_value):
    assert unk_texts(np.array([n])) == [text]
    assert abs(moses_reads(text) - moses_value) < 1e-5
    assert unk_texts(np.array([n]), raw=True) == [str(n)]
    assert math.exp(UNK_COUNT_MAX) < float(np.finfo(np.float32).max) < math.exp(UNK_COUNT_MAX + 1)


def test_every_moses_form_text_is_a_finite_positive_float32():
    logp = np.concatenate([-np.logspace(-12, 6, 400), [0.0, 1e-8, -87.3, -100.0, -math.inf]])
    texts = logprob_texts(logp) + unk_texts(np.arange(0, 400)) + [neutral_text(False)]
    for t in texts:
        x = np.float32(float(t))
        assert np.isfinite(x) and x > 0, t
        assert -100.0 <= moses_reads(t) <= 88.0 + 1e-5, t


def test_raw_minus_infinity_is_the_lowest_float32():
    assert logprob_texts(np.array([-math.inf, -3.0]), raw=True) == [RAW_LOGPROB_MIN, "-3"]
    assert np.isfinite(np.float32(float(RAW_LOGPROB_MIN)))


@pytest.mark.parametrize("text", ["inf", "1e39", "1_0", "nan", "0x10", "1e"])
def test_moses_reads_refuses_what_moses_refuses_or_reads_as_infinite(text):
    with pytest.raises(PhraseRescoreError, match="finite float32"):
        moses_reads(text)


def test_moses_reads_a_negative_number_as_nan_and_zero_as_the_floor():
    assert math.isnan(moses_reads("-0.5"))
    assert moses_reads("0") == -100.0 and moses_reads("-0") == -100.0


def test_neutral_values_add_nothing():
    assert moses_reads(neutral_text(False)) == 0.0
    assert float(neutral_text(True)) == 0.0


@pytest.mark.parametrize("spec,expected", [
    ("logprob,unk", ("logprob", "unk")), ("unk", ("unk",)), (" unk , logprob ", ("unk", "logprob")),
    (("logprob",), ("logprob",)),
])
def test_parse_columns(spec, expected):
    assert parse_columns(spec) == expected


@pytest.mark.parametrize("spec", ["", "logprob,logprob", "prob", "logprob,unk,wp"])
def test_parse_columns_rejects(spec):
    with pytest.raises(PhraseRescoreError, match="--columns"):
        parse_columns(spec)

"""What a Moses system's text says about how it was prepared: its casing (lowercased, truecased, natural) and
tokenizer.perl's escaping, judged from tokenized text as init and the workflow's checks judge it."""
from __future__ import annotations

import pytest

from phrase_rescore.moses_integration.moses_system import MIN_STARTS, detect_case, detect_escape

NATURAL = ["The house is small .", "Paris is big .", "( The cat ) sleeps .", "I see it ."]
TRUECASED = ["the house is small .", "Paris is big .", "( the cat ) sleeps .", "i see it ."]
LOWER = ["the house is small .", "paris is big .", "( the cat ) sleeps .", "i see it ."]


@pytest.mark.parametrize("lines, want", [
    (NATURAL * 5, "none"),
    (TRUECASED * 5, "truecase"),          # 'Paris' starts one line in four: 25%
    (LOWER * 5, "lower"),
    (["&quot; The dog", "&apos; A cat", "[ Le chien"] * 7, "none"),  # escaped delayed starts are skipped
    (["3 dogs in Paris .", "- the cat ."] * 20, "truecase"),   # a line's first cased word, not its first token
    (LOWER[:3], None),                     # too few lines to tell
    (["1 2 3 .", ". , ;"] * 30, None),     # no cased letter
    (["The a .", "the b ."] * 10, None),   # half and half: no verdict
])
def test_detect_case(lines, want):
    d = detect_case(lines)
    assert (d and d.value) == want, d


def test_detect_case_needs_min_starts():
    assert detect_case(LOWER * (MIN_STARTS // 4 - 1) + LOWER[:3]) is None
    assert detect_case(LOWER * (MIN_STARTS // 4)).value == "lower"


@pytest.mark.parametrize("tokens, want", [
    (["l&apos;", "homme", "&quot;", "x"], True),
    (["l'", "homme", '"', "x"], False),
    (["a", "b"], None),                     # nothing tells
    (["&amp;", "'"], None),                 # both: no verdict
    (["&#124;", "&lt;b&gt;"], True),
])
def test_detect_escape(tokens, want):
    d = detect_escape(tokens)
    assert (d and d.value) == want

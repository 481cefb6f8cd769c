"""Truecasing as Moses's truecase.perl applies a train-truecaser.perl model: a table of lines with the script's
output (from the real script), and, with MOSES_HOME, the script itself on the same lines and on a model it
trained."""
from __future__ import annotations

import subprocess

import pytest
from _real_moses import needs_moses, script

from phrase_rescore.moses_integration.embedded.truecase import (
    load_truecase_model,
    parse_truecase_model,
    perl_lc,
    truecase_line,
)

MODEL = """the (10/12) The (2)
Paris (5/5)
iphone (3/4) iPhone (1)
apple (2/3) Apple (1)
σας (1/1)
odd (1/2) Odd
I (39/40) i (1)
"""

# (line, what truecase.perl --model MODEL prints), the expected outputs as the real script printed them
CASES = [
    ("the man saw The Paris .", "the man saw The Paris ."),           # a known form stays mid-sentence
    ("THE iphone . apple is Apple : the", "the iphone . apple is Apple : the"),   # best form at each start
    ("paris is nice", "Paris is nice"),                                 # an unknown form takes the best
    ('" the dog " ( apple', '" the dog " ( apple'),                     # delayed sentence starts
    ("&quot; The dog", "&quot; the dog"),
    ("i think i am", "I think i am"),                                   # 'i' is known: kept after the start
    ("a <b> c <i>d</i> e", "a<b> c<i> d</i> e"),                        # tags: the script's spacing
    ("<x> tag only", "<x> tag only"),
    ("a| <f>| z", "a|<f> | z"),                                         # a tag glued to a factor
    ("word|<x>|y more", "word|<x>| y more"),
    ("a>b <c d < e", "a >b <c d < e"),                                  # '<' or '>' in a word, not a tag
    ("ΣΑΣ the", "ΣΑΣ the"),                                             # Perl's lc: no final sigma, no match
    ("the|DT man|NN .|P the", "the|DT man|NN .|P the"),                 # factors: '.|P' ends no sentence
    ("    leading   spaces  ", "leading spaces"),
    ("odd Odd ODD", "odd odd odd"),           # 'Odd' is no known form: the options' odd fields are counts
    ("", ""),
    ("x\u00a0y", "x y"),                                                # Perl's \s holds the no-break space
]


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("tc") / "truecase-model.en"
    p.write_text(MODEL, encoding="utf-8")
    return p


@pytest.mark.parametrize("line, want", CASES)
def test_truecase_line(model_file, line, want):
    assert truecase_line(line, load_truecase_model(model_file)) == want


def test_model_as_the_script_reads_it():
    m = parse_truecase_model(MODEL.splitlines())
    assert m.best["the"] == "the" and m.best["paris"] == "Paris" and m.best["i"] == "I"
    assert {"the", "The", "Paris", "iphone", "iPhone", "I", "odd"} <= m.known and "Odd" not in m.known
    asr = parse_truecase_model(MODEL.splitlines(), asr=True)
    assert asr.known == set() and truecase_line("The iPhone", asr) == "the iphone"


def test_perl_lc_has_no_final_sigma():
    assert perl_lc("ΣΑΣ") == "σασ" and "ΣΑΣ".lower() == "σας"
    assert perl_lc("İ") == "İ".lower()          # the full mapping otherwise


def test_a_missing_model_is_an_error(tmp_path):
    from phrase_rescore.core.errors import PhraseRescoreError

    with pytest.raises(PhraseRescoreError, match="truecase model not found"):
        load_truecase_model(tmp_path / "nope")


@needs_moses
def test_equals_truecase_perl_on_its_own_model(model_file, tmp_path):
    """The table above, and a model train-truecaser.perl trained, through the real script."""
    lines = [c[0] for c in CASES] + ["Did I see the famous forest ?", "( The cat ) . The Dog ! the dog",
                                     "l&apos; homme et la Maison", "You will hear this horse ."]
    corpus = tmp_path / "corpus"
    corpus.write_text("\n".join(["The dog sees a cat .", "the dog and the Cat .", "I see Paris .", "A cat .",
                                 "( The dog ) sees Paris ; the cat sees me ."]) + "\n", encoding="utf-8")
    trained = tmp_path / "trained-model"
    subprocess.run(["perl", str(script("recaser/train-truecaser.perl")), "--model", str(trained), "--corpus",
                    str(corpus)], check=True, capture_output=True)
    inp = "".join(x + "\n" for x in lines).encode("utf-8")
    for model in (model_file, trained):
        out = subprocess.run(["perl", str(script("recaser/truecase.perl")), "--model", str(model)], input=inp,
                             capture_output=True, check=True).stdout.decode("utf-8")
        m = load_truecase_model(model)
        assert [truecase_line(x, m) for x in lines] == out.split("\n")[:-1]

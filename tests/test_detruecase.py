"""Detruecasing as Moses's detruecase.perl, and evaluate detruecasing a truecased system's output."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from _real_moses import moses_home, needs_moses, script

from phrase_rescore.core.reading import read_text_lines
from phrase_rescore.moses_integration.backend import Backend
from phrase_rescore.moses_integration.configs import EvaluateConfig, SystemSpec
from phrase_rescore.moses_integration.embedded.detruecase import detruecase_line, detruecase_lines
from phrase_rescore.moses_integration.report import evaluate, score_systems

CASES = [
    ("a dog runs .", "A dog runs ."),
    ("a dog runs . the cat sleeps ! is it ? yes : no", "A dog runs . The cat sleeps ! Is it ? Yes : No"),
    ('" the dog " barks . ( a cat ) .', '" The dog " barks . ( A cat ) .'),
    ("&quot; [ &apos; élan vital", "&quot; [ &apos; Élan vital"),
    ("iPhone users", "IPhone users"),                      # only the first character, the rest as it was
    ("dog|NN runs|VB .|PUNC the|DT", "Dog|NN runs|VB .|PUNC the|DT"),  # factors: whole-token comparisons
    ("  two   spaces\tand a tab  ", "Two spaces and a tab"),
    ("", ""),
    ("straße . ß", "Straße . SS"),                        # Perl's uc: the full uppercase mapping
    ("x\x1cy z", "X\x1cy z"),                              # \x1c is no whitespace to Perl
    ("the 3 dogs . 3 cats", "The 3 dogs . 3 cats"),
    ("...", "..."),
    ("the dog.", "The dog."),                              # "dog." is no sentence end
]


@pytest.mark.parametrize("line, want", CASES)
def test_detruecase_line(line, want):
    assert detruecase_line(line) == want


@needs_moses
def test_detruecase_equals_moses_script(tmp_path):
    lines = [c[0] for c in CASES] + ["l' homme . « le chien »", "- la maison ? oui", "( ( ( x"]
    inp = "".join(x + "\n" for x in lines).encode("utf-8")
    out = subprocess.run(["perl", str(script("recaser/detruecase.perl"))], input=inp, capture_output=True,
                         check=True).stdout.decode("utf-8")
    assert detruecase_lines(lines) == out.split("\n")[:-1]
    assert moses_home() is not None


class _Fixed(Backend):
    """'Decodes' into a prepared tokenized, truecased output (tests only)."""

    name = "fixed"

    def __init__(self, lines):
        self.lines = lines

    def decode(self, ini, input_path, output_path, nbest_path=None, nbest=0, threads=1):
        Path(output_path).write_text("".join(x + "\n" for x in self.lines), encoding="utf-8")


def test_evaluate_detruecases_a_truecased_system(tmp_path, monkeypatch):
    out = ["a dog runs in the park .", "two men play chess . they laugh .", '" the cat " sleeps .']
    refs = ["A dog runs in the park.", "Two men play chess. They laugh.", '"The cat" sleeps.']
    monkeypatch.setattr("phrase_rescore.moses_integration.report.get_backend", lambda name, home=None: _Fixed(out))
    ini = tmp_path / "moses.ini"
    ini.write_text("[feature]\n")
    src = tmp_path / "test.tok.en"
    src.write_text("x\n" * 3)
    ref = tmp_path / "test.fr"
    ref.write_text("".join(r + "\n" for r in refs))
    cfg = EvaluateConfig(systems=[SystemSpec("Baseline", ini)], test_src=src, test_ref=ref,
                         workdir=tmp_path / "eval", target_lang="en", case="truecase")
    df = evaluate(cfg)
    assert read_text_lines(tmp_path / "eval" / "test.Baseline.detok") == refs
    assert df["test_bleu"].iloc[0] == 100.0
    # without detruecasing the same output scores lower: the capitals are what changed
    assert score_systems([("b", [x.replace("A ", "a ") for x in refs])], refs).bleu[0] < 100.0


def test_oracle_of_a_truecased_n_best_list_is_scored_as_the_table_scores(tmp_path):
    """The oracle choice and its BLEU see the detruecased hypotheses against the cased references."""
    from phrase_rescore.moses_integration.report import oracle_bleu, oracle_choices

    refs = ["A dog runs in the park.", "Two men play chess."]
    nbest = tmp_path / "test.nbest"
    nbest.write_text("0 ||| a cat sleeps . ||| F0= 1 ||| -1\n"
                     "0 ||| a dog runs in the park . ||| F0= 1 ||| -2\n"
                     "1 ||| two men play chess . ||| F0= 1 ||| -1\n"
                     "1 ||| two women play cards . ||| F0= 1 ||| -2\n", encoding="utf-8")
    assert oracle_choices(nbest, refs, "en", "truecase") == ["a dog runs in the park .", "two men play chess ."]
    assert oracle_bleu(nbest, refs, "en", "truecase") == pytest.approx(100.0)

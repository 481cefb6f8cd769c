"""Dev and test text tokenized as the SMT system's training corpus was, so that its words match the tables'.

:func:`tokenize_file` applies the system's tokenizer, casing and escaping (and removes ``|`` as the corpus
cleaning does); :func:`check_same_preprocessing` refuses settings that differ from those a build-smt system
recorded in its manifest.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Mapping

from phrase_rescore.core.atomic_write import atomic_open
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.reading import read_lines
from phrase_rescore.core.words import words

from .embedded.clean import strip_pipes
from .embedded.tokenizer import TokenizeConfig, Tokenizer
from .embedded.truecase import load_truecase_model, perl_lc, truecase_line
from .moses_system import BUILD_SMT_FORMAT

#: the build settings that dev and test text must be tokenized with, as build-smt tokenized its corpus
TOKENIZE_KEYS = ("source_lang", "target_lang", "case", "escape")


def tokenize_file(src: Path, out: Path, config: TokenizeConfig, truecase_model: Path | None,
                  moses_truecaser: bool = False) -> int:
    """Tokenize ``src`` line by line as build-smt tokenizes its corpus (``|`` removed as clean removes it) into
    ``out``; the lines written.

    :param moses_truecaser: the system is a Moses system, cased by Moses's scripts: ``truecase_model`` is
        train-truecaser.perl's, applied as truecase.perl applies it
        (:mod:`~phrase_rescore.moses_integration.embedded.truecase`), and lowercasing is lowercase.perl's
        (Perl's ``lc``); otherwise the system is build-smt's, cased as build-smt cased its corpus.
    """
    truecase = config.case == "truecase"
    if moses_truecaser and config.case in ("truecase", "lower"):
        model = load_truecase_model(truecase_model) if truecase else None
        tok = Tokenizer(dataclasses.replace(config, case="none"))

        def tokenize(line: str) -> list[str]:
            if model is None:
                return [perl_lc(t) for t in tok.split(line)]
            return words(truecase_line(" ".join(tok.split(line)), model))
    else:
        tc = Tokenizer.load_truecaser(truecase_model) if truecase else None
        tokenize = Tokenizer(config, truecaser=tc).tokenize
    n = 0
    with atomic_open(out, "w") as w:
        for _, line, _ in read_lines(src):
            w.write(" ".join(strip_pipes(tokenize(line))[0]) + "\n")
            n += 1
    return n


def check_same_preprocessing(params: Mapping, build_manifest: Path) -> None:
    """Refuse to tokenize dev and test otherwise (``params``' :data:`TOKENIZE_KEYS`) than the build recorded in
    ``build_manifest`` (when there is one) prepared its training corpus."""
    try:
        m = json.loads(build_manifest.read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError, ValueError, UnicodeDecodeError):
        return
    if not isinstance(m, dict) or m.get("format") != BUILD_SMT_FORMAT or not isinstance(m.get("config"), dict):
        return
    differ = [f"{k} = {params[k]!r} (the build's: {m['config'][k]!r})" for k in TOKENIZE_KEYS
              if k in m["config"] and m["config"][k] != params[k]]
    if differ:
        raise PhraseRescoreError("the SMT system was built with other preprocessing than [tokenize] asks for: "
                                 + ", ".join(differ) + "; set [tokenize] as the build was", build_manifest)

"""``phrase-rescore decode``: the embedded decoder with the ``moses`` binary's command line.

Moses's options are single-dash words with any number of values (``-n-best-list FILE 100 distinct``),
which click's parser does not model, so they are parsed here as Moses parses them
(``Parameter::LoadParam`` in moses/Parameter.cpp): an argument starting with ``-`` followed by a
non-digit starts an option (so ``-0.5`` is a value), every argument up to the next option is one of its
values, and a value holding spaces (``-weight-overwrite 'LM0= 0.5 WordPenalty0= -1'``, as mert-moses.pl
quotes it) counts as its words. ``--name`` is taken as ``-name``.

Numbers are read as every number of the tool is (:func:`~phrase_rescore.core.config.parse_number`: ASCII digits
as Moses's strtol/strtod read a whole token). ``-threads`` above the machine's cores runs on the cores, with a
note; without ``-threads`` the moses.ini's ``[threads]`` applies, as in Moses.

**Input length.** ``-max-input-length N`` (default :data:`DEFAULT_MAX_INPUT_LENGTH` words; 0: no limit) refuses,
before any model is loaded, an input line of more than N words, naming the line. Moses (commit 34452895f) has
no such limit: it translates a line of any length, in a time that grows faster than the length (the
future-cost table alone is cubic in it); so does this decoder, slower, and a line of thousands of words would
run for hours with no output. ``-max-input-length 0`` translates whatever comes, as Moses does. A progress bar
on stderr counts the words translated (one line; off with ``-v 0`` or ``--quiet``).

Every problem is a :class:`~phrase_rescore.core.errors.PhraseRescoreError` (one line from the CLI).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import IO, Sequence

from phrase_rescore.core import progress
from phrase_rescore.core.config import cap_to_cores, machine_cores, parse_float, parse_int
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.outdir import lock_output
from phrase_rescore.core.output_paths import check_outputs
from phrase_rescore.core.reading import read_sentences
from phrase_rescore.core.words import words
from phrase_rescore.moses_integration.embedded.decoder import DecoderConfig
from phrase_rescore.moses_integration.embedded.moses_command import (
    STDOUT_NAMES,
    DecodeRequest,
    decode_stream,
    load_spec,
    show_weights_lines,
)
from phrase_rescore.moses_integration.moses_ini import read_moses_ini

# canonical name -> (spellings, value kind, help); kinds: path, int, float, nbest, words, flag, threads
OPTIONS: dict[str, tuple[tuple[str, ...], str, str]] = {
    "config": (("f", "config"), "path", "the moses.ini (required)"),
    "input-file": (("i", "input-file"), "path", "tokenized input, one sentence a line (default: stdin)"),
    "n-best-list": (("n-best-list",), "nbest",
                    "FILE N [distinct]: write N-best lists to FILE (-: to stdout, instead of the 1-best)"),
    "n-best-factor": (("n-best-factor",), "int", "distinct n-best: consider N * this many paths (default 20)"),
    "threads": (("threads", "th"), "threads",
                "decoding processes, or 'all'; at most the cores (default: the ini's [threads], else 1)"),
    "stack": (("s", "stack"), "int", "hypotheses per stack (default: the ini's [stack], else 200)"),
    "beam-threshold": (("b", "beam-threshold"), "float", "drop hypotheses worse than best * this (default 1e-5)"),
    "search-algorithm": (("search-algorithm",), "int", "0: stack search; 1: cube pruning (when implemented)"),
    "cube-pruning-pop-limit": (("cube-pruning-pop-limit", "cbp"), "int", "pops per stack with cube pruning"),
    "weight-overwrite": (("weight-overwrite",), "words", "'Name= v v ...': replace these features' weights"),
    "show-weights": (("show-weights",), "flag", "print the feature weights as 'Name= v ...' lines and exit"),
    "ttable-limit": (("ttable-limit",), "int", "translations kept per source phrase (default: the ini's, 20)"),
    "distortion-limit": (("distortion-limit", "dl"), "int", "longest jump; -1 unlimited (default: the ini's, 6)"),
    "max-phrase-length": (("max-phrase-length",), "int", "longest source phrase (default 20)"),
    "inputtype": (("inputtype",), "int", "0: plain text (the only type the embedded decoder reads)"),
    "max-input-length": (("max-input-length",), "int",
                         "refuse an input line of more words (default 200; 0: no limit, as Moses)"),
    "verbose": (("v", "verbose"), "int", "0: no progress bar on stderr"),
    "help": (("h", "help"), "flag", "this help"),
}
SPELLINGS = {s: name for name, (spellings, _, _) in OPTIONS.items() for s in spellings}
#: ``-max-input-length``'s default: the longest input line, in words, translated unless the option says otherwise
DEFAULT_MAX_INPUT_LENGTH = 200


@dataclass
class DecodeArgs:
    """What a ``moses``-style command line asks for."""

    config: str | None = None
    input_file: str | None = None
    nbest_file: str | None = None
    nbest_size: int = 0
    nbest_distinct: bool = False
    nbest_factor: int | None = None
    threads: int | None = None      # None: the moses.ini's [threads], else 1
    stack: int | None = None
    beam_threshold: float | None = None
    search_algorithm: int = 0
    cube_pruning_pop_limit: int | None = None
    weight_overwrite: str | None = None
    show_weights: bool = False
    ttable_limit: int | None = None
    distortion_limit: int | None = None
    max_phrase_length: int | None = None
    verbose: int = 1
    max_input_length: int = DEFAULT_MAX_INPUT_LENGTH
    help: bool = False


def usage() -> str:
    rows = [f"  {', '.join('-' + s for s in spellings):34s} {text}" for spellings, _, text in OPTIONS.values()]
    return ("usage: phrase-rescore decode -f INI [options] < input > output\n"
            "Translate tokenized sentences with the embedded decoder, with the moses binary's options "
            "and output formats.\n\noptions:\n" + "\n".join(rows) + "\n")


def _is_option(arg: str) -> bool:
    """Moses's ``isOption``: ``-`` followed by something that is not a digit (or a decimal point)."""
    return len(arg) > 1 and arg[0] == "-" and not (arg[1].isdigit() or arg[1] == ".")


def _int(name: str, v: str, at_least: int | None = None) -> int:
    x = parse_int(v)
    if x is None:
        raise PhraseRescoreError(f"-{name}: expected an integer in ASCII digits, got {v!r}")
    if at_least is not None and x < at_least:
        raise PhraseRescoreError(f"-{name}: expected at least {at_least}, got {x}")
    return x


def _float(name: str, v: str) -> float:
    x = parse_float(v)
    if x is None:
        raise PhraseRescoreError(f"-{name}: expected a finite number in ASCII digits, got {v!r}")
    return x


def parse_decode_args(argv: Sequence[str]) -> DecodeArgs:
    """Parse a ``moses`` command line (without the program name).

    :raises PhraseRescoreError: an unknown option, a value without an option, an option given twice, a
        wrong number of values or a value of the wrong kind, or no ``-f``/``-config``.
    """
    a = DecodeArgs()
    for name, spelled, values in _option_groups(argv):
        _set_option(a, name, spelled, values)
    if a.help:
        return a
    if a.config is None:
        raise PhraseRescoreError("no moses.ini: give -f INI (or -config INI)")
    return a


def _option_groups(argv: Sequence[str]) -> list[tuple[str, str, list[str]]]:
    """The command line as ``(canonical name, spelling used, values)`` per option, in order, each once."""
    groups: list[tuple[str, str, list[str]]] = []
    for arg in argv:
        if _is_option(arg):
            spelled = arg[2:] if arg.startswith("--") else arg[1:]
            name = SPELLINGS.get(spelled)
            if name is None:
                raise PhraseRescoreError(f"unknown option {arg!r} (the embedded decoder reads: "
                                         f"{', '.join('-' + n for n in OPTIONS)})")
            if any(g[0] == name for g in groups):
                raise PhraseRescoreError(f"-{name} given twice")
            groups.append((name, arg, []))
        elif not groups:
            raise PhraseRescoreError(f"unexpected argument {arg!r}: options start with '-' (e.g. -f moses.ini)")
        else:
            groups[-1][2].append(arg)
    return groups


def _set_option(a: DecodeArgs, name: str, spelled: str, values: list[str]) -> None:
    """Set option ``name``'s field(s) of ``a`` from its values, checked by the option's kind."""
    kind = OPTIONS[name][1]
    if kind == "flag":
        _set_flag(a, name, spelled, values)
        return
    if kind == "path":
        if len(values) != 1:
            raise PhraseRescoreError(f"{spelled}: expected one file name, got {len(values)} values")
        setattr(a, name.replace("-", "_"), values[0])
        return
    words = [w for v in values for w in v.split()]
    if kind == "words":
        if not words:
            raise PhraseRescoreError(f"{spelled}: expected 'Name= v ...'")
        a.weight_overwrite = " ".join(words)
        return
    if kind == "nbest":
        _set_nbest(a, name, spelled, words)
        return
    if len(words) != 1:
        raise PhraseRescoreError(f"{spelled}: expected one value, got {len(words)}")
    v = words[0]
    if kind == "threads":
        a.threads = machine_cores() if v == "all" else cap_to_cores(_int(name, v, at_least=1), "-threads")
    elif kind == "float":
        a.beam_threshold = _float(name, v)
    else:
        _set_number(a, name, v)


def _set_flag(a: DecodeArgs, name: str, spelled: str, values: list[str]) -> None:
    """A boolean switch: no value, or Moses's explicit one (``-show-weights true``)."""
    if len(values) > 1 or (values and values[0].lower() not in ("true", "1", "yes", "false", "0", "no")):
        raise PhraseRescoreError(f"{spelled} takes no value, got {' '.join(values)!r}")
    setattr(a, name.replace("-", "_"), not values or values[0].lower() in ("true", "1", "yes"))


def _set_nbest(a: DecodeArgs, name: str, spelled: str, words: list[str]) -> None:
    """``-n-best-list FILE N [distinct]``."""
    if len(words) not in (2, 3) or (len(words) == 3 and words[2] != "distinct"):
        raise PhraseRescoreError(f"{spelled}: expected FILE N [distinct], got {' '.join(words)!r}")
    a.nbest_file = words[0]
    a.nbest_size = _int(name, words[1], at_least=1)
    a.nbest_distinct = len(words) == 3


def _set_number(a: DecodeArgs, name: str, v: str) -> None:
    """An integer option, with its lower bound; ``-inputtype`` takes plain text (0) only."""
    dest = {"stack": "stack", "n-best-factor": "nbest_factor", "ttable-limit": "ttable_limit"}.get(
        name, name.replace("-", "_"))
    at_least = {"stack": 1, "n-best-factor": 1, "ttable-limit": 0, "max-phrase-length": 1,
                "cube-pruning-pop-limit": 1, "verbose": 0, "max-input-length": 0}.get(name)
    x = _int(name, v, at_least)
    if name == "inputtype":
        if x != 0:
            raise PhraseRescoreError(f"-inputtype {x}: the embedded decoder reads plain text only "
                                     "(-inputtype 0); use the moses binary for confusion networks "
                                     "and lattices")
        return
    setattr(a, dest, x)


def decoder_config(a: DecodeArgs) -> DecoderConfig:
    """The :class:`DecoderConfig` of the options; cube pruning only where the decoder has it."""
    fields = {f.name for f in dataclasses.fields(DecoderConfig)}
    kw = dict(stack_size=a.stack, beam_threshold=a.beam_threshold, distortion_limit=a.distortion_limit,
              table_limit=a.ttable_limit, max_phrase_length=a.max_phrase_length, nbest_distinct=a.nbest_distinct)
    if a.nbest_factor is not None:
        kw["nbest_factor"] = a.nbest_factor
    if a.search_algorithm not in (0, 1):
        raise PhraseRescoreError(f"-search-algorithm {a.search_algorithm}: the embedded decoder has 0 (stack "
                                 "search) and 1 (cube pruning) only")
    if "search_algorithm" in fields:
        kw["search_algorithm"] = a.search_algorithm
        if "cube_pruning_pop_limit" in fields and a.cube_pruning_pop_limit is not None:
            kw["cube_pruning_pop_limit"] = a.cube_pruning_pop_limit
    elif a.search_algorithm == 1:
        raise PhraseRescoreError("-search-algorithm 1: this embedded decoder has no cube pruning; use "
                                 "-search-algorithm 0 (stack search)")
    return DecoderConfig(**kw)


def run_decode(argv: Sequence[str], stdin: IO[bytes], stdout: IO[str]) -> int:
    """Run ``phrase-rescore decode ARGV``: translations (or ``-show-weights``) on ``stdout``."""
    a = parse_decode_args(argv)
    if a.help:
        stdout.write(usage())
        return 0
    if a.verbose == 0:
        progress.set_quiet(True)
    ini = read_moses_ini(a.config, weight_overwrite=a.weight_overwrite)
    threads = a.threads
    if threads is None:          # Moses: the ini's [threads] unless -threads says otherwise
        value = ini.get_value("threads", "1")
        threads = machine_cores() if value == "all" else cap_to_cores(int(value), "[threads]")
    req = DecodeRequest(a.config, decoder_config(a), a.weight_overwrite, a.nbest_file, a.nbest_size, threads)
    if a.show_weights:
        spec = load_spec(req)
        stdout.write("".join(line + "\n" for line in show_weights_lines(spec)))
        return 0
    if a.nbest_file is not None and a.nbest_file not in STDOUT_NAMES:
        check_outputs({"-config": a.config, "-input-file": a.input_file, **ini.model_files()},
                      {"-n-best-list": a.nbest_file})
        lock_output(a.nbest_file, "-n-best-list", "decode")     # held until the command ends
    if a.input_file is not None:
        sentences = read_sentences(a.input_file)
    else:
        lines = stdin.read().split(b"\n")
        if lines[-1] == b"":
            lines.pop()                        # what follows the last newline is not a line
        sentences = []
        for n, raw in enumerate(lines, start=1):
            try:
                sentences.append(words(raw.decode("utf-8")))
            except UnicodeDecodeError as e:
                raise PhraseRescoreError(f"stdin line {n}: invalid UTF-8 at byte {e.start}: expected UTF-8 "
                                         "text") from None
    check_input_length(sentences, a.max_input_length, a.input_file)
    decode_stream(req, sentences, stdout)
    return 0


def check_input_length(sentences: Sequence[Sequence[str]], limit: int, path: str | None = None) -> None:
    """Refuse the first input line of more than ``limit`` words (0: no limit), naming it (see the module doc).

    :raises PhraseRescoreError: naming the input, the line, its length and how to translate it anyway.
    """
    if limit <= 0:
        return
    for n, s in enumerate(sentences, start=1):
        if len(s) > limit:
            raise PhraseRescoreError(
                f"{len(s)} words, more than -max-input-length {limit}: the decoder's time grows faster than the "
                f"length (Moses's too), so a line this long would run for minutes to hours; split it, or give "
                f"-max-input-length {len(s)} (or 0, no limit, as Moses) to translate it as it is",
                path or "stdin", n)


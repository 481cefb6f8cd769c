"""The embedded decoder as the ``moses`` binary runs: ``-weight-overwrite``, ``-show-weights`` and Moses's
stdout and n-best formats, for ``phrase-rescore decode`` (the command line is parsed in the application).

Formats, as Moses writes them (moses-smt/mosesdecoder, commit 34452895f):

* 1-best (``IOWrapper`` / ``OutputSurface``): every target word followed by one space, then ``\\n``;
  an empty translation is an empty line.
* n-best (``Manager::OutputNBest``): ``id ||| `` + the words as above + `` ||| `` + the labelled dense
  scores (``OutputAllFeatureScores``) + `` ||| `` + the total. To ``-`` (or ``/dev/stdout``) the n-best
  list goes to stdout in place of the 1-best.
* ``-show-weights`` (``ShowWeights`` in ``moses/ExportInterface.cpp``, ``FixPrecision(cout, 6)``): the
  stateful features in [feature] order, then the stateless ones in [feature] order; a tuneable one as
  ``Name= v v ...`` (fixed, six decimals), an untuneable one as ``Name UNTUNEABLE``. mert-moses.pl reads
  the feature list and the starting weights from this output.
* ``-weight-overwrite "Name= v v Name2= v ..."`` (``Parameter::OverwriteParam``): takes the place of the
  moses.ini's ``[weight-overwrite]`` line and replaces the weights of the features named, the others keep the
  moses.ini's ``[weight]``; mert-moses.pl writes ``x`` for an untuneable component, which keeps its weight
  (read by :func:`~phrase_rescore.moses_integration.moses_ini.read_moses_ini`, as the ini's own section).
"""
from __future__ import annotations

import dataclasses
from contextlib import nullcontext
from dataclasses import dataclass
from typing import IO, Iterable, Sequence

import numpy as np

from phrase_rescore.core.atomic_write import atomic_open
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.progress import bar
from phrase_rescore.core.words import words

from ..moses_ini import read_moses_ini
from ..moses_values import format_moses_float
from .decoder import Candidate, Decoder, DecoderConfig
from .features import STATEFUL, DecoderSpec, load_decoder_spec

#: ``-n-best-list`` names that mean stdout (Moses's IOWrapper)
STDOUT_NAMES = ("-", "/dev/stdout")


def show_weights_lines(spec: DecoderSpec, weights: np.ndarray | None = None) -> list[str]:
    """``moses -show-weights``'s lines for ``spec`` (with ``weights`` when given)."""
    w = spec.weights if weights is None else weights
    by_name = {f.name: f for f in spec.features}
    order = [by_name[f.name] for f in read_moses_ini(spec.ini_path).features if f.name in by_name]
    order = [f for f in order if f.type in STATEFUL] + [f for f in order if f.type not in STATEFUL]
    out = []
    for f in order:
        if f.tuneable:
            out.append(f"{f.name}= " + " ".join(f"{x:.6f}" for x in w[f.offset:f.offset + f.size]))
        else:
            out.append(f"{f.name} UNTUNEABLE")
    return out


def one_best_line(text: str) -> str:
    """A 1-best line as Moses prints it: each word followed by a space (no newline)."""
    return "".join(word + " " for word in words(text))


def nbest_line(spec: DecoderSpec, sent_id: int, cand: Candidate) -> str:
    """One n-best line as Moses writes it (no newline)."""
    return (f"{sent_id} ||| {one_best_line(cand.text)} ||| {spec.format_features(cand.features)} ||| "
            f"{format_moses_float(cand.total)}")


@dataclass
class DecodeRequest:
    """One ``moses``-style run.

    :ivar ini: the moses.ini.
    :ivar decoder: decoder settings (``None`` fields: the moses.ini's, else Moses's defaults).
    :ivar weight_overwrite: ``-weight-overwrite`` text, or None.
    :ivar nbest_path: ``-n-best-list`` file, or None; ``nbest_size`` candidates per sentence.
    :ivar threads: decoding processes.
    """

    ini: str
    decoder: DecoderConfig = dataclasses.field(default_factory=DecoderConfig)
    weight_overwrite: str | None = None
    nbest_path: str | None = None
    nbest_size: int = 0
    threads: int = 1


def load_spec(req: DecodeRequest) -> DecoderSpec:
    """The system of ``req.ini`` as Moses reads it with ``-weight-overwrite`` in place of its ``[weight-overwrite]``."""
    return load_decoder_spec(req.ini, read_moses_ini(req.ini, weight_overwrite=req.weight_overwrite))


def decode_stream(req: DecodeRequest, sentences: Sequence[Sequence[str]], out: IO[str]) -> int:
    """Translate ``sentences`` and write Moses's 1-best lines to ``out`` (flushed sentence by sentence
    with one thread), and the n-best list (atomically) when asked. Returns the number translated."""
    if req.nbest_path is not None and req.nbest_size < 1:
        raise PhraseRescoreError(f"-n-best-list needs a size of at least 1, got {req.nbest_size}")
    spec = load_spec(req)
    dec = Decoder(spec, req.decoder, sentences=sentences)
    k = req.nbest_size if req.nbest_path is not None else 0
    # Moses (IOWrapper): an n-best list to "-" or /dev/stdout goes to stdout instead of the 1-best
    to_stdout = req.nbest_path in STDOUT_NAMES
    with (atomic_open(req.nbest_path, "w") if k and not to_stdout else nullcontext(out if k else None)) as nb:
        for i, r in enumerate(_results(dec, sentences, k, req.threads)):
            if not to_stdout:
                out.write(one_best_line(r.best.text) + "\n")
            if nb is not None:
                for c in r.nbest:
                    nb.write(nbest_line(spec, i, c) + "\n")
            out.flush()
    return len(sentences)


def _results(dec: Decoder, sentences: Sequence[Sequence[str]], k: int, threads: int) -> Iterable:
    if threads > 1:
        yield from dec.translate_all(sentences, k, threads)
        return
    # words, not sentences: one long line moves the bar as much as many short ones
    with bar(total=sum(len(s) for s in sentences), desc="decoding", unit="word") as pb:
        for s in sentences:
            yield dec.translate(s, k)
            pb.update(len(s))


"""Moses n-best lists: streaming reader and writer, grouped by sentence id, and adding a feature.

One hypothesis per line, fields separated by ``|||`` (``Moses::Manager::OutputNBest``)::

    0 ||| the house is small  ||| LexicalReordering0= -1.2 0 Distortion0= 0 LM0= -12.5 TranslationModel0= -2 -1.1 -3 -2.2 ||| -4.713
    id    hypothesis              features: "Name= v v ..." per feature, sparse ones as "name= v"              total score

Further fields (phrase segmentation, word alignment, trees) may follow and are kept verbatim. Moses writes
each word followed by a space and then ``" |||"``, hence the two spaces before the second separator; lines
read here are written back byte for byte, each with its own line ending (``\n``, ``\r\n``, or none on a
last line), unless a feature is added, which appends ``" Name= v ..."`` to the features field exactly as
Moses would have printed it (as marian-scorer's ``--n-best`` does) and leaves the total score alone (it
is recomputed by whoever applies new weights).

Every feature value and total must be a finite decimal number, read by the project's one number parser
(:func:`~phrase_rescore.core.config.parse_float`: ASCII digits as strtod reads a whole token; a NaN total would
otherwise win every comparison it is in, and an infinite one every re-ranking); a line that is not, or is not
UTF-8, is an error naming the file and line. So is a UTF-8 byte-order mark starting the file (see
:mod:`phrase_rescore.core.bom`): dropping it would make a copied line differ from its input.

**Complete or refused.** Moses writes every sentence's hypotheses, in input order, starting at id 0 (a sentence
it cannot translate, an empty line among them, still gets one: the empty hypothesis). A list in which an id is
missing, repeated after another or out of order is refused by :func:`read_nbest_groups`, naming the file, the line
and the missing id; so is one that ends before the source's last sentence (:func:`check_list_end`). Nothing is
filled in for a missing sentence: an empty 1-best line there would look like a translation.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import IO, Iterable, Iterator, Sequence

from phrase_rescore.core.atomic_write import atomic_open
from phrase_rescore.core.config import COUNT_TOKEN_RE, parse_float
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.reading import read_lines

from .moses_values import format_weight

SEP = "|||"


def parse_number(text: str) -> float | None:
    """``text`` (surrounding whitespace ignored) as a finite float, or None when it is not a finite decimal
    number as Moses prints it and mert's extractor reads it (``nan``, ``inf``, ``1_0``, ``٤`` and ``1e999`` are
    not): :func:`~phrase_rescore.core.config.parse_float`."""
    return parse_float(text.strip())


def parse_features(text: str, path=None, line_no=None) -> list[tuple[str, list[float]]]:
    """``"A= 1 2 B= 3"`` → ``[("A", [1.0, 2.0]), ("B", [3.0])]``; a label is a token ending in ``=``."""
    feats: list[tuple[str, list[float]]] = []
    values: list[float] | None = None
    for tok in text.split():
        if tok[-1] == "=":
            if len(tok) == 1:
                raise PhraseRescoreError("expected a feature name before '='", path, line_no)
            values = []
            feats.append((tok[:-1], values))
            continue
        if values is None:
            raise PhraseRescoreError(f"expected a feature label 'Name=' before the value {tok!r} "
                                     "(n-best lists without feature labels are not supported)", path, line_no)
        v = parse_number(tok)
        if v is None:
            raise PhraseRescoreError(f"expected a finite number as a value of feature {feats[-1][0]}, got {tok!r}",
                                     path, line_no)
        values.append(v)
    return feats


def format_features(features: Sequence[tuple[str, Sequence[float]]]) -> str:
    """The inverse of :func:`parse_features`, in Moses's spacing: ``"A= 1 2 B= 3"``."""
    return " ".join(f"{name}= " + " ".join(format_weight(v) for v in values) for name, values in features)


@dataclass
class NBestEntry:
    """One hypothesis of an n-best list.

    :ivar sent_id: 0-based id of the input sentence.
    :ivar hypothesis: the translation (surrounding spaces stripped).
    :ivar features: ``(name, values)`` in line order.
    :ivar total: the model score the decoder gave (weighted sum of the features).
    :ivar extra: further fields after the total, verbatim (with their surrounding spaces).
    :ivar line_no: 1-based line in the file read (0 for an entry built in memory).
    :ivar ending: the line ending it is written with: the one it was read with (``"\n"``, ``"\r\n"``, or
        ``""`` for a last line without one), ``"\n"`` for an entry built in memory.
    """

    sent_id: int
    hypothesis: str
    features: list[tuple[str, list[float]]]
    total: float
    extra: list[str] = field(default_factory=list)
    line_no: int = 0
    ending: str = "\n"
    _raw_fields: list[str] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def create(cls, sent_id: int, hypothesis: str, features: Sequence[tuple[str, Sequence[float]]],
               total: float, extra: Sequence[str] = ()) -> "NBestEntry":
        """A new entry (e.g. from a decoder); it is written in Moses's exact layout."""
        return cls(int(sent_id), hypothesis.strip(), [(n, [float(v) for v in vs]) for n, vs in features],
                   float(total), [f" {e.strip()}" for e in extra])

    def feature(self, name: str) -> list[float]:
        """The values of feature ``name``; KeyError when the hypothesis has no such feature."""
        for n, vs in self.features:
            if n == name:
                return list(vs)
        raise KeyError(name)

    def feature_names(self) -> list[str]:
        """Feature names in line order."""
        return [n for n, _ in self.features]

    def dense_vector(self) -> list[float]:
        """All feature values concatenated in line order (the vector mert's extractor reads)."""
        return [v for _, vs in self.features for v in vs]

    def add_feature(self, name: str, values: Sequence[float], path: str | os.PathLike | None = None) -> None:
        """Append feature ``name`` to the features field; every other byte of the line is kept.

        :param path: the file the entry was read from, for error messages.
        """
        if any(n == name for n, _ in self.features):
            raise PhraseRescoreError(f"hypothesis already has a feature named {name!r}", path, self.line_no or None)
        vals = [float(v) for v in values]
        if not vals or not all(math.isfinite(v) for v in vals):
            raise PhraseRescoreError(f"feature {name!r} needs one or more finite values, got {values!r}",
                                     path, self.line_no or None)
        self.features.append((name, vals))
        if self._raw_fields is not None:
            feats = self._raw_fields[2].rstrip(" ")
            self._raw_fields[2] = f"{feats} {name}= " + " ".join(format_weight(v) for v in vals) + " "

    def to_line(self) -> str:
        """The line without its newline: the raw line (plus added features) when read from a file,
        else Moses's layout ``id ||| hyp  ||| features ||| total``."""
        if self._raw_fields is not None:
            return SEP.join(self._raw_fields)
        head = f"{self.sent_id} {SEP} {self.hypothesis}  {SEP} {format_features(self.features)} {SEP} {format_weight(self.total)}"
        return head + "".join(SEP + e for e in self.extra)


def parse_nbest_line(line: str, path=None, line_no: int = 0, ending: str = "\n") -> NBestEntry:
    """Parse one n-best line (without its line ending, which is given as ``ending``)."""
    fields = line.split(SEP)
    if len(fields) < 4:
        raise PhraseRescoreError(f"expected at least 4 fields 'id ||| hypothesis ||| features ||| total', "
                                 f"found {len(fields)}", path, line_no)
    sid = fields[0].strip()
    if COUNT_TOKEN_RE.fullmatch(sid) is None:      # ASCII digits: str.isdigit() also takes '٣'
        raise PhraseRescoreError(f"expected a sentence id (a non-negative integer) in the first field, got {sid!r}",
                                 path, line_no)
    total = parse_number(fields[3])
    if total is None:
        raise PhraseRescoreError(f"expected the total score (a finite number) in the fourth field, "
                                 f"got {fields[3].strip()!r}", path, line_no)
    feats = parse_features(fields[2], path, line_no)
    return NBestEntry(int(sid), fields[1].strip(), feats, total, fields[4:], line_no, ending, fields)


def read_nbest(path: str | os.PathLike) -> Iterator[NBestEntry]:
    """Stream the hypotheses of an n-best list (plain or gzip by content), checking ids never go down."""
    last = -1
    for line_no, line, ending in read_lines(path, bom="refuse"):   # lines are written back byte for byte
        if not line.strip():
            raise PhraseRescoreError("expected an n-best line, found an empty line", path, line_no)
        entry = parse_nbest_line(line, path, line_no, ending)
        if entry.sent_id < last:
            raise PhraseRescoreError(f"sentence id {entry.sent_id} after {last}: expected an n-best list grouped "
                                     "by sentence id in increasing order", path, line_no)
        last = entry.sent_id
        yield entry


def read_nbest_groups(path: str | os.PathLike, num_sentences: int | None = None, source=None
                      ) -> Iterator[tuple[int, list[NBestEntry]]]:
    """Stream ``(sentence id, hypotheses)`` groups in id order: ids ``0, 1, 2, ...``, each once.

    :param num_sentences: the source's sentence count: the list must have hypotheses for every id
        ``0 .. num_sentences-1`` and none beyond.
    :param source: the source file, for the message of a list that ends early.
    :raises PhraseRescoreError: an id missing (naming the line where the next one starts and the ids missing), an
        id at or beyond ``num_sentences``, or a list that ends before ``num_sentences`` (:func:`check_list_end`).
    """
    cur: list[NBestEntry] = []
    cur_id = None
    for e in read_nbest(path):                  # ids never go down (read_nbest)
        if num_sentences is not None and e.sent_id >= num_sentences:
            raise PhraseRescoreError(f"sentence id {e.sent_id} but the input has only {num_sentences} sentences",
                                     path, e.line_no)
        if e.sent_id != cur_id:
            expected = 0 if cur_id is None else cur_id + 1
            if e.sent_id != expected:
                gap = (f"sentence {expected}" if e.sent_id == expected + 1
                       else f"sentences {expected} to {e.sent_id - 1}")
                where = "the list starts at" if cur_id is None else f"after sentence {cur_id} comes"
                raise PhraseRescoreError(
                    f"{where} sentence {e.sent_id}: no hypotheses for {gap}; expected every sentence's hypotheses, "
                    "in order, as Moses writes them (an untranslatable sentence still gets one, the empty "
                    "hypothesis)", path, e.line_no)
            if cur_id is not None:
                yield cur_id, cur
            cur, cur_id = [], e.sent_id
        cur.append(e)
    if cur_id is not None:
        yield cur_id, cur
    if num_sentences is not None:
        check_list_end(path, -1 if cur_id is None else cur_id, num_sentences, source)


def check_list_end(nbest_path, last: int, num_sentences: int, source=None) -> None:
    """Refuse an n-best list whose last sentence with hypotheses (``last``; -1: none) is not the source's last.

    :param source: the source file, for the message.
    :raises PhraseRescoreError: naming the list, the first sentence id without hypotheses from which on
        the list is empty, and the source's sentence count.
    """
    if last >= num_sentences - 1:
        return
    first = last + 1
    src = f"the source {source}" if source is not None else "the source"
    if last < 0:
        what = "has no hypotheses (none for sentence 0 or any after it)"
    else:
        what = (f"ends after sentence {last}: no hypotheses for sentence {first}"
                + (" or any after it" if first < num_sentences - 1 else ""))
    raise PhraseRescoreError(f"the n-best list {what}, but {src} has {num_sentences} sentences (ids 0 to "
                             f"{num_sentences - 1}); expected hypotheses up to its last sentence (a list cut short, "
                             "as when the decoder is stopped, is refused)", nbest_path)


class NBestWriter:
    """Write an n-best list atomically (temp file renamed on success); ids must not go down.

    ``with NBestWriter(path) as w: w.write(entry)``; gzip when ``path`` ends in .gz.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = path
        self._cm = None
        self._f: IO[bytes] | None = None
        self._last = -1
        self.count = 0
        self._buf: list[bytes] = []
        self._buf_bytes = 0
        self._unterminated = False

    def __enter__(self) -> "NBestWriter":
        self._cm = atomic_open(self.path, "wb")
        self._f = self._cm.__enter__()
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            self._flush()
        return self._cm.__exit__(*exc)

    def _flush(self) -> None:
        # one write per ~1 MB: a gzip stream compresses per write call, so per-line writes cost 3x
        self._f.write(b"".join(self._buf))
        self._buf, self._buf_bytes = [], 0

    def write(self, entry: NBestEntry) -> None:
        """Append one hypothesis."""
        if entry.sent_id < self._last:
            raise PhraseRescoreError(f"writing sentence id {entry.sent_id} after {self._last}: n-best lists are "
                                     "grouped by sentence id in increasing order", self.path)
        self._last = entry.sent_id
        data = (entry.to_line() + entry.ending).encode("utf-8")
        if self._unterminated:  # a last line without its newline was not the last after all
            data = b"\n" + data
        self._unterminated = not entry.ending
        self._buf.append(data)
        self._buf_bytes += len(data)
        self.count += 1
        if self._buf_bytes >= 1 << 20:
            self._flush()


def add_feature_to_nbest(in_path: str | os.PathLike, out_path: str | os.PathLike, name: str,
                         values: Iterable[Sequence[float] | float]) -> int:
    """Copy an n-best list, appending feature ``name`` to every hypothesis.

    :param values: one value (or sequence of values) per hypothesis, in file order; too few or too many is an error.
    :return: the number of hypotheses written.
    """
    it = iter(values)
    with NBestWriter(out_path) as w:
        for e in read_nbest(in_path):
            try:
                v = next(it)
            except StopIteration:
                raise PhraseRescoreError(f"ran out of values for feature {name!r} at this hypothesis",
                                         in_path, e.line_no) from None
            e.add_feature(name, v if hasattr(v, "__len__") else [v], in_path)
            w.write(e)
        extra = next(it, None)
        if extra is not None:
            raise PhraseRescoreError(f"more values for feature {name!r} than hypotheses ({w.count})", in_path)
    return w.count

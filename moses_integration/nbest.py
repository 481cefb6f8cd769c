"""Moses n-best lists: streaming reader and writer, grouped by sentence id, and adding a feature.

One hypothesis per line, fields separated by ``|||`` (``Moses::Manager::OutputNBest``)::

    0 ||| the house is small  ||| LexicalReordering0= -1.2 0 Distortion0= 0 LM0= -12.5 TranslationModel0= -2 -1.1 -3 -2.2 ||| -4.713
    id    hypothesis              features: "Name= v v ..." per feature, sparse ones as "name= v"              total score

Further fields (phrase segmentation, word alignment, trees) may follow and are kept verbatim. Moses writes
each word followed by a space and then ``" |||"``, hence the two spaces before the second separator; lines
read here are written back byte for byte unless a feature is added, which appends ``" Name= v ..."``
to the features field exactly as Moses would have printed it (as marian-scorer's ``--n-best`` does) and
leaves the total score alone (it is recomputed by whoever applies new weights).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import IO, Iterable, Iterator, Sequence

from pipeline.errors import PhraseRescoreError
from pipeline.fileio import atomic_open, open_text_read

SEP = "|||"


def format_value(x: float) -> str:
    """A feature value or score as text: integers bare (``0``, ``-3``), others shortest round-trip."""
    x = float(x)
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return repr(x)


def parse_features(text: str, path=None, line_no=None) -> list[tuple[str, list[float]]]:
    """``"A= 1 2 B= 3"`` → ``[("A", [1.0, 2.0]), ("B", [3.0])]``; a label is a token ending in ``=``."""
    feats: list[tuple[str, list[float]]] = []
    values: list[float] | None = None
    tok = ""
    try:
        for tok in text.split():
            if tok[-1] == "=":
                if len(tok) == 1:
                    raise PhraseRescoreError("expected a feature name before '='", path, line_no)
                values = []
                feats.append((tok[:-1], values))
            else:
                values.append(float(tok))  # AttributeError when no label came first
    except AttributeError:
        raise PhraseRescoreError(f"expected a feature label 'Name=' before the value {tok!r} "
                                 "(n-best lists without feature labels are not supported)", path, line_no) from None
    except ValueError:
        raise PhraseRescoreError(f"expected a number as a value of feature {feats[-1][0]}, got {tok!r}",
                                 path, line_no) from None
    return feats


def format_features(features: Sequence[tuple[str, Sequence[float]]]) -> str:
    """The inverse of :func:`parse_features`, in Moses's spacing: ``"A= 1 2 B= 3"``."""
    return " ".join(f"{name}= " + " ".join(format_value(v) for v in values) for name, values in features)


@dataclass
class NBestEntry:
    """One hypothesis of an n-best list.

    :ivar sent_id: 0-based id of the input sentence.
    :ivar hypothesis: the translation (surrounding spaces stripped).
    :ivar features: ``(name, values)`` in line order.
    :ivar total: the model score the decoder gave (weighted sum of the features).
    :ivar extra: further fields after the total, verbatim (with their surrounding spaces).
    :ivar line_no: 1-based line in the file read (0 for an entry built in memory).
    """

    sent_id: int
    hypothesis: str
    features: list[tuple[str, list[float]]]
    total: float
    extra: list[str] = field(default_factory=list)
    line_no: int = 0
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

    def add_feature(self, name: str, values: Sequence[float]) -> None:
        """Append feature ``name`` to the features field; every other byte of the line is kept."""
        if any(n == name for n, _ in self.features):
            raise PhraseRescoreError(f"hypothesis already has a feature named {name!r}", None, self.line_no or None)
        vals = [float(v) for v in values]
        if not vals or not all(math.isfinite(v) for v in vals):
            raise PhraseRescoreError(f"feature {name!r} needs one or more finite values, got {values!r}",
                                     None, self.line_no or None)
        self.features.append((name, vals))
        if self._raw_fields is not None:
            feats = self._raw_fields[2].rstrip(" ")
            self._raw_fields[2] = f"{feats} {name}= " + " ".join(format_value(v) for v in vals) + " "

    def to_line(self) -> str:
        """The line without its newline: the raw line (plus added features) when read from a file,
        else Moses's layout ``id ||| hyp  ||| features ||| total``."""
        if self._raw_fields is not None:
            return SEP.join(self._raw_fields)
        head = f"{self.sent_id} {SEP} {self.hypothesis}  {SEP} {format_features(self.features)} {SEP} {format_value(self.total)}"
        return head + "".join(SEP + e for e in self.extra)


def parse_nbest_line(line: str, path=None, line_no: int = 0) -> NBestEntry:
    """Parse one n-best line (without its newline)."""
    fields = line.split(SEP)
    if len(fields) < 4:
        raise PhraseRescoreError(f"expected at least 4 fields 'id ||| hypothesis ||| features ||| total', "
                                 f"found {len(fields)}", path, line_no)
    sid = fields[0].strip()
    if not sid.isdigit():
        raise PhraseRescoreError(f"expected a sentence id (a non-negative integer) in the first field, got {sid!r}",
                                 path, line_no)
    try:
        total = float(fields[3])
    except ValueError:
        raise PhraseRescoreError(f"expected the total score (a number) in the fourth field, got {fields[3].strip()!r}",
                                 path, line_no) from None
    feats = parse_features(fields[2], path, line_no)
    return NBestEntry(int(sid), fields[1].strip(), feats, total, fields[4:], line_no, fields)


def read_nbest(path: str | os.PathLike) -> Iterator[NBestEntry]:
    """Stream the hypotheses of an n-best list (plain or gzip by content), checking ids never go down."""
    last = -1
    with open_text_read(path) as f:
        for line_no, line in enumerate(f, start=1):
            line = line.rstrip("\n")
            if line.endswith("\r"):
                line = line[:-1]
            if not line.strip():
                raise PhraseRescoreError("expected an n-best line, found an empty line", path, line_no)
            entry = parse_nbest_line(line, path, line_no)
            if entry.sent_id < last:
                raise PhraseRescoreError(f"sentence id {entry.sent_id} after {last}: expected an n-best list grouped "
                                         "by sentence id in increasing order", path, line_no)
            last = entry.sent_id
            yield entry


def read_nbest_groups(path: str | os.PathLike, num_sentences: int | None = None
                      ) -> Iterator[tuple[int, list[NBestEntry]]]:
    """Stream ``(sentence id, hypotheses)`` groups in id order.

    :param num_sentences: when given, yield every id ``0 .. num_sentences-1`` (an empty list where the decoder
        found no translation) and fail when the list mentions an id at or beyond it.
    """
    cur: list[NBestEntry] = []
    cur_id = None
    next_id = 0

    def fill_to(stop: int):
        nonlocal next_id
        if num_sentences is not None:
            while next_id < stop:
                yield next_id, []
                next_id += 1

    for e in read_nbest(path):
        if num_sentences is not None and e.sent_id >= num_sentences:
            raise PhraseRescoreError(f"sentence id {e.sent_id} but the input has only {num_sentences} sentences",
                                     path, e.line_no)
        if e.sent_id != cur_id:
            if cur_id is not None:
                yield cur_id, cur
                next_id = cur_id + 1
            yield from fill_to(e.sent_id)
            cur, cur_id = [], e.sent_id
        cur.append(e)
    if cur_id is not None:
        yield cur_id, cur
        next_id = cur_id + 1
    if num_sentences is not None:
        yield from fill_to(num_sentences)


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
        data = entry.to_line().encode("utf-8") + b"\n"
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
            e.add_feature(name, v if hasattr(v, "__len__") else [v])
            w.write(e)
        extra = next(it, None)
        if extra is not None:
            raise PhraseRescoreError(f"more values for feature {name!r} than hypotheses ({w.count})", in_path)
    return w.count

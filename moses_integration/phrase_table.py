"""Streaming reader and writer for Moses's text phrase tables.

A line is ``source ||| target ||| scores [||| alignment [||| counts [||| sparse [||| {{Key value}} ...]]]]``;
Moses splits on ``|||`` and trims each field, so three fields are enough. Real tables end their lines with
``||| |||`` (empty sparse-feature and property fields); all of that is kept byte for byte.

The reader yields one :class:`PhraseEntry` per line and holds nothing else; the writer appends new score
columns at the end of the scores field and leaves every other byte of the line as it was, so reading and
writing with no new columns reproduces the input exactly (plain or gzip, whatever the suffix says).

A score is accepted only when Moses reads it as the same finite number: Moses's loader
(``RuleTableLoaderStandard``) splits the scores field on spaces and tabs and converts each token with
double-conversion's ``StringToFloat`` (no flags: the whole token must be a decimal number, ``inf`` and
``nan`` aside), then stores ``FloorScore(log(x))``. So a token must match :data:`~.moses_values.SCORE_TOKEN` (digits with
an optional sign, point and exponent; not ``1_0``, ``0x1p3``, ``Infinity`` or ``١``, which Python's
``float`` takes), must be finite as a float32 (``1e39`` is ``inf`` to Moses, whose log is ``inf``), and
must not be negative (Moses's log makes it NaN); 0 is allowed (Moses floors ``log 0`` to -100). A table
of log-probabilities (``score --raw-logprob``) is read with ``allow_negative=True``.

Bad lines (fewer than 3 fields, a score Moses would not read as the same finite non-negative float32, a
score count that differs from the table's first line, invalid UTF-8, an empty source or target, a CRLF
ending) raise :class:`~phrase_rescore.core.errors.PhraseRescoreError` naming the file and line. With
``on_error="keep"`` they are yielded with ``error`` set instead, counted in :class:`ReadStats` and listed in
a rejects file; the writer then gives them :data:`~.moses_values.NEUTRAL_VALUE` in every new column when the line has a
scores field, and copies the line unchanged otherwise, so no line is dropped or moved. A table without a
single line is refused (:data:`EMPTY_TABLE`) in both modes: there is nothing to rescore.
"""
from __future__ import annotations

import collections
import gzip
import os
import re
from dataclasses import dataclass, field
from typing import IO, Iterable, Iterator, Sequence

from phrase_rescore.core.atomic_write import atomic_open
from phrase_rescore.core.config import spells_non_finite
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.file_errors import GZIP_READ_ERRORS, gzip_read_error
from phrase_rescore.core.reading import open_binary_read
from phrase_rescore.core.words import SEPARATORS

from .configs import ON_ERROR_CHOICES
from .moses_values import FLOAT32_OVERFLOW, NEUTRAL_VALUE, SCORE_TOKEN_RE, format_score

FIELD_SEP = b"|||"


#: A character that no scores field Moses reads whole contains (tokens of SCORE_TOKEN, spaces, tabs).
_NON_SCORE_CHAR = re.compile(r"[^0-9eE+\-. \t]")
_MOSES_SEPARATORS = re.compile(r"[ \t]+")

EMPTY_TABLE = "the phrase table is empty: expected at least one line 'source ||| target ||| scores'"


@dataclass(slots=True)
class PhraseEntry:
    """One line of a phrase table.

    ``raw`` is the line's bytes without the final ``\\n`` (a ``\\r`` stays in it); ``newline`` says whether
    the line ended in ``\\n`` (only the last line of a file may not). ``source`` and ``target`` are the
    trimmed phrases, ``scores`` the parsed score column. ``error`` is None for a good line; with
    ``on_error="keep"`` it names the problem and the other fields hold what could be parsed.
    """

    line_no: int
    raw: bytes
    source: str
    target: str
    scores: tuple[float, ...]
    newline: bool = True
    error: str | None = None


@dataclass
class ReadStats:
    """What a read saw: line count and rejected lines by reason (filled as the reader advances)."""

    lines: int = 0
    rejected: int = 0
    reasons: collections.Counter = field(default_factory=collections.Counter)
    num_scores: int | None = None

    def summary(self) -> str:
        if not self.rejected:
            return f"{self.lines} lines, none rejected"
        parts = ", ".join(f"{n} {r}" for r, n in self.reasons.most_common())
        return f"{self.lines} lines, {self.rejected} rejected ({parts})"


def _split_fields(text: str) -> list[str]:
    return text.split("|||")


class PhraseTableReader:
    """Iterate over a phrase table's lines as :class:`PhraseEntry` records, streaming.

    :param path: plain text or gzip (detected from the content, not the name).
    :param on_error: ``"raise"`` (default) stops at the first bad line with a
        :class:`PhraseRescoreError`; ``"keep"`` yields it with ``error`` set.
    :param rejects_path: with ``on_error="keep"``, where to list rejected lines as
        ``line<TAB>reason<TAB>original bytes``; written atomically when the reader is exhausted.
    :param allow_negative: accept negative scores (a table of log-probabilities, not one for Moses).
    :param span: ``(start, stop, lines_before)``: read only the lines in bytes ``[start, stop)`` of the
        (uncompressed) table, which must begin and end at line starts, numbering them after
        ``lines_before`` lines (for one range of a table cut into several; a gzip table is decompressed
        up to ``start``). An empty span yields nothing and is not refused as an empty table.
    :param num_scores: the score count every line must have (the table's first good line's, for a
        span that does not start the table) [that of the first good line read].
    """

    def __init__(self, path: str | os.PathLike, on_error: str = "raise", rejects_path=None,
                 allow_negative: bool = False, span: tuple[int, int, int] | None = None,
                 num_scores: int | None = None):
        if on_error not in ON_ERROR_CHOICES:
            raise PhraseRescoreError(f"on_error must be one of {', '.join(ON_ERROR_CHOICES)}, got {on_error!r}")
        self.path = os.fspath(path)
        self.on_error = on_error
        self.rejects_path = rejects_path
        self.allow_negative = allow_negative
        self.span = span
        self.num_scores = num_scores
        self.stats = ReadStats()

    def __iter__(self) -> Iterator[PhraseEntry]:
        rejects: list[bytes] = []
        keep = self.on_error == "keep"
        stats = self.stats
        expected = self.num_scores  # score count of the first good line
        stats.num_scores = expected
        line_no = 0 if self.span is None else self.span[2]
        left = None if self.span is None else self.span[1] - self.span[0]   # bytes of the span still to read
        with open_binary_read(self.path) as f:
            try:
                if self.span is not None and self.span[0]:
                    _skip(f, self.span[0])
                for raw in f:
                    if left is not None:
                        if left <= 0:
                            break
                        left -= len(raw)
                    line_no += 1
                    newline = raw.endswith(b"\n")
                    if newline:
                        raw = raw[:-1]
                    entry = _parse(raw, line_no, newline, self.allow_negative)
                    if entry.error is None:
                        n = len(entry.scores)
                        if expected is None:
                            expected = n
                            stats.num_scores = n
                        elif n != expected:
                            entry.error = (f"expected {expected} scores (as on the table's first line), "
                                           f"found {n}")
                    if entry.error is not None:
                        if not keep:
                            raise PhraseRescoreError(entry.error, self.path, line_no)
                        stats.rejected += 1
                        stats.reasons[entry.error.split(":")[0].split(" (")[0]] += 1
                        rejects.append(b"%d\t%s\t%s\n" % (line_no, entry.error.encode("utf-8"), raw))
                    stats.lines = line_no
                    yield entry
            except GZIP_READ_ERRORS as e:
                raise gzip_read_error(e, self.path, line_no) from None
        if line_no == 0 and self.span is None:
            raise PhraseRescoreError(EMPTY_TABLE, self.path)
        if keep and self.rejects_path is not None:
            with atomic_open(self.rejects_path, "wb") as out:
                out.writelines(rejects)


def line_blocks(f: IO[bytes], size: int) -> Iterator[tuple[list[bytes], bool]]:
    """``(lines, ended)`` of a table read ``size`` bytes at a time, for readers that want one call per
    block rather than per line: the complete lines of each block, without their ``\\n``, with ``ended``
    True (a block holding no ``\\n`` gives ``[]``); then, when the file does not end with ``\\n``, its last
    line alone with ``ended`` False."""
    tail = b""
    while True:
        block = f.read(size)
        if not block:
            break
        lines = (tail + block).split(b"\n")
        tail = lines.pop()
        yield lines, True
    if tail:
        yield [tail], False


def _skip(f: IO[bytes], offset: int) -> None:
    """Move ``f`` to byte ``offset`` of its content: a plain file seeks, gzip is decompressed up to it
    in large reads (GzipFile.seek reads 8 KiB at a time, several times slower)."""
    if not isinstance(f, gzip.GzipFile):
        f.seek(offset)
        return
    left = offset
    while left > 0:
        n = len(f.read(min(left, 1 << 24)))
        if not n:
            return
        left -= n


def _parse(raw: bytes, line_no: int, newline: bool, allow_negative: bool = False) -> PhraseEntry:
    """Parse one line (without its ``\\n``); problems are returned in ``error``, never raised."""
    if raw.endswith(b"\r"):
        return PhraseEntry(line_no, raw, "", "", (), newline,
                           "CRLF line ending: expected Unix line endings (\\n); convert with dos2unix")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return PhraseEntry(line_no, raw, "", "", (), newline,
                           f"invalid UTF-8 at byte {e.start}: expected UTF-8 text")
    fields = _split_fields(text)
    if len(fields) < 3:
        return PhraseEntry(line_no, raw, "", "", (), newline,
                           f"expected at least 3 fields 'source ||| target ||| scores', found {len(fields)}")
    source = fields[0].strip(SEPARATORS)    # Moses trims spaces and tabs only (core/words.py)
    target = fields[1].strip(SEPARATORS)
    scores, problem = parse_scores(fields[2], allow_negative)
    if problem is not None:
        return PhraseEntry(line_no, raw, source, target, (), newline, problem)
    if not source or not target:
        side = "source" if not source else "target"
        return PhraseEntry(line_no, raw, source, target, scores, newline,
                           f"empty {side} phrase: expected at least one word")
    return PhraseEntry(line_no, raw, source, target, scores, newline)


def parse_scores(text: str, allow_negative: bool = False) -> tuple[tuple[float, ...], str | None]:
    """``(scores, None)`` for a scores field Moses reads as the same finite numbers, else ``((), problem)``.

    See the module docstring: tokens of :data:`~.moses_values.SCORE_TOKEN` separated by spaces or tabs, each finite as a
    float32 and, unless ``allow_negative``, not negative.
    """
    if _NON_SCORE_CHAR.search(text) is None:
        # with these characters only, Python's float() and StringToFloat accept the same tokens (no "_",
        # "inf" or other whitespace), and split() splits where Moses does: on spaces and tabs
        try:
            scores = tuple(map(float, text.split()))
        except ValueError:
            scores = None
        if scores is not None and (not scores or (max(scores) < FLOAT32_OVERFLOW and (
                min(scores) >= 0 or (allow_negative and min(scores) > -FLOAT32_OVERFLOW)))):
            return scores, None
    for token in _MOSES_SEPARATORS.split(text.strip(" \t")):
        problem = score_problem(token, allow_negative)
        if problem is not None:
            return (), problem
    raise AssertionError(f"no bad token in a rejected scores field {text!r}")


def score_problem(token: str, allow_negative: bool = False) -> str | None:
    """Why Moses would not read ``token`` as the same finite non-negative float32; None when it would."""
    if not SCORE_TOKEN_RE.fullmatch(token):
        if spells_non_finite(token):
            return f"score {token!r} is not finite: expected finite numbers"
        return (f"score {token!r} is not a number: expected decimal numbers such as 0.25 or 1e-05, "
                "separated by spaces or tabs (Moses reads nothing else)")
    x = float(token)
    if abs(x) >= FLOAT32_OVERFLOW:
        return (f"score {token!r} is out of float range: Moses reads scores as float32, in which it is infinite "
                "(expected at most 3.4028235e+38)")
    if x < 0 and not allow_negative:
        return (f"score {token!r} is negative: Moses takes the log of every phrase-table score, which is NaN for "
                "a negative number (expected probabilities >= 0, not log-probabilities)")
    return None


def read_phrase_table(path, on_error: str = "raise", rejects_path=None, allow_negative: bool = False,
                      span: tuple[int, int, int] | None = None, num_scores: int | None = None) -> PhraseTableReader:
    """Open a phrase table for streaming; iterate the result for :class:`PhraseEntry` records.

    The returned reader's ``stats`` (:class:`ReadStats`) count lines and rejects as it advances;
    ``span`` and ``num_scores``: see :class:`PhraseTableReader`.
    """
    return PhraseTableReader(path, on_error, rejects_path, allow_negative, span, num_scores)


def num_scores(path) -> int:
    """The number of score columns of a phrase table: those of its first good line (the count every
    other line must have; a table kept with ``--on-error keep`` may start with a rejected line)."""
    reader = read_phrase_table(path, on_error="keep")
    for entry in reader:
        if entry.error is None:
            return len(entry.scores)
    raise PhraseRescoreError(f"no line of the table has valid scores ({reader.stats.summary()}): expected "
                             "'source ||| target ||| scores'", path)


def check_not_empty(path) -> None:
    """Refuse a phrase table without a single line (before any output is opened); a missing file too."""
    with open_binary_read(path) as f:
        try:
            empty = not f.read(1)
        except GZIP_READ_ERRORS as e:
            raise gzip_read_error(e, path, 0) from None
    if empty:
        raise PhraseRescoreError(EMPTY_TABLE, path)


def append_columns(raw: bytes, columns: bytes) -> bytes:
    """Insert ``columns`` (e.g. ``b"0.5 2.718282"``) after the last score of a line's scores field.

    Spacing around the field, the other fields and any trailing bytes are kept. A line with fewer than
    three fields has no scores field and is returned unchanged.
    """
    i1 = raw.find(FIELD_SEP)
    if i1 < 0:
        return raw
    i2 = raw.find(FIELD_SEP, i1 + 3)
    if i2 < 0:
        return raw
    start = i2 + 3
    end = raw.find(FIELD_SEP, start)
    if end < 0:
        end = len(raw)
    field_bytes = raw[start:end]
    stripped = field_bytes.rstrip()
    pos = start + len(stripped)
    if stripped.strip():
        return raw[:pos] + b" " + columns + raw[pos:]
    # an empty scores field: put the columns where the scores would be, with Moses's spacing
    return raw[:start] + b" " + columns + raw[start:]


def scored_line(line: bytes, columns: bytes) -> bytes:
    """A table line as read (with its ``\\n``, or without on a last line that has none) with ``columns``
    appended to its scores field by :func:`append_columns`, ending as it ended: how every writer of a
    rescored table writes a line."""
    if line.endswith(b"\n"):
        return append_columns(line[:-1], columns) + b"\n"
    return append_columns(line, columns)


class PhraseTableWriter:
    """Write phrase-table lines, appending new score columns; atomic (temp file, then rename).

    gzip when ``path`` ends in ``.gz``. Use as a context manager; the file appears under its final
    name only when the ``with`` block completes without an exception.
    """

    def __init__(self, path, compresslevel: int = 6):
        self.path = os.fspath(path)
        self.compresslevel = compresslevel
        self._cm = None
        self._f: IO[bytes] | None = None

    def __enter__(self) -> "PhraseTableWriter":
        self._cm = atomic_open(self.path, "wb", compresslevel=self.compresslevel)
        self._f = self._cm.__enter__()
        return self

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)

    def write(self, entry: PhraseEntry, new_values: Sequence[float] | None = None) -> None:
        """Write ``entry`` with ``new_values`` appended to its scores (none: the line as read).

        A rejected entry (``error`` set) gets :data:`~.moses_values.NEUTRAL_VALUE` in each new column.
        """
        line = entry.raw + b"\n" if entry.newline else entry.raw
        if new_values:
            if entry.error is not None:
                new_values = [NEUTRAL_VALUE] * len(new_values)
            line = scored_line(line, " ".join(format_score(v) for v in new_values).encode("ascii"))
        self._f.write(line)

    def write_raw(self, lines: Iterable[bytes]) -> None:
        """Write already formatted lines (each with its own line ending)."""
        self._f.writelines(lines)

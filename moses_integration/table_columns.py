"""Phrase-table line surgery for the extra neural columns: the table in the other direction, and merging
a column scored on it (or by a second model) back into the table.

- :func:`swap_table` writes every line with its source and target phrases exchanged (and each
  alignment point ``i-j`` as ``j-i``), in the same order: ``score`` run on it with a model trained in
  the other direction (``prepare`` on the swapped table) gives log p(e|f) for every line, the second
  neural direction that later phrase-table rescoring work adds beside the paper's p(f|e). The other
  fields (scores, counts) are copied as they are: the swapped table is an input for the neural side,
  not a Moses model.
- :func:`append_last_column` appends to each line of a table the last score of the same line of
  another scoring of it (of the swapped table, or of the table itself by a second model).
- :func:`drop_unk_column` writes the table with ``score``'s appended columns less the unknown-word
  column: the +RNN table from the +RNN+WP one, without the model.
- :func:`ensemble_column` replaces one score column by the mean of its log value and the log value of
  the same line's last column in another scoring: log p = (log p_1 + log p_2) / 2, an ensemble of two
  models' log-probabilities in one column, written as :mod:`.moses_values` writes log p.

Every line of the other scoring must carry the same phrases (swapped for the reverse direction), so a
table of another system or a shifted line is refused, naming file and line.
"""
from __future__ import annotations

import itertools
import os

import numpy as np

from phrase_rescore.core.atomic_write import atomic_open
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.reading import open_binary_read

from .moses_values import floor_log, logprob_texts, moses_float32
from .phrase_table import FIELD_SEP, append_columns, scored_line


def _fields(line: bytes) -> list[bytes]:
    return line.rstrip(b"\r\n").split(FIELD_SEP)


def _swap_alignment(field: bytes) -> bytes:
    points = field.split()
    out = []
    for p in points:
        a, sep, b = p.partition(b"-")
        out.append(b + b"-" + a if sep else p)
    lead = field[:len(field) - len(field.lstrip())]
    trail = field[len(field.rstrip()):]
    return lead + b" ".join(out) + trail


def swap_table(table: str | os.PathLike, out: str | os.PathLike, compresslevel: int = 6) -> int:
    """Write ``table`` with source and target exchanged on every line (see the module docstring).

    :returns: the number of lines.
    :raises PhraseRescoreError: a line without the ``source ||| target ||| scores`` fields.
    """
    n = 0
    with open_binary_read(table) as f, atomic_open(out, "wb", compresslevel=compresslevel) as w:
        for n, line in enumerate(f, start=1):
            body = line.rstrip(b"\r\n")
            end = line[len(body):]
            fields = body.split(FIELD_SEP)
            if len(fields) < 3:
                raise PhraseRescoreError("expected 'source ||| target ||| scores [||| alignment ...]'", table, n)
            e, f_ = fields[0], fields[1]
            fields[0] = e[:len(e) - len(e.lstrip())] + f_.strip() + e[len(e.rstrip()):]
            fields[1] = f_[:len(f_) - len(f_.lstrip())] + e.strip() + f_[len(f_.rstrip()):]
            if len(fields) >= 4:
                fields[3] = _swap_alignment(fields[3])
            w.write(FIELD_SEP.join(fields) + end)
    return n


def _last_score(fields: list[bytes], path, n: int) -> bytes:
    cols = fields[2].split() if len(fields) >= 3 else []
    if not cols:
        raise PhraseRescoreError("has no score to take", path, n)
    return cols[-1]


def _paired_lines(base, other, swapped: bool):
    with open_binary_read(base) as fb, open_binary_read(other) as fo:
        for n, (a, b) in enumerate(itertools.zip_longest(fb, fo), start=1):
            if a is None or b is None:
                raise PhraseRescoreError(f"has {'more' if a is None else 'fewer'} lines than {base}; expected the "
                                         "same table scored again", other, n)
            fa, fb_ = _fields(a), _fields(b)
            want = (fa[1].strip(), fa[0].strip()) if swapped else (fa[0].strip(), fa[1].strip())
            if len(fb_) < 3 or (fb_[0].strip(), fb_[1].strip()) != want:
                raise PhraseRescoreError(f"is not line {n} of {base} {'swapped and ' if swapped else ''}scored: "
                                         "expected the same phrases", other, n)
            yield n, a, fa, fb_


def append_last_column(base: str | os.PathLike, other: str | os.PathLike, out: str | os.PathLike,
                       swapped: bool = True, compresslevel: int = 6) -> int:
    """Append the last score of each line of ``other`` (``swapped``: a scoring of :func:`swap_table`'s
    output) to the same line of ``base``. :returns: the number of lines."""
    n = 0
    with atomic_open(out, "wb", compresslevel=compresslevel) as w:
        for n, line, _, fo in _paired_lines(base, other, swapped):
            w.write(scored_line(line, _last_score(fo, other, n)))
    return n


def _log_value(text: bytes, path, n: int) -> float:
    v = moses_float32(text.decode("ascii", "replace"))
    if v is None or v < 0:
        raise PhraseRescoreError(f"score {text.decode('ascii', 'replace')!r} is not a Moses phrase-table value",
                                 path, n)
    return floor_log(v)


def ensemble_column(base: str | os.PathLike, other: str | os.PathLike, out: str | os.PathLike, column: int,
                    compresslevel: int = 6) -> int:
    """Replace score ``column`` (0-based) of every line of ``base`` by exp of the mean of its log and the log of
    the last score of the same line of ``other`` (the same table scored by a second model), each as Moses
    reads it (log, floored at -100). :returns: the number of lines."""
    n = 0
    with atomic_open(out, "wb", compresslevel=compresslevel) as w:
        for n, line, fa, fo in _paired_lines(base, other, swapped=False):
            cols = fa[2].split()
            if not -len(cols) <= column < len(cols):
                raise PhraseRescoreError(f"has {len(cols)} scores, no column {column}", base, n)
            mean = (_log_value(cols[column], base, n) + _log_value(_last_score(fo, other, n), other, n)) / 2
            cols[column] = logprob_texts(np.array([mean]))[0].encode("ascii")
            lead = fa[2][:len(fa[2]) - len(fa[2].lstrip())]
            trail = fa[2][len(fa[2].rstrip()):]
            fa[2] = lead + b" ".join(cols) + trail
            w.write(FIELD_SEP.join(fa) + line[len(line.rstrip(b"\r\n")):])
    return n


#: the columns ``score --columns logprob,unk`` appends, in order, with the reverse model's log p(e|f) last when
#: there are three
SCORE_COLUMNS = {2: ("logprob", "unk"), 3: ("logprob", "unk", "reverse")}


def drop_unk_column(original: str | os.PathLike, rescored: str | os.PathLike, out: str | os.PathLike,
                    appended: int = 2, compresslevel: int = 6) -> int:
    """Write ``original`` with the columns ``rescored`` appended to it, less the unknown-word column.

    Every line of ``rescored`` must be the same line of ``original`` with exactly ``appended`` score columns
    appended: log p(f|e), the unknown-word column, and with 3 the reverse model's log p(e|f) (as ``score
    --columns logprob,unk [--reverse-model]`` writes them). The kept columns' text is copied as it is, so
    with 2 the output is byte for byte what ``score --columns logprob`` would write.
    :returns: the number of lines.
    """
    if appended not in SCORE_COLUMNS:
        raise ValueError(f"appended must be 2 or 3, not {appended}")
    names = SCORE_COLUMNS[appended]
    n = 0
    with open_binary_read(original) as fo, open_binary_read(rescored) as fr, \
            atomic_open(out, "wb", compresslevel=compresslevel) as w:
        for n, (line, b) in enumerate(itertools.zip_longest(fo, fr), start=1):
            if line is None or b is None:
                raise PhraseRescoreError(f"has {'fewer' if line is None else 'more'} lines than the rescored table "
                                         f"{rescored}; expected the same number", original, n)
            a, b = line.removesuffix(b"\n"), b.rstrip(b"\n")
            if a == b and append_columns(a, b"0") == a:  # no scores field (a line kept by --on-error keep)
                w.write(line)
                continue
            fields = b.split(FIELD_SEP)
            cols = fields[2].split() if len(fields) >= 3 else []
            if len(cols) < appended or append_columns(a, b" ".join(cols[-appended:])) != b:
                raise PhraseRescoreError(f"is not line {n} of {original} with {('two', 'three')[appended - 2]} score "
                                         "columns appended", rescored, n)
            kept = [c for name, c in zip(names, cols[-appended:]) if name != "unk"]
            w.write(scored_line(line, b" ".join(kept)))
    return n

"""Phrase-pair extraction with Moses's algorithm (``phrase-extract/extract-main.cpp``, ``extract``).

For every target span of at most ``max_len`` words that is aligned to at least one source word, take
the smallest source span covering its alignment points; it is consistent when no source word in it
is aligned outside the target span. Each consistent pair is emitted together with every extension of
its source span over unaligned source words at either edge (still at most ``max_len`` words).
Unaligned target words at the edges are covered because every target span is tried, and unaligned
words inside a span simply come along.

With ``orientation`` (Moses's ``extract ... orientation --model wbe-msd``, which train-model.perl runs
for ``-reordering msd-bidirectional-fe``), every instance also gets its word-based orientations
(``getOrientWordModel`` with ``REO_MSD`` in ``extract-main.cpp``), against the previous phrase (backward)
and the next one (forward), from the alignment points at the phrase's corners:

- backward: ``mono`` when (start_f-1, start_e-1) is aligned and (end_f+1, start_e-1) is not, ``swap``
  when the reverse holds, ``other`` otherwise;
- forward: ``mono`` when (end_f+1, end_e+1) is aligned and (start_f-1, end_e+1) is not, ``swap`` when
  the reverse holds, ``other`` otherwise;
- the point (-1, -1) before the sentence and (n_src, n_tgt) after it count as aligned (``isAligned``),
  so a phrase starting both sentences is backward ``mono`` and one ending both is forward ``mono``.

Extracted instances are counted with pandas group-bys per chunk of sentences, so memory is bounded by
the number of distinct (source, target, alignment) triples rather than by the corpus size.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np
import pandas as pd

from phrase_rescore.core import progress

Span = tuple[int, int, int, int]  # (start source, end source, start target, end target), inclusive

COLUMNS = ["src", "tgt", "align"]

#: word-based msd orientations, in the order lexical-reordering-score writes their probabilities
MONO, SWAP, OTHER = 0, 1, 2
ORIENTATIONS = ("mono", "swap", "other")
#: the counts of each orientation, backward (against the previous phrase) then forward (the next one)
ORIENTATION_COLUMNS = ["prev_mono", "prev_swap", "prev_other", "next_mono", "next_swap", "next_other"]


class _AlignmentIndex(NamedTuple):
    """One sentence pair's alignment as extract's phrase loop reads it."""

    aligned_to_t: list[list[int]]    # per target word, the source words aligned to it
    count_s: list[int]               # per source word, its alignment points
    min_e: list[int]                 # per source word, its first aligned target word (n_tgt when none)
    max_e: list[int]                 # per source word, its last aligned target word (-1 when none)


def _alignment_index(n_src: int, n_tgt: int, points: Sequence[tuple[int, int]]) -> _AlignmentIndex:
    """Index the alignment points by target word and by source word."""
    aligned_to_t: list[list[int]] = [[] for _ in range(n_tgt)]
    count_s = [0] * n_src
    min_e = [n_tgt] * n_src
    max_e = [-1] * n_src
    for s, t in points:
        aligned_to_t[t].append(s)
        count_s[s] += 1
        if t < min_e[s]:
            min_e[s] = t
        if t > max_e[s]:
            max_e[s] = t
    return _AlignmentIndex(aligned_to_t, count_s, min_e, max_e)


def extract_spans(n_src: int, n_tgt: int, points: Sequence[tuple[int, int]], max_len: int = 7) -> list[Span]:
    """All consistent phrase pairs of one sentence pair, in the order Moses's extract emits them.

    :param n_src: source sentence length.
    :param n_tgt: target sentence length.
    :param points: alignment points (source position, target position).
    :param max_len: the longest phrase on either side (Moses's -max-phrase-length, default 7).
    """
    aligned_to_t, count_s, min_e, max_e = _alignment_index(n_src, n_tgt, points)
    spans: list[Span] = []
    for start_e in range(n_tgt):
        min_f, max_f = n_src, -1
        for end_e in range(start_e, min(n_tgt, start_e + max_len)):
            for f in aligned_to_t[end_e]:
                if f < min_f:
                    min_f = f
                if f > max_f:
                    max_f = f
            if max_f < 0:
                continue  # no alignment point yet: a phrase needs at least one
            if max_f - min_f >= max_len:
                break  # the source span only grows with end_e
            # consistent: no source word in [min_f, max_f] is aligned outside [start_e, end_e]
            if any(count_s[f] and (min_e[f] < start_e or max_e[f] > end_e) for f in range(min_f, max_f + 1)):
                continue
            start_f = min_f
            while start_f >= 0 and start_f > max_f - max_len and (start_f == min_f or count_s[start_f] == 0):
                end_f = max_f
                while end_f < n_src and end_f < start_f + max_len and (end_f == max_f or count_s[end_f] == 0):
                    spans.append((start_f, end_f, start_e, end_e))
                    end_f += 1
                start_f -= 1
    return spans


#: getOrientWordModel for REO_MSD by (left corner aligned, right corner aligned): one side only is
#: mono (left) or swap (right), neither or both is other
_MSD = ((OTHER, SWAP), (MONO, OTHER))


def span_orientations(n_src: int, n_tgt: int, points: Sequence[tuple[int, int]],
                      spans: Sequence[Span]) -> list[tuple[int, int]]:
    """(backward, forward) word-based msd orientation of each span, as Moses's ``extract --model wbe-msd``.

    :param points: alignment points (source position, target position).
    :param spans: (start_f, end_f, start_e, end_e) inclusive, e.g. from :func:`extract_spans`.
    :returns: one (backward, forward) pair of :data:`MONO` / :data:`SWAP` / :data:`OTHER` per span.
    """
    # extract-main.cpp's isAligned(f, e) for -1 <= f <= n_src, -1 <= e <= n_tgt, as a grid shifted by
    # one: the corners (-1, -1) and (n_src, n_tgt) are aligned, every other point off the sentence is not
    w = n_tgt + 2
    grid = [0] * ((n_src + 2) * w)
    grid[0] = grid[-1] = 1
    for f, e in points:
        grid[(f + 1) * w + e + 1] = 1
    return [(_MSD[grid[sf * w + se]][grid[(ef + 2) * w + se]],            # (sf-1, se-1), (ef+1, se-1)
             _MSD[grid[(ef + 2) * w + ee + 2]][grid[sf * w + ee + 2]])    # (ef+1, ee+1), (sf-1, ee+1)
            for sf, ef, se, ee in spans]


def phrase_alignment(points_by_t: Sequence[Sequence[int]], span: Span) -> str:
    """The within-phrase alignment as the phrase table writes it: ``s-t`` ordered by target, then source."""
    start_f, _, start_e, end_e = span
    return " ".join(f"{f - start_f}-{e - start_e}"
                    for e in range(start_e, end_e + 1) for f in points_by_t[e])


def extract_sentence(src: Sequence[str], tgt: Sequence[str], points: Sequence[tuple[int, int]],
                     max_len: int = 7, orientations: list | None = None) -> list[tuple[str, str, str]]:
    """Phrase pairs of one sentence pair as (source phrase, target phrase, alignment) strings.

    :param orientations: when given, a list the (backward, forward) orientation of each returned pair
        is appended to, in the same order (:func:`span_orientations`).
    """
    by_t: list[list[int]] = [[] for _ in range(len(tgt))]
    for s, t in points:
        by_t[t].append(s)
    for lst in by_t:
        lst.sort()
    out = []
    # spans share sub-phrases (extensions over unaligned words): build each string once per sentence
    src_str: dict[tuple[int, int], str] = {}
    tgt_str: dict[tuple[int, int], str] = {}
    align_str: dict[tuple[int, int, int], str] = {}
    spans = extract_spans(len(src), len(tgt), points, max_len)
    if orientations is not None:
        orientations.extend(span_orientations(len(src), len(tgt), points, spans))
    for span in spans:
        sf, ef, se, ee = span
        sp = src_str.get((sf, ef))
        if sp is None:
            sp = src_str[(sf, ef)] = " ".join(src[sf:ef + 1])
        tp = tgt_str.get((se, ee))
        if tp is None:
            tp = tgt_str[(se, ee)] = " ".join(tgt[se:ee + 1])
        ap = align_str.get((sf, se, ee))
        if ap is None:
            ap = align_str[(sf, se, ee)] = phrase_alignment(by_t, span)
        out.append((sp, tp, ap))
    return out


def count_phrase_pairs(src: Sequence[Sequence[str]], tgt: Sequence[Sequence[str]],
                       alignments: Sequence[Sequence[tuple[int, int]]], max_len: int = 7,
                       chunk_size: int = 5000, orientation: bool = False) -> pd.DataFrame:
    """Extract from a whole corpus and count each distinct (src, tgt, align) triple.

    :param orientation: also count each triple's word-based msd orientations (Moses's extract.o).
    :returns: a DataFrame with columns ``src``, ``tgt``, ``align`` (str) and ``count`` (int64); with
        ``orientation`` also the six :data:`ORIENTATION_COLUMNS` (int64), the backward and forward
        mono / swap / other counts of the triple's instances.
    """
    parts: list[pd.DataFrame] = []
    pending_rows = 0
    with progress.bar(total=len(src), desc="extract", unit="sent") as bar:
        for lo in range(0, len(src), chunk_size):
            rows: list[tuple[str, str, str]] = []
            orients: list[tuple[int, int]] | None = [] if orientation else None
            hi = min(lo + chunk_size, len(src))
            for k in range(lo, hi):
                rows.extend(extract_sentence(src[k], tgt[k], alignments[k], max_len, orients))
            df = pd.DataFrame(rows, columns=COLUMNS)
            if orients is not None:
                df = _with_orientation_counts(df, orients)
            parts.append(_count(df))
            pending_rows += len(parts[-1])
            bar.update(hi - lo)
            if len(parts) > 1 and pending_rows > 2_000_000:  # merge partial counts to bound memory
                parts = [_merge(parts)]
                pending_rows = len(parts[0])
    if not parts:
        counts = ["count"] + (ORIENTATION_COLUMNS if orientation else [])
        return pd.DataFrame({c: pd.Series([], dtype="str") for c in COLUMNS}
                            | {c: pd.Series([], dtype="int64") for c in counts})
    return _merge(parts)


def _with_orientation_counts(df: pd.DataFrame, orients: list[tuple[int, int]]) -> pd.DataFrame:
    """Add one-hot orientation columns (one row per extracted instance) and a ``count`` of 1."""
    o = np.array(orients, dtype=np.int64).reshape(-1, 2)
    hot = np.zeros((len(o), 6), dtype=np.int64)
    rows = np.arange(len(o))
    hot[rows, o[:, 0]] = 1
    hot[rows, 3 + o[:, 1]] = 1
    df["count"] = np.ones(len(o), dtype=np.int64)
    for j, name in enumerate(ORIENTATION_COLUMNS):
        df[name] = hot[:, j]
    return df


def _count(df: pd.DataFrame) -> pd.DataFrame:
    if "count" in df.columns:  # instances with orientation columns: sum them per triple
        return df.groupby(COLUMNS, sort=False, observed=True).sum().reset_index()
    return df.groupby(COLUMNS, sort=False, observed=True).size().rename("count").reset_index()


def _merge(parts: list[pd.DataFrame]) -> pd.DataFrame:
    if len(parts) == 1:
        return parts[0]
    df = pd.concat(parts, ignore_index=True)
    summed = [c for c in df.columns if c not in COLUMNS]
    return df.groupby(COLUMNS, sort=False, observed=True)[summed].sum().reset_index()

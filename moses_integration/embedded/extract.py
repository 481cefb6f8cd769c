"""Phrase-pair extraction with Moses's algorithm (``phrase-extract/extract-main.cpp``, ``extract``).

For every target span of at most ``max_len`` words that is aligned to at least one source word, take
the smallest source span covering its alignment points; it is consistent when no source word in it
is aligned outside the target span. Each consistent pair is emitted together with every extension of
its source span over unaligned source words at either edge (still at most ``max_len`` words).
Unaligned target words at the edges are covered because every target span is tried, and unaligned
words inside a span simply come along.

Extracted instances are counted with pandas group-bys per chunk of sentences, so memory is bounded by
the number of distinct (source, target, alignment) triples rather than by the corpus size.
"""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from phrase_rescore.core import progress

Span = tuple[int, int, int, int]  # (start source, end source, start target, end target), inclusive

COLUMNS = ["src", "tgt", "align"]


def extract_spans(n_src: int, n_tgt: int, points: Sequence[tuple[int, int]], max_len: int = 7) -> list[Span]:
    """All consistent phrase pairs of one sentence pair, in the order Moses's extract emits them.

    :param n_src: source sentence length.
    :param n_tgt: target sentence length.
    :param points: alignment points (source position, target position).
    :param max_len: the longest phrase on either side (Moses's -max-phrase-length, default 7).
    """
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


def phrase_alignment(points_by_t: Sequence[Sequence[int]], span: Span) -> str:
    """The within-phrase alignment as the phrase table writes it: ``s-t`` ordered by target, then source."""
    start_f, _, start_e, end_e = span
    return " ".join(f"{f - start_f}-{e - start_e}"
                    for e in range(start_e, end_e + 1) for f in points_by_t[e])


def extract_sentence(src: Sequence[str], tgt: Sequence[str], points: Sequence[tuple[int, int]],
                     max_len: int = 7) -> list[tuple[str, str, str]]:
    """Phrase pairs of one sentence pair as (source phrase, target phrase, alignment) strings."""
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
    for span in extract_spans(len(src), len(tgt), points, max_len):
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
                       chunk_size: int = 5000) -> pd.DataFrame:
    """Extract from a whole corpus and count each distinct (src, tgt, align) triple.

    :returns: a DataFrame with columns ``src``, ``tgt``, ``align`` (str) and ``count`` (int64).
    """
    parts: list[pd.DataFrame] = []
    pending_rows = 0
    with progress.bar(total=len(src), desc="extract", unit="sent") as bar:
        for lo in range(0, len(src), chunk_size):
            rows: list[tuple[str, str, str]] = []
            hi = min(lo + chunk_size, len(src))
            for k in range(lo, hi):
                rows.extend(extract_sentence(src[k], tgt[k], alignments[k], max_len))
            parts.append(_count(pd.DataFrame(rows, columns=COLUMNS)))
            pending_rows += len(parts[-1])
            bar.update(hi - lo)
            if len(parts) > 1 and pending_rows > 2_000_000:  # merge partial counts to bound memory
                parts = [_merge(parts)]
                pending_rows = len(parts[0])
    if not parts:
        return pd.DataFrame({c: pd.Series([], dtype="str") for c in COLUMNS} | {"count": pd.Series([], dtype="int64")})
    return _merge(parts)


def _count(df: pd.DataFrame) -> pd.DataFrame:
    return df.groupby(COLUMNS, sort=False, observed=True).size().rename("count").reset_index()


def _merge(parts: list[pd.DataFrame]) -> pd.DataFrame:
    if len(parts) == 1:
        return parts[0]
    df = pd.concat(parts, ignore_index=True)
    return df.groupby(COLUMNS, sort=False, observed=True)["count"].sum().reset_index()

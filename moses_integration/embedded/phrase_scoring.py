"""Lexical translation tables and Moses phrase-table scoring (``score`` + ``consolidate``), vectorized.

Word translation tables (train-model.perl ``get_lexical``): every alignment point (f, e) counts once
for the pair; every unaligned target word e counts as (NULL, e) and every unaligned source word f as
(f, NULL). ``w(e|f) = c(f, e) / c(f)`` (file ``lex.f2e``: ``e f w``) and ``w(f|e) = c(f, e) / c(e)``
(``lex.e2f``: ``f e w``), written with ``%.7f`` and used at that precision, as Moses's scorer reads
them back from those files. A corpus word spelt ``NULL`` is indistinguishable from NULL, as in Moses.

Phrase scores, per distinct phrase pair (s, t) with extraction count c(s, t):

- ``p(s|t) = c(s,t) / c(t)`` and ``p(t|s) = c(s,t) / c(s)`` (single-precision, as Moses's ``float``),
- ``lex(t|s) = prod_j [ mean_{i aligned to j} w(t_j|s_i) ]``, ``w(t_j|NULL)`` for an unaligned t_j,
  and ``lex(s|t)`` the same with the roles swapped; the alignment used is the pair's most frequent
  one, ties going to the greater alignment as ``std::vector<std::set>`` compares them
  (``ExtractionPhrasePair::FindBestAlignmentTargetToSource``). As Moses scores the two directions
  in separate runs, the inverse run (``lex(s|t)``) compares alignments indexed by source word and
  may break a tie the other way; the alignment field is the direct run's choice. Counts of a
  million or more are used rounded to six digits, as ``consolidate`` reads them back. Lexical
  weights are computed in double and rounded to single precision before they are printed, as
  ``score`` passes them through its ``float`` ``MaybeLog``.

Each line is written as Moses's ``consolidate`` writes it::

    src ||| tgt ||| p(s|t) lex(s|t) p(t|s) lex(t|s) ||| 0-0 1-2 ||| c(t) c(s) c(s,t) ||| |||

numbers printed like a C++ ``ostream`` (``%g``, six significant digits:
:func:`~phrase_rescore.moses_integration.moses_values.format_moses_float`), the alignment ordered by
target then source position, lines sorted by ``"src ||| tgt |||"`` in byte order (``LC_ALL=C sort``
of Moses's extract file). Everything is pandas/pyarrow column arithmetic in chunks of pairs.
"""
from __future__ import annotations

import os
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from phrase_rescore.core import progress
from phrase_rescore.core.atomic_write import atomic_open

from ..moses_values import format_moses_float

NULL = "NULL"


@dataclass
class LexicalTable:
    """One direction of word translation probabilities, ``w(out | given)``, as sorted integer keys.

    ``given_vocab`` / ``out_vocab`` list the words (incl. NULL); ``keys = given_id * len(out_vocab) + out_id``
    sorted ascending with ``probs`` aligned to them.
    """

    given_vocab: list[str]
    out_vocab: list[str]
    keys: np.ndarray   # (K,) int64, sorted
    probs: np.ndarray  # (K,) float64

    def lookup(self, given_ids: np.ndarray, out_ids: np.ndarray) -> np.ndarray:
        """``w(out|given)`` for arrays of ids; 1.0 where the pair is unknown (Moses's permissiveLookup)."""
        q = given_ids.astype(np.int64) * len(self.out_vocab) + out_ids.astype(np.int64)
        idx = np.searchsorted(self.keys, q)
        idx_c = np.minimum(idx, len(self.keys) - 1)
        found = (idx < len(self.keys)) & (self.keys[idx_c] == q) & (given_ids >= 0) & (out_ids >= 0)
        return np.where(found, self.probs[idx_c], 1.0)

    def prob(self, given: str, out: str) -> float:
        """One probability by words (tests, debugging)."""
        gi = {w: i for i, w in enumerate(self.given_vocab)}.get(given, -1)
        oi = {w: i for i, w in enumerate(self.out_vocab)}.get(out, -1)
        return float(self.lookup(np.array([gi]), np.array([oi]))[0])


@dataclass
class LexicalTables:
    """Both directions: ``t_given_s`` (Moses's lex.f2e) and ``s_given_t`` (lex.e2f)."""

    t_given_s: LexicalTable
    s_given_t: LexicalTable
    pair_counts: Counter  # (source word, target word) -> count, NULL included

    def write(self, f2e_path: str | os.PathLike, e2f_path: str | os.PathLike) -> None:
        """Write Moses's ``lex.f2e`` (``e f w(e|f)``) and ``lex.e2f`` (``f e w(f|e)``), sorted for stability."""
        _write_lex_file(f2e_path, self.t_given_s, out_first=True)
        _write_lex_file(e2f_path, self.s_given_t, out_first=True)


def _write_lex_file(path, table: LexicalTable, out_first: bool) -> None:
    """One table as Moses's lex file: ``out given w`` lines (sorted by given word, then out word)."""
    n_out = len(table.out_vocab)
    given = table.keys // n_out
    out = table.keys % n_out
    with atomic_open(path, "w") as f:
        for g, o, p in zip(given.tolist(), out.tolist(), table.probs.tolist()):
            gw, ow = table.given_vocab[g], table.out_vocab[o]
            f.write(f"{ow} {gw} {p:.7f}\n" if out_first else f"{gw} {ow} {p:.7f}\n")


def lexical_tables(src: Sequence[Sequence[str]], tgt: Sequence[Sequence[str]],
                   alignments: Sequence[Sequence[tuple[int, int]]]) -> LexicalTables:
    """Estimate both word translation tables from an aligned corpus, as train-model.perl's get_lexical."""
    pairs: Counter = Counter()
    for s, t, pts in zip(src, tgt, alignments):
        s_al = [False] * len(s)
        t_al = [False] * len(t)
        for i, j in pts:
            s_al[i] = True
            t_al[j] = True
        pairs.update((s[i], t[j]) for i, j in pts)
        pairs.update((NULL, t[j]) for j in range(len(t)) if not t_al[j])
        pairs.update((s[i], NULL) for i in range(len(s)) if not s_al[i])
    total_s: Counter = Counter()
    total_t: Counter = Counter()
    for (sw, tw), c in pairs.items():
        total_s[sw] += c
        total_t[tw] += c
    s_vocab = sorted(total_s)
    t_vocab = sorted(total_t)
    s_id = {w: i for i, w in enumerate(s_vocab)}
    t_id = {w: i for i, w in enumerate(t_vocab)}
    items = list(pairs.items())
    si = np.fromiter((s_id[sw] for (sw, _), _ in items), dtype=np.int64, count=len(items))
    ti = np.fromiter((t_id[tw] for (_, tw), _ in items), dtype=np.int64, count=len(items))
    # probabilities rounded exactly as Perl's printf "%.7f" (the files Moses's scorer reads)
    p_t_s = np.array([float(f"{c / total_s[sw]:.7f}") for (sw, _), c in items], dtype=np.float64)
    p_s_t = np.array([float(f"{c / total_t[tw]:.7f}") for (_, tw), c in items], dtype=np.float64)

    def table(given_ids, given_vocab, out_ids, out_vocab, probs) -> LexicalTable:
        keys = given_ids * len(out_vocab) + out_ids
        order = np.argsort(keys, kind="stable")
        return LexicalTable(given_vocab, out_vocab, keys[order], probs[order])

    return LexicalTables(t_given_s=table(si, s_vocab, ti, t_vocab, p_t_s),
                         s_given_t=table(ti, t_vocab, si, s_vocab, p_s_t),
                         pair_counts=pairs)


# ----------------------------------------------------------------------------------------------
# Scoring


def _alignment_sort_key(align: str, inverse: bool = False) -> tuple:
    """Key ordering alignments of one phrase pair as Moses's ``std::vector<std::set<size_t>>`` compare.

    Target positions past the last aligned one are left off; for two alignments of the same target
    phrase this keeps the order (a missing trailing set compares like an empty one). ``inverse``: the
    vector indexed by source position, as ``score --Inverse`` builds it.
    """
    by_t: dict[int, list[int]] = {}
    for tok in align.split():
        s, t = tok.split("-")
        if inverse:  # Moses's inverse scoring sees the alignment from the source side
            s, t = t, s
        by_t.setdefault(int(t), []).append(int(s))
    if not by_t:
        return ()
    return tuple(tuple(sorted(by_t.get(j, ()))) for j in range(max(by_t) + 1))


@dataclass
class _BestPairs:
    """Distinct phrase pairs as integer codes into the unique source/target/alignment strings."""

    src: np.ndarray     # (P,) code into src_uniq
    tgt: np.ndarray     # (P,) code into tgt_uniq
    align: np.ndarray   # (P,) code into align_uniq: the pair's most frequent alignment (direct scoring's choice)
    align_inv: np.ndarray  # (P,) the same from the inverse side (differs only on ties); used for lex(s|t)
    count: np.ndarray   # (P,) c(s,t), int64
    src_uniq: pa.Array
    tgt_uniq: pa.Array
    align_uniq: pa.Array


def _best_pairs(counts: pd.DataFrame) -> _BestPairs:
    """Group (src, tgt, align) counts by (src, tgt) on integer codes: total count, most frequent alignment."""
    s_code, s_uniq = pd.factorize(counts["src"])
    t_code, t_uniq = pd.factorize(counts["tgt"])
    a_code, a_uniq = pd.factorize(counts["align"])
    a_list = list(a_uniq)
    a_rank = np.empty(len(a_list), dtype=np.int64)
    a_rank[sorted(range(len(a_list)), key=lambda i: _alignment_sort_key(a_list[i]))] = np.arange(len(a_list))
    a_rank_inv = np.empty(len(a_list), dtype=np.int64)
    a_rank_inv[sorted(range(len(a_list)), key=lambda i: _alignment_sort_key(a_list[i], inverse=True))] = \
        np.arange(len(a_list))
    cnt = counts["count"].to_numpy(np.int64)
    pair = s_code.astype(np.int64) * max(len(t_uniq), 1) + t_code
    # by pair; within a pair the highest count first, ties: the greatest alignment (Moses's choice)
    order = np.lexsort((-a_rank[a_code], -cnt, pair))
    ps = pair[order]
    starts = np.flatnonzero(np.r_[True, ps[1:] != ps[:-1]]) if len(ps) else np.zeros(0, dtype=np.int64)
    best = order[starts]
    # Moses scores each direction separately, each keeping its own most frequent alignment; the
    # groups (by pair) are the same, only the tie-break within a group differs
    best_inv = np.lexsort((-a_rank_inv[a_code], -cnt, pair))[starts]
    total = np.add.reduceat(cnt[order], starts) if len(ps) else np.zeros(0, dtype=np.int64)
    return _BestPairs(src=s_code[best].astype(np.int64), tgt=t_code[best].astype(np.int64),
                      align=a_code[best].astype(np.int64), align_inv=a_code[best_inv].astype(np.int64),
                      count=total.astype(np.int64),
                      src_uniq=_arrow_strings(pd.Series(s_uniq)), tgt_uniq=_arrow_strings(pd.Series(t_uniq)),
                      align_uniq=_arrow_strings(pd.Series(a_uniq)))


def best_alignments(counts: pd.DataFrame) -> pd.DataFrame:
    """One row per distinct (src, tgt): total count and the most frequent alignment (ties: the greatest).

    :param counts: columns src, tgt, align, count (one row per distinct triple).
    :returns: columns src, tgt, align, count.
    """
    b = _best_pairs(counts)
    return pd.DataFrame({"src": b.src_uniq.take(pa.array(b.src)).to_pylist(),
                         "tgt": b.tgt_uniq.take(pa.array(b.tgt)).to_pylist(),
                         "align": b.align_uniq.take(pa.array(b.align)).to_pylist(), "count": b.count})


def _byte_rank(strings: pa.Array, suffix: str) -> np.ndarray:
    """Rank of each string + suffix in byte order (LC_ALL=C)."""
    order = pc.sort_indices(pc.binary_join_element_wise(strings, pa.scalar(suffix), "")).to_numpy()
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank


def _tokens(arr: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """Split phrases on spaces: (flat tokens, offsets (N+1,) into them)."""
    lists = pc.split_pattern(arr, " ")
    lens = pc.list_value_length(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    offsets = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    return pc.list_flatten(lists), offsets


def _points(aligns: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Alignment strings "s-t s-t ..." as flat (pair index, source position, target position) arrays."""
    lists = pc.split_pattern(aligns, " ")
    pt_pair = pc.list_parent_indices(lists).to_numpy().astype(np.int64)
    st = pc.list_flatten(pc.split_pattern(pc.list_flatten(lists), "-")).cast(pa.int64()).to_numpy()
    return pt_pair, st[0::2], st[1::2]


def _lex_weights(out_ids: np.ndarray, out_off: np.ndarray, given_ids: np.ndarray, given_off: np.ndarray,
                 pt_pair: np.ndarray, pt_out: np.ndarray, pt_given: np.ndarray,
                 table: LexicalTable, null_id: int) -> np.ndarray:
    """lex(out|given) per phrase pair: product over out words of the mean w over aligned given words.

    out_ids (T,), out_off (N+1,): the "out" side's flat word ids and phrase offsets; same for "given".
    pt_pair, pt_out, pt_given (A,): alignment points as (pair index, out position, given position).
    """
    flat_out = out_off[pt_pair] + pt_out                     # (A,) index into out_ids
    w = table.lookup(given_ids[given_off[pt_pair] + pt_given], out_ids[flat_out])
    n_tok = len(out_ids)
    sums = np.bincount(flat_out, weights=w, minlength=n_tok)
    cnts = np.bincount(flat_out, minlength=n_tok)
    null_w = table.lookup(np.full(n_tok, null_id, dtype=np.int64), out_ids)
    per_tok = np.where(cnts > 0, sums / np.maximum(cnts, 1), null_w)
    return np.multiply.reduceat(per_tok, out_off[:-1])


def _arrow_strings(col: pd.Series) -> pa.Array:
    """A string column as an Arrow string array, without materializing Python str objects when pandas
    already stores it in Arrow."""
    arr = pa.array(col)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return arr.cast(pa.string())


def _as_printed(counts: np.ndarray) -> np.ndarray:
    """Counts as consolidate reads them back from the half tables, where they were printed with six
    significant digits: 1234567 becomes 1.23457e+06 (Moses's probabilities use these rounded counts)."""
    out = counts.copy()
    big = out >= 1e6
    if big.any():
        out[big] = [float(format_moses_float(x)) for x in out[big].tolist()]
    return out


@dataclass
class PhraseTableStats:
    """The shape of a written phrase table."""

    lines: int
    distinct_sources: int
    distinct_targets: int
    mean_targets_per_source: float
    mean_source_length: float
    mean_target_length: float

    def to_dict(self) -> dict:
        return asdict(self)


def score_phrase_table(counts: pd.DataFrame, lex: LexicalTables, path: str | os.PathLike,
                       chunk_size: int = 100_000, compresslevel: int = 6) -> PhraseTableStats:
    """Score counted phrase pairs and write the Moses phrase table (gzip when ``path`` ends in .gz).

    :param counts: columns src, tgt, align, count as from :func:`.extract.count_phrase_pairs`.
    :param lex: word translation tables from :func:`lexical_tables`.
    :returns: the table's shape.
    """
    b = _best_pairs(counts)
    c_s = np.bincount(b.src, weights=b.count, minlength=len(b.src_uniq))[b.src]      # (P,) c(s)
    c_t = np.bincount(b.tgt, weights=b.count, minlength=len(b.tgt_uniq))[b.tgt]      # (P,) c(t)
    # Moses sorts extract lines "src ||| tgt ||| align" bytewise, i.e. by "src |||" then "tgt |||"
    # (no token contains "|||"), so "a b" comes before "a" ('b' < '|').
    order = np.lexsort((_byte_rank(b.tgt_uniq, " |||")[b.tgt], _byte_rank(b.src_uniq, " |||")[b.src]))
    src_codes, tgt_codes, align_codes, align_inv_codes = b.src[order], b.tgt[order], b.align[order], b.align_inv[order]
    c_s, c_t, c_st = c_s[order], c_t[order], b.count[order].astype(np.float64)
    n = len(c_st)

    t_vocab = pa.array(lex.t_given_s.out_vocab, type=pa.string())
    s_vocab = pa.array(lex.t_given_s.given_vocab, type=pa.string())
    s_null = lex.t_given_s.given_vocab.index(NULL) if NULL in lex.t_given_s.given_vocab else -1
    t_null = lex.s_given_t.given_vocab.index(NULL) if NULL in lex.s_given_t.given_vocab else -1

    src_len_total = 0
    tgt_len_total = 0
    fmt = format_moses_float  # every number as Moses's score prints it (ostream, 6 significant digits)
    with atomic_open(path, "wb", compresslevel=compresslevel) as out, \
            progress.bar(total=n, desc="score", unit="pair") as bar:
        for lo in range(0, n, chunk_size):
            hi = min(lo + chunk_size, n)
            s_chunk = b.src_uniq.take(pa.array(src_codes[lo:hi]))
            t_chunk = b.tgt_uniq.take(pa.array(tgt_codes[lo:hi]))
            a_chunk = b.align_uniq.take(pa.array(align_codes[lo:hi]))
            s_tok, s_off = _tokens(s_chunk)
            t_tok, t_off = _tokens(t_chunk)
            s_ids = pc.index_in(s_tok, value_set=s_vocab).fill_null(-1).to_numpy().astype(np.int64)
            t_ids = pc.index_in(t_tok, value_set=t_vocab).fill_null(-1).to_numpy().astype(np.int64)
            pt_pair, pt_s, pt_t = _points(a_chunk)
            lex_t_s = _lex_weights(t_ids, t_off, s_ids, s_off, pt_pair, pt_t, pt_s, lex.t_given_s, s_null)
            if np.array_equal(align_codes[lo:hi], align_inv_codes[lo:hi]):
                ipt_pair, ipt_s, ipt_t = pt_pair, pt_s, pt_t
            else:
                ipt_pair, ipt_s, ipt_t = _points(b.align_uniq.take(pa.array(align_inv_codes[lo:hi])))
            lex_s_t = _lex_weights(s_ids, s_off, t_ids, t_off, ipt_pair, ipt_s, ipt_t, lex.s_given_t, t_null)
            # score computes lexical weights in double but hands them to MaybeLog as a float before printing
            lex_t_s = lex_t_s.astype(np.float32).astype(np.float64)
            lex_s_t = lex_s_t.astype(np.float32).astype(np.float64)
            cs, ct, cst = _as_printed(c_s[lo:hi]), _as_printed(c_t[lo:hi]), _as_printed(c_st[lo:hi])
            p_s_t = (cst.astype(np.float32) / ct.astype(np.float32)).astype(np.float64)
            p_t_s = (cst.astype(np.float32) / cs.astype(np.float32)).astype(np.float64)
            src_len_total += int(np.diff(s_off).sum())
            tgt_len_total += int(np.diff(t_off).sum())
            lines = [
                f"{s} ||| {t} ||| {fmt(a)} {fmt(b)} {fmt(c)} {fmt(d)} ||| {al} ||| "
                f"{fmt(e)} {fmt(f)} {fmt(g)} ||| |||\n"
                for s, t, a, b, c, d, al, e, f, g in zip(
                    s_chunk.to_pylist(), t_chunk.to_pylist(), p_s_t.tolist(), lex_s_t.tolist(),
                    p_t_s.tolist(), lex_t_s.tolist(), a_chunk.to_pylist(), ct.tolist(), cs.tolist(), cst.tolist())
            ]
            out.write("".join(lines).encode("utf-8"))
            bar.update(hi - lo)

    n_src = len(np.unique(src_codes))
    return PhraseTableStats(
        lines=n, distinct_sources=n_src, distinct_targets=len(np.unique(tgt_codes)),
        mean_targets_per_source=(n / n_src) if n_src else 0.0,
        mean_source_length=(src_len_total / n) if n else 0.0,
        mean_target_length=(tgt_len_total / n) if n else 0.0)


# ----------------------------------------------------------------------------------------------
# Lexicalized reordering table


def score_reordering_table(counts: pd.DataFrame, path: str | os.PathLike, smoothing: float = 0.5,
                           chunk_size: int = 100_000, compresslevel: int = 6) -> int:
    """Write the ``wbe-msd-bidirectional-fe`` reordering table as Moses's ``lexical-reordering-score``.

    Per distinct phrase pair (s, t), with c_o the number of its instances of orientation o (summed over
    the pair's alignments) and the constant smoothing ``createConstSmoothing(0.5)`` train-model.perl
    uses by default (``-reordering-smooth 0.5``, no ``--SmoothWithCounts``), each direction is::

        p(o | s, t) = (c_o + smoothing) / sum_o' (c_o' + smoothing)    o in mono, swap, other

    in double precision, summed in that order (``Model::score_fe`` in ``reordering_classes.cpp``). Each
    line is ``s ||| t ||| `` and the six values, backward then forward, printed as the C++ ostream
    prints a double (six significant digits, :func:`format_moses_float`) and separated by single
    spaces, as the ``lexical-reordering-score`` of Moses's ``OutputFileStream`` version writes them
    (older versions wrote ``"%f "``); lines in the phrase table's order (the scorer reads extract.o
    after an LC_ALL=C sort, which orders the pairs as the phrase table).

    :param counts: columns src, tgt, align and the six ``extract.ORIENTATION_COLUMNS`` (from
        :func:`.extract.count_phrase_pairs` with ``orientation=True``).
    :returns: the number of lines written.
    """
    from .extract import ORIENTATION_COLUMNS

    s_code, s_uniq = pd.factorize(counts["src"])
    t_code, t_uniq = pd.factorize(counts["tgt"])
    pair = s_code.astype(np.int64) * max(len(t_uniq), 1) + t_code
    pair_code, pair_uniq = pd.factorize(pair)
    n = len(pair_uniq)
    orient = counts[ORIENTATION_COLUMNS].to_numpy(np.int64)
    totals = np.stack([np.bincount(pair_code, weights=orient[:, j], minlength=n) for j in range(6)], axis=1) \
        if n else np.zeros((0, 6))
    totals = totals.astype(np.int64)
    ps, pt = pair_uniq // max(len(t_uniq), 1), pair_uniq % max(len(t_uniq), 1)
    src_arr, tgt_arr = _arrow_strings(pd.Series(s_uniq)), _arrow_strings(pd.Series(t_uniq))
    order = np.lexsort((_byte_rank(tgt_arr, " |||")[pt], _byte_rank(src_arr, " |||")[ps])) if n else \
        np.zeros(0, dtype=np.int64)
    ps, pt, totals = ps[order], pt[order], totals[order]

    # few distinct count triples: format each one once
    texts = []
    for d in (0, 3):
        c3 = totals[:, d:d + 3]
        base = int(c3.max()) + 1 if n else 1
        if base ** 3 < 2 ** 63:  # one int64 key per triple: a hash factorize, not a row sort
            inverse, keys = pd.factorize(c3[:, 0] * base * base + c3[:, 1] * base + c3[:, 2])
            triples = np.stack([keys // (base * base), keys // base % base, keys % base], axis=1)
        else:
            triples, inverse = np.unique(c3, axis=0, return_inverse=True)
        strings = []
        for c in triples.tolist():
            x = [float(v) + smoothing for v in c]
            total = x[0] + x[1] + x[2]
            strings.append(" ".join(format_moses_float(v / total) for v in x))
        texts.append(np.asarray(strings, dtype=object)[inverse.reshape(-1)] if len(strings) else
                     np.zeros(0, dtype=object))
    backward, forward = texts
    with atomic_open(path, "wb", compresslevel=compresslevel) as out, \
            progress.bar(total=n, desc="reordering", unit="pair") as bar:
        for lo in range(0, n, chunk_size):
            hi = min(lo + chunk_size, n)
            s_chunk = src_arr.take(pa.array(ps[lo:hi])).to_pylist()
            t_chunk = tgt_arr.take(pa.array(pt[lo:hi])).to_pylist()
            out.write("".join(f"{s} ||| {t} ||| {b} {f}\n" for s, t, b, f in zip(
                s_chunk, t_chunk, backward[lo:hi].tolist(), forward[lo:hi].tolist())).encode("utf-8"))
            bar.update(hi - lo)
    return n

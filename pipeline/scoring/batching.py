"""A chunk of phrase pairs as the scorer wants it: unique sources, pairs pointing at them, and
length-bucketed, padded, token-sized batches built with numpy (no per-pair Python in the batcher).

Moses tables are sorted by source phrase, so most sources repeat on consecutive lines; deduplicating
through a dict also handles unsorted tables. Every id sequence ends with ``<eos>`` (id 0), as in
:mod:`pipeline.pairs`.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from ..vocab import EOS_ID, UNK_ID


@dataclass
class ChunkPairs:
    """The scorable pairs of one chunk.

    ``src`` holds each distinct source once (ids ending in eos); pair ``k`` is
    (``src[pair_src[k]]``, ``tgt[k]``) and sits on the chunk's line ``pair_line[k]`` (0-based).
    ``n_unk[k]`` counts its words outside the shortlists (source side + target side).
    """

    src: list[list[int]] = field(default_factory=list)
    pair_src: list[int] = field(default_factory=list)
    tgt: list[list[int]] = field(default_factory=list)
    pair_line: list[int] = field(default_factory=list)
    n_unk: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.tgt)


class PairCollector:
    """Turns (source, target) phrase strings into :class:`ChunkPairs`, encoding each source once."""

    def __init__(self, vocabs):
        self.src_vocab = vocabs.source
        self.tgt_vocab = vocabs.target
        self.reset()

    def reset(self) -> ChunkPairs:
        """Start a new chunk; returns the finished one."""
        done = getattr(self, "pairs", None)
        self.pairs = ChunkPairs()
        self._src_index: dict[str, int] = {}
        self._src_unk: list[int] = []
        self._last_src: str | None = None
        self._last_row = -1
        return done

    def add(self, line: int, source: str, target: str) -> None:
        """Add the pair on chunk line ``line`` (0-based)."""
        p = self.pairs
        if source == self._last_src:        # the sorted-table fast path
            row = self._last_row
        else:
            row = self._src_index.get(source)
            if row is None:
                ids = self.src_vocab.encode(source.split())
                row = len(p.src)
                self._src_index[source] = row
                self._src_unk.append(ids.count(UNK_ID))
                ids.append(EOS_ID)
                p.src.append(ids)
            self._last_src, self._last_row = source, row
        t = self.tgt_vocab.encode(target.split())
        p.n_unk.append(self._src_unk[row] + t.count(UNK_ID))
        t.append(EOS_ID)
        p.tgt.append(t)
        p.pair_src.append(row)
        p.pair_line.append(line)


def lengths_of(seqs: list[list[int]]) -> np.ndarray:
    """(n,) int64 lengths of a list of id sequences."""
    return np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))


def pad(seqs: list[list[int]], index: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Rows ``index`` of ``seqs`` as an (n, max_len) int64 array padded with eos (id 0)."""
    lens = lengths[index]
    width = int(lens.max())
    flat = np.fromiter(itertools.chain.from_iterable(seqs[i] for i in index.tolist()), dtype=np.int64,
                       count=int(lens.sum()))
    out = np.zeros((len(index), width), dtype=np.int64)
    out[np.arange(width)[None, :] < lens[:, None]] = flat  # row-major fill matches the concatenation
    return out


def length_batches(lengths: np.ndarray, max_tokens: int, min_rows: int = 64) -> list[np.ndarray]:
    """Group indices by length into batches of at most ``max_tokens`` padded tokens.

    Indices are sorted by length (stable). Each length's group is cut into batches of
    ``max_tokens // length`` rows, so a batch normally holds ONE length (no padding, no mask); a
    group smaller than ``min_rows`` is merged into the next longer length's batch instead of forming a
    tiny batch of its own (padding it, under a mask). A single row longer than ``max_tokens`` still
    forms a batch.
    """
    order = np.argsort(lengths, kind="stable")
    sorted_lens = lengths[order]
    values, starts = np.unique(sorted_lens, return_index=True)
    bounds = list(starts.tolist()) + [len(order)]
    batches: list[np.ndarray] = []
    carry_from = None                                   # start of small groups waiting to merge
    for k, L in enumerate(values.tolist()):
        lo, hi = bounds[k], bounds[k + 1]
        if carry_from is not None:
            lo = carry_from
        if hi - lo < min_rows and k + 1 < len(values):
            carry_from = lo                             # too few rows: ride with the next length
            continue
        carry_from = None
        rows = max(1, max_tokens // int(L))             # L is the longest in [lo, hi)
        for a in range(lo, hi, rows):
            batches.append(order[a:min(hi, a + rows)])
    return batches


@dataclass
class PrefixLevels:
    """The distinct prefixes of a set of sequences, level by level (a trie, breadth first).

    Level d (0-based) holds the distinct prefixes of length d+1: ``tokens[d]`` their last token and
    ``parents[d]`` the index of their length-d prefix in level d-1 (-1 at level 0: the empty prefix).
    Sequence i ends at level ``end_level[i]``, position ``end_pos[i]``.
    """

    tokens: list[np.ndarray]
    parents: list[np.ndarray]
    end_level: np.ndarray
    end_pos: np.ndarray

    @property
    def n_nodes(self) -> int:
        return sum(len(t) for t in self.tokens)


def prefix_levels(seqs: list[list[int]]) -> PrefixLevels:
    """Build :class:`PrefixLevels` for ``seqs`` (one dict lookup per token, in the batcher, not the model).

    Sorted phrase tables put sources that share a prefix next to each other ("das", "das haus",
    "das haus ist"): the encoder state after a prefix depends only on the prefix, so it is computed once.
    """
    index: list[dict] = []        # per level: (parent position, token) -> position
    toks: list[list[int]] = []
    pars: list[list[int]] = []
    end_level = np.empty(len(seqs), dtype=np.int64)
    end_pos = np.empty(len(seqs), dtype=np.int64)
    for i, seq in enumerate(seqs):
        parent = -1
        for d, tok in enumerate(seq):
            if d == len(index):
                index.append({})
                toks.append([])
                pars.append([])
            key = (parent, tok)
            pos = index[d].get(key)
            if pos is None:
                pos = len(toks[d])
                index[d][key] = pos
                toks[d].append(tok)
                pars[d].append(parent)
            parent = pos
        end_level[i] = len(seq) - 1
        end_pos[i] = parent
    return PrefixLevels([np.asarray(t, dtype=np.int64) for t in toks], [np.asarray(p, dtype=np.int64) for p in pars],
                        end_level, end_pos)

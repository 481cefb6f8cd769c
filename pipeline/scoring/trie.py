"""Prefix tries over id sequences, built with numpy: the scorer's unit of shared work.

A GRU's state after reading a prefix depends only on that prefix and on where it started: the zero
state in the encoder, the source's summary c in the decoder. So a set of sequences hanging off
*roots* needs one GRU step per distinct (root, prefix), not one per token:

* encoder: one root for all sources -- a sorted table puts "das", "das haus", "das haus ist" next to
  each other, and they share their first steps;
* decoder: one root per source, sequences ``<bos> y_1 ... y_{T-1}`` -- every target of a source shares
  the first step (and its softmax normaliser), and targets that start alike ("la maison",
  "la maison de") share more.

Nodes are numbered level by level (level d = prefixes of length d+1), and within a level in the
order of (root, tokens), so a level is a contiguous id range, its nodes are sorted by root, and
each node's parent lies in the previous level. No padding, no masks: level d holds exactly the
sequences longer than d.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class PrefixTrie:
    """The distinct (root, prefix) nodes of ``n`` sequences.

    Level d's nodes have ids ``starts[d]:starts[d+1]``; node i reads ``token[i]`` after ``parent[i]``
    (a node id of level d-1; at level 0, the root's id) and belongs to ``root[i]``. Sequence k passes
    node ``path[k, d]`` at level d for d < ``lengths[k]`` (-1 beyond).
    """

    starts: np.ndarray     # (levels+1,)
    token: np.ndarray      # (n_nodes,)
    parent: np.ndarray     # (n_nodes,)
    root: np.ndarray       # (n_nodes,)
    path: np.ndarray       # (n, levels)
    lengths: np.ndarray    # (n,)

    @property
    def n_nodes(self) -> int:
        return int(self.starts[-1])

    @property
    def n_levels(self) -> int:
        return len(self.starts) - 1

    def level(self, d: int) -> slice:
        return slice(int(self.starts[d]), int(self.starts[d + 1]))


def build_trie(ids: np.ndarray, lengths: np.ndarray, roots: np.ndarray | None = None) -> PrefixTrie:
    """The :class:`PrefixTrie` of the rows of ``ids`` (n, L) int64, row k holding ``lengths[k]`` >= 1
    tokens (>= 0; what lies beyond is ignored), row k hanging off root ``roots[k]`` (default: all 0).

    Vectorised: one lexicographic sort of the rows, then a row starts a new node at level d when its
    (root, first d+1 tokens) differ from the previous sorted row's.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    n = len(lengths)
    roots = np.zeros(n, dtype=np.int64) if roots is None else np.asarray(roots, dtype=np.int64)
    L = int(lengths.max()) if n else 0
    m = np.where(np.arange(L)[None, :] < lengths[:, None], ids[:, :L], -1)  # -1: past the end
    order = np.lexsort(tuple(m[:, d] for d in reversed(range(L))) + (roots,))  # last key sorts first
    m, r = m[order], roots[order]
    differs = np.ones((n, L), dtype=bool)
    differs[1:] = m[1:] != m[:-1]
    differs[1:, 0] |= r[1:] != r[:-1]
    np.logical_or.accumulate(differs, axis=1, out=differs)       # a differing prefix stays different
    exists = m >= 0
    new = differs & exists                                        # rows that open a node at level d
    starts = np.zeros(L + 1, dtype=np.int64)
    np.cumsum(new.sum(0), out=starts[1:])
    node = np.cumsum(new, axis=0) - 1 + starts[:-1]               # (n, L): a row's node at each level
    node[~exists] = -1
    level, row = np.nonzero(new.T)                                # in node-id order: level, then row
    parent = np.where(level == 0, r[row], node[row, np.maximum(level - 1, 0)])
    path = np.empty_like(node)
    path[order] = node
    return PrefixTrie(starts, m[row, level], parent, r[row], path, lengths)

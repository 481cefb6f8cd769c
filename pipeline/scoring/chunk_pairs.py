"""A chunk of phrase pairs as the scorer wants it: each distinct source once, pairs pointing at them,
all ids in flat arrays (:class:`~phrase_rescore.pipeline.pairs.RaggedIds`).

Moses tables are sorted by source phrase, so most sources repeat on consecutive lines; deduplicating
through a dict also handles unsorted tables. Per line the collector only keeps strings; each chunk's
words are encoded at once with pyarrow (:func:`phrase_rescore.pipeline.vocab.encode_phrases`, the encoding ``prepare``
used for training). Every id sequence ends with ``<eos>`` (id 0).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..pairs import RaggedIds
from ..vocab import encode_phrases


@dataclass
class ChunkPairs:
    """The scorable pairs of one chunk.

    ``src`` holds each distinct source once; pair ``k`` is (``src[pair_src[k]]``, ``tgt[k]``) and sits
    on the chunk's line ``pair_line[k]`` (0-based). ``n_unk[k]`` counts its words outside the
    shortlists (source side + target side); ``rare_log_share[k]``, when the scorer shares ``<unk>`` out
    among the rare words (:mod:`phrase_rescore.pipeline.rare_words`), is what its target's rare words add to
    its log p.
    """

    src: RaggedIds
    tgt: RaggedIds
    pair_src: np.ndarray      # (n,) int64
    pair_line: np.ndarray     # (n,) int64
    n_unk: np.ndarray         # (n,) int64
    rare_log_share: np.ndarray | None = None   # (n,) float64

    def __len__(self) -> int:
        return len(self.pair_src)

    @classmethod
    def from_lists(cls, src: list, pair_src: list, tgt: list, pair_line=None, n_unk=None) -> "ChunkPairs":
        """From id lists (each ending in eos); lines default to 0..n-1, unknown counts to 0."""
        n = len(tgt)
        return cls(RaggedIds.from_lists(src), RaggedIds.from_lists(tgt), np.asarray(pair_src, dtype=np.int64),
                   np.arange(n, dtype=np.int64) if pair_line is None else np.asarray(pair_line, dtype=np.int64),
                   np.zeros(n, dtype=np.int64) if n_unk is None else np.asarray(n_unk, dtype=np.int64))


class PairCollector:
    """Collects (source, target) phrase strings into :class:`ChunkPairs`, each source once; with
    ``shares`` (:class:`~phrase_rescore.pipeline.rare_words.RareWordShares`) each pair's rare-word log share too."""

    def __init__(self, vocabs, shares=None):
        self.vocabs, self.shares = vocabs, shares
        self._start()

    def _start(self) -> None:
        self._sources: list[str] = []
        self._src_index: dict[str, int] = {}
        self._targets: list[str] = []
        self._pair_src: list[int] = []
        self._pair_line: list[int] = []
        self._last_src: str | None = None
        self._last_row = -1

    def add(self, line: int, source: str, target: str) -> None:
        """Add the pair on chunk line ``line`` (0-based)."""
        if source != self._last_src:        # a sorted table repeats the source on the next line
            row = self._src_index.get(source)
            if row is None:
                row = self._src_index[source] = len(self._sources)
                self._sources.append(source)
            self._last_src, self._last_row = source, row
        self._pair_src.append(self._last_row)
        self._targets.append(target)
        self._pair_line.append(line)

    def reset(self) -> ChunkPairs:
        """The chunk collected so far, encoded; the collector starts a new one."""
        src, src_unk = encode_phrases(pa.array(self._sources, pa.string()), self.vocabs.source)
        targets = pa.array(self._targets, pa.string())
        tgt, tgt_unk = encode_phrases(targets, self.vocabs.target)
        pair_src = np.asarray(self._pair_src, dtype=np.int64)
        done = ChunkPairs(RaggedIds.from_arrow(src), RaggedIds.from_arrow(tgt), pair_src,
                          np.asarray(self._pair_line, dtype=np.int64),
                          (src_unk[pair_src] + tgt_unk).astype(np.int64),
                          None if self.shares is None else self.shares.phrase_log_shares(targets, tgt))
        self._start()
        return done

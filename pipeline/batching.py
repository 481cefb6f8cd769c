"""Sampling and batching phrase pairs: uniform sampling over unique pairs, padding, length grouping."""
from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np
import torch

from .vocab import EOS_ID


class UniformSampler:
    """Batches of pair indices, uniform over unique pairs (the paper's section 3.1: corpus counts ignored).

    Each epoch is a fresh permutation of ``range(n)`` drawn from ``(seed, epoch)``, so every unique pair
    is seen once per epoch with equal probability, and the state is two integers: ``state_dict()`` after
    k batches and ``load_state_dict`` continue with exactly the batches an uninterrupted run would draw.
    The permutation is the one thing held per pair: 4 bytes each (400 MB for 10^8 pairs).
    The iterator is endless; the trainer decides when to stop.
    """

    def __init__(self, n: int, batch_size: int, seed: int):
        if n < 1:
            raise ValueError("cannot sample from an empty pair set")
        self.n, self.batch_size, self.seed = n, batch_size, seed
        self.epoch, self.pos = 0, 0
        self._perm = None

    def _permutation(self) -> np.ndarray:
        if self._perm is None:
            # Generator.permutation(n), shuffled in 4-byte items while n allows: the same permutation
            # (the shuffle's draws do not depend on the item type) in half the memory
            self._perm = np.arange(self.n, dtype=np.int32 if self.n < 2 ** 31 else np.int64)
            np.random.default_rng([self.seed, self.epoch]).shuffle(self._perm)
        return self._perm

    def __iter__(self) -> Iterator[np.ndarray]:
        return self

    def __next__(self) -> np.ndarray:
        out = []
        need = self.batch_size
        while need:
            perm = self._permutation()
            take = perm[self.pos:self.pos + need]
            out.append(take)
            need -= len(take)
            self.pos += len(take)
            if self.pos >= self.n:
                self.epoch, self.pos, self._perm = self.epoch + 1, 0, None
        return np.concatenate(out).astype(np.int64)

    def state_dict(self) -> dict:
        return {"seed": self.seed, "epoch": self.epoch, "pos": self.pos}

    def load_state_dict(self, state: dict) -> None:
        assert state["seed"] == self.seed, "resuming with a different sampler seed"
        self.epoch, self.pos, self._perm = int(state["epoch"]), int(state["pos"]), None


def pad_batch(seqs: Sequence[np.ndarray], pad_id: int = EOS_ID, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack variable-length id sequences into ``(ids (B, T) long, mask (B, T) bool)``; True marks real tokens."""
    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    T = int(lengths.max()) if len(seqs) else 0
    ids = np.full((len(seqs), T), pad_id, dtype=np.int64)
    mask = np.arange(T)[None, :] < lengths[:, None]
    if len(seqs):
        ids[mask] = np.concatenate(seqs)
    return torch.from_numpy(ids).to(device), torch.from_numpy(mask).to(device)


def length_batches(lengths: np.ndarray, max_tokens: int, max_batch: int | None = None,
                   seed: int | None = None) -> list[np.ndarray]:
    """Group indices by length into batches whose padded size ``count * max_len`` stays within ``max_tokens``.

    ``lengths`` may be (N,) or (N, k) (e.g. source and target lengths; sorted by all columns, padded
    size taken on their sum). Batches come out shortest first, or shuffled when ``seed`` is given.
    """
    lengths = np.asarray(lengths)
    keys = lengths if lengths.ndim == 2 else lengths[:, None]
    cost = keys.sum(axis=1)
    # sort by padded cost first so the longest item of a batch is its last one
    order = np.lexsort(tuple(keys[:, i] for i in reversed(range(keys.shape[1]))) + (cost,))
    cost = cost[order]
    batches, start, n = [], 0, len(order)
    while start < n:
        count = max(1, max_tokens // max(1, int(cost[start])))
        if max_batch:
            count = min(count, max_batch)
        end = min(n, start + count)
        while end - start > 1 and int(cost[end - 1]) * (end - start) > max_tokens:
            end = start + max(1, max_tokens // int(cost[end - 1]))
        batches.append(order[start:end])
        start = end
    if seed is not None:
        rng = np.random.default_rng(seed)
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return batches

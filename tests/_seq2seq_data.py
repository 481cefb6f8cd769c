"""Parallel files of a toy task (reverse the words) for the Seq2Seq tests."""
from __future__ import annotations

import numpy as np


def write_reverse_task(dir, n, seed, reverse_task=True):
    """``n`` pairs of 1-4 words, the target the source reversed (or the same with ``reverse_task=False``);
    returns the two paths."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(5)]
    src, tgt = [], []
    for _ in range(n):
        x = list(rng.choice(words, rng.integers(1, 5)))
        src.append(" ".join(x))
        tgt.append(" ".join(x[::-1] if reverse_task else x))
    (dir / f"s{seed}.txt").write_text("\n".join(src) + "\n")
    (dir / f"t{seed}.txt").write_text("\n".join(tgt) + "\n")
    return str(dir / f"s{seed}.txt"), str(dir / f"t{seed}.txt")

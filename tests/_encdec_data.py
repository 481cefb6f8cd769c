"""Small learnable data for the RNN Encoder-Decoder tests: a word-for-word phrase table, sentence files."""
from __future__ import annotations

import random

TINY = dict(emb_dim=16, hidden_dim=32, maxout_units=16, rank=16)


def make_learnable_table(path, n_pairs=600, n_words=30, seed=0):
    """Word-for-word 'translations' s_i -> t_(7i+3 mod 30), 1-4 words: learnable, far from unigram."""
    r = random.Random(seed)
    lines = set()
    while len(lines) < n_pairs:
        src = [r.randrange(n_words) for _ in range(r.randint(1, 4))]
        tgt = [(7 * w + 3) % n_words for w in src]
        lines.add(f"{' '.join(f's{w}' for w in src)} ||| {' '.join(f't{w}' for w in tgt)} ||| 0.1 0.2 0.3 0.4\n")
    path.write_text("".join(sorted(lines)))


def write_sentences(path, n, seed):
    """``n`` lines of 1-4 words of a 5-word vocabulary at ``path``; returns the path."""
    r = random.Random(seed)
    lines = [" ".join(f"w{r.randrange(5)}" for _ in range(r.randint(1, 4))) for _ in range(n)]
    path.write_text("\n".join(lines) + "\n")
    return str(path)

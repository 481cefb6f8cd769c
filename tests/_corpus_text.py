"""Generated tokenized text for the corpus-scale tests of train-cslm and train-seq2seq."""
import random


def write_text(path, n_lines, seed=0, n_words=40, max_len=9):
    """``n_lines`` lines of 0 to ``max_len`` words drawn from ``n_words`` types (skewed towards the first),
    a few of them empty; returns ``path``."""
    r = random.Random(seed)
    words = [f"w{i}" for i in range(n_words)]
    weights = [1.0 / (i + 1) for i in range(n_words)]
    with open(path, "w") as f:
        for _ in range(n_lines):
            f.write(" ".join(r.choices(words, weights, k=r.randint(0, max_len))) + "\n")
    return path

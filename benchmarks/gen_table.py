"""Generate a synthetic Moses phrase table with the shape of a real one, for benchmarks.

The shape follows measurements of a real Moses table (a 29k-sentence corpus:
818,142 lines, 662,056 distinct sources): about 1.24 targets per source with a power-law tail that
reaches a few hundred, phrases of 1-7 words with means near 4.3 (source) and 4.6 (target), four scores,
an alignment field, a counts field and Moses's trailing ``||| |||``, lines sorted in byte order as
Moses's ``LC_ALL=C sort`` leaves them (so each source's lines are contiguous).

Words are drawn from a Zipfian vocabulary of 40,000 made-up words per side, so a 15,000-word shortlist
leaves a realistic share of unknown words. The output is a deterministic function of
``(n_lines, seed)``.

Library use: ``generate_table(path, n_lines, seed)``; command line:
``python benchmarks/gen_table.py OUT.gz --lines 200000 --seed 1``.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

try:  # write atomically through the project's helper when it is installed
    from phrase_rescore.core.atomic_write import atomic_open
except ImportError:  # pragma: no cover - the benchmark scripts run inside the project
    atomic_open = None

MAX_TARGETS = 400          # the longest tail seen in the real table
TAIL_EXPONENT = 3.3        # P(k targets) ~ k^-a over 1..MAX_TARGETS; gives a mean of about 1.24
SRC_LEN_P = np.array([0.14, 0.16, 0.15, 0.15, 0.14, 0.13, 0.13])  # lengths 1..7, mean about 4.3
TGT_LEN_DELTA = np.array([-1, 0, 1, 2])                               # target = source + delta, clipped
TGT_LEN_DELTA_P = np.array([0.18, 0.36, 0.28, 0.18])                  # mean target length about 4.6
VOCAB_SIZE = 40_000
ZIPF_S = 1.05

_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"] + ["qu", "ch", "sh", "th"]


def _make_words(rng: np.random.Generator, n: int, suffix: str) -> list[str]:
    """``n`` distinct made-up words (2-4 syllables plus a side marker), in a random order."""
    words, seen = [], set()
    syl = np.array(_SYLLABLES)
    while len(words) < n:
        k = rng.integers(2, 5, size=n)
        parts = rng.integers(0, len(syl), size=(n, 4))
        for i in range(n):
            w = "".join(syl[parts[i, : k[i]]]) + suffix
            if w not in seen:
                seen.add(w)
                words.append(w)
                if len(words) == n:
                    break
    return words


def _zipf_sampler(rng: np.random.Generator, n: int):
    p = 1.0 / np.arange(1, n + 1) ** ZIPF_S
    cdf = np.cumsum(p / p.sum())
    return lambda size: np.minimum(np.searchsorted(cdf, rng.random(size)), n - 1)


def _targets_per_source(rng: np.random.Generator, size: int) -> np.ndarray:
    k = np.arange(1, MAX_TARGETS + 1)
    p = k ** -TAIL_EXPONENT
    cdf = np.cumsum(p / p.sum())
    return np.searchsorted(cdf, rng.random(size)) + 1


def _score_text(rng: np.random.Generator, n: int) -> list[str]:
    # four probabilities in (0, 1], log-uniform like real relative frequencies and lexical weights
    vals = np.exp(-rng.exponential(2.5, size=(n, 4)))
    return [" ".join(f"{v:.6g}" for v in row) for row in vals]


def generate_lines(n_lines: int, seed: int) -> list[bytes]:
    """The table's lines (each ending in ``\\n``), sorted in byte order; deterministic in ``seed``."""
    rng = np.random.default_rng(seed)
    src_words = _make_words(rng, VOCAB_SIZE, "")
    tgt_words = _make_words(rng, VOCAB_SIZE, "e")
    draw_src, draw_tgt = _zipf_sampler(rng, VOCAB_SIZE), _zipf_sampler(rng, VOCAB_SIZE)

    # distinct sources, each with its targets, until the lines cover n_lines
    seen_src: set[str] = set()
    lines: list[bytes] = []
    while len(lines) < n_lines:
        m = max(1024, int((n_lines - len(lines)) / 1.2))
        lens = rng.choice(np.arange(1, 8), size=m, p=SRC_LEN_P)
        ids = draw_src(int(lens.sum()))
        n_targets = _targets_per_source(rng, m)
        pos = 0
        for L, c in zip(lens.tolist(), n_targets.tolist()):
            phrase = " ".join(src_words[i] for i in ids[pos: pos + L])
            pos += L
            if phrase in seen_src:
                continue
            seen_src.add(phrase)
            lines.extend(_source_lines(rng, phrase, L, c, tgt_words, draw_tgt))
            if len(lines) >= n_lines:
                break
    lines.sort()  # LC_ALL=C sort on whole lines, as Moses's training leaves the table
    return lines[:n_lines]


def _source_lines(rng, phrase: str, L: int, c: int, tgt_words, draw_tgt) -> list[bytes]:
    """Up to ``c`` lines for one source phrase of ``L`` words (duplicate targets are dropped)."""
    tl = np.clip(L + rng.choice(TGT_LEN_DELTA, size=c, p=TGT_LEN_DELTA_P), 1, 7)
    ids = draw_tgt(int(tl.sum()))
    scores = _score_text(rng, c)
    counts = rng.integers(1, 50, size=(c, 2)).tolist()
    out, targets, pos = [], set(), 0
    for j, n in enumerate(tl.tolist()):
        t = " ".join(tgt_words[i] for i in ids[pos: pos + n])
        pos += n
        if t in targets:
            continue
        targets.add(t)
        # a monotone-ish alignment: each target word linked to a nearby source word
        align = " ".join(f"{min(L - 1, (k * L) // n)}-{k}" for k in range(n))
        cs, ct = counts[j]
        out.append(f"{phrase} ||| {t} ||| {scores[j]} ||| {align} ||| {cs + ct} {cs + ct // 2} {min(cs, ct)} ||| |||\n"
                   .encode("utf-8"))
    return out


def generate_table(path: str | os.PathLike, n_lines: int, seed: int = 1) -> dict:
    """Write a realistic synthetic phrase table of ``n_lines`` lines to ``path`` (gzip when it ends .gz).

    :returns: shape statistics: ``lines``, ``sources``, ``targets_per_source`` (mean), ``max_targets``,
        ``src_len_mean``, ``tgt_len_mean``.
    """
    lines = generate_lines(n_lines, seed)
    if atomic_open is not None:
        with atomic_open(path, "wb") as f:
            f.writelines(lines)
    else:  # pragma: no cover
        import gzip
        opener = gzip.open if os.fspath(path).endswith(".gz") else open
        with opener(path, "wb") as f:
            f.writelines(lines)
    return table_stats(lines)


def table_stats(lines: list[bytes]) -> dict:
    """Shape statistics of a list of phrase-table lines."""
    n_src, max_t, run, prev = 0, 0, 0, None
    src_words = tgt_words = 0
    for line in lines:
        s, t, _ = line.split(b" ||| ", 2)
        src_words += s.count(b" ") + 1
        tgt_words += t.count(b" ") + 1
        if s != prev:
            n_src += 1
            prev, run = s, 0
        run += 1
        max_t = max(max_t, run)
    n = max(1, len(lines))
    return {"lines": len(lines), "sources": n_src, "targets_per_source": len(lines) / max(1, n_src),
            "max_targets": max_t, "src_len_mean": src_words / n, "tgt_len_mean": tgt_words / n}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="output phrase table (.gz for gzip)")
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    stats = generate_table(args.out, args.lines, args.seed)
    print(" ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in stats.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A dev n-best list with a known answer, for the re-ranking tuners.

Every sentence's hypotheses are its reference and corrupted copies of it; ``CSLM0`` is minus the number of
corrupted words (plus a little noise), ``LM0`` and the translation model are noise that the starting weights
(:data:`START`) trust, so that the start re-ranks badly and a weight on CSLM0 re-ranks (nearly) every
reference first.
"""
from __future__ import annotations

import random
from pathlib import Path

VOCAB = [f"w{i}" for i in range(40)]


START = {"LM0": [1.0], "WordPenalty0": [0.0], "TranslationModel0": [0.3, 0.3], "CSLM0": [0.0]}


def write_dev(folder: Path, n_sent: int = 24, n_hyp: int = 8, seed: int = 3, skip: tuple[int, ...] = ()
              ) -> tuple[Path, Path]:
    """The dev n-best list and references described above; sentences in ``skip`` get no
    hypothesis."""
    rng = random.Random(seed)
    refs, lines = [], []
    for sid in range(n_sent):
        ref = [rng.choice(VOCAB) for _ in range(rng.randint(6, 12))]
        refs.append(" ".join(ref))
        if sid in skip:
            continue
        hyps = [(list(ref), 0)]
        while len(hyps) < n_hyp:
            h, errors = list(ref), rng.randint(1, 4)
            for i in rng.sample(range(len(h)), errors):
                h[i] = rng.choice(VOCAB)
            if rng.random() < 0.3:
                h.pop()
                errors += 1
            hyps.append((h, errors))
        rng.shuffle(hyps)
        for h, errors in hyps:
            feats = (f"LM0= {rng.uniform(-30, -10):.4f} WordPenalty0= {-len(h)} "
                     f"TranslationModel0= {rng.uniform(-5, 0):.4f} {rng.uniform(-5, 0):.4f} "
                     f"CSLM0= {-errors - rng.uniform(0, 0.3):.4f}")
            lines.append(f"{sid} ||| {' '.join(h)} ||| {feats} ||| 0\n")
    nbest, ref_path = folder / "dev.nbest", folder / "dev.ref"
    nbest.write_text("".join(lines), encoding="utf-8")
    ref_path.write_text("".join(r + "\n" for r in refs), encoding="utf-8")
    return nbest, ref_path

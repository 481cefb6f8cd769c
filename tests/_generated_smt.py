"""A generated phrase-based system for the decoder tests, from a fixed seed.

A phrase table with up to 25 targets per source phrase (so that table-limit pruning bites), optionally a
lexicalized reordering table that lacks some pairs, a KN trigram LM estimated by
:func:`~phrase_rescore.moses_integration.embedded.lm.train_lm`, and 15 input sentences with unknown words
and an empty line.
"""
from __future__ import annotations

import gzip
import os
import random

from phrase_rescore.moses_integration.embedded.lm import LMConfig, train_lm

SEED = 20141

INI = """[input-factors]
0

[mapping]
0 T 0

[distortion-limit]
6

[feature]
UnknownWordPenalty
WordPenalty
PhrasePenalty
PhraseDictionaryMemory name=TranslationModel0 num-features=4 path={pt} input-factor=0 output-factor=0 table-limit=20
{lr}Distortion
KENLM name=LM0 factor=0 path={lm} order=3

[weight]
UnknownWordPenalty0= 1
WordPenalty0= -0.7
PhrasePenalty0= 0.3
TranslationModel0= 0.2 0.1 0.25 0.05
{lrw}Distortion0= 0.3
LM0= {lm_weight}
"""
LR = ("LexicalReordering name=LexicalReordering0 num-features={n} type={type} "
      "input-factor=0 output-factor=0 path={rt}\n")
LR_WEIGHTS = (0.3, 0.1, 0.2, 0.25, 0.05, 0.15)
#: the LexicalReordering types the tests use, with their number of features
LR_TYPES = {"wbe-msd-bidirectional-fe-allff": 6, "msd-backward-fe": 3, "monotonicity-forward-fe": 2}


def _sentence(rng, vocab, lo, hi):
    return [rng.choice(vocab) for _ in range(rng.randint(lo, hi))]


def make_system(root, lr_type: str | None = "wbe-msd-bidirectional-fe-allff", lm_weight: float = 0.5):
    """Write the system under ``root`` (``lr_type`` None: distance reordering only); return (moses.ini path,
    input sentences)."""
    rng = random.Random(SEED)
    src_vocab = [f"s{i}" for i in range(40)]
    tgt_vocab = [f"t{i}" for i in range(50)]
    sources = set()
    corpus = [_sentence(rng, src_vocab, 3, 12) for _ in range(60)]
    for s in corpus:
        for i in range(len(s)):
            for k in range(1, 4):
                if i + k <= len(s) and rng.random() < 0.7:
                    sources.add(" ".join(s[i:i + k]))
    n_lr = LR_TYPES[lr_type] if lr_type else 0
    pt_lines, rt_lines = [], []
    for src in sorted(sources):
        n = len(src.split())
        targets = set()
        for _ in range(rng.choice([1, 2, 3, 5, 8, 25])):
            targets.add(" ".join(rng.choice(tgt_vocab) for _ in range(max(1, n + rng.randint(-1, 1)))))
        for tgt in sorted(targets):
            ps = " ".join(f"{rng.uniform(0.001, 1):.6g}" for _ in range(4))
            pt_lines.append(f"{src} ||| {tgt} ||| {ps} ||| ||| 1 1 1 ||| |||\n")
            if rng.random() < 0.85:
                rs = [f"{rng.uniform(0.01, 1):.6g}" for _ in range(6)]
                rt_lines.append(f"{src} ||| {tgt} ||| {' '.join(rs[:n_lr])}\n")
    os.makedirs(root, exist_ok=True)
    pt, rt, lm = (os.path.join(root, x) for x in ("phrase-table.gz", "reordering-table.gz", "lm.arpa"))
    with gzip.open(pt, "wt", encoding="utf-8") as f:
        f.writelines(pt_lines)
    with gzip.open(rt, "wt", encoding="utf-8") as f:
        f.writelines(rt_lines)
    train_lm([_sentence(rng, tgt_vocab, 2, 10) for _ in range(400)], lm, LMConfig(order=3))
    ini = os.path.join(root, "moses.ini")
    lr = LR.format(n=n_lr, type=lr_type, rt=rt) if lr_type else ""
    lrw = "LexicalReordering0= " + " ".join(map(str, LR_WEIGHTS[:n_lr])) + "\n" if lr_type else ""
    with open(ini, "w") as f:
        f.write(INI.format(pt=pt, lm=lm, lr=lr, lrw=lrw, lm_weight=lm_weight))
    sents = [s[:] for s in corpus[:14]]
    sents[3][1] = "oov1"          # unknown words are copied through
    sents[7].append("oov2")
    sents.append([])              # an empty line gives an empty translation
    return ini, sents

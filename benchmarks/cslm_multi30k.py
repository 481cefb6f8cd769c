"""The CSLM's held-out perplexity against the n-gram LM's on real text: Multi30k French.

Tokenizes (the embedded Moses tokenizer, lowercased, as the demo builds its system) train.fr and val.fr,
estimates an interpolated modified Kneser-Ney n-gram LM on train.fr (the embedded lmplz), trains the
CSLM on train.fr, and prints both perplexities on val.fr (KenLM's counting: ``</s>`` counted, ``<s>`` not)::

    python benchmarks/cslm_multi30k.py --data ../shared/data/multi30k-en-fr --out /tmp/cslm-m30k --time-budget 600
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch

from phrase_rescore.core.reading import read_lines
from phrase_rescore.moses_integration.embedded.lm import LMConfig, train_lm
from phrase_rescore.moses_integration.embedded.tokenizer import TokenizeConfig, Tokenizer
from phrase_rescore.pipeline.configs import TrainCSLMConfig
from phrase_rescore.pipeline.train_cslm import train_cslm


def tokenize(src: Path, out: Path) -> list[list[str]]:
    tok = Tokenizer(TokenizeConfig(lang="fr", case="lower"))
    sents = [tok.tokenize(text) for _, text, _ in read_lines(src)]
    with open(out, "w", encoding="utf-8") as f:
        f.writelines(" ".join(s) + "\n" for s in sents)
    return sents


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="../shared/data/multi30k-en-fr")
    ap.add_argument("--out", required=True)
    ap.add_argument("--order", type=int, default=5, help="n-gram LM order (lmplz's default: 5)")
    ap.add_argument("--time-budget", type=float, default=600.0)
    ap.add_argument("--preset", default="small")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--resume", action="store_true", help="continue OUT/cslm (e.g. with a larger --time-budget)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if not a.resume:
        train = tokenize(Path(a.data) / "train.fr.gz", out / "train.tok.fr")
        tokenize(Path(a.data) / "val.fr.gz", out / "val.tok.fr")
        train_lm(train, out / "lm.arpa", LMConfig(order=a.order))
    s = train_cslm(out / "train.tok.fr", out / "cslm", TrainCSLMConfig(preset=a.preset, time_budget_s=a.time_budget,
                                                                        valid_every=1000, resume=a.resume),
                   valid=out / "val.tok.fr", lm=out / "lm.arpa")
    print(json.dumps({"cslm_valid_ppl": s.best_valid_ppl, "ngram_valid_ppl": s.ngram_valid_ppl,
                      "ngram_order": a.order, "valid_tokens": s.valid_tokens, "steps": s.steps,
                      "stop": s.stop_reason, "events_per_s": round(s.events_per_s),
                      "train_seconds": round(s.seconds, 1), "shortlist": s.shortlist, "oos_types": s.oos_types,
                      "threads": a.threads, "load": os.getloadavg()}, indent=2))


if __name__ == "__main__":
    main()

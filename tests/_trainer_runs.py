"""Short, fixed runs of the trainers on tiny data."""
from __future__ import annotations

from pathlib import Path

from phrase_rescore.pipeline.configs import TrainCSLMConfig
from phrase_rescore.pipeline.train_cslm import train_cslm

CORPUS = ["the house is small", "the house is little", "it is a small house", "hello", "a house is a house",
          "the small house is old", "it is old", "hello house"] * 3


def run_cslm(tmp: Path, out: str, steps: int, resume: bool = False):
    (tmp / "corpus.txt").write_text("\n".join(CORPUS) + "\n")
    (tmp / "valid.txt").write_text("the house is old\nit is a small zebra\n")
    cfg = TrainCSLMConfig(emb_dim=4, hidden1=8, hidden2=8, order=3, batch_size=16, dropout=0.3, max_steps=steps,
                          valid_every=20, patience=2, device="cpu", resume=resume)
    return train_cslm(tmp / "corpus.txt", tmp / out, cfg, valid=tmp / "valid.txt")

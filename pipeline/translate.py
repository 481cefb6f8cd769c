"""Direct translation with Seq2Seq models: beam search (Sec. 3.2 of Sutskever et al.), greedy, ensembles.

Beam search keeps the B best prefixes of each sentence. At every step each kept prefix is extended by
every target word, scored by its total log-probability, and the B best extensions are kept; an extension
that ends in ``<eos>`` leaves the beam for the set of complete translations (so the beam holds fewer than
B prefixes until the next step refills it, as in the paper's loop). The output is the complete
translation with the highest raw log-probability: no length normalisation unless ``length_penalty`` > 0,
which ranks complete translations by ``logp / len**length_penalty`` (len counting ``<eos>``).

Stopping: with raw scores a sentence is done as soon as its best complete translation scores at least
as well as its best live prefix (every extension adds a log-probability <= 0, so nothing later can beat
it: the result equals running the paper's loop until the beam is empty). With length normalisation it is
done when B translations are complete. At ``max_len`` output tokens ``<eos>`` is forced.
B = 1 is greedy decoding. An ensemble averages the models' per-step log-probabilities.
Sentences are decoded in batches (sorted by length, output restored to input order).
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from phrase_rescore.core.atomic_write import atomic_open
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.progress import bar

from .batching import pad_batch
from .configs import TranslateConfig
from .device import resolve_device
from .model.checkpoint import SEQ2SEQ, ModelKind, load_checkpoint
from .model.seq2seq import EOS_ID, Seq2Seq
from .sentences import encode_eos, read_sentences
from .vocab import Vocabularies


@dataclass
class Hypothesis:
    """One complete translation: target ids WITHOUT the final ``<eos>``, its raw log-probability
    (the ensemble's averaged log-probabilities, ``<eos>`` included) and the score it was ranked by."""

    ids: list[int]
    logp: float
    score: float


class Ensemble:
    """Several models decoding in lock-step; the per-step log-probabilities are averaged.

    Decoding (:meth:`encode`, :meth:`step`) needs Seq2Seq models; scoring (:meth:`encode_sources`,
    :meth:`score_targets`, the interface both models share) takes either kind.
    """

    def __init__(self, models: list):
        if not models:
            raise PhraseRescoreError("an ensemble needs at least one model")
        self.models = models
        V = {m.vocab_sizes[1] for m in models}
        assert len(V) == 1, f"ensemble members disagree on the target vocabulary size: {V}"
        self.tgt_vocab = V.pop()

    @property
    def device(self) -> torch.device:
        return self.models[0].device

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> list:
        """One v = (h, c) per model, each (L, B, H)."""
        return [m.encode(src, src_mask) for m in self.models]

    @staticmethod
    def select(states: list, index: torch.Tensor) -> list:
        """Re-index the batch dimension of every model's state: (L, N, H) -> (L, len(index), H)."""
        return [(h.index_select(1, index), c.index_select(1, index)) for h, c in states]

    def step(self, prev: torch.Tensor, states: list):
        """(N,) previous ids -> ((N, V) averaged log-probs, new states)."""
        out, new = None, []
        for m, st in zip(self.models, states):
            logp, st = m.decode_step(prev, st)
            out = logp if out is None else out + logp
            new.append(st)
        return out / len(self.models), new

    def encode_sources(self, src: torch.Tensor, src_mask: torch.Tensor) -> list:
        """Each model's per-source state for scoring (see the models' ``encode_sources``)."""
        return [m.encode_sources(src, src_mask) for m in self.models]

    def score_targets(self, states: list, rows: torch.Tensor, tgt: torch.Tensor, tgt_mask: torch.Tensor) -> torch.Tensor:
        """Teacher-forced log p(tgt | src) averaged over the models: (b,), target i of source ``rows[i]``."""
        total = None
        for m, st in zip(self.models, states):
            lp = m.score_targets(st, rows, tgt, tgt_mask)
            total = lp if total is None else total + lp
        return total / len(self.models)


def _as_ensemble(models) -> Ensemble:
    if isinstance(models, Ensemble):
        return models
    if isinstance(models, Seq2Seq):
        return Ensemble([models])
    return Ensemble(list(models))


def max_lengths(src_mask: torch.Tensor, a: float, b: int) -> torch.Tensor:
    """Output budget per sentence, ``<eos>`` included: floor(a * source words) + b, at least 1. (N,)"""
    words = src_mask.sum(1) - 1
    return (words.double() * a).floor().long() + b


@torch.no_grad()
def beam_search(models, src: torch.Tensor, src_mask: torch.Tensor, beam: int = 12,
                max_len: torch.Tensor | int = 100, length_penalty: float = 0.0) -> list[Hypothesis]:
    """Beam search of width ``beam`` for a batch of N sources; returns the best translation of each.

    :param models: a Seq2Seq, a list of them (an ensemble) or an :class:`Ensemble`.
    :param src: (N, S) source ids, each row ending with ``<eos>``; ``src_mask`` (N, S) True on real tokens.
    :param max_len: most output tokens (``<eos>`` included), an int or an (N,) tensor.
    :param length_penalty: 0 ranks by raw log-probability (the paper); alpha > 0 by ``logp / len**alpha``.
    """
    ens = _as_ensemble(models)
    dev = src.device
    N, B, V = src.shape[0], beam, ens.tgt_vocab
    if B < 1:
        raise PhraseRescoreError(f"beam width must be at least 1, got {B}")
    max_len = torch.as_tensor(max_len, device=dev).expand(N).clamp(min=1)  # (N,)
    states = ens.encode(src, src_mask)
    states = ens.select(states, torch.arange(N, device=dev).repeat_interleave(B))  # (L, N*B, H): B copies each
    scores = torch.full((N, B), -math.inf, device=dev)
    scores[:, 0] = 0.0  # one empty prefix per sentence to start
    prev = torch.full((N * B,), EOS_ID, dtype=torch.long, device=dev)  # first decoder input is <eos>
    tokens = torch.zeros((N, B, 0), dtype=torch.long, device=dev)  # (N, B, t) prefixes
    finished: list[list[Hypothesis]] = [[] for _ in range(N)]
    best_done = torch.full((N,), -math.inf, device=dev)  # best ranking score of a complete translation
    n_done = torch.zeros(N, dtype=torch.long, device=dev)
    active = torch.ones(N, dtype=torch.bool, device=dev)
    base = (torch.arange(N, device=dev) * B).unsqueeze(1)  # (N, 1)

    for t in range(int(max_len.max())):
        logp, states = ens.step(prev, states)  # (N*B, V)
        cand = scores.unsqueeze(2) + logp.view(N, B, V)  # (N, B, V) total log-prob of each extension
        last = t + 1 >= max_len  # (N,) out of budget: only <eos> may follow
        if last.any():
            cand[last, :, 1:] = -math.inf
        top, idx = cand.view(N, B * V).topk(B, dim=1)  # (N, B): the B best extensions
        origin, word = idx // V, idx % V  # which prefix each extends, and with which word
        ended = (word == EOS_ID) & torch.isfinite(top) & active.unsqueeze(1)  # (N, B)
        if ended.any():
            n_idx, k_idx = ended.nonzero(as_tuple=True)
            for n, k in zip(n_idx.tolist(), k_idx.tolist()):
                ids = tokens[n, origin[n, k]].tolist()
                lp = float(top[n, k])
                sc = lp / (len(ids) + 1) ** length_penalty if length_penalty else lp
                finished[n].append(Hypothesis(ids, lp, sc))
                if sc > best_done[n]:
                    best_done[n] = sc
                n_done[n] += 1
        scores = top.masked_fill(ended | ~active.unsqueeze(1), -math.inf)  # complete ones leave the beam
        flat = (base + origin).view(-1)  # (N*B,) rows of the prefixes being extended
        states = ens.select(states, flat)
        tokens = torch.cat([tokens.gather(1, origin.unsqueeze(2).expand(-1, -1, tokens.shape[2])),
                            word.unsqueeze(2)], dim=2)
        prev = word.view(-1)
        best_live = scores.max(1).values  # (N,)
        if length_penalty:
            done = (n_done >= B) | torch.isinf(best_live)
        else:
            done = best_done >= best_live  # also true when nothing is live
        active &= ~done
        if not active.any():
            break
        scores = scores.masked_fill(~active.unsqueeze(1), -math.inf)

    out = []
    for n in range(N):
        assert finished[n], "every sentence ends with <eos> by max_len"
        out.append(max(finished[n], key=lambda h: h.score))
    return out


@torch.no_grad()
def greedy(models, src: torch.Tensor, src_mask: torch.Tensor, max_len: torch.Tensor | int = 100) -> list[Hypothesis]:
    """Greedy decoding: emit the most probable word until ``<eos>`` (or ``<eos>`` forced at ``max_len``)."""
    ens = _as_ensemble(models)
    N = src.shape[0]
    max_len = torch.as_tensor(max_len, device=src.device).expand(N)
    states = ens.encode(src, src_mask)
    prev = torch.full((N,), EOS_ID, dtype=torch.long, device=src.device)
    ids: list[list[int]] = [[] for _ in range(N)]
    lps = [0.0] * N
    live = list(range(N))
    for t in range(int(max_len.max())):
        logp, states = ens.step(prev, states)  # (N, V)
        for n in range(N):
            if t + 1 >= int(max_len[n]):
                logp[n, 1:] = -math.inf
        lp, word = logp.max(1)
        still = []
        for n in live:
            lps[n] += float(lp[n])
            if int(word[n]) == EOS_ID:
                continue
            ids[n].append(int(word[n]))
            still.append(n)
        live = still
        if not live:
            break
        prev = word
    return [Hypothesis(i, lp, lp) for i, lp in zip(ids, lps)]


@dataclass
class TranslateSummary:
    sentences: int
    seconds: float
    models: int
    unk_source_tokens: int
    output: str
    extra: dict = field(default_factory=dict)


def default_device(device: str | None = None) -> torch.device:
    """``device`` when given, else CUDA when present, else CPU."""
    return resolve_device(device)


def load_ensemble(paths: list[str], device, kind: ModelKind | None = SEQ2SEQ) -> tuple[Ensemble, Vocabularies]:
    """Load checkpoints as an ensemble; they must be of one kind (``kind``, or any when None) and share
    both vocabularies exactly."""
    if not paths:
        raise PhraseRescoreError("give at least one checkpoint")
    cks = [load_checkpoint(p, device, kind) for p in paths]
    for ck in cks:
        if ck.vocabs is None:
            raise PhraseRescoreError("this checkpoint has no vocabulary, so sentences cannot be encoded", ck.path)
        if ck.kind != cks[0].kind:
            raise PhraseRescoreError(f"ensemble members must be of one kind: this one is {ck.kind.description} "
                                     f"model, {cks[0].path} {cks[0].kind.description} one", ck.path)
    for ck in cks[1:]:
        if ck.vocabs.source != cks[0].vocabs.source or ck.vocabs.target != cks[0].vocabs.target:
            raise PhraseRescoreError(f"ensemble members need the same vocabularies; this one differs from "
                                     f"{cks[0].path}", ck.path)
    return Ensemble([ck.model for ck in cks]), cks[0].vocabs


def translate_sentences(ens: Ensemble, vocabs: Vocabularies, sentences: list[list[str]], beam: int = 12,
                        length_penalty: float = 0.0, max_len_a: float = 2.0, max_len_b: int = 10,
                        batch_size: int = 64) -> list[Hypothesis]:
    """Translate tokenized sentences; output i is the translation of input i (sorted for speed, then restored)."""
    src = [encode_eos(vocabs.source, s) for s in sentences]
    order = np.argsort([len(s) for s in src], kind="stable")
    out: list[Hypothesis | None] = [None] * len(src)
    with bar(total=len(src), desc="translate", unit="sent") as pb:
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            ids, mask = pad_batch([src[i] for i in idx], device=ens.device)
            hyps = beam_search(ens, ids, mask, beam, max_lengths(mask, max_len_a, max_len_b), length_penalty)
            for i, h in zip(idx, hyps):
                out[i] = h
            pb.update(len(idx))
    assert all(h is not None for h in out)
    return out  # type: ignore[return-value]


def translate_file(cfg: TranslateConfig) -> TranslateSummary:
    """Translate ``cfg.source`` into ``cfg.output`` (one line per input line, same order)."""
    t0 = time.perf_counter()
    device = default_device(cfg.device)
    ens, vocabs = load_ensemble(cfg.checkpoints, device)
    sentences = read_sentences(cfg.source)
    hyps = translate_sentences(ens, vocabs, sentences, cfg.beam, cfg.length_penalty, cfg.max_len_a,
                               cfg.max_len_b, cfg.batch_size)
    with atomic_open(cfg.output, "w") as f:
        for h in hyps:
            f.write(" ".join(vocabs.target.decode(h.ids)) + "\n")
    if cfg.scores:
        with atomic_open(cfg.scores, "w") as f:
            for h in hyps:
                f.write(f"{h.logp:.6f}\n")
    unk = sum(vocabs.source.unk_count(s) for s in sentences)
    return TranslateSummary(len(sentences), time.perf_counter() - t0, len(ens.models), unk, os.fspath(cfg.output))

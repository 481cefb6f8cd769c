"""The continuous-space language model (CSLM) of the target language (Schwenk 2007), as Cho et al. (2014,
section 5) use it to rescore n-best lists.

A feedforward network over the previous ``n - 1`` words (the paper: n = 7, six words of context):

    x = [E w_{t-6}; ...; E w_{t-1}]          each word embedded (paper: 512), concatenated
    h1 = max(0, W1 x + b1)                    rectifier layer (paper: 1,536 units)
    h2 = max(0, W2 h1 + b2)                   rectifier layer (paper: 1,024 units)
    p_nn(. | h) = softmax(W3 h2 + b3)         over the shortlist, ``</s>`` and one ``<unk>`` class

Sentences are padded on the left with ``<s>`` (a context word only: it is never predicted, its output
is masked out of the softmax) and end with ``</s>`` (predicted, counted in perplexities, as KenLM
counts it).

Words outside the shortlist (the back-off). Schwenk's CSLM gives the probability mass of the words
outside the shortlist to the back-off n-gram LM, ``p(w|h) = p_nn(w|h) P_S(h)`` with ``P_S(h)`` the
n-gram LM's mass of the shortlist in context ``h``. That needs the n-gram LM's probability of every
shortlist word in every context, |shortlist| look-ups per context. This model uses the simpler rule of
an ``<unk>`` class instead: the softmax has one output for "a word outside the shortlist", and its mass
is shared among those words by a fixed unigram distribution ``q`` estimated on the training corpus,

    p(w|h) = p_nn(w|h)                 for w in the shortlist or w = </s>
    p(w|h) = p_nn(<unk>|h) q(w)        otherwise,

with ``q(w) = c(w) / (C + T)`` for the ``T`` out-of-shortlist word types of the training corpus
(``C`` their summed count) and ``q(novel) = T / (C + T)`` for any word never seen in training
(Witten-Bell's estimate of the probability of a new type; ``T`` counts at least 1). The distribution
over the shortlist, ``</s>``, the seen out-of-shortlist words and the novel-word class sums to one
for every context, needs one softmax per context and no n-gram LM at scoring time, so the CSLM's
perplexity is its own and can be compared with the n-gram LM's. With a shortlist covering most of the
corpus (the demo's covers all of it) both rules differ only on rare words.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import ClassVar, Sequence

import numpy as np
import torch
from torch import nn

from phrase_rescore.core.errors import PhraseRescoreError

from ..vocab import EOS, EOS_ID, UNK, UNK_ID, Vocab
from .config import ModelConfig
from .presets import CSLM_PRESETS

BOS = "<s>"
BOS_ID = 2          # after <eos> (= </s>, id 0) and <unk> (id 1): a context word only
VOCAB_FORMAT = "phrase-rescore-cslm-vocab"


@dataclass
class CSLMConfig(ModelConfig):
    """The network's sizes (a checkpoint keeps ``to_dict()``)."""

    vocab_size: int                 # <eos>, <unk>, <s> and the shortlist
    order: int = 7                  # n: the context is the previous n - 1 words
    emb_dim: int = 512
    hidden1: int = 1536
    hidden2: int = 1024
    dropout: float = 0.0            # on the concatenated embeddings and both hidden layers, in training
    init_std: float = 0.05

    PRESETS: ClassVar[dict[str, dict]] = CSLM_PRESETS

    @classmethod
    def preset(cls, name: str, vocab_size: int, **overrides) -> "CSLMConfig":  # type: ignore[override]
        """The sizes of preset ``name`` for a vocabulary of ``vocab_size``; keyword overrides win."""
        if name not in cls.PRESETS:
            raise PhraseRescoreError(f"unknown model preset {name!r}; expected one of {sorted(cls.PRESETS)}")
        return cls(vocab_size=vocab_size, **{**cls.PRESETS[name], **overrides})

    def __post_init__(self):
        for k in ("vocab_size", "order", "emb_dim", "hidden1", "hidden2"):
            if getattr(self, k) < (2 if k == "order" else 1):
                raise ValueError(f"{k} must be at least {2 if k == 'order' else 1}, got {getattr(self, k)}")
        if self.vocab_size < 3:
            raise ValueError(f"vocab_size must be at least 3 (<eos>, <unk>, <s>), got {self.vocab_size}")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")

    @property
    def context(self) -> int:
        return self.order - 1


class CSLM(nn.Module):
    """p_nn(w | previous n-1 words): embeddings, two rectifier layers, a softmax (``<s>`` masked out)."""

    def __init__(self, cfg: CSLMConfig):
        super().__init__()
        self.cfg = cfg
        self.emb = nn.Embedding(cfg.vocab_size, cfg.emb_dim)
        self.l1 = nn.Linear(cfg.context * cfg.emb_dim, cfg.hidden1)
        self.l2 = nn.Linear(cfg.hidden1, cfg.hidden2)
        self.out = nn.Linear(cfg.hidden2, cfg.vocab_size)
        self.drop = nn.Dropout(cfg.dropout)
        mask = torch.zeros(cfg.vocab_size)
        mask[BOS_ID] = float("-inf")
        self.register_buffer("out_mask", mask, persistent=False)
        for p in self.parameters():
            nn.init.normal_(p, 0.0, cfg.init_std) if p.dim() > 1 else nn.init.zeros_(p)

    @property
    def device(self) -> torch.device:
        return self.emb.weight.device

    def forward(self, ctx: torch.Tensor) -> torch.Tensor:
        """(B, n-1) context ids, oldest first -> (B, V) log p_nn(. | context); column ``BOS_ID`` is -inf."""
        x = self.drop(self.emb(ctx).flatten(1))
        h = self.drop(torch.relu(self.l1(x)))
        h = self.drop(torch.relu(self.l2(h)))
        return torch.log_softmax(self.out(h) + self.out_mask, dim=-1)


class CSLMVocab:
    """The CSLM's words: the shortlist (ids as the network's), and the out-of-shortlist unigram ``q``."""

    def __init__(self, words: Sequence[str], oos_words: Sequence[str] = (), oos_counts: Sequence[int] = ()):
        words = list(words)
        if words[:3] != [EOS, UNK, BOS]:
            raise PhraseRescoreError(f"a CSLM vocabulary must start with {EOS}, {UNK}, {BOS}; found {words[:3]}")
        self.vocab = Vocab(words)
        if len(oos_words) != len(oos_counts):
            raise PhraseRescoreError("the out-of-shortlist words and their counts differ in number")
        self.oos_words, self.oos_counts = list(oos_words), [int(c) for c in oos_counts]
        clash = next((w for w in self.oos_words if w in self.vocab), None)
        if clash is not None:
            raise PhraseRescoreError(f"word {clash!r} is both in the shortlist and outside it")
        total = sum(self.oos_counts)
        types = max(len(self.oos_words), 1)
        self.log_q = {w: math.log(c / (total + types)) for w, c in zip(self.oos_words, self.oos_counts) if c > 0}
        self.log_q_novel = math.log(types / (total + types))

    def __len__(self) -> int:
        return len(self.vocab)

    @classmethod
    def build(cls, counts: dict[str, int], size: int) -> "CSLMVocab":
        """The ``size`` most frequent words (ties in byte order) as the shortlist; the rest give ``q``."""
        if size < 1:
            raise PhraseRescoreError(f"the shortlist size must be at least 1, got {size}")
        items = sorted(((w, n) for w, n in counts.items() if w not in (EOS, UNK, BOS)),
                       key=lambda wn: (-wn[1], wn[0].encode("utf-8")))
        return cls([EOS, UNK, BOS] + [w for w, _ in items[:size]], [w for w, _ in items[size:]],
                   [n for _, n in items[size:]])

    def to_dict(self) -> dict:
        return {"words": self.vocab.words, "oos_words": self.oos_words, "oos_counts": self.oos_counts}

    @classmethod
    def from_dict(cls, d: dict) -> "CSLMVocab":
        return cls(d["words"], d.get("oos_words", ()), d.get("oos_counts", ()))

    def to_json(self) -> str:
        return json.dumps({"format": VOCAB_FORMAT, **self.to_dict()}, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str, origin: str = "<vocabulary>") -> "CSLMVocab":
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise PhraseRescoreError(f"not a JSON vocabulary ({e.msg})", origin, e.lineno) from None
        if not isinstance(d, dict) or d.get("format") != VOCAB_FORMAT or not isinstance(d.get("words"), list):
            raise PhraseRescoreError(f"not a CSLM vocabulary: expected \"format\": \"{VOCAB_FORMAT}\" and words",
                                     origin)
        return cls.from_dict(d)

    def ids(self, words: Sequence[str]) -> list[int]:
        """Network ids (out-of-shortlist words: ``<unk>``; a literal ``<s>``/``</s>``/``<eos>`` token too)."""
        get = self.vocab.index.get
        return [UNK_ID if w in (EOS, BOS) else get(w, UNK_ID) for w in words]

    def extra_logp(self, word: str) -> float:
        """log q(word) for a word outside the shortlist (added to log p_nn(<unk>|h)), 0 for a shortlist word."""
        if word in self.vocab.index and word not in (EOS, BOS):
            return 0.0
        return self.log_q.get(word, self.log_q_novel)


def sentence_events(vocab: CSLMVocab, words: Sequence[str], context: int) -> tuple[np.ndarray, np.ndarray, float]:
    """The prediction events of one sentence: ``(contexts (k+1, n-1), targets (k+1,), summed log q)``.

    Every word and the final ``</s>`` is predicted from the ``context`` ids before it (``<s>`` padding on
    the left); the summed log q of its out-of-shortlist words is the part of log p(sentence) the
    network does not give.
    """
    ids = vocab.ids(words)
    padded = np.asarray([BOS_ID] * context + ids, dtype=np.int64)
    tgt = np.asarray(ids + [EOS_ID], dtype=np.int64)
    ctx = padded[np.arange(len(tgt))[:, None] + np.arange(context)]    # row i: the context words of event i
    extra = float(sum(vocab.extra_logp(w) for w in words))
    return ctx, tgt, extra


def corpus_events(vocab: CSLMVocab, sentences: Sequence[Sequence[str]], context: int
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All events of a corpus: contexts (N, n-1) int64, targets (N,) int64, log q per event (N,) float64."""
    ctxs, tgts, extras = [], [], []
    for s in sentences:
        c, t, _ = sentence_events(vocab, s, context)
        ctxs.append(c)
        tgts.append(t)
        extras.append(np.array([vocab.extra_logp(w) for w in s] + [0.0]))
    if not ctxs:
        return np.zeros((0, context), np.int64), np.zeros(0, np.int64), np.zeros(0)
    return np.concatenate(ctxs), np.concatenate(tgts), np.concatenate(extras)


def full_distribution(model: CSLM, vocab: CSLMVocab, context_words: Sequence[str]) -> dict[str, float]:
    """p(w | context) for every word the model can name: ``</s>``, the shortlist, the seen
    out-of-shortlist words and the novel-word class (key ``None``). Sums to one."""
    ids = vocab.ids(context_words)[-model.cfg.context:]
    ctx = [BOS_ID] * (model.cfg.context - len(ids)) + ids
    with torch.no_grad():
        lp = model(torch.tensor([ctx], device=model.device))[0].double().cpu().numpy()
    out = {vocab.vocab.words[i]: math.exp(lp[i]) for i in range(len(vocab)) if i not in (UNK_ID, BOS_ID)}
    p_unk = math.exp(lp[UNK_ID])
    for w, lq in vocab.log_q.items():
        out[w] = p_unk * math.exp(lq)
    out[None] = p_unk * math.exp(vocab.log_q_novel)
    return out

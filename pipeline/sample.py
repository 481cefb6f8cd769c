"""The ``sample`` stage: target phrases the trained encoder-decoder generates for a source phrase.

Three ways, all on raw log-probabilities (no length normalisation):

* ancestral sampling (the paper's Table 3): draw N phrases word by word from p(y_j | y_<j, x), each
  drawn word fed back, until ``<eos>``; identical samples are counted;
* ``greedy``: the most probable word at each step;
* ``beam``: beam search of width K (approximate like any beam search; exact when K is so wide that
  nothing is pruned); a hypothesis leaves the beam when it emits ``<eos>``, and the
  search stops once no live hypothesis can beat the K-th finished one (log-probabilities only fall).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from phrase_rescore.core.errors import PhraseRescoreError

from .configs import MODES, SampleConfig
from .model.encdec import RNNEncoderDecoder
from .vocab import EOS_ID, Vocabularies


@dataclass
class Generated:
    """One distinct generated phrase."""

    ids: tuple[int, ...]        # target ids, without eos
    target: str                 # the words, space-joined
    logprob: float              # log p(y | x), eos included when finished
    count: int = 1              # how many samples were this phrase (1 for greedy/beam)
    finished: bool = True       # False: cut at max_len before <eos>


def encode_source(vocabs: Vocabularies, phrase: str) -> list[int]:
    """Whitespace-tokenized ``phrase`` as source ids with the final ``<eos>``."""
    tokens = phrase.split()
    if not tokens:
        raise PhraseRescoreError("the source phrase is empty")
    return vocabs.source.encode(tokens) + [EOS_ID]


@torch.inference_mode()
def generate(model: RNNEncoderDecoder, src_ids: list[int], config: SampleConfig,
             vocabs: Vocabularies | None = None) -> list[Generated]:
    """Generate target phrases for one source (ids ending with eos), most frequent/probable first."""
    if config.mode not in MODES:
        raise PhraseRescoreError(f"unknown mode {config.mode!r}; choose one of {', '.join(MODES)}")
    max_len = config.max_len if config.max_len is not None else 2 * (len(src_ids) - 1) + 10
    if max_len < 0:
        raise PhraseRescoreError(f"max_len must be at least 0, got {max_len}")
    device = next(model.parameters()).device
    src = torch.tensor([src_ids], dtype=torch.long, device=device)
    ctx = model.decoder_init(model.encode(src, torch.ones_like(src, dtype=torch.bool)))   # (1, ...)
    words = (lambda ids: " ".join(vocabs.target.decode(list(ids) + [EOS_ID]))) if vocabs else \
        (lambda ids: " ".join(map(str, ids)))
    if config.mode == "beam":
        found = _beam(model, ctx, config.beam, max_len)
    else:
        n = 1 if config.mode == "greedy" else config.n
        if n < 1:
            raise PhraseRescoreError(f"the number of samples must be at least 1, got {n}")
        found = _ancestral(model, ctx, n, max_len, config.mode == "greedy", config.seed)
    return [Generated(ids, words(ids), lp, count, fin) for ids, lp, count, fin in found]


def _ancestral(model, ctx, n, max_len, greedy, seed):
    device = ctx.c.device
    gen = torch.Generator(device=device).manual_seed(seed)
    ctx = ctx.select(torch.zeros(n, dtype=torch.long, device=device))      # the source, n times
    s, prev = ctx.s0, None                                                  # (n, H)
    out = torch.zeros(n, max_len + 1, dtype=torch.long, device=device)
    total = torch.zeros(n, dtype=torch.float64, device=device)
    alive = torch.ones(n, dtype=torch.bool, device=device)
    length = torch.full((n,), max_len, dtype=torch.long, device=device)
    for j in range(max_len + 1):
        s, logp = model.decoder_step(prev, s, ctx)                          # (n, Vt)
        if j < max_len:
            y = logp.argmax(-1) if greedy else torch.multinomial(logp.exp(), 1, generator=gen).squeeze(1)
        elif greedy:   # greedy = beam of width 1: the phrase ends with <eos> at max_len, as in the beam
            y = torch.full_like(prev, EOS_ID) if prev is not None else logp.new_zeros(n, dtype=torch.long)
        else:          # a sample cut here is not a draw from the model: reported as unfinished
            break
        total += torch.where(alive, logp.gather(1, y[:, None]).squeeze(1).double(), 0.0)
        out[:, j] = torch.where(alive, y, EOS_ID)
        ended = alive & (y == EOS_ID)
        length = torch.where(ended, j, length)
        alive &= ~ended
        if not alive.any():
            break
        prev = y
    counts: dict[tuple, list] = {}
    for i in range(n):
        ids = tuple(out[i, :int(length[i])].tolist())
        if ids in counts:
            counts[ids][1] += 1
        else:
            counts[ids] = [float(total[i]), 1, not bool(alive[i])]
    found = [(ids, lp, c, fin) for ids, (lp, c, fin) in counts.items()]
    found.sort(key=lambda f: (-f[2], -f[1]))
    return found


def _beam(model, ctx, k, max_len):
    if k < 1:
        raise PhraseRescoreError(f"the beam width must be at least 1, got {k}")
    device = ctx.c.device
    hyps = [()]                                                   # live prefixes
    scores = torch.zeros(1, dtype=torch.float64, device=device)   # (live,)
    s, prev = ctx.s0, None
    live_ctx = ctx
    finished: list[tuple[tuple, float]] = []
    for j in range(max_len + 1):
        s, logp = model.decoder_step(prev, s, live_ctx)           # (live, Vt)
        cand = scores[:, None] + logp.double()                    # (live, Vt)
        if j == max_len:                                          # only <eos> may follow
            for i, h in enumerate(hyps):
                finished.append((h, float(cand[i, EOS_ID])))
            break
        V = cand.shape[1]
        top = torch.topk(cand.flatten(), min(k, cand.numel()))
        next_hyps, keep_rows, keep_words, keep_scores = [], [], [], []
        for score, flat in zip(top.values.tolist(), top.indices.tolist()):
            row, word = divmod(flat, V)
            if word == EOS_ID:
                finished.append((hyps[row], score))
            else:
                next_hyps.append(hyps[row] + (word,))
                keep_rows.append(row)
                keep_words.append(word)
                keep_scores.append(score)
        finished.sort(key=lambda f: -f[1])
        finished = finished[:k]
        # stop when nothing is live, or the k-th finished already beats every live prefix
        if not next_hyps or (len(finished) >= k and finished[-1][1] >= max(keep_scores)):
            break
        rows = torch.tensor(keep_rows, device=device)
        hyps, scores = next_hyps, torch.tensor(keep_scores, dtype=torch.float64, device=device)
        s, live_ctx = s.index_select(0, rows), ctx.select(torch.zeros(len(rows), dtype=torch.long, device=device))
        prev = torch.tensor(keep_words, device=device)
    finished.sort(key=lambda f: -f[1])
    return [(h, lp, 1, True) for h, lp in finished[:k]]


def format_table(results: list[Generated], mode: str) -> str:
    """The paper's Table 3 layout: phrase, count (sampling), log p."""
    rows = [(r.target + ("" if r.finished else " ...") or "(empty)", r.count, r.logprob) for r in results]
    width = max([len(t) for t, _, _ in rows] + [6])
    head = f"{'target':<{width}}  {'count':>5}  {'log p':>9}" if mode == "sample" else f"{'target':<{width}}  {'log p':>9}"
    lines = [head]
    for t, c, lp in rows:
        lines.append(f"{t:<{width}}  {c:>5}  {lp:>9.4f}" if mode == "sample" else f"{t:<{width}}  {lp:>9.4f}")
    return "\n".join(lines)


def sample_phrase(model_path, phrase: str, config: SampleConfig | None = None, device: str = "auto"
                  ) -> list[Generated]:
    """Load a checkpoint (file or training directory) and generate for ``phrase``."""
    config = config or SampleConfig()
    from .device import resolve_device
    from .model.checkpoint import ENCDEC, load_checkpoint

    ck = load_checkpoint(model_path, resolve_device(device), ENCDEC)
    if ck.vocabs is None:
        raise PhraseRescoreError("this checkpoint has no vocabulary, so a phrase cannot be encoded", model_path)
    return generate(ck.model, encode_source(ck.vocabs, phrase), config, ck.vocabs)

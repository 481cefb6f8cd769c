"""``phrase-rescore train-cslm``: fit the target-language CSLM (:mod:`phrase_rescore.pipeline.model.cslm`)
to a tokenized corpus, and compare its held-out perplexity with the n-gram LM's.

Every word of every sentence and its final ``</s>`` is one training event (the previous n-1 words, padded
with ``<s>``, predict it); the loss is the mean cross-entropy of the network's class (a word of the
shortlist, ``</s>`` or the ``<unk>`` class) over a minibatch of events. Schwenk trained his CSLMs with
stochastic back-propagation; this trainer uses Adam (lr 1e-3), which reaches a given perplexity in far
fewer updates on a CPU, and dropout for small corpora. The events of each epoch are a permutation that
is a function of (seed, epoch).

Outputs in ``out_dir``: ``model.pt`` (the lowest validation perplexity), ``last.pt`` (the latest state:
weights, Adam's state, the epoch and batch position, the torch RNG state, the log), ``train_log.csv``
(step, training loss, validation perplexity), ``summary.json`` and ``corpus-ids-<key>/train-ids.npy``, the
training events' targets written once from the corpus (:func:`_write_events`), which batches read by position
(:func:`read_events`) so that memory does not grow with the corpus. ``--resume`` continues from
``last.pt`` with the same batches, optimizer state and dropout masks as a run that never stopped. The
schedule (validations, checkpoints, patience, time budget, the log) is :class:`~.training_loop.TrainingLoop`'s.

Perplexity (the CSLM's and, with ``--lm``, the n-gram LM's through KenLM) is per token of the held-out
text, ``</s>`` counted and ``<s>`` not, as KenLM's ``query`` counts; the CSLM's includes log q of the
words outside its shortlist, so both are perplexities of the same words.
"""
from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from phrase_rescore.core.atomic_write import atomic_open
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.hashing import sha256_file
from phrase_rescore.core.reading import read_sentences

from .configs import TrainCSLMConfig
from .device import resolve_device
from .model.checkpoint import CSLM_KIND, save_checkpoint
from .model.cslm import BOS_ID, CSLM, EOS_ID, CSLMConfig, CSLMVocab, corpus_events
from .pairs import NpyAppender, NpyFile, corpus_arrays
from .sentences import count_lines, held_out_lines, iter_sentences
from .training_loop import TrainingLoop, check_run_dir, resume_from_last

#: ids gathered (in a Python list) before they are appended to the events' array
EVENTS_CHUNK = 1 << 16
LOG_COLUMNS = ["step", "epoch", "elapsed_s", "train_loss", "valid_ppl", "best_valid_ppl"]


@dataclass
class CSLMSummary:
    """What ``train-cslm`` reports (``summary.json``); perplexities per held-out token, ``</s>`` counted."""

    steps: int
    stop_reason: str
    best_valid_ppl: float
    last_valid_ppl: float
    ngram_valid_ppl: float | None
    valid_sentences: int
    valid_tokens: int
    valid_source: str           # the --valid file, or "held out of the corpus"
    shortlist: int
    oos_types: int
    events_per_s: float
    seconds: float
    out_dir: str
    model: str
    device: str
    lm: str | None = None
    history: list = dataclasses.field(default_factory=list)


def _read_corpus(corpus, valid, config: TrainCSLMConfig) -> tuple[collections.Counter, list, set[int]]:
    """One pass over ``corpus``: the word counts of its training sentences, the validation sentences (``valid``'s,
    or ``valid_size`` lines held out of the corpus) and the held-out line numbers. Empty lines are not trained
    on (they stay in a held-out set)."""
    held = set() if valid is not None else held_out_lines(count_lines(corpus), config.valid_size, config.seed)
    counts, valid_sents, n_train = collections.Counter(), [], 0
    for i, s in enumerate(iter_sentences(corpus)):
        if i in held:
            valid_sents.append(s)
        elif s:
            counts.update(s)
            n_train += 1
    if not n_train:
        raise PhraseRescoreError("no training sentences (the corpus is empty)", corpus)
    return counts, (read_sentences(valid) if valid is not None else valid_sents), held


def _write_events(folder: Path, corpus, held: set[int], vocab: CSLMVocab) -> None:
    """``train-ids.npy``: the targets of every training event, in corpus order (each training sentence's ids,
    then ``</s>``); an event's context is the ids before it back to the previous ``</s>``."""
    out, buf = NpyAppender(folder / "train-ids.npy", np.int32), []
    for i, s in enumerate(iter_sentences(corpus)):
        if s and i not in held:
            buf += vocab.ids(s)
            buf.append(EOS_ID)
            if len(buf) >= EVENTS_CHUNK:
                out.append(np.asarray(buf, np.int32))
                buf = []
    out.append(np.asarray(buf, np.int32))
    out.close()


def read_events(ids: NpyFile, positions: np.ndarray, context: int) -> tuple[np.ndarray, np.ndarray]:
    """The events at ``positions`` of the training ids: contexts (B, n-1) and targets (B,), int64, as
    :func:`~.model.cslm.sentence_events` makes them (the previous words of the sentence, ``<s>`` on the left)."""
    ctx = np.full((len(positions), context), BOS_ID, dtype=np.int64)
    tgt = np.empty(len(positions), dtype=np.int64)
    for r, p in enumerate(positions.tolist()):
        window = ids.read(max(0, p - context), p + 1)
        tgt[r] = window[-1]
        before = window[:-1]
        ends = np.flatnonzero(before == EOS_ID)     # the end of the previous sentence
        if len(ends):
            before = before[ends[-1] + 1:]
        if len(before):
            ctx[r, context - len(before):] = before
    return ctx, tgt


@torch.no_grad()
def cslm_perplexity(model: CSLM, ctx: np.ndarray, tgt: np.ndarray, extra: np.ndarray, batch: int = 2048) -> float:
    """exp(-mean log p(w|h)) over events: the network's class log-probability plus log q (outside the shortlist)."""
    if len(tgt) == 0:
        return float("nan")
    was = model.training
    model.eval()
    total = float(extra.sum())
    for i in range(0, len(tgt), batch):
        c = torch.from_numpy(ctx[i:i + batch]).to(model.device)
        t = torch.from_numpy(tgt[i:i + batch]).to(model.device)
        total += float(model(c).gather(1, t[:, None]).double().sum())
    model.train(was)
    return math.exp(-total / len(tgt))


def ngram_perplexity(arpa: str | os.PathLike, sentences) -> float:
    """The n-gram LM's perplexity (KenLM, ``</s>`` counted, ``<s>`` not) of tokenized sentences."""
    from phrase_rescore.moses_integration.embedded.lm import load_lm, perplexity

    return perplexity(load_lm(arpa), sentences)


def train_cslm(corpus: str | os.PathLike, out_dir: str | os.PathLike, config: TrainCSLMConfig | None = None,
               valid: str | os.PathLike | None = None, lm: str | os.PathLike | None = None) -> CSLMSummary:
    """Train (or, with ``config.resume``, continue) the CSLM on the tokenized ``corpus``.

    :param valid: held-out tokenized text; without it ``valid_size`` sentences of the corpus are held out.
    :param lm: an ARPA (or KenLM binary) n-gram LM whose perplexity on the same held-out text is reported.
    """
    config = config or TrainCSLMConfig()
    t_start = time.monotonic()
    out = Path(out_dir)
    check_run_dir(out, config.resume)
    device = resolve_device(config.device)
    data = _read_data(corpus, valid, out, config)
    valid_tokens = len(data.valid_events[1])
    ngram_ppl = ngram_perplexity(lm, data.valid_sentences) if lm is not None and valid_tokens else None
    trainer = _CSLMTrainer(config, device, data, out)
    if config.resume:
        trainer.resume()
    out.mkdir(parents=True, exist_ok=True)
    stop = trainer.run()
    loop, vocab = trainer.loop, data.vocab
    summary = CSLMSummary(
        steps=loop.state["step"], stop_reason=stop, best_valid_ppl=loop.state["best_valid_ppl"],
        last_valid_ppl=loop.last_valid,
        ngram_valid_ppl=ngram_ppl, valid_sentences=len(data.valid_sentences), valid_tokens=int(valid_tokens),
        valid_source=os.fspath(valid) if valid is not None else "held out of the corpus",
        shortlist=len(vocab) - 3, oos_types=len(vocab.oos_words),
        events_per_s=loop.per_second(config.batch_size), seconds=time.monotonic() - t_start, out_dir=os.fspath(out),
        model=os.fspath(loop.best_path), device=str(device), lm=None if lm is None else os.fspath(lm),
        history=[dict(r) for r in loop.state["log"]])
    _write_summary(out / "summary.json", summary)
    return summary


class _Data(NamedTuple):
    """What a run trains and validates on."""

    hashes: dict                # sha256 of the corpus and of the --valid file (None without one)
    vocab: CSLMVocab
    model_config: CSLMConfig
    events: NpyFile             # the training events' targets (:func:`_write_events`)
    valid_sentences: list
    valid_events: tuple         # contexts, targets and log q outside the shortlist (:func:`~.model.cslm.corpus_events`)


def _read_data(corpus, valid, out: Path, config: TrainCSLMConfig) -> _Data:
    """The vocabulary and model sizes from the corpus, its training events (written once into ``out``, keyed by
    the corpus, the held-out lines and the vocabulary) and the validation events."""
    hashes = {"corpus": sha256_file(corpus), "valid": sha256_file(valid) if valid is not None else None}
    counts, valid_sents, held = _read_corpus(corpus, valid, config)
    vocab = CSLMVocab.build(counts, config.shortlist)
    del counts
    try:
        mcfg = config.model_config(len(vocab))
    except ValueError as e:
        raise PhraseRescoreError(f"bad model settings: {e}") from None
    key = {"corpus": hashes["corpus"], "held_out": None if valid is not None else [config.seed, config.valid_size],
           "vocab": hashlib.sha256(vocab.to_json().encode()).hexdigest()}
    events = NpyFile(corpus_arrays(out, key, lambda d: _write_events(d, corpus, held, vocab)) / "train-ids.npy")
    return _Data(hashes, vocab, mcfg, events, valid_sents, corpus_events(vocab, valid_sents, mcfg.context))


class _CSLMTrainer:
    """One run's CSLM, Adam and schedule (:class:`~.training_loop.TrainingLoop`), and the update the schedule
    takes: an Adam step on the next batch of this epoch's permutation of the events."""

    def __init__(self, config: TrainCSLMConfig, device: torch.device, data: _Data, out: Path):
        self.config, self.device, self.data, self.out = config, device, data, out
        torch.manual_seed(config.seed)
        self.model = CSLM(data.model_config).to(device)
        self.model.train()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=config.lr)
        self.loop = TrainingLoop(out, max_steps=config.max_steps, valid_every=config.valid_every,
                                 patience=config.patience, time_budget_s=config.time_budget_s,
                                 log_columns=LOG_COLUMNS, desc="train-cslm", position={"epoch": 0, "batch": 0})
        self.n_batches = math.ceil(data.events.len / config.batch_size)
        self.perm = None                # this epoch's order of the events

    def resume(self) -> None:
        """Continue from ``last.pt`` (:func:`~.training_loop.resume_from_last`), refused when it was trained on
        another corpus or validation text."""
        def check_data(ts: dict) -> None:
            if ts["data_sha256"] != self.data.hashes:
                raise PhraseRescoreError("cannot resume: the corpus or the validation text changed since this run "
                                         "started", self.loop.last_path)

        resume_from_last(self.loop, CSLM_KIND, self.device, self.config, self.model, self.opt, "train-cslm",
                         check_data)

    def step(self) -> tuple[float, int, int]:
        """One Adam step on the next batch of events: (its mean cross-entropy, its events twice: each is
        one target token)."""
        config, state, n = self.config, self.loop.state, self.data.events.len
        if self.perm is None or state["batch"] == 0:     # Generator.permutation(n), in 4-byte items while n allows
            self.perm = np.arange(n, dtype=np.int32 if n < 2 ** 31 else np.int64)
            np.random.default_rng([config.seed, state["epoch"]]).shuffle(self.perm)
        idx = self.perm[state["batch"] * config.batch_size:(state["batch"] + 1) * config.batch_size]
        ctx, tgt = read_events(self.data.events, idx, self.data.model_config.context)
        c = torch.from_numpy(ctx).to(self.device)
        t = torch.from_numpy(tgt).to(self.device)
        loss = torch.nn.functional.nll_loss(self.model(c), t)
        if not torch.isfinite(loss):
            raise PhraseRescoreError(f"training loss became {loss.item()} at step {state['step'] + 1}; stopped "
                                     "(try a lower --lr)", self.out)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        state["batch"] += 1
        if state["batch"] == self.n_batches:
            state["epoch"], state["batch"] = state["epoch"] + 1, 0
        return loss.item(), len(idx), len(idx)

    def run(self) -> str:
        """The schedule's updates, validations and checkpoints; returns why it stopped."""
        loop, vctx, vtgt, vextra = self.loop, *self.data.valid_events
        return loop.run(
            self.step,
            validate=lambda: cslm_perplexity(self.model, vctx, vtgt, vextra),
            save=lambda path, train_state: save_checkpoint(path, self.model, self.data.vocab, train_state),
            own_state=lambda: {"config": dataclasses.asdict(self.config), "data_sha256": self.data.hashes,
                               "optimizer": self.opt.state_dict(), "torch_rng": torch.get_rng_state()},
            log_extra=lambda: {"epoch": round(loop.state["epoch"] + loop.state["batch"] / self.n_batches, 4)},
            held_out=len(vtgt) > 0)


def _write_summary(path: Path, summary: CSLMSummary) -> None:
    """``summary.json``: the summary less its history and timings."""
    with atomic_open(path, "w") as f:
        json.dump({k: v for k, v in dataclasses.asdict(summary).items() if k not in ("history", "seconds",
                                                                                    "events_per_s")},
                  f, indent=2, sort_keys=True)
        f.write("\n")

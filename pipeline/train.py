"""The ``train`` stage: fit the RNN Encoder-Decoder to prepared phrase pairs (Cho et al. 2014, 3.1).

The recipe, each a :class:`TrainConfig` default: unique pairs sampled uniformly, minibatches of 64,
Adadelta (rho 0.95, eps 1e-6), weights N(0, 0.01^2) with orthogonal recurrent matrices, the
gradient's global norm clipped at 1.0. The loss is equation (4): the mean over the batch of
-log p(y | x).

Outputs in ``out_dir``: ``model.pt`` (best validation perplexity so far), ``last.pt`` (the latest
state, with everything needed to resume exactly), ``train_log.csv`` (one row per validation).
A resumed run continues with the same sampler position, optimizer state and RNG state, so it
produces the same weights as a run that never stopped. The schedule (validations, checkpoints, patience,
time budget, the log) is :class:`~.training_loop.TrainingLoop`'s; the model, batches, loss and
optimizer are this module's.

Under ``torchrun`` (``WORLD_SIZE`` > 1) the run is data-parallel (DistributedDataParallel): every rank
draws the same global batch of ``batch_size`` from the same seeded sampler and takes its own contiguous
slice of it (``numpy.array_split``: equal slices when the world size divides the batch, which it must
not exceed). Rank r's loss is its slice's summed -log p times N/B, so DDP's average of the ranks'
gradients is the gradient of equation (4) over the whole batch: the single-process trajectory, up to
float rounding. Clipping sees that averaged (global) gradient, so Adadelta takes the same step on every
rank. Validation is split across the ranks and summed; the time budget is rank 0's clock; rank 0 alone
writes the checkpoints and the log while the others wait. ``last.pt`` records the world size, and a
resume under another one is refused.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from phrase_rescore.core import progress
from phrase_rescore.core.config import cap_to_cores
from phrase_rescore.core.errors import PhraseRescoreError

from .configs import TrainConfig
from .distributed import Dist
from .distributed import setup as setup_distributed
from .model.checkpoint import ENCDEC, LAST, read_checkpoint, save_checkpoint
from .model.encdec import EncDecConfig, RNNEncoderDecoder
from .pairs import ARRAY_PARTS, PairFile, PairSet, UniformSampler, check_pairs_dir, length_batches, pairs_paths
from .training_loop import TrainingLoop, check_run_dir, check_world_size, resume_from_last
from .vocab import Vocabularies

LOG_COLUMNS = ["step", "pairs_seen", "elapsed_s", "train_loss", "train_ppl", "valid_ppl", "best_valid_ppl", "lr"]


@dataclass
class TrainSummary:
    """What a training run of either model reports; ``dataclasses.asdict`` of it is JSON-able.

    Perplexities are per target token on the validation pairs; the rates count this call's steps only.
    """

    steps: int                  # optimizer steps in all, those of a resumed run included
    stop_reason: str            # "max_steps", "time_budget", "patience" or (Seq2Seq) "epochs"
    best_valid_ppl: float
    last_valid_ppl: float
    pairs_per_s: float          # training pairs per second of the training loop (validation included)
    seconds: float              # wall time of this call
    out_dir: str
    model: str                  # the best checkpoint: out_dir/model.pt
    device: str
    history: list = field(default_factory=list)  # one dict per validation (the training log's rows)
    unigram_valid_ppl: float | None = None       # encoder-decoder: a unigram model's validation perplexity
    epochs: float | None = None                  # Seq2Seq: epochs trained in all
    target_tokens_per_s: float | None = None     # Seq2Seq: target tokens per second of training
    resumed_from: float | None = None            # Seq2Seq: the epoch (with its fraction) a resume started at


def default_init_std(preset: str) -> float:
    """The initial weight scale: Cho et al.'s 0.01 (section 3.1) for the paper's sizes. The small preset's
    layers are 4x narrower, so 0.01 leaves activations and gradients near zero and Adadelta (whose first
    steps are about as large as the gradient) barely moves: it gets 0.05."""
    return 0.01 if preset == "paper" else 0.05


@torch.inference_mode()
def validation_perplexity(model: RNNEncoderDecoder, pairs: PairFile | PairSet, device, max_pairs: int | None = None,
             batch_tokens: int = 16_384, dist: Dist | None = None) -> dict:
    """Perplexity per target token (eos included) over the first ``max_pairs`` pairs.

    With ``dist`` of several ranks, each scores every N-th batch and the sums are all-reduced.

    :returns: {"nll": summed -log p, "tokens": target tokens, "pairs": pairs, "ppl": exp(nll/tokens)}.
    """
    n = len(pairs) if max_pairs is None else min(len(pairs), max_pairs)
    if n == 0:
        return {"nll": 0.0, "tokens": 0, "pairs": 0, "ppl": float("nan")}
    was_training = model.training
    model.eval()
    nll, tokens = 0.0, 0
    batches = length_batches(pairs.lengths(n), batch_tokens)
    if dist is not None and dist.enabled:
        batches = batches[dist.rank::dist.world_size]
    for idx in batches:
        s, sm, t, tm = pairs.batch(idx, device=device)
        nll -= float(model.log_prob(s, sm, t, tm).double().sum())
        tokens += int(tm.sum())
    if dist is not None and dist.enabled:
        nll, tokens = dist.all_reduce_sum([nll, tokens])
        tokens = int(tokens)
    model.train(was_training)
    return {"nll": nll, "tokens": tokens, "pairs": n, "ppl": math.exp(nll / tokens)}


def unigram_perplexity(train: PairFile | PairSet, valid: PairFile | PairSet, vocab_size: int,
                       max_pairs: int | None = None) -> float:
    """Perplexity of the add-one unigram model of the training targets (eos included) on ``valid``:
    the baseline a trained encoder-decoder must beat by far. The ids are read in chunks of bounded size."""
    counts = np.ones(vocab_size, np.float64)
    for ids in train.target_ids():
        counts += np.bincount(ids, minlength=vocab_size)[:vocab_size]
    logp = np.log(counts / counts.sum())
    total, count = 0.0, 0
    for ids in valid.target_ids(max_pairs):
        total += float(logp[ids].sum())
        count += len(ids)
    return float(np.exp(-total / count)) if count else float("nan")


def train(pairs_dir, out_dir, config: TrainConfig | None = None) -> TrainSummary:
    """Train on ``pairs_dir`` (written by ``prepare``) into ``out_dir``.

    :returns: steps, stop reason, best/last validation perplexity, the unigram baseline, pairs/s, the
        model path and the log's rows.
    :raises PhraseRescoreError: missing inputs, a run already in ``out_dir`` without ``resume``, a
        resume with different settings or data, a NaN/inf loss (``last.pt`` is left as it was).
    """
    config = config or TrainConfig()
    t_start = time.monotonic()
    data_hashes = _prepared_hashes(pairs_dir)
    out = Path(out_dir)
    check_run_dir(out, config.resume)
    dist = _start_processes(config)
    paths = pairs_paths(pairs_dir)
    vocabs = Vocabularies.load(paths["vocab"])
    # read from disk as the batches need them: the memory does not grow with the number of pairs
    train_set, valid_set = PairFile(pairs_dir, "train"), PairFile(pairs_dir, "valid")
    if len(train_set) == 0:
        raise PhraseRescoreError("no training pairs", paths["train"])
    trainer = _EncDecTrainer(config, dist, vocabs, train_set, out, data_hashes)
    if config.resume:
        trainer.resume(pairs_dir)
    trainer.start()
    unigram = unigram_perplexity(train_set, valid_set, len(vocabs.target), config.valid_max_pairs)
    stop = trainer.run(valid_set)
    loop = trainer.loop
    return TrainSummary(steps=loop.state["step"], stop_reason=stop, best_valid_ppl=loop.state["best_valid_ppl"],
                        last_valid_ppl=loop.last_valid, pairs_per_s=loop.per_second(config.batch_size),
                        seconds=time.monotonic() - t_start, out_dir=str(out), model=str(loop.best_path),
                        device=str(dist.device), history=[dict(r) for r in loop.state["log"]],
                        unigram_valid_ppl=unigram)


def _prepared_hashes(pairs_dir) -> dict[str, str]:
    """The sha256 of every part of ``pairs_dir`` a run trains on, by file name, from its manifest (checked
    against the files by :func:`~.pairs.check_pairs_dir`); a missing input is refused first."""
    paths = pairs_paths(pairs_dir)
    for role in ("train", "valid", "vocab"):
        if not paths[role].exists():
            raise PhraseRescoreError(f"missing {paths[role].name} (expected a directory written by "
                                     "`phrase-rescore prepare`)", paths[role])
    parts = check_pairs_dir(pairs_dir)["parts"]
    data_hashes = {name: parts[name]["sha256"] for name in ("train.parquet", "valid.parquet", "vocab.json")}
    data_hashes.update({name: parts[name]["sha256"] for name in ARRAY_PARTS})
    return data_hashes


def _start_processes(config: TrainConfig) -> Dist:
    """This process's rank and device (``torchrun``'s, or the one process's), its torch threads on a CPU; a world
    larger than the batch is refused, and only rank 0 shows progress."""
    dist = setup_distributed(config.device)
    if dist.device.type == "cpu":
        torch.set_num_threads(cap_to_cores(config.torch_threads, "--torch-threads"))   # for this process, as the command's option asks
    if dist.world_size > config.batch_size:
        raise PhraseRescoreError(f"{dist.world_size} processes (WORLD_SIZE) for a batch of {config.batch_size} "
                                 "pairs: each rank needs at least one pair; start fewer processes or raise --batch-size")
    if not dist.is_main:
        progress.set_quiet(True)        # one progress bar: rank 0's
    return dist


def _model_config(config: TrainConfig, vocabs: Vocabularies) -> EncDecConfig:
    """The preset's sizes for these vocabularies, with the run's GRU form, biases, initial scale and overrides."""
    init_std = default_init_std(config.preset) if config.init_std is None else config.init_std
    try:
        return EncDecConfig.preset(config.preset, len(vocabs.source), len(vocabs.target), gru=config.gru,
                                   bias=config.bias, init_std=init_std, **config.model_overrides)
    except (ValueError, TypeError) as e:
        raise PhraseRescoreError(f"bad model settings: {e}") from None


class _EncDecTrainer:
    """One run's model, Adadelta, pair sampler and schedule (:class:`~.training_loop.TrainingLoop`), and the
    update the schedule takes: an Adadelta step on equation (4)."""

    def __init__(self, config: TrainConfig, dist: Dist, vocabs: Vocabularies, train_set: PairFile, out: Path,
                 data_hashes: dict[str, str]):
        self.config, self.dist, self.vocabs, self.train_set, self.out = config, dist, vocabs, train_set, out
        self.data_hashes, self.last_path = data_hashes, out / LAST
        model_cfg = _model_config(config, vocabs)
        torch.manual_seed(config.seed)                          # the initial weights
        self.model = RNNEncoderDecoder(model_cfg).to(dist.device)
        self.optimizer = torch.optim.Adadelta(self.model.parameters(), lr=config.lr, rho=config.rho, eps=config.eps)
        self.sampler = UniformSampler(len(train_set), config.batch_size, config.seed)
        self.loop = TrainingLoop(out, max_steps=config.max_steps, valid_every=config.valid_every,
                                 patience=config.patience, time_budget_s=config.time_budget_s,
                                 log_columns=LOG_COLUMNS, desc="train", position={"pairs_seen": 0}, dist=dist,
                                 clock=time.monotonic)  # this module's clock

    def resume(self, pairs_dir) -> None:
        """Continue from ``last.pt`` (:func:`~.training_loop.resume_from_last`), refused when it was saved under
        another world size or trained on other prepared pairs."""
        def check_data(ts: dict) -> None:
            check_world_size(ts.get("world_size", 1), self.dist, self.last_path, "train into another --out")
            if ts["data_sha256"] != self.data_hashes["train.parquet"]:
                raise PhraseRescoreError("cannot resume: train.parquet changed since this run started",
                                         pairs_paths(pairs_dir)["train"])
            for name, digest in (ts.get("pairs_sha256") or {}).items():
                if self.data_hashes.get(name) != digest:
                    raise PhraseRescoreError(f"cannot resume: {name} changed since this run started (last.pt was "
                                             "trained on other prepared pairs)", Path(pairs_dir) / name)

        resume_from_last(self.loop, ENCDEC, self.dist.device, self.config, self.model, self.optimizer, "train",
                         check_data, sampler=self.sampler)

    def start(self) -> None:
        """The model in training mode, its ``log_prob`` averaging the ranks' gradients in backward."""
        self.log_prob = self.dist.data_parallel(self.model, "log_prob")
        self.params = [p for p in self.model.parameters()]
        self.model.train()

    def step(self) -> tuple[float, int, int]:
        """One Adadelta step on a batch of pairs: (its loss, eq (4); its pairs; its target tokens)."""
        config, dist, loop = self.config, self.dist, self.loop
        step = loop.state["step"] + 1
        idx = next(self.sampler)                                           # the global batch
        mine = np.array_split(idx, dist.world_size)[dist.rank] if dist.enabled else idx
        s, sm, t, tm = self.train_set.batch(mine, device=dist.device)      # (b, S), (b, T)
        if dist.enabled:    # this slice's share of eq (4); DDP averages the N ranks' gradients
            lp_sum = -self.log_prob(s, sm, t, tm).sum()
            loss = lp_sum * (dist.world_size / len(idx))
            loss_sum, n_tokens = dist.all_reduce_sum([lp_sum.item(), tm.sum().item()])
            loss_value, n_tokens = loss_sum / len(idx), int(n_tokens)
        else:
            loss = -self.log_prob(s, sm, t, tm).mean()                     # eq (4)
            loss_value, n_tokens = loss.item(), int(tm.sum())
        if not math.isfinite(loss_value):
            raise PhraseRescoreError(
                f"training loss became {loss_value} at step {step}; stopped. The last good "
                f"checkpoint is kept in {self.last_path} (step {_saved_step(self.last_path)}); try a lower --lr or "
                "--clip-norm", self.out)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(self.params, config.clip_norm)
        if not torch.isfinite(norm):
            raise PhraseRescoreError(
                f"gradient norm became {float(norm)} at step {step}; stopped. The last good "
                f"checkpoint is kept in {self.last_path} (step {_saved_step(self.last_path)})", self.out)
        self.optimizer.step()
        loop.state["pairs_seen"] += len(idx)
        return loss_value, len(idx), n_tokens

    def own_state(self) -> dict:
        """last.pt's training state beside the loop's: what decides the rest of the trajectory."""
        return {"config": self.config.to_dict(), "data_sha256": self.data_hashes["train.parquet"],
                "pairs_sha256": self.data_hashes, "optimizer": self.optimizer.state_dict(),
                "sampler": self.sampler.state_dict(), "torch_rng": torch.get_rng_state(),
                "world_size": self.dist.world_size}

    def run(self, valid_set: PairFile) -> str:
        """The schedule's updates, validations on ``valid_set`` and checkpoints; returns why it stopped."""
        config = self.config
        # With N(0, 0.01^2) weights, gradients reach the subnormal range, where x86 CPUs run 10-100x slower
        # (measured on a tiny model with std 0.01: 270 pairs/s without, 6,000 with); flushing them to zero changes nothing measurable.
        # torch has no getter for this process-wide flag: it goes back to torch's default (off) on exit.
        torch.set_flush_denormal(True)
        try:
            return self.loop.run(
                self.step,
                validate=lambda: validation_perplexity(self.model, valid_set, self.dist.device, config.valid_max_pairs,
                                                       config.valid_batch_tokens, self.dist)["ppl"],
                save=lambda path, train_state: save_checkpoint(path, self.model, self.vocabs, train_state),
                own_state=self.own_state, log_extra=lambda: {"lr": config.lr},
                held_out=len(valid_set) > 0 and config.valid_max_pairs != 0)
        finally:
            torch.set_flush_denormal(False)


def _saved_step(path: Path):
    """The step of the checkpoint at ``path``, for the message of a run stopped by a NaN."""
    if not path.exists():
        return "none yet"
    try:
        return read_checkpoint(path, "cpu", ENCDEC)["train_state"]["step"]
    except PhraseRescoreError:
        return "unreadable"

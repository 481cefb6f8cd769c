"""The training loop of the trainers that count updates: ``train`` (the RNN Encoder-Decoder) and
``train-cslm`` (the CSLM), and their resume from ``last.pt`` (:func:`resume_from_last`); and the resume checks
that ``train-seq2seq`` makes too.

:class:`TrainingLoop` owns the schedule and its bookkeeping; a trainer brings what is its own (model,
batches, loss, optimizer, what its checkpoint holds) as functions (see :meth:`TrainingLoop.run`). The
schedule, as nanoGPT's train loop and Joey NMT's ``TrainManager`` run it:

1. stop when ``max_steps`` updates are done, when the training time and one more validation would pass
   ``time_budget_s``, or when ``patience`` scheduled validations in a row have not lowered the best
   validation perplexity;
2. else take one update and count it: the step, the window's loss (since the last validation), its time;
3. every ``valid_every`` updates validate: ``model.pt`` when the perplexity is the lowest so far (or
   always, when there are no held-out data: the model is then the latest weights and patience never runs
   out), a row of the log, ``last.pt`` with everything a resume needs, the log file.

A run that stops between validations validates once more after the loop, off the schedule (patience
neither grows nor resets), so that ``last.pt`` and the log end where the run did.

The training time is the wall time of the loop, this run's and earlier ones': the updates, the validations
and the checkpoints. A budget is kept on that clock, the last validation included: the run stops before an
update once the time so far and the latest validation's duration reach ``time_budget_s``, so it ends within
one update of the budget (the validation it takes at the end lasts about as long as the latest one). The
progress bar's total is then the number of steps the budget will reach at the rate so far (at most
``max_steps``), so its ETA is the budget's end, not ``max_steps``'s. Under ``torchrun`` rank 0's clock
decides the time budget (broadcast), so every rank stops at the same step; rank 0 alone writes files, and
every rank waits for them after a validation.

``last.pt`` holds the loop's counters and log beside the trainer's own state: :meth:`TrainingLoop.resume`
takes them back and rewrites the log file from them (a kill between ``last.pt`` and the log's rewrite
leaves a log of one row more).
"""
from __future__ import annotations

import csv
import math
import time
import zipfile
from pathlib import Path
from typing import Callable

import torch

from phrase_rescore.core import progress
from phrase_rescore.core.atomic_write import atomic_open
from phrase_rescore.core.errors import PhraseRescoreError

from .distributed import Dist
from .model.checkpoint import BEST, LAST, ModelKind, read_checkpoint

LOG = "train_log.csv"
POSTFIX_EVERY = 20          # updates between refreshes of the progress bar's loss


def check_run_dir(out: Path, resume: bool) -> None:
    """A resume needs ``out/last.pt``, undamaged (:func:`check_intact`); a fresh run must not overwrite one."""
    last = out / LAST
    if resume and not last.exists():
        raise PhraseRescoreError("nothing to resume: no last.pt here", out)
    if not resume and last.exists():
        raise PhraseRescoreError("this directory already holds a training run; pass --resume to continue it "
                                 "or choose another --out", out)
    if resume:
        check_intact(last)


def check_intact(path: Path) -> None:
    """Refuse a checkpoint whose data do not match their stored CRC-32s. ``torch.save`` writes a zip archive,
    one member per tensor, each with the CRC-32 of its bytes, which ``torch.load`` does not verify: a damaged
    byte would load as a wrong weight or optimizer moment. A file that is no zip archive (or a truncated one)
    is left to the checkpoint reader, which says what it is."""
    try:
        with zipfile.ZipFile(path) as z:
            bad = z.testzip()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError):
        return
    if bad is not None:
        raise PhraseRescoreError(f"damaged: the data of {bad} do not match their checksum; resume from a copy "
                                 "of the run, or start a new one in another --out", path)


def check_train_state(ts, keys: tuple, last_path: Path, command: str) -> dict:
    """``last.pt``'s training state, refused unless it holds every key the resume reads."""
    if not isinstance(ts, dict) or not ts:
        raise PhraseRescoreError("last.pt holds no training state", last_path)
    missing = [k for k in keys if k not in ts]
    if missing:
        raise PhraseRescoreError(f"cannot resume: last.pt's training state lacks {', '.join(missing)}; expected "
                                 f"the last.pt a run of {command} wrote", last_path)
    return ts


def check_same_settings(old: dict, config, trajectory: tuple, last_path: Path) -> None:
    """Refuse to resume with other values of the settings that decide the trajectory."""
    changed = [k for k in trajectory if old.get(k) != getattr(config, k)]
    if changed:
        raise PhraseRescoreError("cannot resume with different settings: " + ", ".join(
            f"{k} was {old.get(k)!r}, now {getattr(config, k)!r}" for k in changed), last_path)


def check_world_size(saved: int, dist: Dist, last_path: Path, instead: str) -> None:
    """Refuse to resume under another number of processes than ``last.pt`` was saved by: the ranks' slices
    of each batch, and so the trajectory, depend on it. ``instead``: the command's other way out."""
    if saved != dist.world_size:
        raise PhraseRescoreError(
            f"cannot resume: last.pt was saved by a run of {saved} process(es), this one has "
            f"{dist.world_size} (WORLD_SIZE); relaunch with {saved} in all (torchrun --nnodes x "
            f"--nproc-per-node), or {instead}", last_path)


def resume_from_last(loop: TrainingLoop, kind: ModelKind, device, config, model, optimizer, command: str,
                     check_data: Callable[[dict], None], sampler=None) -> None:
    """Continue a run of ``train`` or ``train-cslm`` exactly from ``loop.last_path``: the weights, the
    optimizer's state, the sampler's position (when the trainer has one), the torch RNG and the loop's counters.

    ``last.pt`` is refused when its training state lacks a key this resume reads, when a setting of
    ``config.TRAJECTORY`` differs or when ``check_data`` (the trainer's checks of its inputs against the state)
    raises, each before the weights are loaded; or when its weights do not fit ``model``.
    """
    last_path = loop.last_path
    ckpt = read_checkpoint(last_path, device, kind)
    keys = ("config", "data_sha256", "optimizer", *(("sampler",) if sampler is not None else ()), "torch_rng")
    ts = check_train_state(ckpt.get("train_state"), (*keys, *loop.state), last_path, command)
    check_same_settings(ts["config"], config, config.TRAJECTORY, last_path)
    check_data(ts)
    try:
        model.load_state_dict(ckpt["state_dict"])
    except RuntimeError as e:
        raise PhraseRescoreError(f"cannot resume: the weights in last.pt do not fit this model: {str(e)[:300]}",
                                 last_path) from None
    optimizer.load_state_dict(ts["optimizer"])
    if sampler is not None:
        sampler.load_state_dict(ts["sampler"])
    torch.set_rng_state(ts["torch_rng"])
    loop.resume(ts)


def write_csv_log(path: Path, columns: list[str], rows: list[dict]) -> None:
    """The training log, one row per validation, rewritten whole (atomically) each time."""
    with atomic_open(path, "w") as f:
        w = csv.DictWriter(f, fieldnames=columns, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


class TrainingLoop:
    """The schedule of one training run into ``out_dir`` and its counters.

    ``state`` is what ``last.pt`` keeps of the loop: ``step``, the trainer's ``position`` keys (where its
    batches stand, e.g. ``pairs_seen``, or ``epoch`` and ``batch``; the trainer advances them),
    ``elapsed_s`` (training time), ``best_valid_ppl``, ``bad_evals`` (validations without improvement) and
    ``log`` (the log's rows). ``log_columns`` name the log file's columns: ``step``, ``elapsed_s``,
    ``train_loss`` (per example over the window), ``train_ppl`` (per target token over the window),
    ``valid_ppl``, ``best_valid_ppl``, the position keys and what the trainer's ``log_extra`` adds.
    ``clock`` measures the training time and the wall time of the loop.
    """

    def __init__(self, out_dir, *, max_steps: int, valid_every: int, patience: int | None,
                 time_budget_s: float | None, log_columns: list[str], desc: str, position: dict | None = None,
                 dist: Dist | None = None, clock: Callable[[], float] = time.monotonic):
        self.out = Path(out_dir)
        self.last_path, self.best_path, self.log_path = self.out / LAST, self.out / BEST, self.out / LOG
        self.max_steps, self.valid_every, self.patience = max_steps, valid_every, patience
        self.time_budget_s, self.log_columns, self.desc = time_budget_s, log_columns, desc
        self.dist, self.clock = dist if dist is not None else Dist(), clock
        self.state = {"step": 0, **(position or {}), "elapsed_s": 0.0, "best_valid_ppl": math.inf,
                      "bad_evals": 0, "log": []}
        self.last_valid = math.nan          # the latest validation perplexity
        self.validation_s = 0.0             # how long the latest validation and its checkpoints took
        self.steps_here, self.wall_s = 0, 0.0  # this call's updates and the wall time of its loop

    def resume(self, train_state: dict) -> None:
        """Take the counters and the log back from ``last.pt``'s training state; rewrite the log file."""
        self.state = {k: train_state[k] for k in self.state}
        self.state["log"] = [dict(r) for r in train_state["log"]]
        if self.dist.is_main:
            write_csv_log(self.log_path, self.log_columns, self.state["log"])

    def stop_reason(self) -> str | None:
        """Why the run stops before the next update, or None."""
        if self.state["step"] >= self.max_steps:
            return "max_steps"
        if self.time_budget_s is not None and self.budget_used() >= self.time_budget_s:
            return "time_budget"
        if self.patience is not None and self.state["bad_evals"] >= self.patience:
            return "patience"
        return None

    def budget_used(self) -> float:
        """The training time so far plus what the validation at the end will take (rank 0's clock decides for
        every rank)."""
        return self.dist.broadcast([self.state["elapsed_s"] + self.validation_s])[0]

    def steps_in_budget(self, steps: int, update_s: float) -> int:
        """The step the time budget will stop at (at most ``max_steps``): each step to come takes this run's
        mean update time (``update_s`` over its ``steps`` updates) and its share of a validation."""
        if self.time_budget_s is None or steps <= 0:
            return self.max_steps
        per_step = update_s / steps + self.validation_s / self.valid_every
        left = max(0.0, self.time_budget_s - self.state["elapsed_s"] - self.validation_s)
        ahead = self.max_steps if per_step <= 0 else left / per_step
        return max(self.state["step"], min(self.max_steps, self.state["step"] + int(ahead)))

    def _show(self, bar, loss: float, steps: int, update_s: float) -> None:
        """Refresh the bar's loss and, under a time budget, its total: the ETA is then the budget's end."""
        bar.set_postfix(loss=f"{loss:.3f}", valid_ppl=f"{self.last_valid:.2f}", refresh=False)
        if self.time_budget_s is not None:
            bar.total = self.steps_in_budget(steps, update_s)

    def _timed(self, validate_and_save: Callable[[bool], None]) -> None:
        """A scheduled validation and its checkpoints, their time counted as training time."""
        t0 = self.clock()
        validate_and_save(on_schedule=True)
        self.validation_s = self.clock() - t0
        self.state["elapsed_s"] += self.validation_s

    def per_second(self, examples_per_step: int) -> float:
        """Examples per second of this call's loop (validations included)."""
        return self.steps_here * examples_per_step / self.wall_s if self.wall_s > 0 and self.steps_here else 0.0

    def run(self, train_step: Callable[[], tuple[float, int, int]], validate: Callable[[], float],
            save: Callable[[Path, dict | None], None], own_state: Callable[[], dict],
            log_extra: Callable[[], dict], held_out: bool) -> str:
        """Train until a stop rule holds; returns its name (``max_steps``, ``time_budget`` or ``patience``).

        :param train_step: one update; returns (the mean loss per example, the examples, the target tokens).
            It advances the position keys of ``state``; ``state["step"]`` is the number of updates before it.
        :param validate: the validation perplexity (NaN when there are no held-out data).
        :param save: write the weights, with ``train_state`` (None for ``model.pt``), to the path.
        :param own_state: the trainer's part of ``last.pt``'s training state (settings, data hashes,
            optimizer, RNG...); the loop's ``state`` follows it.
        :param log_extra: the trainer's columns of the row logged now.
        :param held_out: whether there are held-out data to validate on.
        """
        state, dist = self.state, self.dist
        run_start, start_step = self.clock(), state["step"]
        window = {"loss": 0.0, "examples": 0, "tokens": 0}      # since the last validation
        bar = progress.bar(total=self.max_steps, desc=self.desc, unit="step", initial=state["step"])
        update_s = 0.0                                          # this run's time in updates

        def validate_and_save(on_schedule: bool) -> None:
            ppl = self.last_valid = validate()
            if held_out and ppl < state["best_valid_ppl"]:
                state["best_valid_ppl"] = ppl
                if dist.is_main:
                    save(self.best_path, None)
                if on_schedule:
                    state["bad_evals"] = 0
            elif not held_out:  # the model is the latest weights; patience never runs out
                if dist.is_main:
                    save(self.best_path, None)
            elif on_schedule:
                state["bad_evals"] += 1
            train_loss = window["loss"] / window["examples"] if window["examples"] else math.nan
            values = {**state, "elapsed_s": round(state["elapsed_s"], 3), "train_loss": train_loss,
                      "valid_ppl": ppl, **log_extra()}
            if "train_ppl" in self.log_columns:
                values["train_ppl"] = math.exp(window["loss"] / window["tokens"]) if window["tokens"] else math.nan
            state["log"].append({c: values[c] for c in self.log_columns})
            window.update(loss=0.0, examples=0, tokens=0)
            if dist.is_main:
                save(self.last_path, {**own_state(), **state})
                write_csv_log(self.log_path, self.log_columns, state["log"])
            dist.barrier()              # no rank runs ahead of the checkpoint
            bar.set_postfix(loss=f"{train_loss:.3f}", valid_ppl=f"{ppl:.2f}", refresh=False)

        try:
            while (stop := self.stop_reason()) is None:
                t0 = self.clock()
                loss, examples, tokens = train_step()
                state["step"] += 1
                window["loss"] += loss * examples
                window["examples"] += examples
                window["tokens"] += tokens
                took = self.clock() - t0
                state["elapsed_s"] += took
                update_s += took
                bar.update(1)
                if state["step"] % POSTFIX_EVERY == 0:
                    self._show(bar, window["loss"] / window["examples"], state["step"] - start_step, update_s)
                if state["step"] % self.valid_every == 0:
                    self._timed(validate_and_save)
            if not state["log"] or state["log"][-1]["step"] != state["step"]:
                validate_and_save(on_schedule=False)
            bar.total = state["step"]       # the run ends here, whichever rule stopped it
        finally:
            bar.close()
        self.steps_here, self.wall_s = state["step"] - start_step, self.clock() - run_start
        return stop

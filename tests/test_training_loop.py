"""The training loop the three trainers share (pipeline/training_loop.py): a run of each trainer resumed from
last.pt gives what an uninterrupted one gives, to the bit (weights, optimizer state, RNG state, log rows), and
the schedule (validations, patience, time budget, checkpoints) is what the settings say.

A fingerprint is the sha256 of the saved tensors and numbers (model.pt's and last.pt's weights, last.pt's
training state: optimizer, sampler, RNG, counters, log) and of the log file's rows, timing columns
(``elapsed_s``) and file paths left out.
"""
from __future__ import annotations

import csv
import hashlib
import json
import math
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from _trainer_runs import run_cslm

from phrase_rescore.pipeline.configs import PrepareConfig, TrainConfig, TrainSeq2SeqConfig
from phrase_rescore.pipeline.prepare import prepare
from phrase_rescore.pipeline.train import train
from phrase_rescore.pipeline.train_seq2seq import train as train_seq2seq

pytestmark = pytest.mark.usefixtures("one_thread")

UNTIMED = ("elapsed_s",)                                            # wall-clock columns differ run to run
NOT_RESULTS = ("config", "train_config", "data_sha256", "pairs_sha256")  # settings and input paths/hashes


def _digest(h, obj) -> None:
    """Feed ``obj`` (tensors, numbers, strings, lists, dicts) into ``h`` in a fixed order."""
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.numpy().tobytes() if t.dtype != torch.bfloat16 else t.view(torch.int16).numpy().tobytes())
    elif isinstance(obj, dict):
        h.update(b"{")
        for k in sorted(obj, key=str):
            if k in UNTIMED or k in NOT_RESULTS:
                continue
            h.update(repr(k).encode())
            _digest(h, obj[k])
        h.update(b"}")
    elif isinstance(obj, (list, tuple)):
        h.update(b"[")
        for x in obj:
            _digest(h, x)
        h.update(b"]")
    elif isinstance(obj, np.ndarray):
        h.update(f"A{obj.dtype}{obj.shape}".encode() + obj.tobytes())
    else:
        h.update(repr(obj).encode())


def _sha(obj) -> str:
    h = hashlib.sha256()
    _digest(h, obj)
    return h.hexdigest()[:16]


def _log_rows(path: Path) -> list:
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines()]
    with open(path, newline="") as f:
        return [{k: v for k, v in r.items() if k not in UNTIMED} for r in csv.DictReader(f)]


def fingerprint(out: Path, summary) -> dict:
    """What a run leaves behind, as short hashes: the weights of model.pt and last.pt, last.pt's optimizer
    state, the rest of its training state, the log file's rows; and the summary's steps and stop reason."""
    best = torch.load(out / "model.pt", weights_only=True)
    last = torch.load(out / "last.pt", weights_only=True)
    ts = dict(last["train_state"])
    log = out / ("train_log.jsonl" if (out / "train_log.jsonl").exists() else "train_log.csv")
    return {"model.pt": _sha(best["state_dict"]), "last.pt": _sha(last["state_dict"]),
            "optimizer": _sha(ts.pop("optimizer", None)), "train_state": _sha(ts), "log": _sha(_log_rows(log)),
            "steps": summary.steps, "stop": summary.stop_reason}


# --- the three trainers' fixed runs: 60 updates, validation every 20, and the same resumed at 40

def _pairs(tmp: Path) -> Path:
    r = random.Random(0)
    lines = set()
    while len(lines) < 400:                 # word-for-word 'translations' s_i -> t_(7i+3 mod 30)
        src = [r.randrange(30) for _ in range(r.randint(1, 4))]
        lines.add(f"{' '.join(f's{w}' for w in src)} ||| {' '.join(f't{(7 * w + 3) % 30}' for w in src)} "
                  "||| 0.1 0.2 0.3 0.4\n")
    (tmp / "table.txt").write_text("".join(sorted(lines)))
    prepare(tmp / "table.txt", tmp / "pairs", PrepareConfig(vocab_size=100, valid_fraction=0.1, seed=1))
    return tmp / "pairs"


def run_encdec(tmp: Path, out: str, steps: int, resume: bool = False):
    pairs = tmp / "pairs" if (tmp / "pairs").exists() else _pairs(tmp)
    cfg = TrainConfig(model_overrides=dict(emb_dim=16, hidden_dim=32, maxout_units=16, rank=16), init_std=0.1,
                      batch_size=16, max_steps=steps, valid_every=20, patience=2, seed=3, device="cpu",
                      resume=resume)
    return train(pairs, tmp / out, cfg)


def run_seq2seq(tmp: Path, out: str, epochs: float):
    rng = np.random.default_rng(2)
    src = [list(rng.choice([f"w{i}" for i in range(5)], rng.integers(1, 5))) for _ in range(120)]
    (tmp / "s.txt").write_text("".join(" ".join(x) + "\n" for x in src))
    (tmp / "t.txt").write_text("".join(" ".join(x[::-1]) + "\n" for x in src))
    cfg = TrainSeq2SeqConfig(str(tmp / "s.txt"), str(tmp / "t.txt"), str(tmp / out), valid_size=20, emb_dim=8,
                             hidden_dim=8, num_layers=1, batch_size=8, decay_start=1.0, seed=4, epochs=epochs,
                             save_every=5, device="cpu")
    return train_seq2seq(cfg)


def fingerprints(tmp: Path) -> dict:
    """Each trainer's runs: 60 updates straight; 40, then resumed to 60. Seq2Seq counts epochs: 2.5
    straight; 1.5, then resumed to 2.5."""
    tmp.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, run in (("encdec", run_encdec), ("cslm", run_cslm)):
        d = tmp / name
        d.mkdir(exist_ok=True)
        out[f"{name} 60"] = fingerprint(d / "a", run(d, "a", 60))
        run(d, "b", 40)
        out[f"{name} 40+20"] = fingerprint(d / "b", run(d, "b", 60, resume=True))
    d = tmp / "seq2seq"
    d.mkdir(exist_ok=True)
    out["seq2seq 2.5"] = fingerprint(d / "a", run_seq2seq(d, "a", 2.5))
    run_seq2seq(d, "b", 1.5)
    out["seq2seq 1.5+1"] = fingerprint(d / "b", run_seq2seq(d, "b", 2.5))
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory, monkeypatch_module):
    torch.set_num_threads(1)
    return fingerprints(tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as m:
        m.setenv("PHRASE_RESCORE_QUIET", "1")
        yield m


@pytest.mark.parametrize("straight, resumed", [("encdec 60", "encdec 40+20"), ("cslm 60", "cslm 40+20"),
                                               ("seq2seq 2.5", "seq2seq 1.5+1")])
def test_a_run_resumed_from_last_pt_is_the_uninterrupted_run_to_the_bit(runs, straight, resumed):
    assert runs[resumed] == runs[straight]


# --- the schedule itself, with a scripted trainer: each update's loss is 1, each validation's perplexity
# the next of a list

def _scripted(tmp_path, ppls, held_out=True, **schedule):
    from phrase_rescore.pipeline.training_loop import TrainingLoop

    loop = TrainingLoop(tmp_path, log_columns=["step", "elapsed_s", "train_loss", "valid_ppl", "best_valid_ppl"],
                        desc="test", **{"patience": None, "time_budget_s": None, **schedule})
    saved, script = [], iter(ppls)

    def save(path, train_state):
        saved.append((loop.state["step"], path.name))
        assert (train_state is None) == (path.name == "model.pt")
        if train_state is not None:
            assert train_state["mine"] == "kept" and train_state["step"] == loop.state["step"]

    stop = loop.run(lambda: (1.0, 4, 8), validate=lambda: next(script), save=save, own_state=lambda: {"mine": "kept"},
                    log_extra=dict, held_out=held_out)
    return stop, loop, saved


@pytest.mark.parametrize("schedule, ppls, held_out, stop, steps, bad_evals, best_saved_at", [
    # patience counts scheduled validations without a new best
    (dict(max_steps=100, valid_every=3, patience=2), [5, 4, 4.5, 4.6], True, "patience", 12, 2, [3, 6]),
    # a last validation off the schedule (step 7) may save a new best, but leaves patience as it was
    (dict(max_steps=7, valid_every=3, patience=5), [5, 6, 4], True, "max_steps", 7, 1, [3, 7]),
    # without held-out data model.pt is the latest weights, and patience never runs out
    (dict(max_steps=6, valid_every=2, patience=1), [math.nan] * 3, False, "max_steps", 6, 0, [2, 4, 6]),
    # a NaN perplexity with held-out data is no improvement
    (dict(max_steps=10, valid_every=2, patience=1), [3, math.nan], True, "patience", 4, 1, [2]),
    # the time budget counts the updates' time, so a budget of 0 stops before the first
    (dict(max_steps=4, valid_every=2, time_budget_s=0.0), [3], True, "time_budget", 0, 0, [0]),
])
def test_schedule(tmp_path, schedule, ppls, held_out, stop, steps, bad_evals, best_saved_at):
    got, loop, saved = _scripted(tmp_path, ppls, held_out, **schedule)
    assert (got, loop.state["step"], loop.state["bad_evals"]) == (stop, steps, bad_evals)
    assert [s for s, name in saved if name == "model.pt"] == best_saved_at
    assert [s for s, name in saved if name == "last.pt"] == [r["step"] for r in loop.state["log"]]
    with open(tmp_path / "train_log.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["step"]) for r in rows] == [r["step"] for r in loop.state["log"]] and len(rows) == len(ppls)
    assert all(float(r["train_loss"]) == 1.0 for r in rows if int(r["step"]) > 0)


def test_resume_takes_the_counters_and_rewrites_the_log(tmp_path):
    _, first, _ = _scripted(tmp_path, [5, 4], max_steps=4, valid_every=2)
    (tmp_path / "train_log.csv").write_text("step\n")         # a log a kill left behind
    from phrase_rescore.pipeline.training_loop import TrainingLoop

    again = TrainingLoop(tmp_path, max_steps=6, valid_every=2, patience=None, time_budget_s=None,
                         log_columns=["step", "elapsed_s", "train_loss", "valid_ppl", "best_valid_ppl"], desc="test")
    again.resume({**first.state, "mine": "not the loop's"})
    assert again.state == first.state and "mine" not in again.state
    assert (tmp_path / "train_log.csv").read_text().splitlines()[1:] == [
        ",".join(str(r[c]) for c in ["step", "elapsed_s", "train_loss", "valid_ppl", "best_valid_ppl"])
        for r in first.state["log"]]


def progress_every() -> int:
    from phrase_rescore.pipeline.training_loop import POSTFIX_EVERY

    return POSTFIX_EVERY


class _Clock:
    """A clock that the scripted trainer moves: each update takes 1 s, each validation ``valid_s``."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class _Bar:
    """progress.bar's stand-in: keeps every total the loop gives it."""

    def __init__(self, total=None, **kw):
        self.totals, self.n = [total], kw.get("initial", 0)

    @property
    def total(self):
        return self.totals[-1]

    @total.setter
    def total(self, value):
        self.totals.append(value)

    def update(self, k):
        self.n += k

    def set_postfix(self, **kw):
        pass

    def close(self):
        pass


@pytest.mark.parametrize("budget, valid_s", [(1200.0, 15.0), (300.0, 2.0), (600.0, 40.0)])
def test_a_time_budget_ends_the_run_within_one_update_and_the_bar_counts_to_it(tmp_path, monkeypatch, budget,
                                                                             valid_s):
    """A budget is wall time, validations included, so the run ends within one validation interval of it;
    the progress bar's total is the step the budget reaches, not ``max_steps``, so its ETA is the budget's."""
    from phrase_rescore.core import progress
    from phrase_rescore.pipeline.training_loop import TrainingLoop

    bars = []
    monkeypatch.setattr(progress, "bar", lambda **kw: bars.append(_Bar(**kw)) or bars[-1])
    clock = _Clock()

    def step():
        clock.now += 1.0
        return 1.0, 4, 8

    def validate():
        clock.now += valid_s
        return 5.0

    loop = TrainingLoop(tmp_path, max_steps=15_000, valid_every=50, patience=None, time_budget_s=budget,
                        log_columns=["step", "elapsed_s", "train_loss", "valid_ppl", "best_valid_ppl"], desc="t",
                        clock=clock)
    stop = loop.run(step, validate=validate, save=lambda path, ts: None, own_state=dict, log_extra=dict,
                    held_out=True)
    assert stop == "time_budget"
    assert budget - 50 - valid_s <= clock.now <= budget + 1, clock.now      # within one validation interval
    # the rate before the first validation leaves the validations out; from then on the total is the end
    end, totals = loop.state["step"], bars[0].totals[1:-1]
    assert totals and all(t <= budget for t in totals), totals     # 1 s an update: never max_steps
    assert all(abs(t - end) <= 0.1 * end for t in totals[50 // progress_every():]), totals
    assert bars[0].totals[-1] == bars[0].n == loop.state["step"]             # the bar ends full


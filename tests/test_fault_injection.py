"""Kills `prepare`, `train` and `score` with SIGKILL at seeded random points; the rerun gives what an
uninterrupted run gives, and nothing a killed run left is trusted.

Each stage runs one command from one starting state (a pairs folder prepared from another table; an
empty training folder; a partial output of `score` with other options). An uninterrupted run gives the
reference and its duration T; then, five times, a run from the same starting state is killed after a
seeded random delay in (0, T) and the same command is run again (`train --resume` once a `last.pt`
exists), and the results are compared with the reference. A run that ends before its kill is timed
again and its kill drawn anew from the shorter time, so every kill lands inside a run.

The killed runs are forked from this process (torch and the project already imported: no start-up
time, so the delays fall inside the work); one kill per stage is of a fresh `phrase-rescore`
process, after the run has started writing.
"""
from __future__ import annotations

import csv
import gzip
import importlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from phrase_rescore.app.cli import main
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.hashing import sha256_file
from phrase_rescore.pipeline.model.checkpoint import read_checkpoint
from phrase_rescore.pipeline.pairs import check_pairs_dir

pytestmark = pytest.mark.usefixtures("one_thread")

KILLS = 5
SEED = 20141003                         # with the test's name, the seed of its kill delays
PARTS = ("train.parquet", "valid.parquet", "vocab.json")
TINY = ["--model-overrides", "{emb_dim = 8, hidden_dim = 16, maxout_units = 8, rank = 8}", "--batch-size", "16"]

for _module in ("prepare", "train", "score"):   # loaded before the forks, as in a command that has started
    importlib.import_module(f"phrase_rescore.pipeline.{_module}")


@pytest.fixture
def rng(request):
    """The kill delays of one test: seeded by its name, whichever tests run before it."""
    return random.Random(f"{SEED}:{request.node.name}")


def _table(path: Path, n_lines: int, seed: int) -> Path:
    r = random.Random(seed)
    lines = set()
    while len(lines) < n_lines:
        src = " ".join(f"s{r.randrange(60)}" for _ in range(r.randint(1, 4)))
        tgt = " ".join(f"t{r.randrange(60)}" for _ in range(r.randint(1, 4)))
        lines.add(f"{src} ||| {tgt} ||| 0.1 0.2 0.3 0.4 ||| 0-0 ||| 1 1 1 ||| |||\n")
    path.write_text("".join(sorted(lines)))
    return path


# ------------------------------------------------------------------ running and killing commands

def _fork(argv: list[str]) -> int:
    """Start ``phrase-rescore ARGV`` in a forked child (output discarded); returns its pid."""
    pid = os.fork()
    if pid == 0:                                          # the child: run the command, never return
        code = 1
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            torch.set_num_threads(1)
            main.main(args=["--quiet", *argv], standalone_mode=False)
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    return pid


def _run_whole(argv: list[str]) -> float:
    """Run a command to its end in a forked child; returns its duration in seconds."""
    t0 = time.perf_counter()
    pid = _fork(argv)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, f"phrase-rescore {' '.join(argv)} failed"
    return time.perf_counter() - t0


def _run_killed(argv: list[str], delay: float) -> bool:
    """Start a command and SIGKILL it after ``delay`` seconds; False when it ended before the kill."""
    pid = _fork(argv)
    time.sleep(delay)
    done, _ = os.waitpid(pid, os.WNOHANG)
    if done:
        return False
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return True


def _kill_at_random_points(rng, argv: list[str], duration: float, reset, check):
    """Five times: ``reset()`` the starting state, kill ``argv`` after a seeded delay in (0, duration),
    then ``check()`` what it left (and rerun). A run that ends before its kill is timed anew."""
    kills = 0
    for _ in range(4 * KILLS):
        if kills == KILLS:
            break
        reset()
        delay = rng.uniform(0.05, 0.95) * duration
        if _run_killed(argv, delay):
            kills += 1
            check()
        else:                                             # faster this time: measure again
            reset()
            duration = min(duration, _run_whole(argv))
    assert kills == KILLS, f"only {kills} of {KILLS} kills landed inside a run"


def _cli(argv: list[str]) -> None:
    r = CliRunner().invoke(main, ["--quiet", *argv])
    assert r.exit_code == 0, r.output


def _kill_fresh_process(argv: list[str], reset, started, delay: float) -> None:
    """Kill a fresh ``phrase-rescore`` process ``delay`` seconds after ``started()`` first holds (the
    delay halved and the run redone, from ``reset()``, when it ended first)."""
    exe = Path(sys.executable).with_name("phrase-rescore")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-c", "import sys; from phrase_rescore.app.cli import main; "
                                                                "sys.exit(main())"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for _ in range(3):
        reset()
        proc = subprocess.Popen([*cmd, "--quiet", *argv], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.time() + 120
        while not started() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.002)
        time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return
        assert proc.returncode == 0, proc.stderr.read()
        delay /= 2
    raise AssertionError("every fresh run ended before it could be killed")


# ------------------------------------------------------------------ prepare

def _pairs_state(d: Path):
    """A pairs folder as train sees it: its parts' hashes, or the error train stops with."""
    try:
        check_pairs_dir(d)
    except PhraseRescoreError as e:
        return ("refused", str(e))
    return {n: sha256_file(d / n) for n in PARTS}


def _manifest(d: Path) -> dict:
    m = json.loads((d / "manifest.json").read_text())
    m.pop("tool_version")                                 # the code's hash: whoever edits the tree meanwhile
    return m


def test_prepare_killed_anywhere_leaves_the_old_folder_or_a_refused_one(tmp_path, rng):
    old_table, table = _table(tmp_path / "old.txt", 2000, 1), _table(tmp_path / "t.txt", 4000, 2)
    start = tmp_path / "start"
    _cli(["prepare", str(old_table), "--out", str(start), "--valid-fraction", "0.1"])
    (start / "notes.txt").write_text("the user's own file\n")
    old = _pairs_state(start)
    out, ref = tmp_path / "out", tmp_path / "ref"
    argv = ["prepare", str(table), "--out", str(out), "--valid-fraction", "0.1"]
    shutil.copytree(start, ref)
    duration = _run_whole(["prepare", str(table), "--out", str(ref), "--valid-fraction", "0.1"])
    new = _pairs_state(ref)
    assert isinstance(new, dict) and new != old

    def reset():
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(start, out)

    def check():
        left = _pairs_state(out)
        assert left == old or left == new or isinstance(left, tuple), left  # never a mix that train accepts
        _cli(argv)                                                         # the same command again
        assert _pairs_state(out) == new and _manifest(out) == _manifest(ref)
        assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in ref.iterdir())  # no temporary left
        assert (out / "notes.txt").read_text() == "the user's own file\n"

    _kill_at_random_points(rng, argv, duration, reset, check)
    _kill_fresh_process(argv, reset, lambda: any(out.glob(".prepare-*.tmp")), rng.uniform(0.0, 0.3) * duration)
    check()


# ------------------------------------------------------------------ train

@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    d = tmp_path_factory.mktemp("fi-pairs")
    _table(d / "t.txt", 1500, 3)
    CliRunner().invoke(main, ["--quiet", "prepare", str(d / "t.txt"), "--out", str(d / "pairs"),
                              "--valid-fraction", "0.1"])
    return d / "pairs"


def _training(d: Path) -> dict:
    last = read_checkpoint(d / "last.pt")
    best = read_checkpoint(d / "model.pt")
    with open(d / "train_log.csv") as f:
        log = [{k: v for k, v in r.items() if k != "elapsed_s"} for r in csv.DictReader(f)]
    ts = last["train_state"]
    return {"last": last["state_dict"], "best": best["state_dict"], "log": log, "step": ts["step"],
            "sampler": ts["sampler"], "optimizer": ts["optimizer"]["state"]}


def _same_training(a: dict, b: dict) -> bool:
    def same(x, y):
        if isinstance(x, dict):
            return x.keys() == y.keys() and all(same(x[k], y[k]) for k in x)
        if torch.is_tensor(x):
            return torch.equal(x, y)
        return x == y
    return same(a, b)


def test_train_killed_anywhere_resumes_to_the_same_weights_and_log(pairs, tmp_path, rng):
    out, ref = tmp_path / "out", tmp_path / "ref"
    args = ["--max-steps", "60", "--valid-every", "10", "--seed", "3", *TINY]
    argv = ["train", str(pairs), "--out", str(out), *args]
    duration = _run_whole(["train", str(pairs), "--out", str(ref), *args])
    whole = _training(ref)
    assert whole["step"] == 60 and len(whole["log"]) == 6

    def reset():
        shutil.rmtree(out, ignore_errors=True)

    def check():
        if (out / "last.pt").exists():
            step = read_checkpoint(out / "last.pt")["train_state"]["step"]   # whole, never half written
            assert step % 10 == 0 and step < 60 or step == 60
            _cli([*argv, "--resume"])
        else:
            _cli(argv)
        assert _same_training(_training(out), whole)

    _kill_at_random_points(rng, argv, duration, reset, check)
    _kill_fresh_process(argv, reset, lambda: (out / "last.pt").exists(), rng.uniform(0.0, 0.3) * duration)
    check()


# ------------------------------------------------------------------ score

@pytest.fixture(scope="module")
def model(pairs, tmp_path_factory):
    d = tmp_path_factory.mktemp("fi-model")
    CliRunner().invoke(main, ["--quiet", "train", str(pairs), "--out", str(d), "--max-steps", "20",
                              "--valid-every", "10", *TINY])
    return d / "model.pt"


def test_score_killed_anywhere_resumes_to_the_same_bytes(model, tmp_path, rng):
    table = _table(tmp_path / "t.txt", 3000, 4)
    start, out_dir, ref_dir = tmp_path / "start", tmp_path / "out", tmp_path / "ref"
    start.mkdir()
    opts = ["--chunk-lines", "200", "--threads", "1"]
    # the starting state: a killed run of another command (one column only) into the same output
    pid = _fork(["score", str(model), str(table), "--out", str(start / "t.rnn.gz"), *opts, "--columns", "logprob"])
    while _chunks_done(start / "t.rnn.gz") < 2:
        assert not os.waitpid(pid, os.WNOHANG)[0], "the run ended before it could be killed"
        time.sleep(0.002)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    assert json.loads((start / "t.rnn.gz.partial.json").read_text())["identity"]["columns"] == ["logprob"]
    argv = ["score", str(model), str(table), "--out", str(out_dir / "t.rnn.gz"), *opts]
    duration = _run_whole(["score", str(model), str(table), "--out", str(ref_dir / "t.rnn.gz"), *opts])
    whole = (ref_dir / "t.rnn.gz").read_bytes()
    assert len(gzip.decompress(whole).splitlines()) == 3000

    def reset():
        shutil.rmtree(out_dir, ignore_errors=True)
        shutil.copytree(start, out_dir)

    def check():
        final = out_dir / "t.rnn.gz"
        assert not final.exists() or final.read_bytes() == whole        # complete, or not there at all
        _cli(argv)
        assert final.read_bytes() == whole
        assert sorted(p.name for p in out_dir.iterdir()) == ["t.rnn.gz"]  # no partial output or manifest left

    _kill_at_random_points(rng, argv, duration, reset, check)
    _kill_fresh_process(argv, reset, lambda: _chunks_done(out_dir / "t.rnn.gz", ["logprob", "unk"]) >= 0,
                        rng.uniform(0.0, 0.3) * duration)
    check()


def _chunks_done(out: Path, columns=None) -> int:
    """Chunks in the partial output's manifest (of a run with ``columns``, when given); -1 when none."""
    try:
        m = json.loads(out.with_name(out.name + ".partial.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return -1
    if columns is not None and m["identity"]["columns"] != columns:
        return -1
    return m["state"]["chunks"]

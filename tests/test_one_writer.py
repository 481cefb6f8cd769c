"""One writer per output: a second command on an output another one is writing is refused at once, naming
the holder; the lock of a killed run is taken over; a lock file is the tool's own.

Every run here is a real process: the commands are forked from this process (the project already imported,
so that they start in milliseconds, as in tests/test_fault_injection.py) and run `phrase-rescore`'s own
command line; a holder is held still with SIGSTOP where a test needs it to be in the middle of its run.
The property test at the end starts two `score` runs on one output at offsets drawn from a seeded RNG.
"""
from __future__ import annotations

import fcntl
import gzip
import os
import random
import signal
import socket
import time
from pathlib import Path

import pytest
from _forked import fork_cli, tiny_model, tiny_table, wait, wait_for
from click.testing import CliRunner

from phrase_rescore.app.cli import main
from phrase_rescore.core import locks
from phrase_rescore.core.errors import PhraseRescoreError

pytestmark = pytest.mark.usefixtures("one_thread")

LOCKED = "another phrase-rescore run is writing this output"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    return tiny_model(d / "a.pt", 1), tiny_model(d / "b.pt", 2)


# ------------------------------------------------------------------ commands as real processes

_fork = fork_cli
_wait = wait
_wait_for = wait_for


def _held(lock: Path):
    """A condition: ``lock`` records its holder (written once the holder has the lock)."""
    def cond() -> bool:
        try:
            return "\nsince " in lock.read_text()
        except FileNotFoundError:
            return False
    return cond


def _score_argv(model, table, out, chunk_lines: int = 50) -> list[str]:
    return ["score", str(model), str(table), "--out", str(out), "--chunk-lines", str(chunk_lines), "--threads", "1",
            "--matmul", "torch"]


def _solo(tmp_path: Path, argv_of, name: str) -> bytes:
    """The bytes an undisturbed run writes (into a folder of its own)."""
    d = tmp_path / f"solo-{name}"
    d.mkdir()
    out = d / "out.gz"
    assert _wait(_fork(argv_of(out), d / "log")) == 0, (d / "log").read_text()
    return out.read_bytes()


# ------------------------------------------------------------------ the lock

def test_a_second_score_on_one_output_is_refused_naming_the_first(tmp_path, models):
    a, b = models
    table = tiny_table(tmp_path / "pt", 400)
    out = tmp_path / "new.gz"
    lock = tmp_path / ".new.gz.lock"
    first = _fork(_score_argv(a, table, out), tmp_path / "a.log")
    try:
        _wait_for(_held(lock), "the first run's lock")
        os.kill(first, signal.SIGSTOP)           # in the middle of its run
        r = CliRunner().invoke(main, ["--quiet", *_score_argv(b, table, out)])
        assert r.exit_code == 1
        assert r.output.startswith(f"error: {out}: {LOCKED} (PID {first} on host {socket.gethostname()}, "
                                   "`phrase-rescore score`, since "), r.output
        assert "\n" not in r.output.strip() and "Traceback" not in r.output
    finally:
        os.kill(first, signal.SIGCONT)
    assert _wait(first) == 0, (tmp_path / "a.log").read_text()
    assert out.read_bytes() == _solo(tmp_path, lambda o: _score_argv(a, table, o), "a")   # the first one's, whole
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []      # no lock, no temporary


def test_two_runs_on_one_workdir(tmp_path):
    wf = tmp_path / "wf.toml"
    wf.write_text('[workflow]\nname = "w"\nstages = ["demo-data"]\n\n[demo-data]\ntrain = 40\ndev = 5\ntest = 5\n'
                  'seed = 1\n')
    work = tmp_path / "runs" / "w"
    first = _fork(["run", str(wf), "--workdir", str(work)], tmp_path / "a.log")
    try:
        _wait_for(_held(tmp_path / "runs" / ".w.lock"), "the first run's lock")
        os.kill(first, signal.SIGSTOP)
        r = CliRunner().invoke(main, ["--quiet", "run", str(wf), "--workdir", str(work),
                                      "--set", "demo-data.seed=2"])
        assert r.exit_code == 1 and f"{LOCKED} (PID {first} on host" in r.output, r.output
    finally:
        os.kill(first, signal.SIGCONT)
    assert _wait(first) == 0, (tmp_path / "a.log").read_text()
    solo = tmp_path / "solo"
    r = CliRunner().invoke(main, ["--quiet", "run", str(wf), "--workdir", str(solo)])
    assert r.exit_code == 0, r.output
    for f in sorted((solo / "demo-data").glob("*.??")):
        assert (work / "demo-data" / f.name).read_bytes() == f.read_bytes()
    assert not (tmp_path / "runs" / ".w.lock").exists()


def test_the_lock_of_a_killed_run_is_taken_over(tmp_path, models):
    a, _ = models
    table = tiny_table(tmp_path / "pt", 60)
    out = tmp_path / "new.gz"
    pid = os.fork()
    if pid == 0:                                  # a run that took the lock and was killed
        try:
            locks.acquire(out, "--out", "score")
            os.kill(os.getpid(), signal.SIGKILL)
        finally:
            os._exit(1)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == -signal.SIGKILL
    lock = tmp_path / ".new.gz.lock"
    assert f"pid {pid}\n" in lock.read_text()     # left behind, recording a process that is gone
    r = CliRunner().invoke(main, ["--quiet", *_score_argv(a, table, out)])
    assert r.exit_code == 0, r.output
    assert not lock.exists() and len(gzip.decompress(out.read_bytes()).splitlines()) == 60


def test_a_live_holder_is_never_taken_over_whatever_its_record_says(tmp_path, models):
    # the flock decides, not the recorded pid: a record naming a dead process does not free a held lock
    a, _ = models
    table = tiny_table(tmp_path / "pt", 20)
    out = tmp_path / "new.gz"
    lock = tmp_path / ".new.gz.lock"
    lock.write_text(f"{locks.LOCK_FORMAT}\npid 999999999\nhost elsewhere\ncommand score\nsince then\n")
    fd = os.open(lock, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        r = CliRunner().invoke(main, ["--quiet", *_score_argv(a, table, out)])
        assert r.exit_code == 1 and "(PID 999999999 on host elsewhere" in r.output, r.output
        assert not out.exists()
    finally:
        os.close(fd)


@pytest.mark.parametrize("what", ["file", "link", "folder"])
def test_a_users_file_in_the_lock_files_place_is_refused_and_kept(tmp_path, models, what):
    a, _ = models
    table = tiny_table(tmp_path / "pt", 20)
    out = tmp_path / "new.gz"
    lock = tmp_path / ".new.gz.lock"
    if what == "file":
        lock.write_text("my notes\n")
    elif what == "link":
        (tmp_path / "target").write_text("mine\n")
        lock.symlink_to(tmp_path / "target")
    else:
        lock.mkdir()
    r = CliRunner().invoke(main, ["--quiet", *_score_argv(a, table, out)])
    assert r.exit_code == 1 and r.output.startswith(f"error: {lock}: phrase-rescore keeps the lock"), r.output
    assert not out.exists()
    if what == "file":
        assert lock.read_text() == "my notes\n"
    elif what == "link":
        assert lock.is_symlink() and (tmp_path / "target").read_text() == "mine\n"
    else:
        assert lock.is_dir()


def test_a_refused_run_leaves_no_folder_and_the_lock_in_a_new_folder_goes_with_it(tmp_path, models):
    a, _ = models
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    out = tmp_path / "new" / "deeper" / "out.gz"
    r = CliRunner().invoke(main, ["--quiet", *_score_argv(a, empty, out)])
    assert r.exit_code == 1 and "empty" in r.output, r.output
    assert not (tmp_path / "new").exists()
    r = CliRunner().invoke(main, ["--quiet", "prepare", str(empty), "--out", str(tmp_path / "p" / "q")])
    assert r.exit_code == 1 and "empty" in r.output, r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]


def test_locks_are_reentrant_and_not_kept_by_a_forked_child(tmp_path):
    out = tmp_path / "o"
    locks.acquire(out)
    locks.acquire(out)
    locks.release(out)
    assert (tmp_path / ".o.lock").exists()
    pid = os.fork()
    if pid == 0:          # the child's copy of the descriptor is closed at the fork; the parent keeps the lock
        code = 1
        try:
            try:
                locks.acquire(out)
            except PhraseRescoreError as e:
                code = 0 if LOCKED in str(e) else 2
        finally:
            os._exit(code)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    locks.release(out)
    assert not (tmp_path / ".o.lock").exists()
    locks.release_all()


def test_no_lock_for_a_device(tmp_path):
    locks.acquire(os.devnull)
    assert locks.held_outputs() == [] and not Path("/dev/.null.lock").exists()


# ------------------------------------------------------------------ two runs, random interleavings

INTERLEAVINGS = 24
SEED = 20240501


def test_random_interleavings_of_two_scores_on_one_output(tmp_path, models):
    """Two `score` runs with different models on one --out, the second started at a seeded random offset
    from the first (three in four within the first 60 % of a solo run, the rest up to after its end): one of them wins whole (the output is a
    solo run's bytes, nothing of the other's in it) and the other is refused with the lock's message; when
    they do not overlap, both succeed and the later one's output stands, whole."""
    a, b = models
    table = tiny_table(tmp_path / "pt", 100)
    argv = {"a": lambda o: _score_argv(a, table, o, 20), "b": lambda o: _score_argv(b, table, o, 20)}
    solo, durations = {}, []
    for k, f in argv.items():
        t0 = time.perf_counter()
        solo[k] = _solo(tmp_path, f, k)
        durations.append(time.perf_counter() - t0)
    assert solo["a"] != solo["b"]
    duration = min(durations)
    rng = random.Random(SEED)
    seen = {"refused": 0, "both": 0}
    for i in range(INTERLEAVINGS):
        d = tmp_path / f"run{i}"
        d.mkdir()
        out = d / "out.gz"
        order = ["a", "b"] if rng.random() < 0.5 else ["b", "a"]
        offset = rng.uniform(0.0, 0.6 * duration) if i % 4 else rng.uniform(0.6 * duration, 1.2 * duration)
        pids = {order[0]: _fork(argv[order[0]](out), d / f"{order[0]}.log")}
        time.sleep(offset)
        pids[order[1]] = _fork(argv[order[1]](out), d / f"{order[1]}.log")
        codes = {k: _wait(p) for k, p in pids.items()}
        logs = {k: (d / f"{k}.log").read_text() for k in pids}
        if codes["a"] == codes["b"] == 0:                       # one after the other
            seen["both"] += 1
            assert out.read_bytes() == solo[order[1]], f"interleaving {i}: offset {offset:.3f}s"
        else:
            seen["refused"] += 1
            winner = "a" if codes["a"] == 0 else "b"
            loser = "b" if winner == "a" else "a"
            assert codes[winner] == 0 and codes[loser] == 1, (i, codes, logs)
            assert logs[loser].startswith(f"error: {out}: {LOCKED} (PID {pids[winner]} on host "), (i, logs[loser])
            assert out.read_bytes() == solo[winner], f"interleaving {i}: offset {offset:.3f}s"
        assert sorted(p.name for p in d.iterdir()) == ["a.log", "b.log", "out.gz"], i   # no lock, no temporary
    # how many overlap depends on the machine's load (a busy machine stretches the start-up before the lock);
    # at least one must, so that the refusal is seen
    assert seen["refused"] >= 1, seen

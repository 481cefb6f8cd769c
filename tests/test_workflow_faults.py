"""A whole workflow run killed at seeded random points: the rerun's outputs equal an uninterrupted run's.

The four toy stages write as real ones do: ``gen`` atomically, ``square`` line by line into its output
(as a naive stage would), ``sums`` in resumable chunks with a progress record, ``report`` a directory.
The run is killed in a subprocess, either at a seeded step (``os._exit`` inside a stage, or in the
runner's progress callback between stages) or by SIGKILL after a seeded delay.

Run as a script (``python test_workflow_faults.py WORKDIR KILL_AT VERSION``) it runs the workflow in
WORKDIR as code version VERSION and exits with status 77 at step KILL_AT (0: never). The killed run takes
the test's code version, so that the source being edited while the test runs cannot make its rerun refuse
to resume ("tool version changed"): the rerun must resume because the attempt matches, not by luck.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import phrase_rescore.app.workflow as workflow
from phrase_rescore.app.workflow import ATTEMPT, MANIFEST, Registry, StageDef, load_workflow, run_workflow
from phrase_rescore.core.atomic_write import atomic_open

KILLED = 77
CHUNK = 4
SLEEP_S = 0.004
STEPS = {"done": 0, "kill_at": 0}
SPANS: dict[str, list[int]] = {}  # stage -> the steps taken while it ran (in the last run of this process)
WORKFLOW = {"workflow": {"name": "faults", "stages": ["gen", "square", "sums", "report"]}}


def step() -> None:
    """One point where the run may be killed."""
    STEPS["done"] += 1
    if STEPS["done"] == STEPS["kill_at"]:
        os._exit(KILLED)
    time.sleep(SLEEP_S)


def _ints(p: Path) -> list[int]:
    return [int(x) for x in p.read_text().split()]


def gen(ctx):
    rng = random.Random(ctx.params["seed"])
    xs = [rng.randrange(1000) for _ in range(ctx.params["n"])]
    step()
    with atomic_open(ctx.output("numbers"), "w") as f:
        f.write("".join(f"{x}\n" for x in xs[: len(xs) // 2]))
        step()  # killed here: a temporary file, never the output
        f.write("".join(f"{x}\n" for x in xs[len(xs) // 2:]))
    step()


def square(ctx):
    out = ctx.output("squares")
    for x in _ints(ctx.input("numbers")):
        with open(out, "a") as f:  # appends: a leftover of an interrupted attempt would be kept
            f.write(f"{x * x}\n")
        step()


def sums(ctx):
    """Running sums of the squares in chunks; continues an interrupted attempt from its progress record."""
    xs = _ints(ctx.input("squares"))
    partial, progress = ctx.dir / "sums.partial", ctx.dir / "progress.json"
    for tmp in ctx.dir.glob(".progress.json.*.tmp"):  # a progress record an interrupted attempt was writing
        tmp.unlink()
    done, size = 0, 0
    if ctx.resume and progress.exists():
        state = json.loads(progress.read_text())
        done, size = state["lines"], state["bytes"]
    if not partial.exists() or partial.stat().st_size < size:
        done, size = 0, 0
    partial.touch()
    os.truncate(partial, size)  # a chunk appended after the last progress record is not trusted
    total = sum(xs[:done])
    for i in range(done, len(xs), CHUNK):
        text = ""
        for x in xs[i:i + CHUNK]:
            total += x
            text += f"{total}\n"
        with open(partial, "ab") as f:
            f.write(text.encode())
            f.flush()
            os.fsync(f.fileno())
        step()
        with atomic_open(progress, "w") as f:
            json.dump({"lines": min(i + CHUNK, len(xs)), "bytes": partial.stat().st_size}, f)
        step()
    os.replace(partial, ctx.output("sums"))
    progress.unlink()
    return {"resumed_from": done}


def report(ctx):
    out = ctx.output("report")
    out.mkdir(exist_ok=True)
    (out / "count.txt").write_text(f"{len(_ints(ctx.input('numbers')))}\n")
    step()
    (out / "last.txt").write_text(f"{_ints(ctx.input('sums'))[-1]}\n")
    step()


def registry() -> Registry:
    return Registry([
        StageDef("gen", "gen", gen, {"n": 13, "seed": 5}, produces={"numbers": "numbers.txt"}),
        StageDef("square", "square", square, {}, consumes=("numbers",), produces={"squares": "squares.txt"}),
        StageDef("sums", "sums", sums, {}, consumes=("squares",), produces={"sums": "sums.txt"}, resumable=True),
        StageDef("report", "report", report, {}, consumes=("numbers", "sums"), produces={"report": "report"}),
    ])


def run(work: Path, kill_at: int = 0) -> list:
    STEPS.update(done=0, kill_at=kill_at)
    SPANS.clear()

    def echo(msg: str) -> None:  # "[stage] running (...)", "[stage] done in 0.1s"
        step()
        if " running " in msg:
            SPANS[msg[1:msg.index("]")]] = [STEPS["done"] + 1]
        elif " done " in msg:
            SPANS[msg[1:msg.index("]")]].append(STEPS["done"])
    reg = registry()
    return run_workflow(load_workflow(None, reg, data=WORKFLOW), reg, work, echo=echo)


def run_subprocess(work: Path, kill_at: int = 0) -> subprocess.Popen:
    root = os.fspath(Path(__file__).resolve().parent.parent)  # the package, installed or not
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen([sys.executable, __file__, os.fspath(work), str(kill_at), workflow.code_version()],
                            stdout=subprocess.DEVNULL, env=env)


def state(work: Path) -> dict:
    """Every file's hash, and what each manifest and attempt record says (without times)."""
    out = {}
    for p in sorted(work.rglob("*")):
        rel = p.relative_to(work).as_posix()
        if p.is_dir() or p.name == "run-log.json":
            continue
        if p.name == MANIFEST:
            m = json.loads(p.read_text())
            out[rel] = {k: m[k] for k in ("stage", "params", "inputs", "outputs")}
        elif p.name == ATTEMPT:
            out[rel] = {k: v for k, v in json.loads(p.read_text()).items() if k != "tool_version"}
        else:
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def test_killed_runs_rerun_to_the_same_outputs(tmp_path):
    run(tmp_path / "reference")
    total_steps = STEPS["done"]
    reference = state(tmp_path / "reference")
    assert len(reference) == 4 * 3 + 5 and total_steps > 30  # marker, attempt, manifest per stage; 5 outputs
    rng = random.Random(20261201)
    first, last = SPANS["sums"]
    # anywhere in the run, and at least one point inside the resumable stage after its first chunk
    anywhere = rng.sample(range(1, total_steps + 1), 6)
    inside = rng.randrange(first + 2, last)
    resumed = set()
    for k in sorted(set(anywhere) | {inside}):
        work = tmp_path / f"step-{k}"
        assert run_subprocess(work, k).wait() == KILLED
        results = run(work)
        assert state(work) == reference, f"killed at step {k}"
        if any(r.name == "sums" and r.status == "ran" and r.summary["resumed_from"] > 0 for r in results):
            resumed.add(k)
        assert {r.status for r in run(work)} == {"skipped"}
    assert inside in resumed  # killed inside the resumable stage after a chunk: it continued there
    # killed twice: the second kill lands in the rerun of the first
    for k1, k2 in ((rng.randrange(1, total_steps), rng.randrange(1, 12)) for _ in range(2)):
        work = tmp_path / f"twice-{k1}-{k2}"
        assert run_subprocess(work, k1).wait() == KILLED
        run_subprocess(work, k2).wait()
        run(work)
        assert state(work) == reference, f"killed at steps {k1}, then {k2}"


def test_sigkilled_runs_rerun_to_the_same_outputs(tmp_path):
    t0 = time.time()
    assert run_subprocess(tmp_path / "reference").wait() == 0
    wall = time.time() - t0
    reference = state(tmp_path / "reference")
    rng = random.Random(7)
    for i in range(5):
        work = tmp_path / f"kill-{i}"
        proc = run_subprocess(work)
        time.sleep(rng.uniform(0.0, wall))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        run(work)
        assert state(work) == reference, f"killed after {i}"


if __name__ == "__main__":
    workflow.code_version = lambda: sys.argv[3]  # the version of the code the test process runs
    run(Path(sys.argv[1]), int(sys.argv[2]))

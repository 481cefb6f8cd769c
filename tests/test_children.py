"""External programs die with the command that started them, and write like the tool: processPhraseTableMin
into a temporary prefix renamed into place only on success.

The commands here are real `phrase-rescore` processes, killed with real signals; the Moses programs are
stand-ins (tests/_moses_standin.py) that, where a test needs it, start a program of their own (as
mert-moses.pl starts the decoder) and wait, recording both process ids.
"""
from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _moses_standin import _script, add_process_phrase_table_min, make_standin_moses

from phrase_rescore.core import children
from phrase_rescore.moses_integration.configs import RewriteConfig
from phrase_rescore.moses_integration.rewrite import rewrite_moses_ini

FIX = Path(__file__).parent / "fixtures" / "moses"
TABLE6 = ("das Haus ||| the home ||| 0.1 0.2 0.1 0.2 0.0011 2.718282 ||| 0-0 1-1 ||| 2 12 2 ||| |||\n"
          "das Haus ||| the house ||| 0.8 0.6 0.7 0.5 0.0123 1 ||| 0-0 1-1 ||| 10 12 8 ||| |||\n")
CLI = [sys.executable, "-c", "import sys; from phrase_rescore.app.cli import main; sys.exit(main())"]

# A program that starts one of its own (as mert-moses.pl starts moses), records both pids, and waits; with
# WRITE_MINPHR it first writes part of processPhraseTableMin's output, under the name the tool gave it.
SLOW = r'''
import os, subprocess, sys, time
a = sys.argv[1:]
if os.environ.get("WRITE_MINPHR"):
    out = a[a.index("-out") + 1]
    out = out if out.endswith(".minphr") else out + ".minphr"
    f = open(out, "wb")
    f.write(b"the first bytes of a new binarized table")
    f.flush()
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
with open(os.environ["STANDIN_PIDS"] + ".tmp", "w") as p:
    p.write(f"{os.getpid()} {grandchild.pid}\n")
os.rename(os.environ["STANDIN_PIDS"] + ".tmp", os.environ["STANDIN_PIDS"])
time.sleep(300)
'''


def _alive(pid: int) -> bool:
    """The process runs (a zombie waiting for a parent to reap it does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def _wait_for(cond, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def _pids(path: Path, proc: subprocess.Popen) -> list[int]:
    _wait_for(lambda: path.exists() or proc.poll() is not None, "the stand-in to start")
    assert proc.poll() is None, proc.communicate()
    return [int(x) for x in path.read_text().split()]


def _signal_state(pid: int) -> str:
    """Each thread of ``pid`` with its state and signal masks (pending, blocked, ignored, caught), from /proc."""
    rows = []
    for task in sorted(Path(f"/proc/{pid}/task").iterdir()):
        status = (task / "status").read_text().splitlines()
        rows.append("  ".join(line for line in status if line.startswith(("Name", "State", "Sig", "ShdPnd"))))
    return "\n".join(rows)


def _all_gone(pids: list[int], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    left = [p for p in pids if _alive(p)]
    for p in left:                       # do not leave them behind for the other tests
        os.kill(p, signal.SIGKILL)
    assert not left, f"still running after their command ended: {left}"


@pytest.fixture
def compact(tmp_path):
    """A PhraseDictionaryCompact system: its ini, the rescored table, a Moses stand-in home."""
    table = tmp_path / "phrase-table.rnn.gz"
    with gzip.open(table, "wt", encoding="utf-8") as f:
        f.write(TABLE6)
    ini = tmp_path / "compact.ini"
    ini.write_text((FIX / "train-model.moses.ini").read_text().replace(
        "PhraseDictionaryMemory name=TranslationModel0", "PhraseDictionaryCompact name=TranslationModel0"))
    home = make_standin_moses(tmp_path / "mosesdecoder")
    add_process_phrase_table_min(home)
    return {"ini": ini, "table": table, "home": home}


def test_a_killed_moses_ini_keeps_the_earlier_binarized_table_and_takes_the_binarizer_along(tmp_path, compact):
    env = {**os.environ, "MOSES_HOME": str(compact["home"])}
    prefix = tmp_path / "bin" / "pt"
    argv = [*CLI, "moses-ini", str(compact["ini"]), "--table", str(compact["table"]), "--binarized-prefix",
            str(prefix)]
    # an earlier run's binarized table, which the ini of that run names
    done = subprocess.run([*argv, "--out", str(tmp_path / "earlier.ini")], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    minphr = Path(f"{prefix}.minphr")
    earlier = minphr.read_bytes()
    assert earlier == b"minphr stand-in\n"
    # the second run's binarizer is killed with it, in the middle of writing
    _script(compact["home"] / "bin" / "processPhraseTableMin", SLOW)
    pids_file = tmp_path / "pids"
    proc = subprocess.Popen([*argv, "--out", str(tmp_path / "new.ini")], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env={**env, "STANDIN_PIDS": str(pids_file), "WRITE_MINPHR": "1"})
    pids = _pids(pids_file, proc)
    proc.kill()
    proc.wait()
    _all_gone(pids)                                  # the binarizer and the program it started
    assert minphr.read_bytes() == earlier            # the earlier run's table, as it was
    assert not (tmp_path / "new.ini").exists()
    # a rerun replaces it whole, and removes what the killed run left (its temporary folder and locks)
    add_process_phrase_table_min(compact["home"])
    again = subprocess.run([*argv, "--out", str(tmp_path / "new.ini")], env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert minphr.read_bytes() == b"minphr stand-in\n"
    assert sorted(p.name for p in prefix.parent.iterdir()) == ["pt.minphr", "pt.processPhraseTableMin.log"]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".lock")]


def test_a_failed_binarizer_leaves_the_earlier_table(tmp_path, compact):
    prefix = tmp_path / "pt"
    Path(f"{prefix}.minphr").write_bytes(b"an earlier table\n")
    _script(compact["home"] / "bin" / "processPhraseTableMin", r'''
import sys
a = sys.argv[1:]
open(a[a.index("-out") + 1] + ".minphr", "wb").write(b"half")
print("out of memory")
sys.exit(3)
''')
    old = os.environ.get("MOSES_HOME")
    os.environ["MOSES_HOME"] = str(compact["home"])
    try:
        with pytest.raises(Exception, match="processPhraseTableMin exited with status 3"):
            rewrite_moses_ini(RewriteConfig(compact["ini"], compact["table"], tmp_path / "new.ini",
                                            binarized_prefix=prefix))
    finally:
        if old is None:
            os.environ.pop("MOSES_HOME")
        else:
            os.environ["MOSES_HOME"] = old
    assert Path(f"{prefix}.minphr").read_bytes() == b"an earlier table\n"
    assert "out of memory" in Path(f"{prefix}.processPhraseTableMin.log").read_text()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_killed_tune_takes_mert_moses_and_its_decoder_along(tmp_path, compact, sig):
    home = compact["home"]
    _script(home / "scripts" / "training" / "mert-moses.pl", SLOW)
    src, ref = tmp_path / "dev.fr", tmp_path / "dev.en"
    src.write_text("das haus\n")
    ref.write_text("the house\n")
    ini = tmp_path / "rescored.ini"
    rewrite_moses_ini(RewriteConfig(FIX / "train-model.moses.ini", compact["table"], ini))
    pids_file = tmp_path / "pids"
    work = tmp_path / "tune"
    proc = subprocess.Popen([*CLI, "tune", "--backend", "moses", str(ini), "--dev-src", str(src), "--dev-ref",
                             str(ref), "--workdir", str(work)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={**os.environ, "MOSES_HOME": str(home), "STANDIN_PIDS": str(pids_file)})
    pids = _pids(pids_file, proc)
    proc.send_signal(sig)
    try:
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        state = _signal_state(proc.pid)
        proc.kill()
        proc.communicate()
        _all_gone(pids)
        pytest.fail(f"tune did not end within 60 s of {sig.name}; its threads:\n{state}")
    assert proc.returncode != 0
    _all_gone(pids)
    assert not (tmp_path / ".tune.lock").exists() or sig == signal.SIGKILL


def test_run_gives_what_subprocess_run_gives(tmp_path):
    r = children.run([sys.executable, "-c", "import sys; print(sys.stdin.read().upper()); sys.exit(3)"],
                     input="abc", capture_output=True, text=True)
    assert (r.returncode, r.stdout) == (3, "ABC\n")
    r = children.run([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"])
    assert r.returncode == 128 + signal.SIGTERM
    with pytest.raises(FileNotFoundError) as e:
        children.run([str(tmp_path / "no-such-program")])
    assert e.value.filename == str(tmp_path / "no-such-program")
    (tmp_path / "not-executable").write_text("#!/bin/sh\n")
    with pytest.raises(PermissionError):
        children.run([str(tmp_path / "not-executable")])


def test_an_exception_in_the_caller_ends_the_program_and_what_it_started(tmp_path):
    pids_file = tmp_path / "pids"
    script = tmp_path / "slow"
    _script(script, SLOW)
    env = {**os.environ, "STANDIN_PIDS": str(pids_file)}
    with pytest.raises(KeyboardInterrupt):
        with children.child([str(script)], env=env) as proc:
            _wait_for(pids_file.exists, "the program to start")
            pids = [int(x) for x in pids_file.read_text().split()]
            raise KeyboardInterrupt
    assert proc.returncode is not None
    _all_gone(pids)


def _descendants(pid: int) -> dict[int, str]:
    """The processes below ``pid`` (pid: command line), from /proc."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    found, frontier = {}, [pid]
    while frontier:
        p = frontier.pop()
        for child, parent in parents.items():
            if parent == p and child not in found:
                try:
                    with open(f"/proc/{child}/cmdline", "rb") as f:
                        found[child] = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
                except OSError:
                    found[child] = ""
                frontier.append(child)
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from /proc")
def test_a_killed_build_smt_takes_the_eflomal_aligner_along(tmp_path):
    from click.testing import CliRunner

    from phrase_rescore.app.cli import main

    r = CliRunner().invoke(main, ["--quiet", "make-demo-data", "--out", str(tmp_path / "d"), "--train", "6000",
                                  "--dev", "5", "--test", "5"])
    assert r.exit_code == 0, r.output
    proc = subprocess.Popen([*CLI, "--quiet", "build-smt", str(tmp_path / "d" / "train.en"),
                             str(tmp_path / "d" / "train.fr"), "--out", str(tmp_path / "smt")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    aligners: list[int] = []

    def aligning() -> bool:
        aligners[:] = [p for p, cmd in _descendants(proc.pid).items() if "eflomal/bin/eflomal" in cmd]
        return bool(aligners) or proc.poll() is not None

    _wait_for(aligning, "eflomal to start", timeout=300)
    assert aligners, "build-smt ended before eflomal ran"
    proc.kill()
    proc.wait()
    _all_gone(aligners)


def test_a_progress_bar_starts_no_thread_that_could_take_the_commands_signals():
    """A SIGINT or SIGTERM sent to a command goes to one of its threads; only the main thread runs Python's
    handler, so the bars a command shows while it waits on a helper program must not start one (tqdm's
    monitor would). Checked in a fresh interpreter, where no other bar has run."""
    code = ("import threading\n"
            "from phrase_rescore.core.progress import bar\n"
            "with bar(total=10, desc='waiting') as b:\n"
            "    b.update(3)\n"
            "    print(sorted(t.name for t in threading.enumerate()))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "['MainThread']", r.stdout

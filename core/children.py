"""External programs that die with the command that started them.

Every program the tool runs (Moses's ``moses``, ``processPhraseTableMin``, ``mert-moses.pl``, ``extractor``,
``mert``, ``kbmira``, KenLM's ``build_binary``) starts through :func:`child` or :func:`run`, never through
:mod:`subprocess` directly, so that none outlives the command: a killed ``tune`` never leaves
``mert-moses.pl`` writing into its working folder while a rerun starts there.

Each program runs under a small watchdog (a Python process, the direct child) in a process group of its
own (``start_new_session``), which the program and everything it starts belong to (mert-moses.pl's
decoders and optimizers). The group ends, every process in it killed:

* when the command is killed, by any signal, SIGKILL included: the watchdog asks the kernel for a signal
  when its parent dies (``prctl(PR_SET_PDEATHSIG)`` on Linux; elsewhere it looks for its parent every
  second) and then kills the group;
* when the command raises, e.g. on Ctrl-C (SIGINT reaches the command's own process group, not the
  program's) or a failed write of the program's output: :func:`child` kills the group before the
  exception goes on;
* when the program ends: what it left running in its group is sent SIGTERM.

The program sees what :func:`subprocess.Popen` gives it (the same arguments, descriptors, folder and
environment, default signal handlers), and a program that cannot be started raises the same
``OSError`` as ``Popen`` (``FileNotFoundError``...), naming it. Programs that put themselves into a group of
their own escape the group, as with any process-group kill.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from typing import Iterator, Sequence

#: The watchdog: argv[1] the parent's pid, argv[2] a descriptor for reporting a failed start, then the program.
_WATCHDOG = r"""
import os, signal, sys
def end(*_):
    os.killpg(0, signal.SIGKILL)
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, end)
parent, report, argv = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
watched = False
if sys.platform.startswith("linux"):
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        watched = libc.prctl(1, signal.SIGTERM, 0, 0, 0) == 0     # PR_SET_PDEATHSIG: SIGTERM when the parent dies
    except Exception:
        pass
if os.getppid() != parent:                                        # it died before the watch began
    end()
import subprocess
try:
    proc = subprocess.Popen(argv)
except OSError as e:
    os.write(report, f"{e.errno} {e.strerror}".encode("utf-8", "replace"))
    os._exit(127)
os.close(report)
if not watched:
    import threading, time
    def watch():
        while os.getppid() == parent:
            time.sleep(1.0)
        end()
    threading.Thread(target=watch, daemon=True).start()
while True:
    try:
        rc = proc.wait()
        break
    except InterruptedError:
        pass
signal.signal(signal.SIGTERM, signal.SIG_IGN)
try:
    os.killpg(0, signal.SIGTERM)                                  # what it left running
except OSError:
    pass
sys.stdout.flush()
os._exit(rc if rc >= 0 else 128 - rc)
"""

_NOT_ALLOWED = ("start_new_session", "preexec_fn", "process_group", "pass_fds", "close_fds", "shell")


def start(argv: Sequence[str | os.PathLike], **popen_kwargs) -> subprocess.Popen:
    """Start ``argv`` under the watchdog (see the module docstring), as :class:`subprocess.Popen` with
    ``popen_kwargs`` (``stdin``, ``stdout``, ``stderr``, ``cwd``, ``env``, ``text``...); the program's exit
    status is the returned process's (a program killed by signal N: 128 + N). Use it in :func:`ended`.

    :raises OSError: the program cannot be started (as ``Popen`` raises it, naming the program).
    """
    bad = sorted(set(popen_kwargs) & set(_NOT_ALLOWED))
    assert not bad, f"not for programs run by children: {bad}"
    argv = [os.fspath(a) for a in argv]
    r, w = os.pipe()
    try:
        proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", _WATCHDOG, str(os.getpid()), str(w), *argv],
                                start_new_session=True, pass_fds=(w,), **popen_kwargs)
    except BaseException:
        os.close(r)
        raise
    finally:
        os.close(w)
    try:
        with os.fdopen(r, "rb") as f:
            report = f.read()                 # empty once the program has started
    except BaseException:
        end_group(proc)
        raise
    if report:
        proc.wait()
        code, _, message = report.decode("utf-8", "replace").partition(" ")
        raise OSError(int(code), message, argv[0])
    return proc


def end_group(proc: subprocess.Popen) -> None:
    """Kill every process of ``proc``'s group (its watchdog, the program and what that started) and reap it."""
    if proc.returncode is None:           # not reaped: its group id cannot have gone to another group
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    proc.wait()


@contextlib.contextmanager
def ended(proc: subprocess.Popen) -> Iterator[subprocess.Popen]:
    """The ``with`` block reads from or waits for ``proc`` (from :func:`start`) as it needs; leaving it waits
    for the program, and an exception in it, an interrupt included, kills the program's group first."""
    try:
        yield proc
        proc.wait()
    except BaseException:
        end_group(proc)
        raise


@contextlib.contextmanager
def child(argv: Sequence[str | os.PathLike], **popen_kwargs) -> Iterator[subprocess.Popen]:
    """:func:`start` ``argv`` for the ``with`` block, which ends as :func:`ended` says."""
    with ended(start(argv, **popen_kwargs)) as proc:
        yield proc


def run(argv: Sequence[str | os.PathLike], input: bytes | str | None = None, capture_output: bool = False,
        check: bool = False, **popen_kwargs) -> subprocess.CompletedProcess:
    """:func:`subprocess.run` for a program that dies with the command (see the module docstring).

    :raises subprocess.CalledProcessError: with ``check``, for a non-zero exit status.
    """
    if capture_output:
        popen_kwargs["stdout"] = popen_kwargs["stderr"] = subprocess.PIPE
    if input is not None:
        popen_kwargs["stdin"] = subprocess.PIPE
    with child(argv, **popen_kwargs) as proc:
        out, err = proc.communicate(input)
    if check and proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, list(argv), out, err)
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)

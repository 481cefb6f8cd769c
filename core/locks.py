"""One writer per output: an advisory lock beside every output a command writes, held for its whole run.

Two runs writing one output would interleave their bytes: each replaces the other's temporary files,
resumes the other's partial output, or renames its result over the other's. So a command first takes
the lock of each output it writes (a file, a folder, a workflow's workdir) and keeps it until it ends;
a second command on the same output is refused at once, naming the holder::

    error: /data/new.gz: another phrase-rescore run is writing this output (PID 4242 on host gpu-3,
    `phrase-rescore score`, since 2024-05-01 12:00:00 UTC); wait for it to end, or choose another path

The lock is ``fcntl.flock`` on the lock file ``.NAME.lock`` beside the output ``NAME`` (in the same
folder: for an output folder ``runs/x``, ``runs/.x.lock``). The file records the holder's process id, host
and command, for the message only: the lock is the ``flock``, which the kernel releases when the holder
ends however it ends (a kill included), so the lock of a dead run is taken over without asking, and a
recorded process id is never trusted. The holder removes the lock file when it lets go; one that a
killed run left is removed by the next run that takes it.

A lock file is the tool's own: a file of that name holding anything else (a user's ``.x.lock``), a
symbolic link or a folder there, is refused, never written over nor removed. An output that is no regular
file or folder (``/dev/null``, a pipe) takes no lock, and nor does a name with no folder to put one in.

The locks a process holds are re-entrant (taking one again is a no-op) and released together by
:func:`release_all` (the command line does it when a command ends). A child process made by ``fork``
(a multiprocessing pool's worker) holds none of them: the kernel shares a ``flock`` with a forked child,
so the child's copies are closed at the fork, and a worker outliving its parent keeps no output locked.
Programs started through :mod:`.children` never inherit them (the descriptors close on exec).
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .errors import PhraseRescoreError

#: the first line of every lock file
LOCK_FORMAT = "phrase-rescore output lock"
_SUFFIX = ".lock"


@dataclass
class _Held:
    fd: int
    output: Path
    lock: Path
    count: int


_held: dict[str, _Held] = {}   # by the lock file's path


def _forget_in_child() -> None:
    """At a fork, in the child: close this process's lock descriptors (the parent keeps its locks)."""
    for h in _held.values():
        with contextlib.suppress(OSError):
            os.close(h.fd)
    _held.clear()


os.register_at_fork(after_in_child=_forget_in_child)


def lock_file(output: str | os.PathLike) -> Path:
    """The lock file of ``output``: ``.NAME.lock`` in the folder that holds it (links in the folder's
    path resolved, so that two spellings of one output share one lock)."""
    p = Path(os.path.abspath(os.fspath(output)))
    parent = Path(os.path.realpath(p.parent))
    return parent / f".{p.name or 'root'}{_SUFFIX}"


def _record(command: str) -> bytes:
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    return (f"{LOCK_FORMAT}\npid {os.getpid()}\nhost {socket.gethostname()}\ncommand {command}\n"
            f"since {when}\n").encode("utf-8")


def _parse(data: bytes) -> dict[str, str] | None:
    """The fields of a lock file's record; {} for an empty file (one being created); None for a file
    that is not a lock file of ours."""
    if not data:
        return {}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = text.split("\n")
    if lines[0] != LOCK_FORMAT:
        return None
    fields = {}
    for line in lines[1:]:
        key, _, value = line.partition(" ")
        if key:
            fields[key] = value
    return fields


def _read(fd: int) -> bytes:
    return os.pread(fd, 4096, 0)


def _holder(fd: int) -> str:
    """Who holds the lock on ``fd``, from its record (waiting briefly for a holder that is writing it)."""
    fields: dict[str, str] | None = {}
    for _ in range(50):
        fields = _parse(_read(fd))
        if fields is None or "since" in fields:
            break
        time.sleep(0.01)
    fields = fields or {}
    who = f"PID {fields.get('pid', '?')} on host {fields.get('host', '?')}"
    if fields.get("command"):
        who += f", `phrase-rescore {fields['command']}`"
    if fields.get("since"):
        who += f", since {fields['since']}"
    return who


def _not_ours(lock: Path, what: str) -> PhraseRescoreError:
    return PhraseRescoreError(f"phrase-rescore keeps the lock of the output beside it here, but {what}: it was "
                              "not written by phrase-rescore; move it away", lock)


def _lockable(output: Path) -> bool:
    """An output that takes a lock: a regular file or folder, or a name not taken yet."""
    try:
        st = os.stat(output)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)


def _make_parents(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing parents; the ones created, outermost first."""
    missing = [q for q in (folder, *folder.parents) if not q.exists()]
    folder.mkdir(parents=True, exist_ok=True)
    return list(reversed(missing))


def acquire(output: str | os.PathLike, option: str = "--out", command: str = "") -> list[Path]:
    """Lock ``output`` for this process until :func:`release` / :func:`release_all`, or refuse it.

    :param option: the option that named the output, for the message.
    :param command: the command that writes it, recorded for a refused run's message.
    :returns: the folders created to hold the lock file (missing parents of ``output``), outermost first.
    :raises PhraseRescoreError: another live process holds the lock (naming its PID and host), or a file
        that is not a lock file of ours is in the lock file's place.
    """
    out = Path(os.path.abspath(os.fspath(output)))
    if not _lockable(out):
        return []
    lock = lock_file(out)
    key = os.fspath(lock)
    if key in _held:
        _held[key].count += 1
        return []
    try:
        created = _make_parents(lock.parent)
    except OSError:
        return []               # no folder to write into: the command's own write will say why
    while True:
        fd = _open(lock, out, option)
        if fd is None:
            return created      # a folder we may not write in: the command's own write will say why
        try:
            taken = _take(fd, lock, out, option)
            if taken:
                os.ftruncate(fd, 0)
                os.pwrite(fd, _record(command), 0)
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise
        if taken:
            _held[key] = _Held(fd, out, lock, 1)
            return created
        os.close(fd)            # a holder that was letting go removed the file we opened: again


def _open(lock: Path, out: Path, option: str) -> int | None:
    """The lock file, opened (created when missing), never through a link; None where it may not be created."""
    try:
        return os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise _not_ours(lock, "a symbolic link is in its place") from None
        if e.errno == errno.EISDIR:
            raise _not_ours(lock, "a folder is in its place") from None
        if e.errno in (errno.EACCES, errno.EROFS, errno.EPERM):
            return None
        raise PhraseRescoreError(f"cannot create the lock file of {option} {out}: {e.strerror}", lock) from None


def _take(fd: int, lock: Path, out: Path, option: str) -> bool:
    """``flock`` the open lock file ``fd``; False when the file at ``lock`` is no longer the one opened.

    :raises PhraseRescoreError: another process holds it, or it is not a lock file of ours.
    """
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise _not_ours(lock, "something other than a regular file is in its place")
    if _parse(_read(fd)) is None:
        raise _not_ours(lock, "it holds something else")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise PhraseRescoreError(f"another phrase-rescore run is writing this output ({_holder(fd)}); two runs "
                                 f"on one output would mix their writes: wait for it to end, or give {option} "
                                 "another path", out) from None
    try:
        now = os.stat(lock, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
        return False
    if _parse(_read(fd)) is None:
        raise _not_ours(lock, "it holds something else")
    return True


def release(output: str | os.PathLike, all_holds: bool = False) -> None:
    """Let go of ``output``'s lock taken by :func:`acquire` (once per acquire, or at once with
    ``all_holds``); the last one removes the lock file."""
    key = os.fspath(lock_file(output))
    h = _held.get(key)
    if h is None:
        return
    h.count = 0 if all_holds else h.count - 1
    if h.count <= 0:
        _let_go(_held.pop(key))


def _let_go(h: _Held) -> None:
    try:                    # removed while still locked, so that no other run takes a file about to vanish
        st = os.fstat(h.fd)
        now = os.stat(h.lock, follow_symlinks=False)
        if (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
            os.unlink(h.lock)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        os.close(h.fd)


def release_all() -> None:
    """Let go of every lock this process holds (the end of a command)."""
    while _held:
        _let_go(_held.popitem()[1])


def held_outputs() -> list[Path]:
    """The outputs this process holds locks on, in the order taken."""
    return [h.output for h in _held.values()]


def held_in(folder: str | os.PathLike) -> list[tuple[Path, Path]]:
    """(output, lock file) of the locks this process holds whose lock files are in ``folder``."""
    real = Path(os.path.realpath(folder))
    return [(h.output, h.lock) for h in _held.values() if h.lock.parent == real]


@contextlib.contextmanager
def holding(output: str | os.PathLike, option: str = "--out", command: str = "") -> Iterator[list[Path]]:
    """:func:`acquire` ``output`` for the ``with`` block; yields the folders created for the lock file."""
    created = acquire(output, option, command)
    try:
        yield created
    finally:
        release(output)

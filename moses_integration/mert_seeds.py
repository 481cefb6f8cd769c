"""MERT's seeds: one for each iteration of a tuning run, with either backend.

A tuning run seeded ``s`` draws its random restarts (MERT's random starting points; kbmira's order of the
sentences) anew in every iteration ``i``, from the seed ``s * 1000 + i`` (:func:`iteration_seed`). So each
iteration explores other starting points than the one before it (with the same draw every time, an
iteration whose new n-best entries do not move the earlier optima returns the same weights, and
mert-moses.pl stops), and two runs with different seeds never share a draw.

The embedded MERT calls :func:`iteration_seed` itself. mert-moses.pl gives ``mert`` either no seed (it then
seeds from the clock, to the second) or ``1000 * i`` in every run alike (``--predictable-seeds``), and has
no option for a seed of each iteration. So ``tune`` points its ``--mertdir`` at a folder of its own
(:func:`write_launchers`): ``mert`` and ``kbmira`` there are small launchers that read the iteration from
the file names mert-moses.pl passes (``--ifile runI.init.opt``, ``--dense-init runI.dense``) and run the
real program with ``-r`` and that iteration's seed added (:func:`seeded_command`); ``extractor``, ``pro``
and ``evaluator`` link to the real ones. The launcher runs::

    python -m phrase_rescore.moses_integration.mert_seeds REAL_PROGRAM SEED ARGS...
"""
from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path
from typing import Sequence

from phrase_rescore.core.atomic_write import atomic_open
from phrase_rescore.core.errors import PhraseRescoreError

#: a run's iterations are numbered below this; iteration i of seed s uses s * ITERATIONS_PER_SEED + i
ITERATIONS_PER_SEED = 1000
#: mert and kbmira read -r as a C int
SEED_MODULUS = 2 ** 31
#: the programs mert-moses.pl runs from --mertdir: those given a seed, and those linked as they are
SEEDED = ("mert", "kbmira")
LINKED = ("extractor", "pro", "evaluator")
#: the options whose file names say the iteration (mert's --ifile, kbmira's --dense-init; with
#: --historic-bests, --ifile lists every earlier iteration's file first and this one's last)
ITERATION_OPTIONS = ("--ifile", "--dense-init")
RUN_FILE = re.compile(r"run(\d+)\.")
#: the first lines of a launcher this module wrote (another file in its place is not overwritten)
MARK = "# phrase-rescore: runs Moses's {name} with a seed of its own in each MERT iteration"


def iteration_seed(seed: int, iteration: int) -> int:
    """The seed of iteration ``iteration`` (1, 2, ...) of a tuning run seeded ``seed``."""
    return (int(seed) * ITERATIONS_PER_SEED + int(iteration)) % SEED_MODULUS


def iteration_of(args: Sequence[str]) -> int:
    """The iteration mert-moses.pl runs ``mert`` or ``kbmira`` for, from their arguments.

    :raises PhraseRescoreError: no ``--ifile``/``--dense-init`` value names a ``runI.`` file.
    """
    found = None
    for i, a in enumerate(args):
        flag, eq, value = a.partition("=")
        if flag not in ITERATION_OPTIONS:
            continue
        if not eq:
            value = args[i + 1] if i + 1 < len(args) else ""
        for name in value.split(","):
            m = RUN_FILE.match(os.path.basename(name))
            if m:
                found = int(m.group(1))
    if found is None:
        raise PhraseRescoreError("cannot tell the MERT iteration from the optimizer's arguments: expected "
                                 f"{' or '.join(ITERATION_OPTIONS)} naming a runI. file, as mert-moses.pl "
                                 f"passes; got: {' '.join(args)}")
    return found


def seeded_command(program: str, seed: int, args: Sequence[str]) -> list[str]:
    """``program`` with ``args`` and ``-r`` the seed of the iteration that ``args`` name."""
    return [program, *args, "-r", str(iteration_seed(seed, iteration_of(args)))]


def write_launchers(folder: str | os.PathLike, bin_dir: str | os.PathLike, seed: int) -> Path:
    """Fill ``folder`` with what mert-moses.pl runs from ``--mertdir``: launchers of ``bin_dir``'s
    ``mert`` and ``kbmira`` that seed each iteration, links to its other programs. Returns ``folder``.

    :raises PhraseRescoreError: a file in ``folder`` that this function did not write is in the way.
    """
    folder, bin_dir = Path(folder), Path(bin_dir)
    folder.mkdir(parents=True, exist_ok=True)
    for name in LINKED:
        link = folder / name
        if link.is_symlink():
            link.unlink()
        elif link.exists():
            raise PhraseRescoreError(f"is in the way of the link to Moses's {name} (not written by tune); "
                                     "move it or tune in another working directory", link)
        os.symlink(bin_dir / name, link)
    for name in SEEDED:
        path = folder / name
        mark = MARK.format(name=name)
        if path.is_symlink() or (path.exists() and mark not in path.read_text(encoding="utf-8", errors="replace")):
            raise PhraseRescoreError(f"is in the way of the launcher of Moses's {name} (not written by tune); "
                                     "move it or tune in another working directory", path)
        argv = [sys.executable, "-m", __name__, os.fspath(bin_dir / name), str(int(seed))]
        with atomic_open(path, "w") as f:
            f.write(f"#!/bin/sh\n{mark}\nexec {shlex.join(argv)} \"$@\"\n")
        path.chmod(0o755)
    return folder


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m phrase_rescore.moses_integration.mert_seeds PROGRAM SEED ARGS...``: run PROGRAM seeded
    for the iteration ARGS name (replaces this process)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 2 or not argv[1].isdigit():
        print("usage: python -m phrase_rescore.moses_integration.mert_seeds PROGRAM SEED ARGS...", file=sys.stderr)
        return 2
    try:
        cmd = seeded_command(argv[0], int(argv[1]), argv[2:])
    except PhraseRescoreError as e:
        print(f"{Path(argv[0]).name} launcher: {e}", file=sys.stderr)
        return 2
    try:
        os.execv(cmd[0], cmd)
    except OSError as e:
        print(f"{Path(argv[0]).name} launcher: cannot run {cmd[0]}: {e}", file=sys.stderr)
        return 127
    return 0   # not reached: execv replaces the process


if __name__ == "__main__":
    sys.exit(main())

"""`phrase-rescore` commands as real processes that start in milliseconds: forked from the test process (the
project already imported), each running the command line's own ``main`` (as tests/test_fault_injection.py)."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Callable

import torch
from _tables import write_table

from phrase_rescore.app.cli import main
from phrase_rescore.pipeline.model.checkpoint import save_checkpoint
from phrase_rescore.pipeline.model.encdec import EncDecConfig, RNNEncoderDecoder
from phrase_rescore.pipeline.vocab import Vocab, Vocabularies

SRC = ["das", "haus", "ist", "klein", "ein", "der", "mann", "und"]
TGT = ["the", "house", "is", "small", "a", "man", "and", "little"]


def fork_cli(argv: list[str], log: Path, before: Callable[[], None] | None = None) -> int:
    """Start ``phrase-rescore --quiet ARGV`` in a forked child, its stdout and stderr into ``log``
    (``before()`` run in the child first); returns its pid."""
    pid = os.fork()
    if pid == 0:                                          # the child: run the command, never return
        code = 1
        try:
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            sys.stdout = open(1, "w", closefd=False)      # not the test's captured streams
            sys.stderr = open(2, "w", closefd=False)
            torch.set_num_threads(1)
            if before is not None:
                before()
            main.main(args=["--quiet", *argv], standalone_mode=False)
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:
            import traceback
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return pid


def wait(pid: int) -> int:
    """The exit status of the forked command ``pid`` (-N: killed by signal N)."""
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def run_cli(argv: list[str], log: Path, before: Callable[[], None] | None = None) -> tuple[int, str]:
    """Run ``phrase-rescore --quiet ARGV`` in a forked child to its end: (exit status, its output)."""
    code = wait(fork_cli(argv, log, before))
    return code, log.read_text()


def wait_for(cond: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.002)


def tiny_model(path: Path, seed: int) -> Path:
    """A small encoder-decoder checkpoint over :data:`SRC` and :data:`TGT` (untrained, seeded)."""
    torch.manual_seed(seed)
    vocabs = Vocabularies(Vocab(["<eos>", "<unk>"] + SRC), Vocab(["<eos>", "<unk>"] + TGT))
    cfg = EncDecConfig(len(vocabs.source), len(vocabs.target), emb_dim=8, hidden_dim=16, maxout_units=8, rank=6,
                       bias=True, init_std=0.3)
    save_checkpoint(path, RNNEncoderDecoder(cfg), vocabs)
    return path


def tiny_table(path: Path, n: int, seed: int = 0) -> Path:
    """A phrase table of ``n`` distinct lines over :data:`SRC` and :data:`TGT`, sorted."""
    import random

    r = random.Random(seed)
    lines = set()
    while len(lines) < n:
        src = " ".join(r.choice(SRC) for _ in range(r.randint(1, 5)))
        tgt = " ".join(r.choice(TGT) for _ in range(r.randint(1, 5)))
        lines.add(f"{src} ||| {tgt} ||| 0.5 0.5 0.5 0.5 ||| 0-0 ||| 1 1 1 ||| |||".encode())
    write_table(path, sorted(lines))
    return path

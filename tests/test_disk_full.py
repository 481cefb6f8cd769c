"""A full disk while a command writes is one line naming the file, never a traceback; nothing half-written is
trusted by a rerun; a command that fails removes the folders it created that hold none of its outputs.

The disk is a real one that fills: a small tmpfs mounted for the test (as root), else a real limit on the
size of any file the command writes (RLIMIT_FSIZE: the write fails with EFBIG, "File too large"). The
commands run as real processes (forked, see tests/_forked.py).
"""
from __future__ import annotations

import gzip
import random
import re
import resource
import subprocess
from pathlib import Path

import pytest
from _forked import run_cli, tiny_model, tiny_table
from click.testing import CliRunner

from phrase_rescore.app.cli import main

pytestmark = pytest.mark.usefixtures("one_thread")

FULL = r"(No space left on device|File too large)"
TINY = ["--model-overrides", "{emb_dim = 8, hidden_dim = 16, maxout_units = 8, rank = 8}", "--batch-size", "16"]


class SmallDisk:
    """A folder where at most ``size`` bytes fit (tmpfs), or where no file may grow past ``size`` bytes
    (RLIMIT_FSIZE, set in the command's process by :meth:`before`)."""

    def __init__(self, kind: str, folder: Path, size: int):
        self.kind, self.folder, self.size = kind, folder, size
        self.mounted = False
        folder.mkdir()
        if kind == "tmpfs":
            r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                               capture_output=True, text=True)
            if r.returncode != 0:
                pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip()}); the RLIMIT_FSIZE case runs instead")
            self.mounted = True

    def before(self) -> None:
        if self.kind == "fsize":
            resource.setrlimit(resource.RLIMIT_FSIZE, (self.size, self.size))

    def grow(self, size: int) -> None:
        """Room for ``size`` bytes from now on."""
        self.size = size
        if self.mounted:
            subprocess.run(["mount", "-o", f"remount,size={size}", str(self.folder)], check=True)

    def close(self) -> None:
        if self.mounted:
            subprocess.run(["umount", str(self.folder)], check=False)


@pytest.fixture(params=["tmpfs", "fsize"])
def small_disk(request, tmp_path):
    disks = []

    def make(size: int) -> SmallDisk:
        disks.append(SmallDisk(request.param, tmp_path / f"disk{len(disks)}", size))
        return disks[-1]

    yield make
    for d in disks:
        d.close()


def _one_line(out: str, path_pattern: str) -> None:
    assert "Traceback" not in out, out
    assert re.fullmatch(rf"error: {path_pattern}: {FULL}\n", out), out


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    d = tmp_path_factory.mktemp("pairs")
    r = random.Random(0)
    lines = set()
    while len(lines) < 200:
        src = " ".join(f"s{r.randrange(60)}" for _ in range(r.randint(1, 4)))
        tgt = " ".join(f"t{r.randrange(60)}" for _ in range(r.randint(1, 4)))
        lines.add(f"{src} ||| {tgt} ||| 0.1 0.2 0.3 0.4 ||| 0-0 ||| 1 1 1 ||| |||\n")
    (d / "pt").write_text("".join(sorted(lines)))
    res = CliRunner().invoke(main, ["--quiet", "prepare", str(d / "pt"), "--out", str(d / "pairs")])
    assert res.exit_code == 0, res.output
    return d / "pairs"


def _temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.name.endswith((".tmp", ".lock")))


def test_train_on_a_full_disk_names_the_checkpoint_and_leaves_no_folder(tmp_path, small_disk, pairs):
    disk = small_disk(16 * 1024)                    # less than one checkpoint
    code, out = run_cli(["train", str(pairs), "--out", str(disk.folder / "m"), "--max-steps", "4",
                         "--valid-every", "2", *TINY], tmp_path / "log", disk.before)
    assert code == 1
    _one_line(out, re.escape(str(disk.folder / "m")) + r"/(model|last)\.pt")
    assert sorted(p.name for p in disk.folder.iterdir()) == []      # its folder, marker and all, is gone


def test_train_that_fills_the_disk_after_its_best_model_keeps_it_and_resumes_nothing_half_written(
        tmp_path, small_disk, pairs):
    disk = small_disk(48 * 1024)                    # room for model.pt, not for last.pt beside it
    argv = ["train", str(pairs), "--out", str(disk.folder / "m"), "--max-steps", "4", "--valid-every", "2", *TINY]
    code, out = run_cli(argv, tmp_path / "log", disk.before)
    assert code == 1
    _one_line(out, re.escape(str(disk.folder / "m" / "last.pt")))
    assert sorted(p.name for p in (disk.folder / "m").iterdir()) == [".phrase-rescore-output", "model.pt"]
    disk.grow(4 << 20)
    code, out = run_cli([*argv, "--resume"], tmp_path / "log2", disk.before)     # no half-written last.pt
    assert (code, out) == (1, f"error: {disk.folder / 'm'}: nothing to resume: no last.pt here\n")
    code, out = run_cli(argv, tmp_path / "log3", disk.before)
    assert code == 0, out
    assert _temporaries(disk.folder) == []


def test_train_cslm_on_a_full_disk_names_the_checkpoint(tmp_path, small_disk):
    disk = small_disk(16 * 1024)
    corpus = tmp_path / "corpus"
    r = random.Random(1)
    corpus.write_text("".join(" ".join(f"w{r.randrange(40)}" for _ in range(r.randint(3, 9))) + "\n"
                              for _ in range(300)))
    code, out = run_cli(["train-cslm", str(corpus), "--out", str(disk.folder / "lm"), "--max-steps", "10",
                         "--valid-every", "5", "--valid-size", "20", "--emb-dim", "8", "--hidden1", "16",
                         "--hidden2", "8", "--batch-size", "32", "--order", "3"], tmp_path / "log", disk.before)
    assert code == 1
    _one_line(out, re.escape(str(disk.folder / "lm")) + r"/[a-z0-9_.-]+")   # a checkpoint or the corpus's ids
    assert _temporaries(disk.folder) == []


def test_score_on_a_full_disk_names_its_file_and_a_rerun_with_room_gives_a_whole_output(tmp_path, small_disk):
    model = tiny_model(tmp_path / "m.pt", 1)
    table = tiny_table(tmp_path / "pt", 1500)
    disk = small_disk(12 * 1024)
    argv = ["score", str(model), str(table), "--out", str(disk.folder / "new.gz"), "--chunk-lines", "100",
            "--threads", "1", "--matmul", "torch"]
    code, out = run_cli(argv, tmp_path / "log", disk.before)
    assert code == 1
    _one_line(out, re.escape(str(disk.folder / "new.gz")) + r"\.partial(\.json)?")
    disk.grow(4 << 20)
    code, out = run_cli(argv, tmp_path / "log2", disk.before)
    assert code == 0, out
    data = (disk.folder / "new.gz").read_bytes()
    ref = tmp_path / "ref.gz"
    code, out = run_cli([*argv[:4], str(ref), *argv[5:]], tmp_path / "log3")
    assert code == 0, out
    assert data == ref.read_bytes() and len(gzip.decompress(data).splitlines()) == 1500
    assert _temporaries(disk.folder) == []


def test_prepare_on_a_full_disk_names_its_output(tmp_path, small_disk):
    table = tiny_table(tmp_path / "pt", 3000)
    disk = small_disk(24 * 1024)
    code, out = run_cli(["prepare", str(table), "--out", str(disk.folder / "pairs")], tmp_path / "log", disk.before)
    assert code == 1
    _one_line(out, re.escape(str(disk.folder / "pairs")) + r"(/\S+)?")
    assert _temporaries(disk.folder) == []

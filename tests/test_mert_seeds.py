"""MERT's seed of each iteration: the formula both backends share, and the launchers through which
mert-moses.pl's mert and kbmira receive it."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.moses_integration.mert_seeds import (
    LINKED,
    iteration_of,
    iteration_seed,
    seeded_command,
    write_launchers,
)


@pytest.mark.parametrize("seed, iteration, want", [
    (1, 1, 1001), (1, 2, 1002), (2, 1, 2001),   # seed 2's first draw is not seed 1's second
    (0, 1, 1), (7, 999, 7999),
    (2_147_484, 1, (2_147_484_000 + 1) % 2 ** 31),   # mert reads -r as a C int
])
def test_iteration_seed(seed, iteration, want):
    assert iteration_seed(seed, iteration) == want


@pytest.mark.parametrize("args, want", [
    # mert, as mert-moses.pl runs it; with --historic-bests, this iteration's file comes last
    (["-d", "14", "--sctype", "BLEU", "-n", "20", "--ffile", "run3.features.dat", "--scfile", "run3.scores.dat",
      "--ifile", "run3.init.opt"], 3),
    (["-d", "14", "--ifile", "run1.init.opt,run2.init.opt,run12.init.opt"], 12),
    (["--ifile=/w/mert-work/run4.init.opt", "-d", "3"], 4),
    # kbmira
    (["--dense-init", "run5.dense", "--ffile", "run5.features.dat", "-o", "mert.out"], 5),
])
def test_the_iteration_is_read_from_the_files_mert_moses_passes(args, want):
    assert iteration_of(args) == want
    assert seeded_command("/m/bin/mert", 7, args) == ["/m/bin/mert", *args, "-r", str(7000 + want)]


@pytest.mark.parametrize("args", [[], ["-d", "3", "--ffile", "run1.features.dat"], ["--ifile"],
                                  ["--ifile", "weights.txt"]])
def test_arguments_without_an_iteration_are_refused(args):
    with pytest.raises(PhraseRescoreError, match="cannot tell the MERT iteration"):
        iteration_of(args)


@pytest.fixture
def bin_dir(tmp_path):
    """A Moses bin folder whose mert and kbmira print their arguments."""
    d = tmp_path / "moses-bin"
    d.mkdir()
    for name in ("mert", "kbmira", *LINKED):
        p = d / name
        p.write_text(f"#!{sys.executable}\nimport json, sys\nprint(json.dumps(['{name}'] + sys.argv[1:]))\n")
        p.chmod(0o755)
    return d


def test_the_launchers_run_the_real_programs_with_the_iterations_seed(tmp_path, bin_dir):
    folder = write_launchers(tmp_path / "work dir" / "mert-bin", bin_dir, 7)   # a path with a space
    for name in LINKED:
        assert os.readlink(folder / name) == str(bin_dir / name)
    got = subprocess.run([folder / "mert", "-d", "3", "--ifile", "run2.init.opt"], capture_output=True, text=True,
                         check=True).stdout
    assert got.strip() == '["mert", "-d", "3", "--ifile", "run2.init.opt", "-r", "7002"]'
    got = subprocess.run([folder / "kbmira", "--dense-init", "run1.dense", "-o", "out"], capture_output=True,
                         text=True, check=True).stdout
    assert got.strip() == '["kbmira", "--dense-init", "run1.dense", "-o", "out", "-r", "7001"]'
    bad = subprocess.run([folder / "mert", "-d", "3"], capture_output=True, text=True)
    assert bad.returncode == 2 and "mert launcher: cannot tell the MERT iteration" in bad.stderr
    # written again (another seed, another Moses): its own files are replaced
    other = tmp_path / "other-bin"
    other.mkdir()
    write_launchers(folder, other, 8)
    assert os.readlink(folder / "extractor") == str(other / "extractor")
    assert f"{other / 'mert'} 8 " in (folder / "mert").read_text()


@pytest.mark.parametrize("name, symlink", [("mert", False), ("kbmira", True), ("extractor", False)])
def test_a_file_it_did_not_write_is_left_alone(tmp_path, bin_dir, name, symlink):
    folder = tmp_path / "mert-bin"
    folder.mkdir()
    theirs = folder / name
    if symlink:
        theirs.symlink_to(bin_dir / "pro")
    else:
        theirs.write_text("a user's file\n")
    with pytest.raises(PhraseRescoreError, match="is in the way"):
        write_launchers(folder, bin_dir, 1)
    assert theirs.is_symlink() if symlink else theirs.read_text() == "a user's file\n"

"""fileio: the output-path check, deterministic gzip, durable atomic writes, killed runs' temporary
files, and file errors that reach the user as `error: FILE: ...` instead of a traceback."""
from __future__ import annotations

import errno
import gzip
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from phrase_rescore.app.cli import main as cli
from phrase_rescore.core.atomic_write import atomic_open, atomic_path
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.file_errors import describe_file_error
from phrase_rescore.core.gzip_writing import gzip_writer
from phrase_rescore.core.output_paths import check_outputs
from phrase_rescore.core.reading import open_text_read
from phrase_rescore.core.temp_names import HOST_TAG, remove_stale_temps
from phrase_rescore.pipeline.model.checkpoint import save_checkpoint
from phrase_rescore.pipeline.model.encdec import EncDecConfig, RNNEncoderDecoder
from phrase_rescore.pipeline.vocab import Vocab, Vocabularies

# ------------------------------------------------------------------------------------ check_outputs

@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("in.txt").write_bytes(b"input\n")
    Path("other.txt").write_bytes(b"other\n")
    Path("indir").mkdir()
    Path("indir/inner.txt").write_bytes(b"inner\n")
    os.symlink(tmp_path / "in.txt", "link.txt")
    os.link("in.txt", "hard.txt")
    os.symlink(tmp_path / "indir", "dirlink")
    return tmp_path


# (inputs, outputs, output folders, expected message fragment or None when accepted)
CHECK_CASES = [
    ({"A": "in.txt"}, {"--out": "new.txt"}, {}, None),
    ({"A": "in.txt"}, {"--out": "in.txt"}, {}, "--out would overwrite the input A in.txt: "),
    ({"A": "in.txt"}, {"--out": "./x/../in.txt"}, {}, "--out would overwrite the input A in.txt: "),
    ({"A": "in.txt"}, {"--out": "link.txt"}, {}, "(through a symbolic link)"),
    ({"A": "link.txt"}, {"--out": "in.txt"}, {}, "(through a symbolic link)"),
    ({"A": "in.txt"}, {"--out": "hard.txt"}, {}, "(a hard link to it)"),
    ({"A": ["other.txt", "in.txt"]}, {"--out": "hard.txt"}, {}, "the input A in.txt"),
    ({"A": None, "B": "other.txt"}, {"--out": None, "--log": "other.txt"}, {}, "--log would overwrite the input B"),
    ({}, {"--out": "new.txt", "--rejects": "new.txt"}, {}, "--out and --rejects (new.txt) are one file"),
    ({}, {"--out": "new.txt", "--rejects": "./new.txt"}, {}, "are one file"),
    ({}, {"--out": "other.txt", "--rejects": "other.txt"}, {}, "are one file"),
    ({}, {"--out": "in.txt", "--rejects": "hard.txt"}, {}, "are one file (a hard link to it)"),
    ({}, {"--out": "new"}, {"--workdir": "new"}, "--out and --workdir (new) are one file"),
    ({}, {"--out": "wd/new.txt"}, {"--workdir": "wd"}, None),               # an output inside the output folder
    ({"A": "indir"}, {}, {"--out": "indir/model"}, None),                    # a folder inside an input folder
    ({"A": "indir/inner.txt"}, {}, {"--out": "indir"}, "the output folder --out holds the input A"),
    ({"A": "indir/inner.txt"}, {}, {"--out": "dirlink"}, "the output folder --out holds the input A"),
    ({"A": "dirlink/inner.txt"}, {}, {"--out": "indir"}, "the output folder --out holds the input A"),
    ({"A": "indir"}, {}, {"--out": "indir"}, "the output folder --out is the input A indir"),
    ({"A": "indir"}, {}, {"--out": "."}, "the output folder --out holds the input A indir"),
    ({"A": "in.txt"}, {}, {"--out": "indir"}, None),
]


@pytest.mark.parametrize("inputs, outputs, out_dirs, expected", CHECK_CASES)
def test_check_outputs(files, inputs, outputs, out_dirs, expected):
    if expected is None:
        check_outputs(inputs, outputs, out_dirs)
        return
    with pytest.raises(PhraseRescoreError) as e:
        check_outputs(inputs, outputs, out_dirs)
    assert expected in str(e.value)
    named = list(outputs.values()) + list(out_dirs.values())
    assert e.value.path in named                              # the message starts with the output's path


# ------------------------------------------------------------------------------------ deterministic gzip

def _header(path) -> tuple[int, int]:
    """(FLG, MTIME) of a gzip member's header (RFC 1952)."""
    head = Path(path).read_bytes()[:10]
    return head[3], int.from_bytes(head[4:8], "little")


@pytest.mark.parametrize("mode, data", [("wb", b"a ||| b ||| 1\n" * 500), ("w", "é ||| è ||| 1\n" * 500)])
def test_gzip_outputs_are_the_same_bytes_for_the_same_content(tmp_path, mode, data):
    outs = [tmp_path / "one.gz", tmp_path / "sub" / "two.gz"]
    for i, out in enumerate(outs):
        if i:
            time.sleep(1.1)                      # a header with the time in it would differ
        with atomic_open(out, mode) as f:
            f.write(data)
    assert outs[0].read_bytes() == outs[1].read_bytes()
    assert _header(outs[0]) == (0, 0)            # no FNAME flag, mtime 0
    assert b"one" not in outs[0].read_bytes()[:64] and b".tmp" not in outs[0].read_bytes()[:64]
    got = gzip.decompress(outs[0].read_bytes())
    assert got == (data if mode == "wb" else data.encode("utf-8"))


def test_gzip_writer_leaves_the_file_open(tmp_path):
    with open(tmp_path / "x.gz", "wb") as f:
        with gzip_writer(f) as g:
            g.write(b"x\n")
        f.write(b"")                             # still open
    assert gzip.decompress((tmp_path / "x.gz").read_bytes()) == b"x\n"


# ------------------------------------------------------------------------------------ durability

def test_atomic_write_fsyncs_the_file_before_the_rename_and_the_folder_after(tmp_path, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", os.fspath(src), os.fspath(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    target = tmp_path / "out.txt"
    with atomic_open(target, "w") as f:
        f.write("line\n")
    assert target.read_text() == "line\n"
    renames = [e for e in events if e[0] == "replace"]
    assert len(renames) == 1 and renames[0][2] == str(target)
    tmp = renames[0][1]
    assert events == [("fsync", tmp), renames[0], ("fsync", str(tmp_path))]


def test_a_folder_that_refuses_fsync_is_tolerated(tmp_path, monkeypatch):
    real_fsync = os.fsync
    synced = []

    def fsync(fd):
        path = os.readlink(f"/proc/self/fd/{fd}")
        if os.path.isdir(path):
            raise OSError(errno.EINVAL, "Invalid argument")
        synced.append(path)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with atomic_open(tmp_path / "out.txt", "wb") as f:
        f.write(b"x")
    assert (tmp_path / "out.txt").read_bytes() == b"x"
    assert len(synced) == 1 and Path(synced[0]).parent == tmp_path   # the file itself was synced


def test_a_full_disk_is_reported_against_the_output_and_leaves_nothing(tmp_path):
    target = tmp_path / "out.txt"
    target.write_bytes(b"the earlier output\n")
    with pytest.raises(OSError) as e:
        with atomic_path(target):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert e.value.filename == str(target)
    assert os.listdir(tmp_path) == ["out.txt"] and target.read_bytes() == b"the earlier output\n"


# ------------------------------------------------------------------------------------ killed runs

_KILLED_WRITER = """
import os, signal, sys
from phrase_rescore.core.atomic_write import atomic_open
with atomic_open(sys.argv[1], "wb") as f:
    f.write(b"half of it")
    f.flush()
    os.kill(os.getpid(), signal.SIGKILL)
"""


def _temps(folder: Path, name: str) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.startswith(f".{name}.") and n.endswith(".tmp"))


def test_a_killed_writers_temporary_file_is_removed_by_the_next_write(tmp_path):
    target = tmp_path / "out.txt"
    left = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(target)])
        assert r.returncode == -signal.SIGKILL
        left.append(_temps(tmp_path, "out.txt"))
    assert len(left[0]) == 1 and len(left[1]) == 1 and left[0] != left[1]   # the second removed the first's
    assert not target.exists()
    with atomic_open(target, "wb") as f:
        f.write(b"whole\n")
    assert _temps(tmp_path, "out.txt") == [] and target.read_bytes() == b"whole\n"


def test_temporary_files_of_live_processes_and_others_are_kept(tmp_path):
    target = tmp_path / "out.txt"
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        host = HOST_TAG
        other_host = "0" * 8 if host != "0" * 8 else "1" * 8
        keep = [f".out.txt.{host}-{live.pid}.abc123_x.tmp",          # a writer still running
                f".out.txt.{host}-{os.getpid()}.abc123_y.tmp",      # this process (another thread)
                f".out.txt.{other_host}-{dead_pid}.abc123_z.tmp",   # another machine on a shared folder
                f".out.txt.{host}-{dead_pid}.abc123_z.tmp.keep",    # not our name
                f".out.txt.{host}-0.abc123_z.tmp",                  # not a process id
                f".other.txt.{host}-{dead_pid}.abc123_z.tmp",       # another target's
                f"out.txt.{host}-{dead_pid}.abc123_z.tmp"]          # not hidden: not ours
        stale = f".out.txt.{host}-{dead_pid}.abc123_w.tmp"
        for name in keep + [stale]:
            (tmp_path / name).write_bytes(b"x")
        os.mkdir(tmp_path / f".out.txt.{host}-{dead_pid}.abc123_d.tmp")  # a folder: never removed
        assert remove_stale_temps(target) == [tmp_path / stale]
        assert sorted(os.listdir(tmp_path)) == sorted(keep + [f".out.txt.{host}-{dead_pid}.abc123_d.tmp"])
    finally:
        live.kill()
        live.wait()


# ------------------------------------------------------------------------------------ file errors

def test_decoding_errors_inside_a_readers_block_name_the_file(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine\n\xff\xfe not utf-8\n")
    with pytest.raises(UnicodeDecodeError) as e:
        with open_text_read(bad) as f:
            f.read()
    assert describe_file_error(e.value) == f"{bad}: not valid UTF-8 text (byte b'\\xff': invalid start byte)"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    torch.manual_seed(5)
    vocabs = Vocabularies(Vocab(["<eos>", "<unk>", "das"]), Vocab(["<eos>", "<unk>", "the"]))
    model = RNNEncoderDecoder(EncDecConfig(3, 3, emb_dim=4, hidden_dim=6, maxout_units=4, rank=3))
    path = tmp_path_factory.mktemp("model") / "model.pt"
    save_checkpoint(path, model, vocabs)
    return path


def _gzip_truncated() -> bytes:
    data = gzip.compress(b"das haus\n" * 2000)
    return data[: len(data) // 2]


# (command line with {F} for the user's file, the file's bytes, expected message after "error: F: ")
FILE_ERRORS = [
    ("build-smt {F} ok.txt --out smt", _gzip_truncated(), "the file ends too early, truncated?"),
    ("build-smt {F} ok.txt --out smt", b"\x1f\x8b\x05 not gzip at all", "not a valid gzip file"),
    ("prepare pt.txt --src-corpus {F} --tgt-corpus ok.txt --out pairs", _gzip_truncated(),
     "the file ends too early, truncated?"),
    ("score {MODEL} pt.txt --out new.txt --vocab {F}", b'{"source": ["\xff"]}', "invalid UTF-8"),
]


@pytest.mark.parametrize("line, data, expected", FILE_ERRORS)
def test_bad_user_files_give_an_error_naming_them_not_a_traceback(tmp_path, monkeypatch, tiny_model, line, data,
                                                                    expected):
    monkeypatch.chdir(tmp_path)
    Path("user.file").write_bytes(data)
    Path("ok.txt").write_bytes(b"the house\n" * 10)
    Path("pt.txt").write_bytes(b"das ||| the ||| 0.5 0.5 0.5 0.5\n")
    r = CliRunner().invoke(cli, ["--quiet"] + line.replace("{F}", "user.file").replace("{MODEL}", str(tiny_model))
                           .split())
    assert r.exit_code == 1 and isinstance(r.exception, SystemExit), r.output
    assert re.search(rf"error: user\.file(:\d+)?: {re.escape(expected)}", r.output), r.output


@pytest.mark.parametrize("exc, expected", [
    (NotADirectoryError(errno.ENOTDIR, "Not a directory", "file.txt/sub"), "error: file.txt/sub: Not a directory"),
    (IsADirectoryError(errno.EISDIR, "Is a directory", "d"), "error: d: Is a directory"),
    # a write that names no file (a library's own) names the output the command was writing
    (OSError(errno.ENOSPC, "No space left on device"), "/demo: No space left on device"),
    (OSError(errno.EXDEV, "Invalid cross-device link", "a", None, "b"), "error: a -> b: Invalid cross-device link"),
    (KeyError("a bug"), None),                   # not a file's problem: a bug, which keeps its traceback
])
def test_os_errors_give_an_error_not_a_traceback(tmp_path, monkeypatch, exc, expected):
    import phrase_rescore.data.demo_corpus

    def fail(*args, **kwargs):
        raise exc

    monkeypatch.setattr(phrase_rescore.data.demo_corpus, "generate", fail)
    r = CliRunner().invoke(cli, ["--quiet", "make-demo-data", "--out", str(tmp_path / "demo")])
    if expected is None:
        assert r.exception is exc
        return
    assert r.exit_code == 1 and isinstance(r.exception, SystemExit), r.output
    assert expected in r.output


def test_an_output_folder_below_a_file_is_an_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("pt.txt").write_bytes(b"das ||| the ||| 0.5 0.5 0.5 0.5\n")
    r = CliRunner().invoke(cli, ["--quiet", "prepare", "pt.txt", "--out", "pt.txt/pairs"])
    assert r.exit_code == 1 and isinstance(r.exception, SystemExit), r.output
    assert "error: pt.txt/pairs: Not a directory" in r.output


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o077])
def test_an_atomic_output_has_the_mode_a_plain_open_gives_and_the_umask_stays(tmp_path, mask):
    """mkstemp makes 0600; the output gets 0666 & ~umask, as open() would give it, read from the process
    without setting the umask (which would race with another thread creating a file)."""
    from phrase_rescore.core.atomic_write import atomic_open, process_umask

    old = os.umask(mask)
    try:
        assert process_umask() == mask
        with atomic_open(tmp_path / "out.txt", "w") as f:
            f.write("x\n")
        assert os.umask(mask) == mask                        # still the caller's
    finally:
        os.umask(old)
    assert (tmp_path / "out.txt").stat().st_mode & 0o777 == 0o666 & ~mask

"""A resumed `score` trusts nothing of its partial output it has not verified: the bytes the manifest counts
are checked against the chained digest it records before anything is appended.

The partial outputs are those of real runs: a `score` process killed once its manifest records some chunks
(as in tests/test_score_stage.py), or one left by an interrupted run in this process.
"""
from __future__ import annotations

import gzip
import json
import os
import random
import signal
import zlib

import pytest
from _forked import fork_cli, tiny_model, tiny_table, wait, wait_for
from click.testing import CliRunner

from phrase_rescore.app.cli import main
from phrase_rescore.pipeline.configs import ScoreConfig
from phrase_rescore.pipeline.score import score_table
from phrase_rescore.pipeline.scoring.chunked import ChunkedOutput

pytestmark = pytest.mark.usefixtures("one_thread")

ARGS = ["--chunk-lines", "40", "--threads", "1", "--matmul", "torch"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return tiny_model(tmp_path_factory.mktemp("model") / "m.pt", 3)


def _killed_partial(tmp_path, model, table, out, min_bytes: int) -> dict:
    """Run `score` in a real process and SIGKILL it once its manifest counts ``min_bytes`` bytes; the state."""
    manifest = out.with_name(out.name + ".partial.json")

    def far_enough() -> bool:
        try:
            return json.loads(manifest.read_text())["state"]["bytes"] >= min_bytes
        except (FileNotFoundError, ValueError, KeyError):
            return False

    pid = fork_cli(["score", str(model), str(table), "--out", str(out), *ARGS], tmp_path / "killed.log")
    wait_for(lambda: far_enough() or os.waitpid(pid, os.WNOHANG)[0] != 0, "two chunks")
    os.kill(pid, signal.SIGKILL)
    assert wait(pid) == -signal.SIGKILL, "the run ended before it could be killed"
    return json.loads(manifest.read_text())["state"]


def _solo(tmp_path, model, table) -> bytes:
    ref = tmp_path / "ref.gz"
    r = CliRunner().invoke(main, ["--quiet", "score", str(model), str(table), "--out", str(ref), *ARGS])
    assert r.exit_code == 0, r.output
    return ref.read_bytes()


def _flip(path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x01]))


def test_a_flipped_byte_in_the_partial_output_starts_it_afresh(tmp_path, model):
    table = tiny_table(tmp_path / "pt", 800)
    out = tmp_path / "new.gz"
    state = _killed_partial(tmp_path, model, table, out, 1100)
    _flip(out.with_name("new.gz.partial"), 1000)           # after the kill: inside what the manifest counts
    r = CliRunner().invoke(main, ["--quiet", "score", str(model), str(table), "--out", str(out), *ARGS])
    assert r.exit_code == 0, r.output
    assert "resumed" not in r.output
    assert (f"note: started afresh (the first {state['bytes']} bytes of {tmp_path / 'new.gz.partial'} differ from "
            "the digest its manifest records") in r.output
    data = out.read_bytes()
    assert zlib.decompressobj(31).decompress(data) == gzip.decompress(data)   # one whole, valid gzip member
    assert data == _solo(tmp_path, model, table)


def test_the_half_written_chunk_after_the_counted_bytes_does_not_stop_a_resume(tmp_path, model):
    table = tiny_table(tmp_path / "pt", 800)
    out = tmp_path / "new.gz"
    state = _killed_partial(tmp_path, model, table, out, 1100)
    partial = out.with_name("new.gz.partial")
    with open(partial, "ab") as f:                             # what a kill in the middle of a chunk leaves
        f.write(b"\x00garbage of a chunk that was never recorded")
    r = CliRunner().invoke(main, ["--quiet", "score", str(model), str(table), "--out", str(out), *ARGS])
    assert r.exit_code == 0, r.output
    assert f"resumed after line {state['lines']}" in r.output and "afresh" not in r.output
    assert out.read_bytes() == _solo(tmp_path, model, table)


def test_a_manifest_without_a_digest_of_its_output_is_not_resumed(tmp_path, model, monkeypatch):
    table = tiny_table(tmp_path / "pt", 400)
    out = tmp_path / "new.gz"
    cfg = ScoreConfig(chunk_lines=40, threads=1, matmul="torch")
    from phrase_rescore.pipeline.scoring import chunked
    real = chunked.ChunkedOutput.write_chunk

    def write_then_stop(self, *a, **kw):
        if self.chunks == 2:
            raise KeyboardInterrupt
        return real(self, *a, **kw)

    with monkeypatch.context() as m:
        m.setattr(chunked.ChunkedOutput, "write_chunk", write_then_stop)
        with pytest.raises(KeyboardInterrupt):
            score_table(model, table, out, cfg)
    manifest = tmp_path / "new.gz.partial.json"
    m = json.loads(manifest.read_text())
    del m["state"]["output_sha256"]                       # as an earlier version wrote it
    manifest.write_text(json.dumps(m))
    s = score_table(model, table, out, cfg)
    assert s.resumed_from_line == 0 and "records no digest" in s.restart_reason
    assert out.read_bytes() == _solo(tmp_path, model, table)


def test_a_finished_part_is_verified_before_it_is_joined(tmp_path):
    part = ChunkedOutput(tmp_path / "o.gz.part-00000-of-00002", {"x": 1}, part=True, gzip=True)
    part.open()
    rng = random.Random(0)
    for i in range(8):                                     # 180 kB: whole blocks of the digest and a tail
        part.write_chunk(f"line {i} ||| {rng.randbytes(20000).hex()}\n".encode(), 1)
    part.finish()
    assert part.finished() is not None and part.path.stat().st_size > 80000
    _flip(part.path, 70000)
    assert part.finished() is None                         # scored again, not joined as it is

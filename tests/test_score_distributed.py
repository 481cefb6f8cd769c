"""Sharded `score` on 2 CPU ranks with gloo (started by torchrun, or forked from this process as torchrun
would start them): the output is a single run's bytes, plain and gzip, also after the whole job was
killed and relaunched; the split pass cuts at chunk boundaries; CRCs combine."""
from __future__ import annotations

import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import time
import traceback
import zlib

import numpy as np
import pytest
import torch
from _tables import write_table

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.version import code_version
from phrase_rescore.moses_integration.phrase_table import read_phrase_table
from phrase_rescore.pipeline.configs import ScoreConfig
from phrase_rescore.pipeline.model.checkpoint import save_checkpoint
from phrase_rescore.pipeline.model.encdec import EncDecConfig, RNNEncoderDecoder
from phrase_rescore.pipeline.score import score_table
from phrase_rescore.pipeline.scoring.chunked import ChunkedOutput, crc32_combine
from phrase_rescore.pipeline.scoring.sharded import chunk_offsets, load_or_plan, part_output, plan
from phrase_rescore.pipeline.vocab import Vocab, Vocabularies

pytestmark = pytest.mark.usefixtures("one_thread")

SRC_WORDS = ["das", "haus", "ist", "klein", "ein", "der", "mann", "und"]
TGT_WORDS = ["the", "house", "is", "small", "a", "man", "and", "little"]

# torchrun's ranks run this instead of the `phrase-rescore` script: with this process's code version
# (part of the output's identity), as the reference run has it
RANK_MAIN = """\
import sys
import phrase_rescore.core.version as v
version = sys.argv.pop(1)
v.code_version = lambda: version
from phrase_rescore.app.cli import main
sys.exit(main())
"""


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    torch.manual_seed(11)
    vocabs = Vocabularies(Vocab(["<eos>", "<unk>"] + SRC_WORDS), Vocab(["<eos>", "<unk>"] + TGT_WORDS))
    cfg = EncDecConfig(len(vocabs.source), len(vocabs.target), emb_dim=8, hidden_dim=16, maxout_units=8, rank=6,
                       bias=True, init_std=0.3)
    path = tmp_path_factory.mktemp("model") / "model.pt"
    save_checkpoint(path, RNNEncoderDecoder(cfg), vocabs)
    return path


def _table_lines(n_sources=150, seed=0) -> list[bytes]:
    """A sorted table whose sources repeat over 1-4 lines (so chunk boundaries fall inside sources)."""
    rng = np.random.default_rng(seed)
    lines = set()
    for _ in range(n_sources):
        src = " ".join(rng.choice(SRC_WORDS + ["xx"], size=rng.integers(1, 6)))
        for _ in range(int(rng.integers(1, 5))):
            tgt = " ".join(rng.choice(TGT_WORDS + ["zz"], size=rng.integers(1, 6)))
            lines.add(f"{src} ||| {tgt} ||| 0.5 0.5 0.5 0.5 ||| 0-0 ||| 1 1 1 ||| |||".encode())
    return sorted(lines)


def _torchrun(tmp_path, args, env=None, **kw) -> subprocess.Popen:
    main = tmp_path / "rank_main.py"
    main.write_text(RANK_MAIN)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           str(main), code_version(), "--quiet", "score", *map(str, args)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", **(env or {})}
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def _finish(proc: subprocess.Popen) -> str:
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err.decode(errors="replace")[-3000:]
    return out.decode()


def test_chunk_offsets_and_plan_tile_the_table_at_chunk_boundaries(tmp_path):
    lines = [b"a ||| x ||| 1", b"a ||| y ||| 1", b"b ||| x ||| 1", b"c ||| z ||| 1", b"c ||| w ||| 1"]
    for final_newline in (True, False):
        for suffix in ("", ".gz"):
            table = tmp_path / f"t{int(final_newline)}{suffix}"
            data = write_table(table, lines, final_newline=final_newline)
            starts = [0] + [i + 1 for i, b in enumerate(data) if b == 10 and i + 1 < len(data)]
            for chunk_lines in (1, 2, 5, 7):
                offsets, n, size = chunk_offsets(table, chunk_lines)
                assert (n, size) == (5, len(data))
                assert offsets == starts[::chunk_lines]
                for count in (1, 2, 3, 8):          # 8 ranks: more than there are chunks
                    shards = plan(table, chunk_lines, count)
                    assert [s.index for s in shards] == list(range(count))
                    assert sum(s.lines for s in shards) == 5 and shards[-1].stop == len(data)
                    got = []
                    for s in shards:
                        assert s.lines_before % chunk_lines == 0 and s.lines_before == s.first_chunk * chunk_lines \
                            or s.lines == 0
                        entries = list(read_phrase_table(table, span=s.span))
                        assert [e.line_no for e in entries] == list(range(s.lines_before + 1,
                                                                          s.lines_before + s.lines + 1))
                        got += [e.raw for e in entries]
                    assert got == lines


def test_a_file_with_a_parts_name_that_score_did_not_write_is_refused(tmp_path):
    table = tmp_path / "pt"
    write_table(table, _table_lines(n_sources=5))
    shard = plan(table, 4, 2)[1]
    theirs = tmp_path / "out.gz.part-00001-of-00002"
    theirs.write_bytes(b"not score's")
    with pytest.raises(PhraseRescoreError, match="without its manifest"):
        part_output(tmp_path / "out.gz", shard, {}, 6, gzip=True)
    assert theirs.read_bytes() == b"not score's"


def test_crc32_combine_equals_the_crc_of_the_concatenation():
    rng = np.random.default_rng(0)
    for n1, n2 in [(0, 0), (0, 7), (7, 0), (1, 1), (1000, 3), (5, 1 << 16)]:
        a, b = rng.bytes(n1), rng.bytes(n2)
        assert crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)


def test_two_ranks_write_a_single_runs_bytes_with_rejects(tmp_path, model_path):
    lines = _table_lines()
    lines[37] = b"kaputt ||| broken ||| 0.5 nope 0.5 0.5"            # kept in place, listed in the rejects
    table = tmp_path / "pt"
    write_table(table, lines, final_newline=False)
    ref, out = tmp_path / "ref", tmp_path / "out"
    score_table(model_path, table, ref, ScoreConfig(chunk_lines=30, threads=1, on_error="keep"))
    # a part an earlier job of 3 ranks left (score's: it has a manifest), and a user's file of that name
    (tmp_path / "out.part-00002-of-00003").write_bytes(b"left")
    (tmp_path / "out.part-00002-of-00003.json").write_text(json.dumps({"format": "phrase-rescore-score-manifest"}))
    (tmp_path / "out.part-00001-of-00003").write_bytes(b"the user's")
    printed = _finish(_torchrun(tmp_path, [model_path, table, "--out", out, "--chunk-lines", "30",
                                           "--on-error", "keep"]))
    assert out.read_bytes() == ref.read_bytes()
    assert (tmp_path / "out.rejects").read_bytes() == (tmp_path / "ref.rejects").read_bytes()
    assert b"\t" in (tmp_path / "out.rejects").read_bytes()
    assert f"scored {len(lines)} lines" in printed and "2 ranks" in printed and printed.count("scored") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "out.part-00001-of-00003", "out.rejects", "pt",
                                                          "rank_main.py", "ref", "ref.rejects"]
    assert (tmp_path / "out.part-00001-of-00003").read_bytes() == b"the user's"  # ours removed, not theirs


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _fork_job(tmp_path, args: tuple, delay: float = 0.0) -> list[int]:
    """The two ranks of a torchrun job on this machine, forked from this process (torch and the project
    already imported: no start-up time); each writes score_table's summary to ``summary-RANK.json``
    (an error to ``error-RANK.txt``); ``delay``: a pause after each chunk."""
    port, pids = _free_port(), []
    for rank in (0, 1):
        pid = os.fork()
        if pid == 0:                                                  # the rank
            code = 1
            try:
                os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", LOCAL_WORLD_SIZE="2",
                                  MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), PHRASE_RESCORE_QUIET="1")
                if delay:
                    write_chunk = ChunkedOutput.write_chunk

                    def slow(self, *a, write_chunk=write_chunk, **kw):
                        write_chunk(self, *a, **kw)
                        time.sleep(delay)
                    ChunkedOutput.write_chunk = slow
                summary = score_table(*args)
                (tmp_path / f"summary-{rank}.json").write_text(json.dumps(summary.as_dict(), default=str))
                code = 0
            except BaseException:
                (tmp_path / f"error-{rank}.txt").write_text(traceback.format_exc())
            finally:
                os._exit(code)
        pids.append(pid)
    return pids


def test_a_parts_manifest_of_the_users_is_refused_before_the_job_writes_and_its_own_stale_one_replaced(
        tmp_path, model_path):
    lines = _table_lines(n_sources=40, seed=2)
    table = tmp_path / "pt"
    write_table(table, lines)
    ref, out = tmp_path / "ref", tmp_path / "out"
    score_table(model_path, table, ref, ScoreConfig(chunk_lines=20, threads=1))
    theirs = tmp_path / "out.shards.json"
    theirs.write_bytes(b'{"shards": "the user\'s"}')
    with pytest.raises(PhraseRescoreError, match=r"out\.shards\.json: expected the plan .*not written by `score`"):
        load_or_plan(table, out, 20, 2)
    assert theirs.read_bytes() == b'{"shards": "the user\'s"}'
    theirs.unlink()
    before = sorted(p.name for p in tmp_path.iterdir())
    for name, data in (("out.part-00001-of-00002.json", b'{"format": "mine"}\n'),
                       ("out.part-00000-of-00002.json", b"not json")):
        theirs = tmp_path / name
        theirs.write_bytes(data)
        codes = [os.waitpid(pid, 0)[1] for pid in _fork_job(tmp_path, (model_path, table, out, ScoreConfig(chunk_lines=20)))]
        assert codes == [256, 256]
        for r in (0, 1):
            err = (tmp_path / f"error-{r}.txt").read_text()
            assert f"{theirs}: expected the manifest of a part" in err and "not written by `score`" in err, err
            (tmp_path / f"error-{r}.txt").unlink()
        assert theirs.read_bytes() == data
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(before + [name])   # nothing written
        theirs.unlink()
    # score's own files of an earlier job on another table: replaced, then removed
    (tmp_path / "out.part-00001-of-00002").write_bytes(b"stale")
    (tmp_path / "out.part-00001-of-00002.json").write_text(json.dumps(
        {"format": "phrase-rescore-score-manifest", "version": 1, "identity": {}, "state": {}}))
    codes = [os.waitpid(pid, 0)[1] for pid in _fork_job(tmp_path, (model_path, table, out, ScoreConfig(chunk_lines=20)))]
    assert codes == [0, 0], "".join(p.read_text() for p in tmp_path.glob("error-*"))
    assert out.read_bytes() == ref.read_bytes()
    assert not list(tmp_path.glob("out.*"))


def test_a_killed_job_relaunched_writes_a_single_runs_gzip_bytes(tmp_path, model_path):
    lines = _table_lines(n_sources=200, seed=1)
    table = tmp_path / "pt.gz"
    write_table(table, lines)
    ref, out = tmp_path / "ref.gz", tmp_path / "out.gz"
    score_table(model_path, table, ref, ScoreConfig(chunk_lines=20, threads=1))
    args = (model_path, table, out, ScoreConfig(chunk_lines=20))
    manifests = [tmp_path / f"out.gz.part-0000{r}-of-00002.partial.json" for r in (0, 1)]
    pids = _fork_job(tmp_path, args, delay=0.5)
    deadline, done = time.time() + 60, [0, 0]
    while time.time() < deadline and min(done) < 1:
        for r, m in enumerate(manifests):
            try:
                done[r] = json.loads(m.read_text())["state"]["chunks"]
            except (FileNotFoundError, json.JSONDecodeError, KeyError):
                pass
        time.sleep(0.01)
    for pid in pids:                                                  # the whole job, mid-run
        os.kill(pid, signal.SIGKILL)
    assert [os.waitpid(pid, 0)[1] for pid in pids] == [signal.SIGKILL] * 2, list(tmp_path.glob("error-*"))
    assert not out.exists() and all(m.exists() for m in manifests)
    kept = sum(json.loads(m.read_text())["state"]["lines"] for m in manifests)
    assert kept >= 40
    codes = [os.waitpid(pid, 0)[1] for pid in _fork_job(tmp_path, args)]   # the same job again
    assert codes == [0, 0], "".join(p.read_text() for p in tmp_path.glob("error-*"))
    summaries = [json.loads((tmp_path / f"summary-{r}.json").read_text()) for r in (0, 1)]
    assert [s["rank"] for s in summaries] == [0, 1] and summaries[0]["ranks"] == 2
    assert summaries[0]["resumed_from_line"] >= kept                  # finished chunks were not redone
    assert summaries[0]["lines"] == len(lines)
    assert out.read_bytes() == ref.read_bytes()                       # one gzip member, the same bytes
    entries = list(read_phrase_table(out))                            # the project's reader takes it
    assert [e.raw.split(b" ||| ")[:2] for e in entries] == [l.split(b" ||| ")[:2] for l in lines]
    assert len(gzip.decompress(out.read_bytes()).splitlines()) == len(lines)
    assert not list(tmp_path.glob("out.gz.*"))

"""The score stage end to end: columns by hand, every original byte kept, bad lines, resume after kill."""
from __future__ import annotations

import gzip
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
from _tables import write_table
from click.testing import CliRunner

from phrase_rescore.app.cli import main as cli
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.version import code_version
from phrase_rescore.moses_integration.phrase_table import append_columns
from phrase_rescore.pipeline.configs import ScoreConfig
from phrase_rescore.pipeline.model.checkpoint import save_checkpoint
from phrase_rescore.pipeline.model.encdec import EncDecConfig, RNNEncoderDecoder
from phrase_rescore.pipeline.model.reference import log_p, reference_params
from phrase_rescore.pipeline.score import score_table
from phrase_rescore.pipeline.vocab import EOS_ID, UNK_ID, Vocab, Vocabularies

pytestmark = pytest.mark.usefixtures("one_thread")


SRC_WORDS = ["das", "haus", "ist", "klein", "ein", "der", "mann", "und"]
TGT_WORDS = ["the", "house", "is", "small", "a", "man", "and", "little"]

# (line, expected unknown words): source words outside SRC_WORDS + target words outside TGT_WORDS
HAND_TABLE = [
    (b"das haus ||| the house ||| 0.5 0.25 0.125 1 ||| 0-0 1-1 ||| 4 2 1 ||| |||", 0),
    (b"das haus ||| the building ||| 0.5 0.25 0.125 1 ||| 0-0 1-1 ||| 4 2 1 ||| |||", 1),
    (b"das Haus ist ||| the house is ||| 0.1 0.2 0.3 0.4 ||| 0-0 1-1 2-2 ||| 2 2 2 ||| |||", 1),
    (b"Katze ||| cat ||| 1 1 1 1", 2),                                       # three fields only
    (b"ein mann ||| a man |||   0.1  0.2  0.3  0.4   ||| 0-0 1-1 |||  1 1 1 ||| ||| {{Key value}}", 0),
    (b"der Mann und ||| the Man and Kind ||| 0.7 0.6 0.5 0.4 ||| 0-0 ||| 1 1 1 ||| |||", 3),
    (b"das haus ||| the house ||| 0.5 0.25 0.125 1 ||| 0-0 1-1 ||| 4 2 1 ||| |||", 0),  # repeated pair
    (b"das <eos> ||| <unk> house ||| 0.5 0.5 0.5 0.5 ||| 0-0 ||| 1 1 1 ||| |||", 2),  # literal tokens: unknown
    (b"ist ||| is ||| 0.9 0.8 0.7 0.6 ||| 0-0 ||| 3 3 3 ||| |||", 0),      # last line: no final newline
]


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    torch.manual_seed(11)
    vocabs = Vocabularies(Vocab(["<eos>", "<unk>"] + SRC_WORDS), Vocab(["<eos>", "<unk>"] + TGT_WORDS))
    cfg = EncDecConfig(len(vocabs.source), len(vocabs.target), emb_dim=8, hidden_dim=16, maxout_units=8, rank=6,
                       bias=True, init_std=0.3)
    model = RNNEncoderDecoder(cfg)
    path = tmp_path_factory.mktemp("model") / "model.pt"
    save_checkpoint(path, model, vocabs)
    return path, model, vocabs


def _read(path) -> bytes:
    with open(path, "rb") as f:
        head = f.read(2)
    return gzip.open(path).read() if head == b"\x1f\x8b" else open(path, "rb").read()


def _ref_logp(model, vocabs, line: bytes) -> float:
    src, tgt = (f.strip().decode() for f in line.split(b"|||")[:2])
    # a literal "<eos>" in the data is a word outside the shortlist, not the end of the phrase
    s = [UNK_ID if i == EOS_ID else i for i in vocabs.source.encode(src.split())] + [EOS_ID]
    t = [UNK_ID if i == EOS_ID else i for i in vocabs.target.encode(tgt.split())] + [EOS_ID]
    return log_p(s, t, reference_params(model))


@pytest.mark.parametrize("suffix", [".gz", ""])
def test_columns_by_hand_and_every_original_byte_kept(tmp_path, model_path, suffix):
    path, model, vocabs = model_path
    table, out = tmp_path / f"pt{suffix}", tmp_path / f"new{suffix}"
    write_table(table, [l for l, _ in HAND_TABLE], final_newline=False)
    s = score_table(path, table, out, ScoreConfig(chunk_lines=3))     # chunks cut through a source's lines
    assert s.lines == len(HAND_TABLE) and s.pairs == len(HAND_TABLE) and s.rejected == 0
    got = _read(out).split(b"\n")
    assert got[-1] != b"" and len(got) == len(HAND_TABLE)            # no final newline added
    for (orig, n_unk), new in zip(HAND_TABLE, got, strict=True):
        p_text, unk_text = new.split(b"|||")[2].split()[-2:]
        assert unk_text == f"{math.exp(n_unk):.7g}".encode()           # exp(count), counted by hand
        assert math.log(float(p_text)) == pytest.approx(_ref_logp(model, vocabs, orig), abs=1e-4)
        assert new == append_columns(orig, p_text + b" " + unk_text)  # all other bytes as they were
    assert not (tmp_path / f"new{suffix}.partial").exists()
    assert not (tmp_path / f"new{suffix}.partial.json").exists()


def test_columns_option_and_raw_logprob(tmp_path, model_path):
    path, model, vocabs = model_path
    table = tmp_path / "pt"
    write_table(table, [l for l, _ in HAND_TABLE], final_newline=True)
    score_table(path, table, tmp_path / "unk", ScoreConfig(columns="unk"))
    score_table(path, table, tmp_path / "raw", ScoreConfig(columns=("unk", "logprob"), raw_logprob=True))
    unk_lines = _read(tmp_path / "unk").splitlines()
    raw_lines = _read(tmp_path / "raw").splitlines()
    for (orig, n_unk), u, r in zip(HAND_TABLE, unk_lines, raw_lines, strict=True):
        assert u == append_columns(orig, f"{math.exp(n_unk):.7g}".encode())
        n_text, lp_text = r.split(b"|||")[2].split()[-2:]
        assert n_text == str(n_unk).encode()
        assert float(lp_text) == pytest.approx(_ref_logp(model, vocabs, orig), abs=1e-4)
        assert r == append_columns(orig, n_text + b" " + lp_text)


BAD_TABLE = [
    b"das haus ||| the house ||| 0.5 0.25 0.125 1 ||| 0-0 1-1 ||| 4 2 1 ||| |||",
    b"no fields at all",
    b"das ||| the ||| 0.5 zero 0.1 0.2 ||| 0-0 ||| 1 1 1 ||| |||",
    b"ist ||| is ||| 0.9 0.8 0.7 0.6 ||| 0-0 ||| 3 3 3 ||| |||",
]


def test_on_error_keep_keeps_bad_lines_in_place_with_neutral_values(tmp_path, model_path):
    path, _, _ = model_path
    table, out = tmp_path / "pt", tmp_path / "new.gz"
    write_table(table, BAD_TABLE, final_newline=True)
    s = score_table(path, table, out, ScoreConfig(on_error="keep", chunk_lines=2))
    assert s.lines == 4 and s.rejected == 2 and s.pairs == 2
    got = _read(out).splitlines()
    assert got[1] == BAD_TABLE[1]                                      # no scores field: unchanged
    assert got[2] == append_columns(BAD_TABLE[2], b"1 1")              # neutral: log 1 = 0 for Moses
    assert got[0].startswith(b"das haus ||| the house ||| 0.5 0.25 0.125 1 ") and got[3].startswith(b"ist ||| is")
    rejects = (tmp_path / "new.gz.rejects").read_bytes().splitlines()
    assert [r.split(b"\t")[0] for r in rejects] == [b"2", b"3"]


def test_on_error_raise_names_file_and_line(tmp_path, model_path):
    path, _, _ = model_path
    table = tmp_path / "pt"
    write_table(table, BAD_TABLE, final_newline=True)
    with pytest.raises(PhraseRescoreError) as e:
        score_table(path, table, tmp_path / "new", ScoreConfig())
    assert f"{table}:2" in str(e.value)
    assert not (tmp_path / "new").exists()


def _big_table(path, n_sources=700, seed=0):
    rng = np.random.default_rng(seed)
    words_s, words_t = SRC_WORDS + ["xx", "yy"], TGT_WORDS + ["zz"]
    lines = set()
    for _ in range(n_sources):
        src = " ".join(rng.choice(words_s, size=rng.integers(1, 8)))
        for _ in range(int(rng.integers(1, 5))):
            tgt = " ".join(rng.choice(words_t, size=rng.integers(1, 8)))
            lines.add(f"{src} ||| {tgt} ||| 0.5 0.5 0.5 0.5 ||| 0-0 ||| 1 1 1 ||| |||".encode())
    write_table(path, sorted(lines), final_newline=True)
    return len(lines)


def test_resume_after_kill_is_byte_identical(tmp_path, model_path):
    path, _, _ = model_path
    table = tmp_path / "pt.gz"
    n = _big_table(table)
    cfg = dict(chunk_lines=40, threads=1)
    out = tmp_path / "new.gz"
    manifest = tmp_path / "new.gz.partial.json"
    # the killed run takes this process's code version (part of the partial output's identity), so that
    # the source being edited while the test runs cannot make the resume below start afresh
    code = ("import sys, phrase_rescore.core.version as v; version = sys.argv.pop(1); v.code_version = lambda: version; "
            "from phrase_rescore.app.cli import main; sys.exit(main())")
    proc = subprocess.Popen([sys.executable, "-c", code, code_version(), "--quiet", "score", str(path), str(table),
                             "--out", str(out), "--chunk-lines", "40", "--threads", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    done = 0
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        try:
            done = json.loads(manifest.read_text())["state"]["chunks"]
        except (FileNotFoundError, json.JSONDecodeError, KeyError):
            done = 0
        if done >= 2:
            break
        time.sleep(0.005)
    assert proc.poll() is None, f"the run ended before it could be killed: {proc.stderr.read()!r}"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not out.exists() and (tmp_path / "new.gz.partial").exists()
    noted = json.loads(manifest.read_text())["state"]["notes"]["matmul"]   # the BLAS the first run chose
    s = score_table(path, table, out, ScoreConfig(**cfg))
    assert s.resumed_from_line >= 80 and s.resumed_from_line % 40 == 0 and s.restart_reason is None
    assert s.lines == n and s.matmul == noted                  # repeated, not timed again
    ref = tmp_path / "ref.gz"
    score_table(path, table, ref, ScoreConfig(**cfg, matmul=noted))
    assert out.read_bytes() == ref.read_bytes()                       # the same bytes, gzip included
    assert len(gzip.open(out).read().splitlines()) == n


def test_output_does_not_depend_on_the_worker_count(tmp_path, model_path, many_cores):
    # each group of sources is scored by one worker with one torch thread: the same bytes however many
    path, _, _ = model_path
    table = tmp_path / "pt.gz"
    _big_table(table, n_sources=300)
    outs = []
    for threads in (1, 3):
        outs.append(tmp_path / f"new{threads}.gz")
        s = score_table(path, table, outs[-1], ScoreConfig(chunk_lines=100, max_tokens=64, threads=threads,
                                                           matmul="numpy"))
        assert s.workers == threads
    assert outs[0].read_bytes() == outs[1].read_bytes()


def test_numpy_matmul_with_low_precision_is_a_clear_error(tmp_path, model_path):
    path, _, _ = model_path
    table = tmp_path / "pt"
    write_table(table, [l for l, _ in HAND_TABLE], final_newline=True)
    with pytest.raises(PhraseRescoreError, match="float32 on a CPU"):
        score_table(path, table, tmp_path / "new", ScoreConfig(matmul="numpy", precision="bf16"))


def test_changed_options_start_afresh(tmp_path, model_path):
    path, _, _ = model_path
    table = tmp_path / "pt"
    _big_table(table, n_sources=50)
    out = tmp_path / "new"
    # a partial run from other options: a manifest that does not match this run
    (tmp_path / "new.partial").write_bytes(b"stale bytes\n")
    (tmp_path / "new.partial.json").write_text(json.dumps({
        "format": "phrase-rescore-score-manifest", "version": 1,
        "identity": {"columns": ["unk"]}, "state": {"lines": 1, "chunks": 1, "bytes": 12, "crc32": 0,
                                                    "isize": 0, "stats": {}}}))
    s = score_table(path, table, out, ScoreConfig(chunk_lines=30, matmul="torch"))
    assert s.resumed_from_line == 0 and "columns" in s.restart_reason
    assert b"stale" not in out.read_bytes()
    ref = tmp_path / "ref"
    score_table(path, table, ref, ScoreConfig(chunk_lines=30, matmul="torch"))
    assert out.read_bytes() == ref.read_bytes()


def test_cli_score(tmp_path, model_path):
    path, _, _ = model_path
    table, out = tmp_path / "pt.gz", tmp_path / "new.gz"
    write_table(table, [l for l, _ in HAND_TABLE], final_newline=False)
    r = CliRunner().invoke(cli, ["--quiet", "score", str(path), str(table), "--out", str(out), "--columns", "logprob"])
    assert r.exit_code == 0, r.output
    assert f"scored {len(HAND_TABLE)} lines" in r.output
    assert len(_read(out).split(b"\n")) == len(HAND_TABLE)
    r = CliRunner().invoke(cli, ["score", str(path), str(table), "--out", str(out), "--columns", "wp"])
    assert r.exit_code == 1 and "--columns" in r.output


def _leave_partial(monkeypatch, model, table, out, config):
    """A partial run of ``score`` that stops after two chunks, as a kill leaves it."""
    from phrase_rescore.pipeline.scoring import chunked
    real = chunked.ChunkedOutput.write_chunk

    def write_then_stop(self, *a, **kw):
        if self.chunks == 2:
            raise KeyboardInterrupt
        return real(self, *a, **kw)

    with monkeypatch.context() as m:
        m.setattr(chunked.ChunkedOutput, "write_chunk", write_then_stop)
        with pytest.raises(KeyboardInterrupt):
            score_table(model, table, out, config)


def _file_names(d):
    return sorted(p.name for p in d.iterdir())


def test_model_with_nan_weights_is_refused_naming_it_and_leaves_nothing(tmp_path, model_path):
    _, model, vocabs = model_path
    broken = tmp_path / "broken.pt"
    bad = RNNEncoderDecoder(model.cfg)
    bad.load_state_dict(model.state_dict())
    with torch.no_grad():
        bad.decoder.O_h[0, 0] = float("nan")
    save_checkpoint(broken, bad, vocabs)
    table = tmp_path / "pt"
    write_table(table, [l for l, _ in HAND_TABLE], final_newline=True)
    before = _file_names(tmp_path)
    r = CliRunner().invoke(cli, ["--quiet", "score", str(broken), str(table), "--out", str(tmp_path / "new.gz")])
    assert r.exit_code == 1 and f"error: {broken}: the model's weights contain NaN" in r.output, r.output
    assert _file_names(tmp_path) == before                           # no OUT.partial, no manifest


def test_nan_log_probs_stop_naming_the_model_and_line_and_leave_nothing(tmp_path, model_path, monkeypatch):
    # finite weights whose products overflow (low precision) give NaN log p: checked chunk by chunk
    path, _, _ = model_path
    from phrase_rescore.pipeline.scoring.fast import FastScorer
    real = FastScorer.score_group

    def overflowing(self, pairs, idx):
        lp = real(self, pairs, idx)
        lp[pairs.pair_line[idx] == 1] = float("nan")                  # the chunk's second line
        return lp

    monkeypatch.setattr(FastScorer, "score_group", overflowing)
    table = tmp_path / "pt"
    write_table(table, [l for l, _ in HAND_TABLE], final_newline=True)
    before = _file_names(tmp_path)
    with pytest.raises(PhraseRescoreError) as e:
        score_table(path, table, tmp_path / "new.gz", ScoreConfig(chunk_lines=3))
    assert e.value.path == str(path) and "log p = NaN for line 2 of the table" in e.value.message
    assert _file_names(tmp_path) == before


def test_auto_matmul_does_not_depend_on_the_machine_load(tmp_path, model_path, monkeypatch):
    # the same command twice, once while torch's products are slow and once while numpy's are: same bytes
    from phrase_rescore.pipeline.scoring import fast
    path, _, _ = model_path
    table = tmp_path / "pt.gz"
    _big_table(table, n_sources=40)
    real = fast.linear
    outs, chosen = [], []
    for slow in ("numpy", "torch"):
        def loaded(x, W, b, matmul="torch", slow=slow):
            if matmul == slow:
                time.sleep(0.002)                                     # another process on this core
            return real(x, W, b, matmul)

        monkeypatch.setattr(fast, "linear", loaded)
        outs.append(tmp_path / f"busy-{slow}.gz")
        chosen.append(score_table(path, table, outs[-1], ScoreConfig(threads=1)).matmul)
    assert chosen[0] == chosen[1]
    assert outs[0].read_bytes() == outs[1].read_bytes()


def test_a_partial_output_from_another_vocabulary_is_not_resumed(tmp_path, model_path, monkeypatch):
    _, model, vocabs = model_path
    path = tmp_path / "no-vocab.pt"        # --vocab gives the words of a checkpoint that carries none
    save_checkpoint(path, model, None)
    table = tmp_path / "pt"
    _big_table(table, n_sources=50)
    out = tmp_path / "new"
    vocab_a, vocab_b = tmp_path / "a.json", tmp_path / "b.json"
    vocabs.save(vocab_a)
    other = Vocabularies(Vocab(vocabs.source.words[:2] + vocabs.source.words[2:][::-1]), vocabs.target)
    other.save(vocab_b)
    _leave_partial(monkeypatch, path, table, out, ScoreConfig(chunk_lines=30, matmul="torch", vocab=str(vocab_a)))
    s = score_table(path, table, out, ScoreConfig(chunk_lines=30, matmul="torch", vocab=str(vocab_b)))
    assert s.resumed_from_line == 0 and "vocab_sha256" in s.restart_reason
    ref = tmp_path / "ref"
    score_table(path, table, ref, ScoreConfig(chunk_lines=30, matmul="torch", vocab=str(vocab_b)))
    assert out.read_bytes() == ref.read_bytes()


def test_vocab_must_be_the_checkpoints_own_words(tmp_path, model_path):
    """A model's vocabulary is part of the model: other words of the same sizes would make every id another word."""
    path, _, vocabs = model_path
    table = tmp_path / "pt"
    _big_table(table, n_sources=5)
    same, other = tmp_path / "same.json", tmp_path / "other.json"
    vocabs.save(same)
    Vocabularies(vocabs.source, Vocab(vocabs.target.words[:2] + vocabs.target.words[2:][::-1])).save(other)
    with pytest.raises(PhraseRescoreError, match=r"the target words differ from the checkpoint's own \(entry 2") as e:
        score_table(path, table, tmp_path / "o", ScoreConfig(vocab=str(other)))
    assert e.value.path == str(other) and not (tmp_path / "o").exists()
    score_table(path, table, tmp_path / "a", ScoreConfig())
    score_table(path, table, tmp_path / "b", ScoreConfig(vocab=str(same)))
    assert (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes()


def test_a_table_from_a_pipe_is_refused(tmp_path, model_path):
    """score reads its table more than once; a pipe gives its lines to the first reading only (and one nobody
    writes to blocks the reader: the command runs in a process of its own, with a time limit)."""
    path, _, _ = model_path
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    exe = shutil.which("phrase-rescore", path=os.path.dirname(sys.executable)) or shutil.which("phrase-rescore")
    cmd = [exe, "--quiet", "score", str(path), str(fifo), "--out", str(tmp_path / "o")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith(f"error: {fifo}: the phrase table is a pipe, not a regular file"), r.stderr
    assert not (tmp_path / "o").exists()


def test_a_table_rewritten_with_its_size_and_time_kept_is_not_resumed(tmp_path, model_path, monkeypatch):
    path, _, _ = model_path
    table = tmp_path / "pt"
    _big_table(table, n_sources=50)
    out = tmp_path / "new"
    cfg = ScoreConfig(chunk_lines=30, matmul="torch")
    _leave_partial(monkeypatch, path, table, out, cfg)
    st = table.stat()
    data = table.read_bytes()
    table.write_bytes(data.replace(b"das", b"der", 1))                # same size, then the same mtime
    os.utime(table, ns=(st.st_atime_ns, st.st_mtime_ns))
    partial = (tmp_path / "new.partial").read_bytes()
    with pytest.raises(PhraseRescoreError, match=r"first 60 lines are not those .*new.partial was made from"):
        score_table(path, table, out, cfg)
    assert (tmp_path / "new.partial").read_bytes() == partial and not out.exists()
    s = score_table(path, table, out, ScoreConfig(chunk_lines=30, matmul="torch", restart=True))
    assert s.resumed_from_line == 0


def test_a_partial_file_without_its_manifest_is_not_overwritten(tmp_path, model_path):
    path, _, _ = model_path
    table = tmp_path / "pt"
    write_table(table, [l for l, _ in HAND_TABLE], final_newline=True)
    (tmp_path / "new.partial").write_bytes(b"a user's file\n")
    with pytest.raises(PhraseRescoreError, match="new.partial: exists without its manifest"):
        score_table(path, table, tmp_path / "new", ScoreConfig(restart=True))
    assert (tmp_path / "new.partial").read_bytes() == b"a user's file\n"


@pytest.mark.parametrize("restart", [False, True])
@pytest.mark.parametrize("manifest", [b'{"my": "notes"}\n', b"notes\n", b"[1, 2]\n", b"\xff\xfe\n", b"",
                                      b'{"format": "something-else", "version": 1}\n'])
def test_a_file_in_the_manifests_place_that_is_not_scores_is_refused_and_kept(tmp_path, model_path, manifest,
                                                                              restart):
    path, _, _ = model_path
    table = tmp_path / "pt"
    write_table(table, [l for l, _ in HAND_TABLE], final_newline=True)
    user = {"new.gz.partial.json": manifest, "new.gz.partial.json.tmp": b"keep me\n"}
    for name, data in user.items():
        (tmp_path / name).write_bytes(data)
    with pytest.raises(PhraseRescoreError, match=r"new.gz.partial.json: expected the manifest of a partial `score` "
                                                 r"output .*not written by `score`"):
        score_table(path, table, tmp_path / "new.gz", ScoreConfig(restart=restart))
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("new")} == user
    r = CliRunner().invoke(cli, ["--quiet", "score", str(path), str(table), "--out", str(tmp_path / "new.gz"),
                                 "--device", "cpu"])
    assert r.exit_code == 1 and r.output.startswith(f"error: {tmp_path / 'new.gz.partial.json'}: expected"), r.output
    assert "Traceback" not in r.output
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("new")} == user


def test_a_manifest_of_another_version_starts_afresh_and_a_user_file_beside_it_stays(tmp_path, model_path):
    path, _, _ = model_path
    table = tmp_path / "pt"
    write_table(table, [l for l, _ in HAND_TABLE], final_newline=True)
    (tmp_path / "new.partial").write_bytes(b"stale bytes\n")
    (tmp_path / "new.partial.json").write_text(json.dumps({"format": "phrase-rescore-score-manifest", "version": 0}))
    (tmp_path / "new.partial.json.tmp").write_bytes(b"keep me\n")
    s = score_table(path, table, tmp_path / "new", ScoreConfig(chunk_lines=3, matmul="torch"))
    assert s.resumed_from_line == 0 and "another format version" in s.restart_reason
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new", "new.partial.json.tmp", "pt"]
    assert (tmp_path / "new.partial.json.tmp").read_bytes() == b"keep me\n"
    assert b"stale" not in (tmp_path / "new").read_bytes()


def test_on_error_keep_refuses_a_user_file_named_like_the_reject_list(tmp_path, model_path):
    path, _, _ = model_path
    table = tmp_path / "pt"
    write_table(table, BAD_TABLE, final_newline=True)
    out, rejects = tmp_path / "new", tmp_path / "new.rejects"
    rejects.write_bytes(b"my notes\n")
    with pytest.raises(PhraseRescoreError, match=r"new.rejects: exists and is not a reject list"):
        score_table(path, table, out, ScoreConfig(on_error="keep"))
    assert rejects.read_bytes() == b"my notes\n" and not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.rejects", "pt"]
    rejects.unlink()
    for _ in range(2):          # the list score wrote is replaced by a rerun
        s = score_table(path, table, out, ScoreConfig(on_error="keep"))
        assert s.rejected == 2 and rejects.read_bytes().startswith(b"2\t")
    rejects.write_bytes(b"")    # an empty list (a table without bad lines) is one too
    score_table(path, table, out, ScoreConfig(on_error="keep"))
    mine = tmp_path / "mine.txt"   # a list named with --rejects is the user's choice
    mine.write_bytes(b"my notes\n")
    score_table(path, table, out, ScoreConfig(on_error="keep", rejects=str(mine)))
    assert mine.read_bytes().startswith(b"2\t")


def test_a_partial_output_made_on_another_device_is_not_resumed(tmp_path, model_path, monkeypatch):
    path, _, _ = model_path
    table = tmp_path / "pt"
    _big_table(table, n_sources=50)
    out = tmp_path / "new"
    cfg = ScoreConfig(chunk_lines=30, matmul="torch")
    _leave_partial(monkeypatch, path, table, out, cfg)
    manifest = tmp_path / "new.partial.json"
    m = json.loads(manifest.read_text())
    assert m["identity"]["device"] == "cpu"
    manifest.write_text(json.dumps({**m, "identity": {**m["identity"], "device": "cuda"}}))  # as a GPU run leaves it
    s = score_table(path, table, out, cfg)
    assert s.resumed_from_line == 0 and "device" in s.restart_reason

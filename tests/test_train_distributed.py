"""Data-parallel training on torch.distributed (gloo, CPU, 2 processes): the same weights as one process
with the same global batch, exact resume under the same world size, another world size refused."""
import os
import shutil
import socket
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest
import torch
from _encdec_data import TINY, make_learnable_table
from _seq2seq_data import write_reverse_task

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.pipeline import train_seq2seq
from phrase_rescore.pipeline.configs import PrepareConfig, TrainConfig
from phrase_rescore.pipeline.prepare import prepare
from phrase_rescore.pipeline.train import train

pytestmark = [pytest.mark.usefixtures("one_thread"),
              pytest.mark.skipif(not torch.distributed.is_available() or not torch.distributed.is_gloo_available(),
                                 reason="torch without the gloo backend")]

ARGS = dict(model_overrides=TINY, init_std=0.1, batch_size=8, valid_every=5, seed=3, device="cpu")


@pytest.fixture(scope="module")
def pairs_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("pairs")
    make_learnable_table(d / "table.txt", n_pairs=200)
    prepare(d / "table.txt", d / "pairs", PrepareConfig(vocab_size=100, valid_fraction=0.1, seed=1))
    return d / "pairs"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank, world, port, fn, args):
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), PHRASE_RESCORE_QUIET="1")
    torch.set_num_threads(1)
    fn(*args)


def on_ranks(world, fn, *args, timeout=240):
    """``fn(*args)`` in ``world`` forked processes joined as torchrun would join them (env://, gloo).

    Ranks that wait for a collective the others never join would wait forever: they fail the test instead.
    What every rank imports lazily (DDP; torch._dynamo, which the first optimizer loads, seconds of
    imports) is imported here once, so that the forked ranks inherit it.
    """
    import torch._dynamo  # noqa: F401
    from torch.nn.parallel import DistributedDataParallel  # noqa: F401
    ctx = torch.multiprocessing.start_processes(_rank_main, args=(world, _free_port(), fn, args), nprocs=world,
                                                join=False, start_method="fork")
    deadline = time.monotonic() + timeout
    while not ctx.join(timeout=0.5):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                p.kill()
            pytest.fail(f"the ranks still run after {timeout} s: one waits for a collective the others skipped")


def _tensors(path):
    d = torch.load(path, weights_only=True)
    return d["state_dict"], d["train_state"]


def _assert_close(a, b, atol):
    assert a.keys() == b.keys()
    for k in a:
        assert torch.allclose(a[k], b[k], rtol=0, atol=atol), (k, float((a[k] - b[k]).abs().max()))


def test_torchrun_two_ranks_train_like_one_process_with_the_same_global_batch(pairs_dir, tmp_path):
    one = train(pairs_dir, tmp_path / "one", TrainConfig(max_steps=12, **ARGS))
    exe = Path(sys.executable).with_name("phrase-rescore")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "--no-python",
           str(exe), "train", str(pairs_dir), "--out", str(tmp_path / "two"), "--model-overrides",
           "{" + ", ".join(f"{k} = {v}" for k, v in TINY.items()) + "}", "--init-std", "0.1", "--batch-size", "8",
           "--max-steps", "12", "--valid-every", "5", "--seed", "3", "--device", "cpu"]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PHRASE_RESCORE_QUIET="1")
    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("12 steps (max_steps)") == 1, r.stdout     # rank 0 reports for both
    for name in ("model.pt", "last.pt"):
        w1, ts1 = _tensors(tmp_path / "one" / name)
        w2, ts2 = _tensors(tmp_path / "two" / name)
        _assert_close(w1, w2, atol=1e-5)
    assert ts2["world_size"] == 2 and ts1["world_size"] == 1
    assert ts2["sampler"] == ts1["sampler"] and ts2["step"] == ts1["step"] == 12
    assert [row["step"] for row in ts2["log"]] == [5, 10, 12]
    # validation split over the ranks and summed: the same perplexities
    assert [row["valid_ppl"] for row in ts2["log"]] == pytest.approx([row["valid_ppl"] for row in one.history],
                                                                     rel=1e-6)
    assert (tmp_path / "two" / "train_log.csv").read_text().count("\n") == 4


def _train(pairs, out, steps, resume=False):
    train(pairs, out, TrainConfig(max_steps=steps, resume=resume, **ARGS))


def test_two_rank_resume_is_exact_and_another_world_size_is_refused(pairs_dir, tmp_path):
    on_ranks(2, _train, pairs_dir, tmp_path / "whole", 12)
    on_ranks(2, _train, pairs_dir, tmp_path / "split", 7)        # stops between validations
    shutil.copytree(tmp_path / "split", tmp_path / "split-copy")
    on_ranks(2, _train, pairs_dir, tmp_path / "split", 12, True)
    a, ta = _tensors(tmp_path / "whole" / "last.pt")
    b, tb = _tensors(tmp_path / "split" / "last.pt")
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert ta["sampler"] == tb["sampler"] and ta["log"][-1]["valid_ppl"] == tb["log"][-1]["valid_ppl"]
    for state in ("square_avg", "acc_delta"):
        for i in ta["optimizer"]["state"]:
            assert torch.equal(ta["optimizer"]["state"][i][state], tb["optimizer"]["state"][i][state])
    with pytest.raises(PhraseRescoreError, match=r"last.pt was saved by a run of 2 process\(es\), this one has 1"):
        train(pairs_dir, tmp_path / "split-copy", TrainConfig(max_steps=12, resume=True, **ARGS))


def _seq2seq(src, tgt, out):
    train_seq2seq.train(train_seq2seq.TrainSeq2SeqConfig(
        src, tgt, str(out), valid_size=20, emb_dim=8, hidden_dim=8, num_layers=1, batch_size=16, epochs=2,
        decay_start=1.0, seed=4, device="cpu"))


def test_seq2seq_two_ranks_train_like_one_process(tmp_path, monkeypatch):
    monkeypatch.setenv("PHRASE_RESCORE_QUIET", "1")
    src, tgt = write_reverse_task(tmp_path, 107, 2)    # 10 held out, 97 trained on: a last batch of 1 sentence
    _seq2seq(src, tgt, tmp_path / "one")
    on_ranks(2, _seq2seq, src, tgt, tmp_path / "two")
    a, ta = _tensors(tmp_path / "one" / "last.pt")
    b, tb = _tensors(tmp_path / "two" / "last.pt")
    assert ta["step"] == tb["step"] == 14 and tb["world_size"] == 2
    lengths = np.ones(97, dtype=int)
    assert min(len(x) for x in train_seq2seq.epoch_batches(lengths, lengths, 16, 4, 0, True)) == 1
    _assert_close(a, b, atol=1e-5)
    assert [h["valid_ppl"] for h in tb["history"]] == pytest.approx([h["valid_ppl"] for h in ta["history"]], rel=1e-5)
    assert [h["train_loss"] for h in tb["history"]] == pytest.approx([h["train_loss"] for h in ta["history"]],
                                                                     rel=1e-5)
    with pytest.raises(PhraseRescoreError, match=r"last.pt was saved by a run of 2 process\(es\), this one has 1"):
        _seq2seq(src, tgt, tmp_path / "two")


def _train_batch_of_one(pairs, out):
    train(pairs, out, TrainConfig(max_steps=2, **{**ARGS, "batch_size": 1}))


def test_more_ranks_than_pairs_per_batch_is_refused(pairs_dir, tmp_path):
    with pytest.raises(torch.multiprocessing.ProcessRaisedException,
                       match=r"2 processes \(WORLD_SIZE\) for a batch of 1 pairs"):
        on_ranks(2, _train_batch_of_one, pairs_dir, tmp_path / "m")
    assert not (tmp_path / "m" / "last.pt").exists()


def _train_with_a_fast_clock_on_rank_1(pairs, out):
    if os.environ["RANK"] == "1":   # this rank's clock runs 1000 s per reading: alone it would stop at once
        from phrase_rescore.pipeline import train as train_module
        start, readings = time.monotonic(), [0]

        def monotonic():
            readings[0] += 1
            return start + 1000.0 * readings[0]
        train_module.time = types.SimpleNamespace(monotonic=monotonic)
    train(pairs, out, TrainConfig(max_steps=6, time_budget_s=50, **ARGS))


def test_rank_0s_clock_decides_the_time_budget_for_all_ranks(pairs_dir, tmp_path):
    on_ranks(2, _train_with_a_fast_clock_on_rank_1, pairs_dir, tmp_path / "m")
    _, ts = _tensors(tmp_path / "m" / "last.pt")
    assert ts["step"] == 6 and ts["log"][-1]["step"] == 6 and ts["elapsed_s"] < 50

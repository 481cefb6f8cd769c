"""The CUDA path of ``score`` and ``train`` (marked ``cuda``; skipped without a CUDA device; run by
benchmarks/gpu_check.sh): fp32 scores on CUDA equal the CPU's within 1e-4, training on CUDA follows
training on the CPU, and the effect of bf16 autocast and of TF32 matrix products on log p of a trained
model is measured (max and mean |Δ log p| printed) and bounded."""
import numpy as np
import pytest
import torch
from _encdec_data import TINY, make_learnable_table

from phrase_rescore.pipeline.configs import PrepareConfig, ScoreConfig, TrainConfig
from phrase_rescore.pipeline.prepare import prepare
from phrase_rescore.pipeline.score import score_table
from phrase_rescore.pipeline.train import train

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny model trained on the CPU to a perplexity far below the unigram's, and its table."""
    d = tmp_path_factory.mktemp("cuda")
    make_learnable_table(d / "table.txt", n_pairs=600)
    prepare(d / "table.txt", d / "pairs", PrepareConfig(vocab_size=100, valid_fraction=0.1, seed=1))
    s = train(d / "pairs", d / "model", TrainConfig(model_overrides=TINY, init_std=0.1, batch_size=32,
                                                      max_steps=300, valid_every=100, seed=3, device="cpu"))
    assert s.best_valid_ppl < 0.5 * s.unigram_valid_ppl
    return d


def _logp(model_dir, table, out, **kw) -> np.ndarray:
    score_table(model_dir / "model.pt", table, out, ScoreConfig(columns=("logprob",), raw_logprob=True,
                                                                restart=True, **kw))
    with open(out, encoding="utf-8") as f:   # raw log p, the last score of each line
        return np.array([float(line.split(" ||| ")[2].split()[-1]) for line in f], dtype=np.float64)


@pytest.fixture
def no_tf32():
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def test_cuda_scores_equal_cpu_scores_in_fp32(trained, tmp_path, no_tf32):
    cpu = _logp(trained / "model", trained / "table.txt", tmp_path / "cpu.txt", device="cpu", threads=1)
    gpu = _logp(trained / "model", trained / "table.txt", tmp_path / "cuda.txt", device="cuda")
    assert len(cpu) == len(gpu) == 600 and np.isfinite(gpu).all()
    print(f"\nfp32 CUDA vs CPU: max |Δ log p| {np.abs(gpu - cpu).max():.2e} over {len(cpu)} pairs")
    assert np.abs(gpu - cpu).max() <= 1e-4


def test_cuda_training_follows_cpu_training(trained, tmp_path, no_tf32):
    cfg = dict(model_overrides=TINY, init_std=0.1, batch_size=32, max_steps=20, valid_every=10, seed=3)
    a = train(trained / "pairs", tmp_path / "cpu", TrainConfig(device="cpu", **cfg))
    b = train(trained / "pairs", tmp_path / "cuda", TrainConfig(device="cuda", **cfg))
    assert b.device.startswith("cuda") and a.steps == b.steps == 20
    wa = torch.load(tmp_path / "cpu" / "last.pt", weights_only=True)["state_dict"]
    wb = torch.load(tmp_path / "cuda" / "last.pt", weights_only=True)["state_dict"]
    diff = max(float((wa[k] - wb[k].cpu()).abs().max()) for k in wa)
    print(f"\ntraining 20 steps, CUDA vs CPU: max |Δ weight| {diff:.2e}")
    assert diff <= 1e-4
    assert b.best_valid_ppl == pytest.approx(a.best_valid_ppl, rel=1e-4)


def test_bf16_autocast_and_tf32_effect_on_log_p(trained, tmp_path, no_tf32):
    ref = _logp(trained / "model", trained / "table.txt", tmp_path / "cpu.txt", device="cpu", threads=1)
    bf16 = _logp(trained / "model", trained / "table.txt", tmp_path / "bf16.txt", device="cuda", precision="bf16")
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    tf32 = _logp(trained / "model", trained / "table.txt", tmp_path / "tf32.txt", device="cuda")
    print(f"\nlog p of a trained model (mean {ref.mean():.3f} per pair), {len(ref)} pairs, vs CPU fp32:")
    for name, x in (("bf16 autocast", bf16), ("TF32 matmul", tf32)):
        d = np.abs(x - ref)
        print(f"  {name:14s} max |Δ log p| {d.max():.2e}  mean {d.mean():.2e}")
    # bf16 keeps 8 significant bits (relative error 2^-9 per product), TF32 11: errors of a few 1e-2 and
    # 1e-3 nats on phrases of a few words; far more means a product is not where autocast should put it
    assert np.abs(bf16 - ref).mean() <= 0.05 and np.abs(bf16 - ref).max() <= 0.5
    assert np.abs(tf32 - ref).max() <= 0.05

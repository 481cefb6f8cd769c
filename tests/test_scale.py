"""Training at scale: pairs read from disk as needed, the same batches as before, memory that does not grow
with the number of pairs."""
import csv
import gc
import json
import random
import tracemalloc

import numpy as np
import pytest
from _encdec_data import TINY, make_learnable_table

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.pipeline import pairs as pairs_module
from phrase_rescore.pipeline.batching import UniformSampler
from phrase_rescore.pipeline.configs import PrepareConfig, TrainConfig
from phrase_rescore.pipeline.pairs import PairFile, check_pairs_dir, load_pairs
from phrase_rescore.pipeline.prepare import prepare
from phrase_rescore.pipeline.train import train, unigram_perplexity

pytestmark = pytest.mark.usefixtures("one_thread")

# The per-step losses of a 20-step run (batch 32 over about 540 pairs: an epoch boundary at step 17),
# recorded with the code that held every pair in memory (load_pairs + Generator.permutation): the
# trainer that reads its pairs from disk must draw the same batches and so give the same losses.
LOSSES_BEFORE = [13.652467727661133, 14.082498550415039, 13.754953384399414, 13.861296653747559, 14.512939453125,
                 13.534148216247559, 13.964611053466797, 13.095043182373047, 14.17705249786377, 14.826221466064453,
                 13.521037101745605, 13.623454093933105, 13.625730514526367, 14.47972583770752, 13.387238502502441,
                 13.593524932861328, 13.466257095336914, 13.561885833740234, 14.163663864135742, 13.896581649780273]
VALID_PPL_BEFORE = [32.01177052631078, 31.997159269539686, 31.98233210136887, 31.969165555546738, 31.95576585226893,
                    31.93995379209059, 31.92410608967748, 31.904115830428687, 31.881974484505786, 31.856148723950483,
                    31.82493656059798, 31.788249332369833, 31.743524234506992, 31.681706713471097, 31.595772787783694,
                    31.477246453214466, 31.310899278294357, 31.059535798634826, 30.62755141206829, 29.90179299598658]


@pytest.fixture(scope="module")
def pairs_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("pairs")
    make_learnable_table(d / "table.txt")
    prepare(d / "table.txt", d / "pairs", PrepareConfig(vocab_size=100, valid_fraction=0.1, seed=1))
    return d / "pairs"


def test_a_short_run_draws_the_same_batches_as_the_in_memory_trainer(pairs_dir, tmp_path):
    s = train(pairs_dir, tmp_path / "m", TrainConfig(model_overrides=TINY, init_std=0.1, batch_size=32, max_steps=20,
                                                   valid_every=1, seed=3))
    with open(tmp_path / "m" / "train_log.csv") as f:
        rows = list(csv.DictReader(f))
    assert [float(r["train_loss"]) for r in rows] == pytest.approx(LOSSES_BEFORE, rel=1e-6)
    assert [float(r["valid_ppl"]) for r in rows] == pytest.approx(VALID_PPL_BEFORE, rel=1e-9)
    assert s.unigram_valid_ppl == pytest.approx(22.56557816704621, rel=1e-12)


def test_the_arrays_on_disk_hold_the_parquet_pairs_in_order(pairs_dir):
    for split in ("train", "valid"):
        on_disk, in_memory = PairFile(pairs_dir, split), load_pairs(pairs_dir / f"{split}.parquet")
        assert len(on_disk) == len(in_memory) > 0
        idx = np.random.default_rng(0).permutation(len(in_memory))[:50]
        for a, b in zip(on_disk.batch(idx), in_memory.batch(idx)):
            assert a.dtype == b.dtype and a.shape == b.shape and bool((a == b).all())
        assert (on_disk.lengths(7) == in_memory.lengths()[:7]).all()
        assert np.array_equal(np.concatenate(list(on_disk.target_ids())), in_memory.tgt.values)
        # plain .npy files: NumPy reads them whole as well
        assert np.array_equal(np.load(pairs_dir / f"{split}-tgt-ids.npy"), in_memory.tgt.values)
        assert np.array_equal(np.load(pairs_dir / f"{split}-src-offsets.npy"), in_memory.src.offsets)
    train_set = PairFile(pairs_dir, "train")
    assert unigram_perplexity(train_set, PairFile(pairs_dir, "valid"), 101) == pytest.approx(
        unigram_perplexity(load_pairs(pairs_dir / "train.parquet"), load_pairs(pairs_dir / "valid.parquet"), 101))


def test_the_sampler_draws_generator_permutations_in_four_byte_items():
    s = UniformSampler(1000, 64, seed=7)
    drawn = np.concatenate([next(s) for _ in range(32)])      # 2048 indices: two whole epochs and a part
    expected = np.concatenate([np.random.default_rng([7, e]).permutation(1000) for e in range(3)])[:2048]
    assert drawn.dtype == np.int64 and np.array_equal(drawn, expected)
    assert s._perm.dtype == np.int32 and s._perm.nbytes == 4000


def test_an_array_damaged_after_prepare_is_refused_before_training(pairs_dir, tmp_path):
    import shutil
    d = tmp_path / "pairs"
    shutil.copytree(pairs_dir, d)
    with open(d / "train-tgt-ids.npy", "r+b") as f:
        f.seek(-4, 2)
        f.write(b"\x07\x00\x00\x00")
    with pytest.raises(PhraseRescoreError, match="train-tgt-ids.npy does not belong"):
        check_pairs_dir(d)
    with pytest.raises(PhraseRescoreError, match="train-tgt-ids.npy does not belong"):
        train(d, tmp_path / "m", TrainConfig(model_overrides=TINY, max_steps=1))


def test_a_pairs_folder_of_the_previous_format_asks_for_a_new_prepare(pairs_dir, tmp_path):
    import shutil
    d = tmp_path / "pairs"
    shutil.copytree(pairs_dir, d)
    m = json.loads((d / "manifest.json").read_text())
    (d / "manifest.json").write_text(json.dumps({**m, "format_version": 2}))
    with pytest.raises(PhraseRescoreError, match="older prepare.*id arrays"):
        train(d, tmp_path / "m", TrainConfig(model_overrides=TINY, max_steps=1))


def _table(path, n_pairs, seed=0):
    r = random.Random(seed)
    words = [f"w{i}" for i in range(300)]
    with open(path, "w") as f:
        for i in range(n_pairs):
            src = " ".join(r.choice(words) for _ in range(r.randint(1, 7)))
            f.write(f"{src} x{i} ||| {' '.join(r.choice(words) for _ in range(r.randint(1, 7)))} ||| 0.1 0.2\n")


def _traced_peak(pairs, out) -> int:
    """Peak bytes NumPy, torch's CPU tensors and Python allocate (tracemalloc) over a 3-step run."""
    gc.collect()
    tracemalloc.start()
    try:
        train(pairs, out, TrainConfig(model_overrides=TINY, max_steps=3, valid_every=3, valid_max_pairs=500))
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_training_memory_does_not_grow_with_the_number_of_pairs(tmp_path, monkeypatch):
    """10x the pairs: the in-memory trainer's peak grew by ~80 bytes a pair (the ids and their offsets,
    as int64); reading from disk leaves the sampler's permutation, 4 bytes a pair. (Whole arrays are
    read in chunks of a fixed size, here made small so that they are the same at both sizes.)"""
    monkeypatch.setattr(pairs_module, "CHUNK_ITEMS", 4096)
    peaks = {}
    for n in (10_000, 100_000):
        _table(tmp_path / f"t{n}.txt", n)
        prepare(tmp_path / f"t{n}.txt", tmp_path / f"p{n}", PrepareConfig(vocab_size=200, valid_fraction=0.01))
        peaks[n] = _traced_peak(tmp_path / f"p{n}", tmp_path / f"m{n}")
    assert peaks[100_000] - peaks[10_000] < 8 * 90_000, peaks

"""Vocabulary counts, the prepare stage (unique pairs, split, Parquet), the sampler and the batcher."""
import collections
import gzip
import random

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from pipeline.batching import UniformSampler, length_batches, pad_batch
from pipeline.cli import main
from pipeline.errors import PhraseRescoreError
from pipeline.pairs import load_pairs
from pipeline.prepare import PrepareConfig, prepare
from pipeline.vocab import EOS_ID, UNK_ID, Vocabularies, build_vocab

HAND_TABLE = """\
la maison ||| the house ||| 0.5 0.5 0.5 0.5
la maison ||| the home ||| 0.5 0.5 0.5 0.5
la maison ||| the house ||| 0.5 0.5 0.5 0.5
la ||| the ||| 1 1 1 1
maison bleue ||| blue house ||| 1 1 1 1
"""


def test_vocabulary_counted_over_unique_pairs(tmp_path):
    table = tmp_path / "t.txt"
    table.write_text(HAND_TABLE)
    m = prepare(table, tmp_path / "pairs", PrepareConfig(vocab_size=3, valid_fraction=0.0))
    assert m["lines"] == 5 and m["unique_pairs"] == 4  # the repeated pair counts once
    v = Vocabularies.load(tmp_path / "pairs" / "vocab.json")
    # source counts over unique pairs: la 3, maison 3, bleue 1 -> ties in byte order
    assert v.source.words == ["<eos>", "<unk>", "la", "maison", "bleue"]
    # target: the 3, house 2, blue 1, home 1 -> top 3 with byte-order tie-break: blue before home
    assert v.target.words == ["<eos>", "<unk>", "the", "house", "blue"]
    df = pd.read_parquet(tmp_path / "pairs" / "train.parquet")
    home = df[df.target == "the home"].iloc[0]
    assert list(home.tgt_ids) == [2, UNK_ID, EOS_ID] and home.tgt_len == 3 and home.n_unk == 1
    assert list(df[df.source == "maison bleue"].iloc[0].src_ids) == [3, 4, EOS_ID]


def test_build_vocab_table():
    c = collections.Counter({"b": 2, "a": 2, "c": 5, "<unk>": 9})
    assert build_vocab(c, 2).words == ["<eos>", "<unk>", "c", "a"]
    v = build_vocab(c, 10)
    assert v.encode(["c", "zzz", "b"]) == [2, UNK_ID, 4] and v.unk_count(["c", "zzz", "q"]) == 2
    assert v.decode([2, 4, EOS_ID, 3]) == ["c", "b"]


def make_table(path, n_sources=400, seed=0):
    r = random.Random(seed)
    src_words = [f"s{i}" for i in range(60)]
    tgt_words = [f"t{i}" for i in range(60)]
    pairs = set()
    for _ in range(n_sources):
        s = " ".join(r.choice(src_words) for _ in range(r.randint(1, 7)))
        for _ in range(r.choice([1, 1, 1, 2, 3, 8])):
            pairs.add((s, " ".join(r.choice(tgt_words) for _ in range(r.randint(1, 7)))))
    lines = sorted(f"{s} ||| {t} ||| 0.1 0.2 0.3 0.4 ||| 0-0 ||| 1 1 1 ||| |||\n" for s, t in pairs)
    dup = lines[::10]  # duplicates scattered through the file (unsorted), which must still be merged
    lines = lines + dup
    r.shuffle(lines)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(lines)
    return pairs


@pytest.mark.parametrize("partition_bytes", [1 << 30, 2000])  # one partition, and many
def test_prepare_unique_pairs_split_and_parquet(tmp_path, partition_bytes):
    pairs = make_table(tmp_path / "t.gz")
    out = tmp_path / "pairs"
    m = prepare(tmp_path / "t.gz", out, PrepareConfig(vocab_size=40, valid_fraction=0.2, buffer_pairs=37,
                                                      partition_bytes=partition_bytes))
    train = pd.read_parquet(out / "train.parquet")
    valid = pd.read_parquet(out / "valid.parquet")
    got = list(zip(train.source, train.target)) + list(zip(valid.source, valid.target))
    assert len(got) == len(set(got)) == len(pairs) == m["unique_pairs"]
    assert set(got) == pairs
    assert not set(train.source) & set(valid.source)  # disjoint by source
    assert 0.1 < m["valid_sources"] / (m["valid_sources"] + m["train_sources"]) < 0.3
    v = Vocabularies.load(out / "vocab.json")
    for row in train.head(50).itertuples():
        assert list(row.src_ids) == v.source.encode(row.source.split()) + [EOS_ID]
        assert list(row.tgt_ids) == v.target.encode(row.target.split()) + [EOS_ID]
        assert row.n_unk == v.source.unk_count(row.source.split()) + v.target.unk_count(row.target.split())
    ps = load_pairs(out / "train.parquet")
    assert len(ps) == len(train) and list(ps.tgt[3]) == list(train.tgt_ids[3])


def test_prepare_is_deterministic(tmp_path):
    make_table(tmp_path / "t.gz")
    prepare(tmp_path / "t.gz", tmp_path / "a", PrepareConfig(valid_fraction=0.2))
    prepare(tmp_path / "t.gz", tmp_path / "b", PrepareConfig(valid_fraction=0.2))
    for name in ("train.parquet", "valid.parquet", "vocab.json"):
        assert pd.read_parquet(tmp_path / "a" / name).equals(pd.read_parquet(tmp_path / "b" / name)) \
            if name.endswith(".parquet") else (tmp_path / "a" / name).read_text() == (tmp_path / "b" / name).read_text()


def test_prepare_bad_line_and_keep(tmp_path):
    table = tmp_path / "t.txt"
    table.write_text(HAND_TABLE + "broken line\n")
    with pytest.raises(PhraseRescoreError, match=r"t.txt:6: expected at least 3 fields"):
        prepare(table, tmp_path / "p1")
    m = prepare(table, tmp_path / "p2", PrepareConfig(on_error="keep", valid_fraction=0.0))
    assert m["rejected"] == 1 and m["unique_pairs"] == 4
    assert (tmp_path / "p2" / "rejects.txt").read_text().startswith("6\t")


def test_prepare_cli(tmp_path):
    table = tmp_path / "t.txt"
    table.write_text(HAND_TABLE)
    r = CliRunner().invoke(main, ["--quiet", "prepare", str(table), "--out", str(tmp_path / "p")])
    assert r.exit_code == 0, r.output
    assert "4 unique pairs" in r.output
    table.write_text("a ||| b ||| x\n")
    r = CliRunner().invoke(main, ["--quiet", "prepare", str(table), "--out", str(tmp_path / "p")])
    assert r.exit_code == 1 and "t.txt:1: score 'x' is not a number" in r.output


def test_sampler_uniform_and_resumable():
    s = UniformSampler(10, 4, seed=7)
    first = [next(s) for _ in range(5)]  # 20 draws = two epochs
    seen = np.concatenate(first)
    assert sorted(seen[:10]) == list(range(10)) and sorted(seen[10:]) == list(range(10))
    s2 = UniformSampler(10, 4, seed=7)
    for _ in range(2):
        next(s2)
    state = s2.state_dict()
    s3 = UniformSampler(10, 4, seed=7)
    s3.load_state_dict(state)
    assert all((next(s3) == b).all() for b in first[2:])


def test_pad_batch_and_length_batches():
    ids, mask = pad_batch([np.array([5, 0]), np.array([3, 4, 6, 0])])
    assert ids.tolist() == [[5, 0, 0, 0], [3, 4, 6, 0]]
    assert mask.tolist() == [[True, True, False, False], [True, True, True, True]]
    lengths = np.random.default_rng(0).integers(1, 9, size=(500, 2))
    batches = length_batches(lengths, max_tokens=64)
    assert sorted(np.concatenate(batches).tolist()) == list(range(500))
    assert all(len(b) * lengths[b].sum(1).max() <= 64 for b in batches)
    assert np.mean([np.ptp(lengths[b].sum(1)) for b in batches]) < 2  # similar lengths together

"""Vocabulary counts, the prepare stage (unique pairs, split, Parquet), the sampler and the batcher."""
import collections
import gzip
import os
import random
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from phrase_rescore.app.cli import main
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.pipeline.batching import UniformSampler, length_batches, pad_batch
from phrase_rescore.pipeline.configs import PrepareConfig
from phrase_rescore.pipeline.pairs import ARRAY_PARTS, load_pairs
from phrase_rescore.pipeline.prepare import prepare
from phrase_rescore.pipeline.vocab import EOS_ID, UNK_ID, Vocabularies, build_vocab

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


def test_a_no_break_space_is_part_of_a_word_as_in_moses(tmp_path):
    """Moses splits phrases at spaces and tabs only: "la\u00a0maison" is one word, "x\u00a0" is not "x"."""
    table = tmp_path / "t.txt"
    table.write_text("la\u00a0maison ||| the house ||| 1 1 1 1\nla ||| the ||| 1 1 1 1\n"
                     "x\u00a0 ||| y ||| 1 1 1 1\n", encoding="utf-8")
    prepare(table, tmp_path / "pairs", PrepareConfig(vocab_size=10, valid_fraction=0.0))
    v = Vocabularies.load(tmp_path / "pairs" / "vocab.json")
    assert sorted(v.source.words[2:]) == ["la", "la\u00a0maison", "x\u00a0"]
    df = pd.read_parquet(tmp_path / "pairs" / "train.parquet")
    assert sorted(df.source) == ["la", "la\u00a0maison", "x\u00a0"]
    assert len(df[df.source == "la\u00a0maison"].iloc[0].src_ids) == 2      # one word and <eos>


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


# --- an output folder is all-old or all-new; train refuses parts that do not belong together

PARTS = ("train.parquet", "valid.parquet", "vocab.json") + ARRAY_PARTS


def _two_tables(tmp_path):
    make_table(tmp_path / "a.gz", seed=0)
    make_table(tmp_path / "b.gz", n_sources=300, seed=1)
    return tmp_path / "a.gz", tmp_path / "b.gz"


def _parts(d):
    return {n: (d / n).read_bytes() for n in PARTS}


def _train_cfg():
    from phrase_rescore.pipeline.configs import TrainConfig
    return TrainConfig(model_overrides=dict(emb_dim=8, hidden_dim=8, maxout_units=4, rank=4), max_steps=1,
                       valid_every=1, batch_size=8)


@pytest.mark.usefixtures("one_thread")
def test_a_prepare_killed_while_it_rewrites_a_folder_leaves_the_old_one(tmp_path, monkeypatch):
    from phrase_rescore.pipeline import prepare as prepare_module
    from phrase_rescore.pipeline.train import train
    a, b = _two_tables(tmp_path)
    out = tmp_path / "pairs"
    prepare(a, out, PrepareConfig(valid_fraction=0.2))
    old = _parts(out)

    def killed(*args, **kwargs):        # the vocabulary is written, the pairs are being encoded
        raise KeyboardInterrupt

    monkeypatch.setattr(prepare_module, "_encode_and_write", killed)
    with pytest.raises(KeyboardInterrupt):
        prepare(b, out, PrepareConfig(valid_fraction=0.2))
    assert _parts(out) == old                                        # all old: no new vocab beside old pairs
    train(out, tmp_path / "m", _train_cfg())                         # and usable as it was


# the renames into the folder, in order: the incomplete manifest, the three parts, the complete manifest
@pytest.mark.parametrize("renamed", [0, 1, 2, 3, 4])                 # how many were done when the kill came
def test_a_prepare_killed_while_it_swaps_the_parts_is_refused_then_redone(tmp_path, monkeypatch, renamed):
    from phrase_rescore.pipeline import prepare as prepare_module
    from phrase_rescore.pipeline.train import train
    a, b = _two_tables(tmp_path)
    out, ref = tmp_path / "pairs", tmp_path / "ref"
    prepare(a, out, PrepareConfig(valid_fraction=0.2))
    old = _parts(out)
    real = os.replace
    calls = []

    def replace_then_die(src, dst):
        if Path(dst).parent == out and Path(dst).name in PARTS + ("manifest.json",):
            if len(calls) == renamed:
                raise KeyboardInterrupt
            calls.append(dst)
        return real(src, dst)

    monkeypatch.setattr(prepare_module.os, "replace", replace_then_die)
    with pytest.raises(KeyboardInterrupt):
        prepare(b, out, PrepareConfig(valid_fraction=0.2))
    monkeypatch.setattr(prepare_module.os, "replace", real)
    if renamed == 0:
        assert _parts(out) == old
        train(out, tmp_path / "m", _train_cfg())                     # the old folder, whole
    else:
        with pytest.raises(PhraseRescoreError, match="prepare was interrupted while it replaced") as e:
            train(out, tmp_path / "m", _train_cfg())
        assert e.value.path == str(out)
    prepare(b, out, PrepareConfig(valid_fraction=0.2))               # the same command again
    prepare(b, ref, PrepareConfig(valid_fraction=0.2))
    assert _parts(out) == _parts(ref)
    assert sorted(p.name for p in out.iterdir()) == sorted(PARTS + ("manifest.json",))


# (the part replaced by another run's, where the kill left it)
MIXED = [("vocab.json",), ("train.parquet",), ("valid.parquet",), ("vocab.json", "valid.parquet")]


@pytest.mark.parametrize("foreign", MIXED)
def test_train_refuses_parts_that_do_not_belong_together(tmp_path, foreign):
    from phrase_rescore.pipeline.train import train
    a, b = _two_tables(tmp_path)
    prepare(a, tmp_path / "pa", PrepareConfig(valid_fraction=0.2))
    prepare(b, tmp_path / "pb", PrepareConfig(valid_fraction=0.2))
    for name in foreign:
        shutil.copyfile(tmp_path / "pb" / name, tmp_path / "pa" / name)
    first = next(n for n in PARTS if n in foreign)
    with pytest.raises(PhraseRescoreError, match=f"{first} does not belong with the other files of "
                                                 f"{tmp_path / 'pa'}") as e:
        train(tmp_path / "pa", tmp_path / "m", _train_cfg())
    assert e.value.path == str(tmp_path / "pa" / first)
    assert not (tmp_path / "m" / "last.pt").exists()


def test_prepare_keeps_a_users_files_and_never_overwrites_a_part_it_did_not_write(tmp_path):
    a, b = _two_tables(tmp_path)
    out = tmp_path / "pairs"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    prepare(a, out, PrepareConfig(valid_fraction=0.2))
    prepare(b, out, PrepareConfig(valid_fraction=0.2, on_error="keep"))
    assert (out / "rejects.txt").exists()
    prepare(a, out, PrepareConfig(valid_fraction=0.2))               # its own old rejects.txt goes
    assert sorted(p.name for p in out.iterdir()) == sorted(PARTS + ("manifest.json", "notes.txt"))
    assert (out / "notes.txt").read_text() == "mine\n"
    other = tmp_path / "other"
    other.mkdir()
    (other / "vocab.json").write_text("{}\n")                        # a user's file with a part's name
    with pytest.raises(PhraseRescoreError, match="this folder holds vocab.json, which `phrase-rescore prepare` did not write"):
        prepare(a, other, PrepareConfig())
    assert sorted(p.name for p in other.iterdir()) == ["vocab.json"] and (other / "vocab.json").read_text() == "{}\n"


def test_the_next_prepare_removes_only_the_temporary_folders_of_killed_runs(tmp_path):
    import subprocess
    import sys

    from phrase_rescore.core.temp_names import HOST_TAG
    from phrase_rescore.pipeline import prepare as prepare_module
    a, _ = _two_tables(tmp_path)
    out = tmp_path / "pairs"
    out.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    host = HOST_TAG

    def temp(owner, marker=True, token="0a1b2c3d"):
        d = out / f".prepare-{owner}.{token}.tmp"
        d.mkdir()
        (d / "partitions").mkdir()
        if marker:
            (d / prepare_module.TMP_MARKER).write_text("x")
        return d

    killed = temp(f"{host}-{dead}")
    alive = temp(f"{host}-{os.getppid()}")                           # a prepare still running
    other_host = temp(f"0000ffff-{dead}")                            # another machine's, in a shared folder
    unmarked = temp(f"{host}-{dead}", marker=False, token="ffff")   # not provably ours
    prepare(a, out, PrepareConfig(valid_fraction=0.2))
    assert not killed.exists()
    assert alive.exists() and other_host.exists() and unmarked.exists()


def test_a_folder_of_an_older_prepare_is_refused_by_train_and_replaced_by_prepare(tmp_path):
    import json

    from phrase_rescore.pipeline.train import train
    a, b = _two_tables(tmp_path)
    out = tmp_path / "pairs"
    prepare(a, out, PrepareConfig(valid_fraction=0.2))
    m = json.loads((out / "manifest.json").read_text())
    for key in ("parts", "complete"):
        del m[key]
    (out / "manifest.json").write_text(json.dumps({**m, "format_version": 1}))   # as an older prepare wrote it
    for name in ARRAY_PARTS:                                                    # which wrote no id arrays
        (out / name).unlink()
    (out / "rejects.txt").write_text("3\tbad\tline\n")                          # from an older --on-error keep
    with pytest.raises(PhraseRescoreError, match="written by an older prepare .*rerun `phrase-rescore prepare`"):
        train(out, tmp_path / "m", _train_cfg())
    prepare(b, out, PrepareConfig(valid_fraction=0.2))
    assert sorted(p.name for p in out.iterdir()) == sorted(PARTS + ("manifest.json",))
    train(out, tmp_path / "m", _train_cfg())

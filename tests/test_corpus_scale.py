"""train-cslm and train-seq2seq at scale: the corpus is read once into id arrays on disk and batches read
them by position, drawing the same batches as when the corpus was held in memory, with memory that does
not grow with the corpus."""
import csv
import gc
import tracemalloc

import numpy as np
import pytest
from _corpus_text import write_text

from phrase_rescore.core.reading import read_sentences
from phrase_rescore.pipeline import pairs as pairs_module
from phrase_rescore.pipeline import train_cslm as train_cslm_module
from phrase_rescore.pipeline import train_seq2seq as train_seq2seq_module
from phrase_rescore.pipeline.batching import pad_batch
from phrase_rescore.pipeline.configs import TrainCSLMConfig, TrainSeq2SeqConfig
from phrase_rescore.pipeline.model.checkpoint import CSLM_KIND, load_checkpoint
from phrase_rescore.pipeline.model.cslm import corpus_events
from phrase_rescore.pipeline.pairs import NpyFile, PairFile
from phrase_rescore.pipeline.sentences import encode_eos
from phrase_rescore.pipeline.train_cslm import read_events, train_cslm
from phrase_rescore.pipeline.train_seq2seq import train
from phrase_rescore.pipeline.vocab import Vocabularies

pytestmark = pytest.mark.usefixtures("one_thread")

# Per-step training losses and validation perplexities of short runs, recorded with the trainers that held
# their corpora in memory as lists of words (train-cslm: about 12 batches an epoch, so an epoch boundary;
# empty lines and words outside the shortlist; train-seq2seq: 9 length-grouped batches an epoch, a
# validation after each, the learning rate halved from epoch 1). Reading the corpus from disk must draw the
# same batches and so give the same numbers.
CSLM_LOSSES = [3.0910959243774414, 3.090235948562622, 3.089296340942383, 3.088838577270508, 3.087578058242798,
               3.087496042251587, 3.0859525203704834, 3.0844814777374268, 3.0850467681884766, 3.084156036376953,
               3.0835821628570557, 3.0816173553466797, 3.0821077823638916, 3.0803542137145996, 3.0805752277374268,
               3.0790395736694336]
CSLM_PPL = [34.176387046146644, 34.148439152646795, 34.11995556215929, 34.09129474633237, 34.06272371335117,
            34.03445177737667, 34.006411159859795, 33.97805125862169, 33.94942027214526, 33.92064264135683,
            33.891725458222375, 33.862283597746234, 33.832937711124934, 33.80342130003372, 33.774031327125904,
            33.744668303273464]
S2S_LOSSES = [20.268339157104492, 15.922208786010742, 15.21461009979248, 11.11406421661377, 4.081956386566162,
              24.508638381958008, 12.32586669921875, 8.076639175415039, 27.722795486450195, 12.340328216552734,
              8.167712211608887, 4.080111503601074, 14.695696830749512, 17.324125289916992, 23.769718170166016,
              10.850638389587402, 14.525115966796875, 27.197832107543945]
S2S_PPL = [17.613464452193167, 15.70098021577689, 14.86528041395999, 14.695525060470407, 15.024061488412102,
           14.247977833648708, 14.079521622974825, 14.304039675865736, 14.322096992957528, 14.178352202354125,
           14.173013825696236, 14.248921410787041, 14.17617594386573, 14.118930414182985, 14.036846863670574,
           14.049721015892436, 14.063885921020965, 14.068474771929473]


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.setenv("PHRASE_RESCORE_QUIET", "1")


def _cslm_config(**over):
    return TrainCSLMConfig(**{**dict(emb_dim=8, hidden1=16, hidden2=8, order=4, shortlist=20, batch_size=128,
                                     max_steps=16, valid_every=1, valid_size=20, patience=0, seed=5), **over})


def _s2s_config(d, src, tgt, **over):
    return TrainSeq2SeqConfig(str(src), str(tgt), str(d), **{
        **dict(valid_size=22, emb_dim=8, hidden_dim=8, num_layers=1, batch_size=16, epochs=2, decay_start=1.0,
               valid_every=1 / 9, seed=4, src_vocab_size=20, tgt_vocab_size=20), **over})


def test_train_cslm_draws_the_same_batches_as_the_in_memory_trainer(tmp_path):
    corpus = write_text(tmp_path / "c.txt", 300, seed=1)
    train_cslm(corpus, tmp_path / "m", _cslm_config())
    with open(tmp_path / "m" / "train_log.csv") as f:
        rows = list(csv.DictReader(f))
    assert [float(r["train_loss"]) for r in rows] == pytest.approx(CSLM_LOSSES, rel=1e-6)
    assert [float(r["valid_ppl"]) for r in rows] == pytest.approx(CSLM_PPL, rel=1e-9)


def test_train_seq2seq_draws_the_same_batches_as_the_in_memory_trainer(tmp_path):
    src = write_text(tmp_path / "s.txt", 150, seed=2, n_words=30)
    tgt = write_text(tmp_path / "t.txt", 150, seed=3, n_words=25)
    s = train(_s2s_config(tmp_path / "m", src, tgt))
    assert [h["train_loss"] for h in s.history] == pytest.approx(S2S_LOSSES, rel=1e-6)
    assert [h["valid_ppl"] for h in s.history] == pytest.approx(S2S_PPL, rel=1e-9)


def _traced_peak(run, *args) -> int:
    """Peak bytes NumPy, torch's CPU tensors and Python allocate (tracemalloc) while ``run(*args)`` runs."""
    gc.collect()
    tracemalloc.start()
    try:
        run(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _tokens(path) -> int:
    with open(path) as f:
        return sum(len(line.split()) + 1 for line in f)


def test_train_cslm_memory_does_not_grow_with_the_corpus(tmp_path, monkeypatch):
    """10x the corpus: the trainer that held the words as Python strings and every event's context as int64
    grew by ~200 bytes a token; from disk, the epoch's permutation of the events is left, 4 bytes a token.
    (The corpus is written to disk in chunks of a fixed size, here made small so that they are the same at
    both sizes.)"""
    monkeypatch.setattr(train_cslm_module, "EVENTS_CHUNK", 4096)
    peaks, tokens = {}, {}
    for n in (3_000, 30_000):
        corpus = write_text(tmp_path / f"c{n}.txt", n, seed=n)
        tokens[n] = _tokens(corpus)
        cfg = _cslm_config(max_steps=3, valid_every=3, valid_size=100)
        if n == 3_000:      # a first run allocates once what later runs reuse (lazy imports, torch's pools)
            train_cslm(corpus, tmp_path / "warm", cfg)
        peaks[n] = _traced_peak(train_cslm, corpus, tmp_path / f"m{n}", cfg)
    assert peaks[30_000] - peaks[3_000] < 6 * (tokens[30_000] - tokens[3_000]), (peaks, tokens)


def test_train_seq2seq_memory_does_not_grow_with_the_corpus(tmp_path, monkeypatch):
    """10x the pairs: the trainer that held both sides as Python strings and int64 arrays grew by ~100 bytes
    a token (~1 kB a pair); from disk, what is left per pair is the epoch's length-grouped order (its
    lengths, permutation and sort keys). (Chunks of a fixed size, here made small, as above.)"""
    monkeypatch.setattr(train_seq2seq_module, "PAIRS_CHUNK", 512)
    monkeypatch.setattr(pairs_module, "CHUNK_ITEMS", 4096)
    peaks, tokens = {}, {}
    for n in (3_000, 30_000):
        src = write_text(tmp_path / f"s{n}.txt", n, seed=n, n_words=30)
        tgt = write_text(tmp_path / f"t{n}.txt", n, seed=n + 1, n_words=25)
        tokens[n] = _tokens(src) + _tokens(tgt)
        cfg = _s2s_config(tmp_path / f"m{n}", src, tgt, valid_size=100, epochs=2 / (n // 16), valid_every=1.0)
        if n == 3_000:      # a first run allocates once what later runs reuse (lazy imports, torch's pools)
            train(_s2s_config(tmp_path / "warm", src, tgt, valid_size=100, epochs=2 / (n // 16), valid_every=1.0))
        peaks[n] = _traced_peak(train, cfg)
    assert peaks[30_000] - peaks[3_000] < 10 * (tokens[30_000] - tokens[3_000]), (peaks, tokens)


def test_train_cslm_events_on_disk_are_the_in_memory_events_and_a_resume_reuses_them(tmp_path):
    corpus = write_text(tmp_path / "c.txt", 300, seed=1)
    train_cslm(corpus, tmp_path / "m", _cslm_config(max_steps=4, valid_every=2))
    [folder] = (tmp_path / "m").glob("corpus-ids-*")
    vocab = load_checkpoint(tmp_path / "m" / "last.pt", "cpu", CSLM_KIND).vocabs
    lines = read_sentences(corpus)
    held = set(np.random.default_rng([5, 10 ** 6]).permutation(len(lines))[:20].tolist())
    ctx, tgt, _ = corpus_events(vocab, [s for i, s in enumerate(lines) if s and i not in held], 3)
    assert np.array_equal(np.load(folder / "train-ids.npy"), tgt)
    positions = np.random.default_rng(0).permutation(len(tgt))[:200]
    got_ctx, got_tgt = read_events(NpyFile(folder / "train-ids.npy"), positions, 3)
    assert np.array_equal(got_ctx, ctx[positions]) and np.array_equal(got_tgt, tgt[positions])
    inode = (folder / "train-ids.npy").stat().st_ino
    train_cslm(corpus, tmp_path / "m", _cslm_config(max_steps=6, valid_every=2, resume=True))
    assert [p.name for p in (tmp_path / "m").glob("corpus-ids-*")] == [folder.name]
    assert (folder / "train-ids.npy").stat().st_ino == inode        # written once


def test_train_seq2seq_pairs_on_disk_are_the_encoded_pairs_and_a_resume_reuses_them(tmp_path):
    src = write_text(tmp_path / "s.txt", 150, seed=2, n_words=30)
    tgt = write_text(tmp_path / "t.txt", 150, seed=3, n_words=25)
    train(_s2s_config(tmp_path / "m", src, tgt, epochs=0.5))
    [folder] = (tmp_path / "m").glob("corpus-ids-*")
    vocabs = Vocabularies.load(tmp_path / "m" / "vocab.json")
    held = set(np.random.default_rng([4, 10 ** 6]).permutation(150)[:15].tolist())
    pairs = [(x, y) for i, (x, y) in enumerate(zip(read_sentences(src), read_sentences(tgt))) if i not in held]
    on_disk = PairFile(folder, "train")
    assert len(on_disk) == len(pairs) == 135
    idx = np.random.default_rng(0).permutation(len(pairs))[:40]
    expected = (*pad_batch([encode_eos(vocabs.source, pairs[i][0]) for i in idx]),
                *pad_batch([encode_eos(vocabs.target, pairs[i][1]) for i in idx]))
    assert all(a.shape == b.shape and bool((a == b).all()) for a, b in zip(on_disk.batch(idx), expected))
    inode = (folder / "train-src-ids.npy").stat().st_ino
    train(_s2s_config(tmp_path / "m", src, tgt, epochs=1))
    assert [p.name for p in (tmp_path / "m").glob("corpus-ids-*")] == [folder.name]
    assert (folder / "train-src-ids.npy").stat().st_ino == inode

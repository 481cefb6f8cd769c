"""BLEU statistics, Och's exact line search and the MERT optimizer."""
import numpy as np
import pytest
import sacrebleu

from phrase_rescore.moses_integration.embedded.bleu_stats import Reference, bleu, corpus_bleu, sentence_stats
from phrase_rescore.moses_integration.embedded.mert import NBestPool, line_search, one_best_stats, optimize, score_at


@pytest.mark.parametrize("hyp, ref, expected", [
    ("the cat sat on the mat", "the cat sat on the mat", [6, 6, 5, 5, 4, 4, 3, 3, 6]),
    ("the the the the", "the cat the", [2, 4, 0, 3, 0, 2, 0, 1, 3]),         # clipping
    ("", "a b", [0, 0, 0, 0, 0, 0, 0, 0, 2]),                                  # empty hypothesis
    ("a b c", "a b c d e", [3, 3, 2, 2, 1, 1, 0, 0, 5]),
])
def test_sentence_stats(hyp, ref, expected):
    np.testing.assert_array_equal(sentence_stats(hyp, ref), expected)


def test_closest_reference_length():
    assert sentence_stats("a b c", Reference(["a b", "a b c d", "x"]))[-1] == 2   # |2-3| = |4-3|: shorter
    assert sentence_stats("a b c d", Reference(["a b", "a b c d e"]))[-1] == 5


HYPS = ["the cat is on the mat today", "a dog runs in the park", "two men play football outside",
        "the woman is reading a book", "children are swimming in the blue lake"]
REFS = ["the cat sits on the mat today", "a dog is running in the park", "two men are playing football outside",
        "a woman is reading a book", "the children swim in the lake"]


@pytest.mark.parametrize("hyps", [HYPS, [h.split(" ", 1)[1] for h in HYPS], [h + " extra words here" for h in HYPS]])
def test_corpus_bleu_equals_sacrebleu(hyps):
    ours = corpus_bleu(hyps, REFS)
    ref = sacrebleu.corpus_bleu(hyps, [REFS], tokenize="none", smooth_method="none", force=True).score
    assert 100 * ours == pytest.approx(ref, abs=1e-9)


def test_bleu_zero_when_an_order_has_no_match():
    assert bleu(np.array([3, 3, 0, 2, 0, 1, 0, 0, 3])) == 0.0


def _random_pool(rng, n=25, k=12, dim=4):
    pool = NBestPool(n, dim)
    for s in range(n):
        ref_len = rng.integers(5, 15)
        for _ in range(rng.integers(1, k + 1)):
            hl = int(rng.integers(3, 16))
            tot = np.array([max(hl - i, 0) for i in range(4)])
            m = np.minimum(tot, rng.integers(0, hl + 1, 4))
            m = np.minimum.accumulate(m)
            st = np.array([m[0], tot[0], m[1], tot[1], m[2], tot[2], m[3], tot[3], ref_len], dtype=float)
            # integer-valued features make ties between lines, as word penalty does
            f = np.concatenate([rng.normal(size=dim - 1), [-float(hl)]])
            pool.add(s, f, st)
    return pool


@pytest.mark.parametrize("seed", range(6))
def test_line_search_never_worse_than_fine_grid(seed):
    rng = np.random.default_rng(seed)
    pool = _random_pool(rng)
    F, S, mask = pool.padded()
    origin = rng.normal(size=4)
    direction = rng.normal(size=4) if seed % 2 else np.eye(4)[seed % 4]
    res = line_search(F, S, mask, origin, direction)
    grid = np.linspace(-20, 20, 8001)
    grid_scores = np.array([bleu(one_best_stats(F, S, mask, origin + x * direction)) for x in grid])
    assert res.score >= grid_scores.max() - 1e-12
    # the returned point really has the returned score
    assert bleu(one_best_stats(F, S, mask, origin + res.x * direction)) == pytest.approx(res.score, abs=1e-12)


def test_optimize_improves_is_seeded_and_normalized():
    rng = np.random.default_rng(7)
    pool = _random_pool(rng, n=40, k=15)
    init = np.array([0.0, 0.0, 0.0, 1.0, 1.0])   # last component is untuned (like UnknownWordPenalty)
    big = NBestPool(len(pool), 5)
    for s in range(len(pool)):
        for f, st in zip(pool.feats[s], pool.stats[s]):
            big.add(s, np.concatenate([f, [0.0]]), st)
    tuned = [True, True, True, True, False]
    r1 = optimize(big, init, tuned, restarts=5, random_directions=2, seed=3)
    r2 = optimize(big, init, tuned, restarts=5, random_directions=2, seed=3)
    np.testing.assert_array_equal(r1.weights, r2.weights)
    assert r1.score > score_at(big, init)
    assert score_at(big, r1.weights) == pytest.approx(r1.score, abs=1e-12)   # scale-invariant
    assert np.abs(r1.weights[:4]).sum() == pytest.approx(1.0)
    assert r1.weights[4] == 1.0
    assert r1.score == max(r1.start_scores)


def test_more_starts_are_searched_after_init_and_before_the_random_ones():
    rng = np.random.default_rng(7)
    pool = _random_pool(rng, n=40, k=15)
    init = np.array([1.0, 0.0, 0.0, 0.0])
    good = optimize(pool, init, [True] * 4, restarts=6, random_directions=2, seed=3)
    alone = optimize(pool, init, [True] * 4, restarts=0, seed=5)
    both = optimize(pool, init, [True] * 4, restarts=0, seed=5, more_starts=[good.weights])
    assert both.start_scores[0] == alone.start_scores[0] and len(both.start_scores) == 2
    assert both.score >= good.score > alone.score
    # no further starts: the same bits as before there were any
    r1 = optimize(pool, init, [True] * 4, restarts=3, seed=9)
    r2 = optimize(pool, init, [True] * 4, restarts=3, seed=9, more_starts=())
    np.testing.assert_array_equal(r1.weights, r2.weights)


def test_pool_drops_duplicates():
    pool = NBestPool(1, 2)
    st = np.arange(9, dtype=float)
    assert pool.add(0, [1.0, 2.0], st)
    assert not pool.add(0, [1.0, 2.0], st)
    assert pool.add(0, [1.0, 2.5], st)
    assert pool.num_candidates() == 2

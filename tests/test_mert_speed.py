"""The faster MERT optimiser finds exactly what the first implementation found (tests/_mert_reference.py).

The envelope search leaves out lines far below each sentence's envelope; these tests check, on pools made
to be hard (tied integer slopes, identical lines, slopes one unit in the last place apart, crossings
beyond 1e12), that the search still takes the same steps as over every line, that the line search and
the whole optimiser give the same bits as the reference, and that lines really are left out.
"""
import _mert_reference as reference
import numpy as np
import pytest

from phrase_rescore.moses_integration.embedded import mert
from phrase_rescore.moses_integration.embedded.mert import NBestPool, line_search, optimize


def _hard_pool(seed: int, n: int = 30, k: int = 40, dim: int = 5) -> NBestPool:
    """Candidates whose lines tie, repeat, and run nearly parallel along every axis."""
    rng = np.random.default_rng(seed)
    pool = NBestPool(n, dim)
    for s in range(n):
        ref_len = float(rng.integers(5, 15))
        base = rng.normal(size=dim - 2) * 3
        for j in range(int(rng.integers(1, k + 1))):
            hl = int(rng.integers(3, 16))
            tot = np.array([max(hl - i, 0) for i in range(4)])
            mt = np.minimum.accumulate(np.minimum(tot, rng.integers(0, hl + 1, 4)))
            st = np.array([mt[0], tot[0], mt[1], tot[1], mt[2], tot[2], mt[3], tot[3], ref_len])
            kind = j % 4
            if kind == 0:                       # a fresh continuous point
                cont = base + rng.normal(size=dim - 2)
            elif kind == 1:                     # the same scores, some one ulp off (nearly parallel lines)
                cont = np.nextafter(base, base + rng.choice([-1.0, 1.0], dim - 2) * rng.integers(0, 2, dim - 2) * 9)
            elif kind == 2:                     # the base itself again, with other statistics (identical lines)
                cont = base.copy()
            else:                               # coarse values: many exact ties
                cont = np.round(base + rng.normal(size=dim - 2))
            f = np.concatenate([cont, [-float(hl), -float(rng.integers(1, 4))]])
            pool.add(s, f, st)
    return pool


def _directions(rng, dim):
    yield from np.eye(dim)
    for _ in range(4):
        yield rng.normal(size=dim)


@pytest.mark.parametrize("seed", range(4))
def test_left_out_lines_change_no_step_of_the_envelope_search(seed):
    rng = np.random.default_rng(100 + seed)
    pool = _hard_pool(seed)
    F, S, mask = pool.padded()
    fp = mert._FlatPool(F, S, mask)
    for _ in range(3):
        b = fp.scores(rng.normal(size=pool.dim) * rng.choice([1e-3, 1.0, 1e3]))
        for d in _directions(rng, pool.dim):
            sl = mert._Slopes(fp, fp.scores(d))
            fast = mert._envelopes_flat(sl, b, fp)
            full = mert._gift_wrap(sl.m, b, np.arange(fp.size), fp)
            np.testing.assert_array_equal(fast[0], full[0])
            for a, c in zip(fast[1], full[1]):
                np.testing.assert_array_equal(a, c)


@pytest.mark.parametrize("seed", range(4))
def test_line_search_gives_the_reference_result_bit_for_bit(seed):
    rng = np.random.default_rng(200 + seed)
    pool = _hard_pool(seed)
    F, S, mask = pool.padded()
    for _ in range(3):
        origin = rng.normal(size=pool.dim)
        for d in _directions(rng, pool.dim):
            new, old = line_search(F, S, mask, origin, d), reference.line_search(F, S, mask, origin, d)
            assert (new.x, new.score, new.intervals) == (old.x, old.score, old.intervals)


def test_optimize_gives_the_reference_weights_on_a_demo_like_pool():
    pool, init = reference.demo_like_pool(3, sentences=40, nbest=20, iterations=3)
    tuned = np.arange(10) < 9
    new = optimize(pool, init, tuned, restarts=4, random_directions=3, seed=11)
    old = reference.optimize(pool, init, tuned, restarts=4, random_directions=3, seed=11)
    np.testing.assert_array_equal(new.weights, old.weights)
    assert new.score == old.score
    assert new.start_scores == old.start_scores
    assert new.weights[9] == 1.0 and np.abs(new.weights[:9]).sum() == pytest.approx(1.0)


def test_optimize_gives_the_reference_weights_on_hard_pools():
    for seed in range(3):
        pool = _hard_pool(seed, n=25, k=30)
        init = np.array([0.1, -0.2, 0.3, -0.5, 1.0])
        tuned = [True, True, True, True, False]
        new = optimize(pool, init, tuned, restarts=3, random_directions=2, seed=seed)
        old = reference.optimize(pool, init, tuned, restarts=3, random_directions=2, seed=seed)
        np.testing.assert_array_equal(new.weights, old.weights)
        assert (new.score, new.start_scores) == (old.score, old.start_scores)


def test_most_lines_are_left_out_of_the_envelope_search():
    pool, init = reference.demo_like_pool(5, sentences=60, nbest=30, iterations=3)
    F, S, mask = pool.padded()
    fp = mert._FlatPool(F, S, mask)
    b = fp.scores(init)
    kept = [mert._candidates(mert._Slopes(fp, fp.scores(d)), b, fp).size for d in np.eye(10)[:9]]
    assert max(kept) < 0.5 * fp.size

"""grow-diag-final-and (Moses's symal) on hand-made alignments, and the eflomal wrapper's directions."""
import pytest

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.moses_integration.embedded.align import (
    align_eflomal,
    format_pharaoh,
    grow_diag_final_and,
    parse_pharaoh,
    symmetrize,
)

# Points are (source, target). fwd gives each target word <= 1 source word, rev each source word <= 1 target.
# Each expected result is worked out by hand below, following symal: start from the intersection, grow
# through union neighbours (4-neighbourhood, then diagonals) that cover a new word, then "final-and":
# fwd-only points, then rev-only points, each added only if both of its words are still unaligned.
CASES = [
    # 1. Agreement: intersection only.
    ("agree", [(0, 0), (1, 1)], [(0, 0), (1, 1)], "0-0 1-1", "0-0 1-1"),
    # 2. Grow everything: inter {0-0}; from (t0,s0) the 4-neighbour (t1,s0)=0-1 covers t1, the diagonal
    #    (t1,s1)=1-1 covers s1; from (t1,s1): (t1,s2)=2-1 covers s2, diagonal (t2,s2)=2-2 covers t2.
    ("grow-all", [(0, 0), (0, 1), (2, 2)], [(0, 0), (1, 1), (2, 1)],
     "0-0 0-1 1-1 2-1 2-2", "0-0 0-1 1-1 2-1 2-2"),
    # 3. Final-and and its order: inter {0-0}, nothing adjacent. fwd-only 2-2 first: t2, s2 both free -> added.
    #    rev-only 2-1: s2 now aligned -> refused (plain "final" would add it: t1 is free).
    #    Were rev-only points taken first, 2-1 would win instead: the order matters and is symal's.
    ("final-and", [(0, 0), (2, 2)], [(0, 0), (2, 1)], "0-0 2-2", "0-0 2-2"),
    # 4. Diagonal growth: inter {0-0}; the only union neighbour of (t0,s0) is the diagonal (t1,s1)=1-1;
    #    from it (t2,s1)=1-2 covers t2 and (t1,s2)=2-1 covers s2. Without diagonals nothing grows and
    #    final-and adds 1-1 only (then 1-2 and 2-1 each touch an aligned word).
    ("diagonal", [(0, 0), (1, 1), (1, 2)], [(0, 0), (2, 1)], "0-0 1-1 2-1 1-2", "0-0 1-1"),
]


@pytest.mark.parametrize("name,fwd,rev,gdfa,grow_final_and", CASES, ids=[c[0] for c in CASES])
def test_grow_diag_final_and_hand_worked(name, fwd, rev, gdfa, grow_final_and):
    assert format_pharaoh(grow_diag_final_and(fwd, rev)) == gdfa
    assert format_pharaoh(symmetrize(fwd, rev, diagonal=False, final=True, final_and=True)) == grow_final_and


def test_final_without_and_adds_points_touching_one_free_word():
    # case 3 with plain "final": 2-1 covers the free target word t1, so it is added too.
    assert format_pharaoh(symmetrize([(0, 0), (2, 2)], [(0, 0), (2, 1)], final_and=False)) == "0-0 2-1 2-2"


def test_output_is_a_subset_of_the_union_and_contains_the_intersection():
    fwd = [(0, 0), (1, 2), (3, 1), (2, 3)]
    rev = [(0, 0), (1, 1), (2, 3), (3, 2)]
    out = set(grow_diag_final_and(fwd, rev))
    assert set(fwd) & set(rev) <= out <= set(fwd) | set(rev)


def test_parse_pharaoh_checks_bounds_and_syntax():
    assert parse_pharaoh("0-1 2-0", 3, 2) == [(0, 1), (2, 0)]
    with pytest.raises(PhraseRescoreError, match="outside"):
        parse_pharaoh("0-2", 3, 2, path="a.txt", line_no=4)
    with pytest.raises(PhraseRescoreError, match="a.txt:7"):
        parse_pharaoh("0:1", path="a.txt", line_no=7)


def test_eflomal_directions_and_bounds():
    # eflomal has no seed: 20 copies make the links below hold in every run (0 misses in 550 runs;
    # with 5 copies the "the house" link missed in 5 of 300)
    src = [s.split() for s in ["the house is small", "the house is big", "a small house", "the big dog"] * 20]
    tgt = [t.split() for t in ["das haus ist klein", "das haus ist gross", "ein kleines haus", "der grosse hund"] * 20]
    fwd, rev = align_eflomal(src, tgt)
    assert len(fwd) == len(rev) == len(src)
    for s, t, f, r in zip(src, tgt, fwd, rev):
        assert all(i < len(s) and j < len(t) for i, j in f + r)
        assert len({j for _, j in f}) == len(f)  # forward: each target word has at most one source word
        assert len({i for i, _ in r}) == len(r)  # reverse: each source word has at most one target word
    # the repeated, unambiguous pair "the house" / "das haus" is aligned monotonically
    assert (1, 1) in grow_diag_final_and(fwd[0], rev[0])


def test_eflomal_refuses_mismatched_or_empty_input():
    with pytest.raises(PhraseRescoreError, match="sentences"):
        align_eflomal([["a"]], [["b"], ["c"]])
    with pytest.raises(PhraseRescoreError, match="empty"):
        align_eflomal([["a"], []], [["b"], ["c"]])

"""Moses's phrase extraction on small hand-worked sentence pairs."""
import pytest

from phrase_rescore.moses_integration.embedded.extract import count_phrase_pairs, extract_sentence, extract_spans

# (name, source, target, alignment (src-tgt), max_len, expected [(src phrase, tgt phrase, alignment)] in Moses's order)
CASES = [
    # b is unaligned INSIDE: target span "x" -> source a, extended right over b (not over aligned c);
    # "x y" -> a..c; "y" -> c, extended left over b (not over aligned a).
    ("unaligned-inside", "a b c", "x y", "0-0 2-1", 7, [
        ("a", "x", "0-0"), ("a b", "x", "0-0"), ("a b c", "x y", "0-0 2-1"),
        ("c", "y", "0-0"), ("b c", "y", "1-0")]),
    # x is an unaligned TARGET word at the left edge: "x" alone has no alignment point (no phrase),
    # but every span starting at x is tried, so "x y" and "x y z" come out with it.
    ("unaligned-target-edge", "a b", "x y z", "0-1 1-2", 7, [
        ("a", "x y", "0-1"), ("a b", "x y z", "0-1 1-2"),
        ("a", "y", "0-0"), ("a b", "y z", "0-0 1-1"), ("b", "z", "0-0")]),
    # unaligned SOURCE words at both edges: "y" -> b, extended to a (left) and c (right) in all combinations,
    # start retreating in the outer loop as Moses's extract does.
    ("unaligned-source-edges", "a b c", "y", "1-0", 7, [
        ("b", "y", "0-0"), ("b c", "y", "0-0"), ("a b", "y", "1-0"), ("a b c", "y", "1-0")]),
    # inconsistency: a is aligned to x and y, b to x. "x" would need a, which is also aligned outside
    # (to y); "y" likewise. Only the whole pair is consistent.
    ("inconsistent", "a b", "x y", "0-0 0-1 1-0", 7, [("a b", "x y", "0-0 1-0 0-1")]),
    # crossing alignment: the alignment field is ordered by target position, then source position.
    ("swap", "a b", "x y", "0-1 1-0", 7, [
        ("b", "x", "0-0"), ("a b", "x y", "1-0 0-1"), ("a", "y", "0-0")]),
    # max phrase length 2: no 3-word phrase, and no extension beyond 2 source words.
    ("max-len", "a b c", "x y z", "0-0 1-1 2-2", 2, [
        ("a", "x", "0-0"), ("a b", "x y", "0-0 1-1"), ("b", "y", "0-0"), ("b c", "y z", "0-0 1-1"),
        ("c", "z", "0-0")]),
]


def _points(text):
    return [tuple(map(int, p.split("-"))) for p in text.split()]


@pytest.mark.parametrize("name,src,tgt,align,max_len,expected", CASES, ids=[c[0] for c in CASES])
def test_extract_hand_worked(name, src, tgt, align, max_len, expected):
    assert extract_sentence(src.split(), tgt.split(), _points(align), max_len) == expected


def test_spans_respect_length_limit_with_unaligned_runs():
    # source "u u a u u" with only a aligned: extensions stop at max_len words
    spans = extract_spans(5, 1, [(2, 0)], max_len=3)
    assert sorted((s, e) for s, e, _, _ in spans) == [(0, 2), (1, 2), (1, 3), (2, 2), (2, 3), (2, 4)]


def test_count_phrase_pairs_aggregates_across_sentences_and_chunks():
    src = [["a", "b"], ["a", "b"], ["a"]]
    tgt = [["x", "y"], ["x", "y"], ["x"]]
    al = [[(0, 0), (1, 1)], [(0, 0), (1, 1)], [(0, 0)]]
    df = count_phrase_pairs(src, tgt, al, chunk_size=1)  # one sentence per chunk: counts merged across chunks
    got = {(r.src, r.tgt, r.align): r.count for r in df.itertuples()}
    assert got == {("a", "x", "0-0"): 3, ("a b", "x y", "0-0 1-1"): 2, ("b", "y", "0-0"): 2}

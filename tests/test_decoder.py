"""The embedded decoder on a hand-made system whose scores are worked out by hand.

System: bigram ARPA LM over {X, Y, Z}, a four-column phrase table, weights
Distortion0=0.3 LM0=0.5 WordPenalty0=-1 PhrasePenalty0=0.2 TranslationModel0=0.2 x4.
Input "a b":
  Y X  (b first, then a): TM 8*ln(.5), LM log10 <s> Y -0.1, Y X -0.2, X </s> -0.3 = -0.6,
       distortion d=1 then |1-0+1|=2 -> -3, WP -2, PP 2
  X Y  (monotone, two phrases): LM <s> X -0.4, X Y -0.9, Y </s> = bo(Y) -0.3 + P(</s>) -1.0 -> -2.6, d=0
  X Y  (one phrase "a b"): TM 4*ln(.1), same LM, WP -2, PP 1
"""
import math

import numpy as np
import pytest

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.moses_integration.embedded.decoder import Decoder, DecoderConfig, decode_file
from phrase_rescore.moses_integration.nbest import read_nbest

LN10 = math.log(10)
LN_HALF = math.log(0.5)

ARPA = """\\data\\
ngram 1=6
ngram 2=5

\\1-grams:
-1.0\t<unk>
-99\t<s>\t-0.5
-1.0\t</s>
-1.0\tX\t-0.2
-1.0\tY\t-0.3
-1.5\tZ\t-0.1

\\2-grams:
-0.1\t<s> Y
-0.2\tY X
-0.3\tX </s>
-0.4\t<s> X
-0.9\tX Y

\\end\\
"""

TABLE = """a ||| X ||| 0.5 0.5 0.5 0.5 ||| 0-0 ||| 2 2 2
a ||| Z ||| 0.25 0.25 0.25 0 ||| 0-0 ||| 2 2 2
a b ||| X Y ||| 0.1 0.1 0.1 0.1 ||| 0-0 1-1 ||| 1 1 1
b ||| Y ||| 0.5 0.5 0.5 0.5 ||| 0-0 ||| 2 2 2
"""

INI = """[input-factors]
0

[mapping]
0 T 0

[distortion-limit]
{dl}

[feature]
UnknownWordPenalty
WordPenalty
PhrasePenalty
PhraseDictionaryMemory name=TranslationModel0 num-features=4 path={pt} input-factor=0 output-factor=0
Distortion
KENLM name=LM0 factor=0 path={lm} order=2

[weight]
UnknownWordPenalty0= 1
WordPenalty0= -1
PhrasePenalty0= 0.2
TranslationModel0= 0.2 0.2 0.2 0.2
Distortion0= 0.3
LM0= 0.5
"""

W = dict(d=0.3, lm=0.5, wp=-1.0, pp=0.2, tm=0.2)


def total(tm, lm10, dist, nwords, nphrases, unk=0):
    return (W["tm"] * tm + W["lm"] * lm10 * LN10 + W["d"] * -dist + W["wp"] * -nwords + W["pp"] * nphrases
            - 100.0 * unk)


Y_X = total(8 * LN_HALF, -0.6, 3, 2, 2)
X_Y = total(8 * LN_HALF, -2.6, 0, 2, 2)
X_Y_PHRASE = total(4 * math.log(0.1), -2.6, 0, 2, 1)


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    d = tmp_path_factory.mktemp("sys")
    (d / "lm.arpa").write_text(ARPA)
    (d / "phrase-table").write_text(TABLE)

    def make(dl=6):
        p = d / f"moses.{dl}.ini"
        p.write_text(INI.format(dl=dl, pt=d / "phrase-table", lm=d / "lm.arpa"))
        return str(p)
    return make


@pytest.mark.parametrize("dl, expected_text, expected_total", [
    (6, "Y X", Y_X),    # reordering pays: LM gain beats distortion cost 0.3*3
    (2, "Y X", Y_X),    # jump 1 then back 2: within the limit
    (1, "X Y", X_Y),    # starting at b leaves the gap at a two words back: forbidden
    (0, "X Y", X_Y),    # monotone
])
def test_best_translation_and_total(system, dl, expected_text, expected_total):
    dec = Decoder.from_ini(system(dl), progress=False)
    r = dec.translate("a b".split())
    assert r.best.text == expected_text
    assert r.best.total == pytest.approx(expected_total, abs=1e-6)  # KenLM stores float32
    assert float(dec.weights @ r.best.features) == pytest.approx(r.best.total, abs=1e-9)


def test_feature_values_are_moses_values(system):
    dec = Decoder.from_ini(system(6), progress=False)
    names = [f.name for f in dec.spec.features]
    assert names == ["Distortion0", "LM0", "WordPenalty0", "PhrasePenalty0", "TranslationModel0",
                     "UnknownWordPenalty0"]
    h = dec.translate("a b".split()).best.features
    expected = [-3, -0.6 * LN10, -2, 2] + [2 * LN_HALF] * 4 + [0]
    np.testing.assert_allclose(h, expected, rtol=0, atol=1e-6)
    # a probability of 0 is floored at ln = -100 (FloorScore(TransformScore(0)))
    dec.set_weights([0.3, 0.5, -1, 0.2, 0.2, 0.2, 0.2, 0.0, 1])  # column 4 unweighted: a -> Z stays in the beam
    r = dec.translate(["a"], nbest=5)
    z = [c for c in r.nbest if c.text == "Z"][0]
    np.testing.assert_allclose(z.features[4:8], [math.log(.25)] * 3 + [-100.0], atol=1e-12)


def test_unknown_word_copied_with_penalty(system):
    dec = Decoder.from_ini(system(6), progress=False)
    r = dec.translate(["q"])
    assert r.best.text == "q"
    # <s> q: P(<unk>) -1.0 + bo(<s>) -0.5; q </s>: P(</s>) -1.0  -> log10 -2.5
    assert r.best.total == pytest.approx(total(0, -2.5, 0, 1, 1, unk=1), abs=1e-6)
    assert r.best.features[-1] == -100.0


def test_nbest_format_order_and_distinct(system, tmp_path):
    ini = system(6)
    src = tmp_path / "in.txt"
    src.write_text("a b\nq\n")
    out, nb = tmp_path / "out.txt", tmp_path / "nbest.txt"
    decode_file(ini, src, out, nbest_path=nb, nbest_size=10)
    assert out.read_text() == "Y X\nq\n"
    lines = nb.read_text().splitlines()
    first = lines[0]
    assert first == ("0 ||| Y X  ||| Distortion0= -3 LM0= -1.38155 WordPenalty0= -2 PhrasePenalty0= 2 "
                     "TranslationModel0= -1.38629 -1.38629 -1.38629 -1.38629 ||| %g" % Y_X)
    entries = list(read_nbest(nb))
    by_sent = {}
    for e in entries:
        by_sent.setdefault(e.sent_id, []).append(e)
    assert sorted(by_sent) == [0, 1]
    s0 = by_sent[0]
    texts = [e.hypothesis for e in s0]
    assert len(texts) == len(set(texts))                      # distinct
    totals = [e.total for e in s0]
    assert totals == sorted(totals, reverse=True)              # best first
    assert texts[:2] == ["Y X", "X Y"]
    assert totals[1] == pytest.approx(X_Y, abs=1e-4)
    # every line's total is w . h of its printed features (UnknownWordPenalty is not printed)
    w = np.array([0.3, 0.5, -1, 0.2, 0.2, 0.2, 0.2, 0.2])
    for e in s0:
        assert float(w @ np.array(e.dense_vector())) == pytest.approx(e.total, abs=1e-3)


def test_nbest_not_distinct_keeps_recombined_paths(system):
    dec = Decoder.from_ini(system(6), DecoderConfig(nbest_distinct=False), progress=False)
    r = dec.translate("a b".split(), nbest=50)
    totals = [c.total for c in r.nbest]
    assert totals == sorted(totals, reverse=True)
    xy = [c.total for c in r.nbest if c.text == "X Y"]
    # both segmentations of "X Y" are found, the one-phrase one through a recombination arc
    assert xy[:2] == pytest.approx([X_Y, X_Y_PHRASE], abs=1e-6)
    # n-best 1 is the 1-best
    assert r.nbest[0].text == r.best.text and r.nbest[0].total == pytest.approx(r.best.total)


def _brute_force(words, dec):
    """Every path: segmentations x orders x targets, scored from scratch (LM: kenlm on the whole string)."""
    import itertools

    import kenlm
    lm = kenlm.Model(dec.spec.lm_path)
    table = {}
    for line in TABLE.splitlines():
        f = [x.strip() for x in line.split("|||")]
        table.setdefault(f[0], []).append((f[1], [max(math.log(float(p)), -100) if float(p) > 0 else -100.0
                                                   for p in f[2].split()]))
    n = len(words)

    def segmentations(i):
        if i == n:
            yield []
            return
        for j in range(i + 1, n + 1):
            src = " ".join(words[i:j])
            if src in table or (j == i + 1):
                for rest in segmentations(j):
                    yield [(i, j - 1)] + rest

    w = dec.weights
    out = []
    for seg in segmentations(0):
        for order in itertools.permutations(seg):
            choices = [table.get(" ".join(words[a:b + 1]), [(words[a], None)]) for a, b in order]
            for pick in itertools.product(*choices):
                tm = np.zeros(4)
                unk = 0
                dist = 0
                prev_end = -1
                for (a, b), (_, sc) in zip(order, pick):
                    dist += a if prev_end < 0 else abs(prev_end - a + 1)
                    prev_end = b
                    if sc is None:
                        unk += 1
                    else:
                        tm += sc
                text = " ".join(t for t, _ in pick)
                lm10 = lm.score(text, bos=True, eos=True)
                h = np.array([-dist, lm10 * LN10, -len(text.split()), len(order), *tm, -100.0 * unk])
                out.append((float(w @ h), text))
    return sorted(out, reverse=True)


@pytest.mark.parametrize("sentence", ["a b a", "b q a"])
def test_nbest_equals_exhaustive_enumeration(system, sentence):
    """No pruning and no distortion limit: the n-best list is every path, in the brute-force order."""
    dec = Decoder.from_ini(system(-1), DecoderConfig(nbest_distinct=False, stack_size=100000, beam_threshold=0),
                           progress=False)
    words = sentence.split()
    expected = _brute_force(words, dec)
    r = dec.translate(words, nbest=100000)
    assert len(r.nbest) == len(expected)
    np.testing.assert_allclose([c.total for c in r.nbest], [t for t, _ in expected], atol=1e-5)
    assert sorted(c.text for c in r.nbest) == sorted(t for _, t in expected)
    for c in r.nbest:
        assert float(dec.weights @ c.features) == pytest.approx(c.total, abs=1e-9)


def test_refuses_unsupported_feature(system, tmp_path):
    text = open(system(6)).read().replace(
        "Distortion\n", "Distortion\nLexicalReordering name=LexicalReordering0 num-features=6 "
        "type=hier-mslr-bidirectional-fe-allff input-factor=0 output-factor=0 path=x\n")
    text = text.replace("LM0= 0.5\n", "LM0= 0.5\nLexicalReordering0= 1 1 1 1 1 1\n")
    p = tmp_path / "bad.ini"
    p.write_text(text)
    with pytest.raises(PhraseRescoreError, match="LexicalReordering0: type=hier-mslr.*hierarchical"):
        Decoder.from_ini(p, progress=False)


def test_parallel_equals_serial(system):
    dec = Decoder.from_ini(system(6), progress=False)
    sents = [s.split() for s in ["a b", "b a", "a", "q a b", "b b a a", ""] * 3]
    serial = dec.translate_all(sents, nbest=5, threads=1)
    par = dec.translate_all(sents, nbest=5, threads=2)
    assert len(par) == len(serial) == len(sents)
    for a, b in zip(serial, par):
        assert a.best.text == b.best.text and a.best.total == b.best.total
        assert [c.text for c in a.nbest] == [c.text for c in b.nbest]


def test_decode_file_rejects_unknown_option_and_bad_counts(system, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("a b\n")
    with pytest.raises(PhraseRescoreError, match="unknown decoder option.*stack_sise"):
        decode_file(system(6), src, tmp_path / "o", stack_sise=10)
    with pytest.raises(PhraseRescoreError, match="nbest_size"):
        decode_file(system(6), src, tmp_path / "o", nbest_path=tmp_path / "n", nbest_size=0)
    assert not (tmp_path / "o").exists()


def test_small_stack_still_translates_every_line(system, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("a b a b\n\nb a q\n")
    decode_file(system(6), src, tmp_path / "o", stack_size=1, beam_threshold=0.5)
    out = (tmp_path / "o").read_text().splitlines()
    assert len(out) == 3 and out[1] == ""
    assert len(out[0].split()) == 4
    assert len(out[2].split()) == 3 and "q" in out[2].split()   # the unknown word is copied through

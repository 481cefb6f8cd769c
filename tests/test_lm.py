"""The modified Kneser-Ney LM: normalization through the kenlm module and agreement with a direct evaluation.

The reference below evaluates the interpolated modified Kneser-Ney formulas literally, with dictionaries
and recursion, written independently of lm.py's vectorized estimator; held-out scores from kenlm
(reading our ARPA file) must match it token by token.
"""
import math
import random
from collections import Counter

import kenlm
import pytest

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.moses_integration.embedded.lm import LMConfig, load_lm, perplexity, train_lm

FALLBACK = (0.5, 1.0, 1.5)


def _corpus(n, seed):
    rng = random.Random(seed)
    subj = ["a man", "a woman", "the dog", "two kids", "a girl in red"]
    verb = ["is running", "sits", "plays", "is eating", "jumps"]
    obj = ["on the grass", "in the park", "with a ball", "near the water", "", "outside"]
    return [f"{rng.choice(subj)} {rng.choice(verb)} {rng.choice(obj)} .".split() for _ in range(n)]


class ReferenceKN:
    """Interpolated modified Kneser-Ney written out directly from the definitions (slow, dict-based)."""

    def __init__(self, sentences, order):
        self.order = order
        raw = [Counter() for _ in range(order + 1)]
        for s in sentences:
            toks = ["<s>"] + list(s) + ["</s>"]
            for n in range(1, order + 1):
                for i in range(len(toks) - n + 1):
                    raw[n][tuple(toks[i:i + n])] += 1
        self.adj = [None] * (order + 1)
        self.adj[order] = dict(raw[order])
        for n in range(order - 1, 0, -1):
            left = Counter(g[1:] for g in raw[n + 1])
            self.adj[n] = {g: (c if g[0] == "<s>" else left[g]) for g, c in raw[n].items()}
        self.adj[1][("<s>",)] = 0
        self.adj[1].setdefault(("<unk>",), 0)
        self.vocab = [g[0] for g in self.adj[1] if g[0] != "<s>"]
        self.disc = {}
        for n in range(1, order + 1):
            t = [sum(1 for a in self.adj[n].values() if a == k) for k in (1, 2, 3, 4)]
            if min(t[:3]) == 0:
                self.disc[n] = FALLBACK
                continue
            y = t[0] / (t[0] + 2 * t[1])
            d = tuple(k - (k + 1) * y * t[k] / t[k - 1] for k in (1, 2, 3))
            self.disc[n] = d if all(0 <= d[k - 1] <= k for k in (1, 2, 3)) else FALLBACK

    def _d(self, n, a):
        return 0.0 if a == 0 else self.disc[n][min(a, 3) - 1]

    def prob(self, w, ctx):
        ctx = tuple(ctx)[-(self.order - 1):] if self.order > 1 else ()
        if not ctx:
            items = {g: a for g, a in self.adj[1].items() if g != ("<s>",)}
            total = sum(items.values())
            gamma = sum(self._d(1, a) for a in items.values()) / total
            a = items.get((w,), 0)
            return (a - self._d(1, a)) / total + gamma / len(self.vocab)
        n = len(ctx) + 1
        ext = {g: a for g, a in self.adj[n].items() if g[:-1] == ctx}
        if not ext:
            return self.prob(w, ctx[1:])
        total = sum(ext.values())
        gamma = sum(self._d(n, a) for a in ext.values()) / total
        a = ext.get(ctx + (w,), 0)
        return (a - self._d(n, a)) / total + gamma * self.prob(w, ctx[1:])

    def sentence_log10(self, words):
        words = [w if (w,) in self.adj[1] else "<unk>" for w in words] + ["</s>"]
        ctx = ["<s>"]
        out = []
        for w in words:
            out.append(math.log10(self.prob(w, ctx)))
            ctx.append(w)
        return out


def _zipf_corpus(n, seed, vocab=150):
    """Sentences of 2-9 words drawn from a Zipfian vocabulary: enough variety for every discount."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(vocab)]
    weights = [1 / (r + 1) for r in range(vocab)]
    return [rng.choices(words, weights, k=rng.randint(2, 9)) for _ in range(n)]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    train = _zipf_corpus(400, seed=1)
    path = tmp_path_factory.mktemp("lm") / "lm.arpa"
    stats = train_lm(train, path, LMConfig(order=3))
    return train, path, stats, load_lm(path)


def test_heldout_scores_match_the_reference(trained):
    train, _, stats, model = trained
    ref = ReferenceKN(train, 3)
    assert stats.fallback_orders == []  # the discounts come from the data (the other path is tested below)
    held = _zipf_corpus(15, seed=2) + [["w1", "zebra", "w2", "w3"], ["w0"], ["unseen", "words", "only"]]
    total_k, total_r, n = 0.0, 0.0, 0
    for s in held:
        got = [lp for lp, _, _ in model.full_scores(" ".join(s), bos=True, eos=True)]
        want = ref.sentence_log10(s)
        assert got == pytest.approx(want, abs=2e-5)
        total_k, total_r, n = total_k + sum(got), total_r + sum(want), n + len(want)
    # perplexity "in line with a straightforward reference computation": equal to 1e-4 relative
    assert perplexity(model, held) == pytest.approx(10 ** (-total_r / n), rel=1e-4)
    assert [d for n in (1, 2, 3) for d in ref.disc[n]] == pytest.approx([d for ds in stats.discounts for d in ds])


def _state_after(model, ctx):
    state = kenlm.State()
    if ctx and ctx[0] == "<s>":
        model.BeginSentenceWrite(state)
        ctx = ctx[1:]
    else:
        model.NullContextWrite(state)
    for w in ctx:
        nxt = kenlm.State()
        model.BaseScore(state, w, nxt)
        state = nxt
    return state


def _contexts_and_vocab(path):
    grams, vocab = [], []
    for line in open(path, encoding="utf-8"):
        parts = line.rstrip("\n").split("\t")
        if len(parts) >= 2:
            words = parts[1].split()
            grams.append(words)
            if len(words) == 1 and words[0] != "<s>":
                vocab.append(words[0])
    return grams, vocab


@pytest.mark.parametrize("order,n_sent", [(3, 60), (5, 60), (3, 3)])
def test_every_context_sums_to_one(tmp_path, order, n_sent):
    path = tmp_path / "lm.arpa"
    stats = train_lm(_corpus(n_sent, seed=3), path, LMConfig(order=order))
    model = load_lm(path)
    grams, vocab = _contexts_and_vocab(path)
    assert "</s>" in vocab and "<unk>" in vocab
    contexts = [[]] + [g for g in grams if len(g) < stats.order and g[-1] != "</s>"] + [["never", "seen"]]
    for ctx in contexts:
        state = _state_after(model, ctx)
        total = sum(10 ** model.BaseScore(state, w, kenlm.State()) for w in vocab)
        assert total == pytest.approx(1.0, abs=1e-4), ctx


def test_small_data_falls_back_to_default_discounts(tmp_path):
    stats = train_lm([["a", "b"], ["a", "c"]], tmp_path / "lm.arpa", LMConfig(order=3))
    assert stats.fallback_orders == [1, 2, 3]
    assert stats.discounts[0] == list(FALLBACK)


def test_order_is_reduced_when_sentences_are_too_short(tmp_path):
    stats = train_lm([["a"], ["b"]], tmp_path / "lm.arpa", LMConfig(order=5))
    assert stats.order == 3  # "<s> a </s>" holds at most trigrams
    assert load_lm(tmp_path / "lm.arpa").order == 3


def test_reserved_tokens_are_refused(tmp_path):
    with pytest.raises(PhraseRescoreError, match="line 2.*reserved token '</s>'"):
        train_lm([["a"], ["b", "</s>"]], tmp_path / "lm.arpa")


@pytest.mark.parametrize("adjusted,expected,fell_back", [
    # t = (3, 2, 1, 0): Y = 3/7, D1 = 1 - 2Y(2/3) = 3/7, D2 = 2 - 3Y(1/2) = 19/14, D3+ = 3 - 4Y(0/1) = 3
    ([1, 1, 1, 2, 2, 3], [3 / 7, 19 / 14, 3.0], False),
    # no adjusted count 2: t2 = 0 -> fallback
    ([1, 1, 3, 3], list(FALLBACK), True),
    # t = (10, 1, 10, 0): Y = 10/12, D2 = 2 - 3Y(10/1) = -23 < 0 -> fallback
    ([1] * 10 + [2] + [3] * 10, list(FALLBACK), True),
])
def test_discounts_hand_computed(adjusted, expected, fell_back):
    import numpy as np

    from phrase_rescore.moses_integration.embedded.lm import _discounts

    d, fb = _discounts(np.array(adjusted), FALLBACK)
    assert fb == fell_back and d == pytest.approx(expected)


def test_an_arpa_lm_loads_without_kenlms_advice_to_build_a_binary(trained, capfd):
    """KenLM prints "Loading the LM will be faster if you build a binary file." and a progress bar on stderr
    (its C++ stream, fd 2) for every ARPA file it loads: where the project loads one, it says nothing."""
    from phrase_rescore.moses_integration.embedded.translation_options import LanguageModel

    _, path, _, _ = trained
    capfd.readouterr()
    assert load_lm(path).order == 3 and LanguageModel(str(path)).order == 3
    err = capfd.readouterr().err
    assert "binary" not in err and "Reading" not in err and "****" not in err, err
    kenlm.Model(str(path))                              # kenlm's own default says it
    assert "build a binary file" in capfd.readouterr().err

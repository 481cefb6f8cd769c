"""The embedded decoder's search equals its level-by-level reference (``tests/_decoder_reference.py``).

On generated systems (``tests/_generated_smt.py``: table-limit pruning, unknown words, an empty line; no
LexicalReordering, a bidirectional msd model, a backward-only and a forward-only one; a negative LM
weight), decoded at several stack sizes, distortion limits and beams, 1-best and n-best: the same final
hypotheses with the same scores to the last bit, the same arcs, and the same bytes out (1-best text,
Moses n-best lines, every feature value). The comparisons with the real Moses are in
``test_real_moses_decoder.py`` and ``test_lexical_reordering.py``.
"""
import pytest
from _decoder_reference import search as reference_search
from _generated_smt import make_system

from phrase_rescore.moses_integration.embedded import decoder as decoder_module
from phrase_rescore.moses_integration.embedded.decoder import Decoder, DecoderConfig
from phrase_rescore.moses_integration.embedded.search import SearchParams, path_of, search

SYSTEMS = {
    "distance": dict(lr_type=None),
    "msd-bidirectional": dict(lr_type="wbe-msd-bidirectional-fe-allff"),
    "msd-backward": dict(lr_type="msd-backward-fe"),
    "monotonicity-forward": dict(lr_type="monotonicity-forward-fe"),
    "negative-lm-weight": dict(lr_type="wbe-msd-bidirectional-fe-allff", lm_weight=-0.2),
}
# (stack size, distortion limit, beam threshold, max phrase length, keep arcs)
SEARCHES = [(30, 6, 1e-5, 20, True), (4, 6, 1e-5, 20, True), (200, 6, 1e-5, 20, False), (30, 0, 1e-5, 20, True),
            (30, -1, 0.0, 20, True), (10, 3, 1e-2, 2, True)]


@pytest.fixture(scope="module")
def decoders(tmp_path_factory):
    root = tmp_path_factory.mktemp("generated")
    out = {}
    for name, kw in SYSTEMS.items():
        ini, sents = make_system(str(root / name), **kw)
        out[name] = (Decoder.from_ini(ini, DecoderConfig(), sents, progress=False), sents)
    return out


def _steps(h):
    return tuple((s.opt.start, s.opt.end, s.opt.words) for s in path_of(h))


def _lattice(final):
    """Every kept final hypothesis: its scores, path, and the arcs recombined into it (scores and paths)."""
    return [(h.score, h.total, h.cov, h.last_end, _steps(h),
             [(a.score, a.total, _steps(a)) for a in h.arcs or ()]) for h in final]


@pytest.mark.parametrize("search_args", SEARCHES, ids=lambda a: "stack{}-dl{}-beam{}-len{}-arcs{}".format(*a))
@pytest.mark.parametrize("system", SYSTEMS)
def test_final_hypotheses_equal_the_reference(decoders, system, search_args):
    dec, sents = decoders[system]
    params = SearchParams(*search_args)
    for words in sents:
        got = search(words, dec.options, params)
        want = reference_search(words, dec.options, params)
        assert _lattice(got) == _lattice(want), words


def _render(dec, sents, nbest):
    """1-best text, Moses n-best bytes, and every feature value and total to 17 digits."""
    res = [dec.translate(s, nbest) for s in sents]
    out = ["".join(r.best.text + "\n" for r in res)]
    out += [line for i, r in enumerate(res) for line in dec.nbest_lines(i, r.nbest)]
    out += [f"{i} {' '.join(f'{v:.17g}' for v in c.features)} {c.total:.17g}"
            for i, r in enumerate(res) for c in [r.best, *r.nbest]]
    return out


@pytest.mark.parametrize("stack, nbest", [(30, 0), (30, 20), (4, 20)])
@pytest.mark.parametrize("system", SYSTEMS)
def test_decoder_output_equals_the_reference(decoders, system, stack, nbest, monkeypatch):
    dec, sents = decoders[system]
    dec.config.stack_size = stack
    dec.set_weights(dec.weights)
    got = _render(dec, sents, nbest)
    monkeypatch.setattr(decoder_module, "search", reference_search)
    want = _render(dec, sents, nbest)
    assert got == want


def test_generated_systems_exercise_pruning_and_reordering(decoders):
    """The comparisons test something: stack pruning, reordering and the LM weight change the result."""
    dec, sents = decoders["msd-bidirectional"]
    by_stack = {}
    for stack in (30, 4):
        dec.config.stack_size = stack
        dec.set_weights(dec.weights)
        by_stack[stack] = _render(dec, sents, 20)
    assert by_stack[30] != by_stack[4]
    assert len(by_stack[30]) > 150
    best = {name: _render(d, s, 0)[0] for name, (d, s) in decoders.items()}
    assert len(set(best.values())) == len(best)
    assert "oov1" in best["msd-bidirectional"]

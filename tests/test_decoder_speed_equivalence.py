"""The embedded decoder's output does not change when only its implementation does.

A system is generated from a fixed seed (a phrase table with up to 25 targets per source phrase, so that
table-limit pruning bites; a lexicalized reordering table that lacks some pairs; a KN trigram LM estimated
by :func:`~phrase_rescore.moses_integration.embedded.lm.train_lm`; input with unknown words), and decoded
1-best and 20-best at two stack sizes, with and without LexicalReordering. The 1-best text, the Moses
n-best lists (bytes) and every feature value and total to 12 significant digits must equal the files in
``tests/data/decoder_equivalence/``, which the straightforward implementation (object per hypothesis, text
tables parsed line by line) wrote. Run this file as a script to see the differences as a diff.
"""
import difflib
import gzip
import os
import random
import sys

import pytest

from phrase_rescore.moses_integration.embedded.decoder import Decoder, DecoderConfig
from phrase_rescore.moses_integration.embedded.lm import LMConfig, train_lm

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "decoder_equivalence")
SEED = 20141
CASES = [(lr, stack, nbest) for lr in (True, False) for stack in (30, 4) for nbest in (0, 20)]

INI = """[input-factors]
0

[mapping]
0 T 0

[distortion-limit]
6

[feature]
UnknownWordPenalty
WordPenalty
PhrasePenalty
PhraseDictionaryMemory name=TranslationModel0 num-features=4 path={pt} input-factor=0 output-factor=0 table-limit=20
{lr}Distortion
KENLM name=LM0 factor=0 path={lm} order=3

[weight]
UnknownWordPenalty0= 1
WordPenalty0= -0.7
PhrasePenalty0= 0.3
TranslationModel0= 0.2 0.1 0.25 0.05
{lrw}Distortion0= 0.3
LM0= 0.5
"""
LR = ("LexicalReordering name=LexicalReordering0 num-features=6 type=wbe-msd-bidirectional-fe-allff "
      "input-factor=0 output-factor=0 path={rt}\n")
LRW = "LexicalReordering0= 0.3 0.1 0.2 0.25 0.05 0.15\n"


def _sentence(rng, vocab, lo, hi):
    return [rng.choice(vocab) for _ in range(rng.randint(lo, hi))]


def make_system(root, lr: bool):
    """Write the generated system under ``root``; return (moses.ini path, input sentences)."""
    rng = random.Random(SEED)
    src_vocab = [f"s{i}" for i in range(40)]
    tgt_vocab = [f"t{i}" for i in range(50)]
    sources = set()
    corpus = [_sentence(rng, src_vocab, 3, 12) for _ in range(60)]
    for s in corpus:
        for i in range(len(s)):
            for k in range(1, 4):
                if i + k <= len(s) and rng.random() < 0.7:
                    sources.add(" ".join(s[i:i + k]))
    pt_lines, rt_lines = [], []
    for src in sorted(sources):
        n = len(src.split())
        targets = set()
        for _ in range(rng.choice([1, 2, 3, 5, 8, 25])):
            targets.add(" ".join(rng.choice(tgt_vocab) for _ in range(max(1, n + rng.randint(-1, 1)))))
        for tgt in sorted(targets):
            ps = " ".join(f"{rng.uniform(0.001, 1):.6g}" for _ in range(4))
            pt_lines.append(f"{src} ||| {tgt} ||| {ps} ||| ||| 1 1 1 ||| |||\n")
            if rng.random() < 0.85:
                rs = " ".join(f"{rng.uniform(0.01, 1):.6g}" for _ in range(6))
                rt_lines.append(f"{src} ||| {tgt} ||| {rs}\n")
    os.makedirs(root, exist_ok=True)
    pt, rt, lm = (os.path.join(root, x) for x in ("phrase-table.gz", "reordering-table.gz", "lm.arpa"))
    with gzip.open(pt, "wt", encoding="utf-8") as f:
        f.writelines(pt_lines)
    with gzip.open(rt, "wt", encoding="utf-8") as f:
        f.writelines(rt_lines)
    train_lm([_sentence(rng, tgt_vocab, 2, 10) for _ in range(400)], lm, LMConfig(order=3))
    ini = os.path.join(root, "moses.ini")
    with open(ini, "w") as f:
        f.write(INI.format(pt=pt, lm=lm, lr=LR.format(rt=rt) if lr else "", lrw=LRW if lr else ""))
    sents = [s[:] for s in corpus[:14]]
    sents[3][1] = "oov1"          # unknown words are copied through
    sents[7].append("oov2")
    sents.append([])              # an empty line gives an empty translation
    return ini, sents


def render(dec: Decoder, sents, stack: int, nbest: int) -> dict[str, str]:
    """The three outputs compared: 1-best text, Moses n-best bytes, features and totals to 12 digits."""
    dec.config.stack_size = stack
    dec.set_weights(dec.weights)
    res = [dec.translate(s, nbest) for s in sents]
    out = {"best": "".join(r.best.text + "\n" for r in res)}
    exact = [f"{i} best {' '.join(f'{v:.12g}' for v in r.best.features)} {r.best.total:.12g}\n"
             for i, r in enumerate(res)]
    if nbest:
        out["nbest"] = "".join(line + "\n" for i, r in enumerate(res) for line in dec.nbest_lines(i, r.nbest))
        exact += [f"{i} {' '.join(f'{v:.12g}' for v in c.features)} {c.total:.12g}\n"
                  for i, r in enumerate(res) for c in r.nbest]
    out["exact"] = "".join(exact)
    return out


def outputs(root):
    got = {}
    for lr in (True, False):
        ini, sents = make_system(os.path.join(root, "lr" if lr else "distance"), lr)
        dec = Decoder.from_ini(ini, DecoderConfig(), sents, progress=False)
        for _, stack, nbest in (c for c in CASES if c[0] == lr):
            for kind, text in render(dec, sents, stack, nbest).items():
                got[f"{'lr' if lr else 'distance'}.stack{stack}.nbest{nbest}.{kind}"] = text
    return got


@pytest.fixture(scope="module")
def produced(tmp_path_factory):
    return outputs(str(tmp_path_factory.mktemp("equivalence")))


def test_recorded_outputs_cover_every_case(produced):
    assert sorted(produced) == sorted(os.listdir(DATA))


@pytest.mark.parametrize("name", sorted(os.listdir(DATA)) if os.path.isdir(DATA) else [])
def test_output_identical_to_recorded(produced, name):
    with open(os.path.join(DATA, name), encoding="utf-8") as f:
        want = f.read()
    assert produced[name] == want, "".join(difflib.unified_diff(
        want.splitlines(True), produced[name].splitlines(True), "recorded", "now", n=1))[:3000]


def test_generated_system_exercises_pruning_and_reordering(produced):
    """The recordings test something: table-limit and stack pruning change the result, LR matters."""
    assert produced["lr.stack30.nbest20.nbest"] != produced["lr.stack4.nbest20.nbest"]
    assert produced["lr.stack30.nbest0.best"] != produced["distance.stack30.nbest0.best"]
    assert "oov1" in produced["lr.stack30.nbest0.best"]
    assert len(produced["lr.stack30.nbest20.nbest"].splitlines()) > 150


def test_table_read_in_blocks_equals_whole_table(tmp_path, monkeypatch):
    """Lines split across read blocks, a last line without a newline, a source with a no-break space."""
    from phrase_rescore.core.errors import PhraseRescoreError
    from phrase_rescore.moses_integration.embedded import translation_options as to
    from phrase_rescore.moses_integration.embedded.features import load_decoder_spec

    ini, sents = make_system(str(tmp_path / "sys"), True)
    spec = load_decoder_spec(ini)
    keep = to.source_phrases(sents, 20)
    whole = to.PhraseTable(spec, keep, progress=False).entries
    rt_whole = to.ReorderingTable(spec.reordering, keep, progress=False).entries
    monkeypatch.setattr(to, "_CHUNK", 7)
    assert to.PhraseTable(spec, keep, progress=False).entries == whole
    assert to.ReorderingTable(spec.reordering, keep, progress=False).entries == rt_whole
    assert len(whole) > 50
    src = next(iter(whole))
    path = tmp_path / "pt.txt"
    path.write_bytes(f"{src}\u00a0 ||| X ||| 0.5 0.5 0.5 0.5\nzz ||| Y ||| 0.5 x 0.5 0.5\n"
                     f"{src} ||| Z ||| 0.5 0.5 0.5 0.25".encode("utf-8"))
    spec.phrase_table = str(path)
    t = to.PhraseTable(spec, keep, progress=False)        # "zz" is not in the input: its line is not read
    # a no-break space is part of a word to Moses, not a separator it trims: "SRC\u00a0" is another phrase
    assert [w for w, _ in t.entries[src]] == [("Z",)]
    t = to.PhraseTable(spec, keep | {src + "\u00a0"}, progress=False)
    assert [w for w, _ in t.entries[src + "\u00a0"]] == [("X",)] and [w for w, _ in t.entries[src]] == [("Z",)]
    with pytest.raises(PhraseRescoreError, match=r"pt.txt:2: score 'x' is not a number"):
        to.PhraseTable(spec, keep | {"zz"}, progress=False)


if __name__ == "__main__":     # write the recordings (only with the implementation they describe)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        got = outputs(tmp)
    if sys.argv[1:] == ["--write"]:
        os.makedirs(DATA, exist_ok=True)
        for name, text in got.items():
            with open(os.path.join(DATA, name), "w", encoding="utf-8") as f:
                f.write(text)
        print(f"wrote {len(got)} files to {DATA}")

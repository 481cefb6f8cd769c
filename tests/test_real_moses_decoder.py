"""The embedded decoder against the real moses on the same moses.ini and tables (distance reordering):
its search is as good (1-best model score >= Moses's - 1e-4), its feature values are Moses's where both pick
the same translation, and Moses's extractor reads its n-best lists."""
from __future__ import annotations

import pytest
from _real_moses import (  # noqa: F401
    moses_decode,
    needs_moses,
    parse_nbest,
    printed_close,
    printed_slack,
    run,
    tokenize_file,
    tool,
)

from phrase_rescore.moses_integration.embedded.decoder import decode_file

pytestmark = needs_moses

STACK = 100


@pytest.fixture(scope="module", params=["baseline", "rescored"])
def decoded(request, tmp_path_factory, tiny_system):
    s = tiny_system
    ini = s.ini if request.param == "baseline" else s.rescored_ini
    d = tmp_path_factory.mktemp(f"decode-{request.param}")
    inp = d / "input"
    train = (s.smt / "corpus" / "clean.src").read_text().splitlines()[:24]     # longer phrases, fewer unknowns
    inp.write_text(s.test_src.read_text() + s.dev_src.read_text() + "".join(x + "\n" for x in train))
    sentences = inp.read_text().splitlines()
    moses_decode(ini, sentences, nbest=d / "moses.nbest", n=10, extra=["-stack", str(STACK)])
    decode_file(ini, inp, d / "embedded.out", nbest_path=d / "embedded.nbest", nbest_size=10, stack_size=STACK)
    return d, len(sentences)


def _best(path):
    best = {}
    for e in parse_nbest(path):
        best.setdefault(e.sent, e)
    return best


def test_embedded_search_is_as_good_and_features_agree(decoded):
    d, n = decoded
    ours, theirs = _best(d / "embedded.nbest"), _best(d / "moses.nbest")
    assert sorted(ours) == sorted(theirs) == list(range(n))
    same = 0
    for i in range(n):
        a, b = ours[i], theirs[i]
        assert a.total >= b.total - printed_slack(a.total, b.total), (i, a, b)
        if a.text == b.text:
            same += 1
            assert list(a.features) == list(b.features), i          # same features, same order
            for name in a.features:
                assert len(a.features[name]) == len(b.features[name])
                assert all(printed_close(x, y) for x, y in zip(a.features[name], b.features[name])), (i, name, a, b)
            assert printed_close(a.total, b.total), (i, a.total, b.total)
    assert same >= n // 2


def test_moses_extractor_reads_the_embedded_nbest(decoded, tiny_system):
    d, n = decoded
    refs = d / "refs"
    test_ref = tokenize_file(tiny_system.test_ref, d / "test.tok.fr", "fr")
    train = (tiny_system.smt / "corpus" / "clean.tgt").read_text().splitlines()[:24]
    refs.write_text("".join(x + "\n" for x in test_ref + tiny_system.dev_ref.read_text().splitlines() + train))
    outs = {}
    for name in ("embedded", "moses"):
        run([tool("extractor"), "--sctype", "BLEU", "--reference", refs, "--nbest", d / f"{name}.nbest",
             "--scfile", d / f"{name}.scores.dat", "--ffile", d / f"{name}.features.dat"])
        outs[name] = (d / f"{name}.features.dat").read_text().splitlines()
    heads = {k: [ln for ln in v if ln.startswith("FEATURES_TXT_BEGIN")] for k, v in outs.items()}
    assert len(heads["embedded"]) == n
    # the feature names Moses's tools take from the list are the same for both decoders
    assert heads["embedded"][0].split()[3:] == heads["moses"][0].split()[3:]
    scores = (d / "embedded.scores.dat").read_text().splitlines()
    assert sum(ln.startswith("SCORES_TXT_BEGIN") for ln in scores) == n


def _read_dat(path, begin):
    """Per-sentence rows of an extractor ``features.dat`` / ``scores.dat`` (text format): (names, rows)."""
    names, rows, sent = None, {}, None
    for ln in path.read_text().splitlines():
        if ln.startswith(begin + "BEGIN"):
            parts = ln.split()
            sent = int(parts[1])
            names = parts[4:]
            rows.setdefault(sent, [])
        elif ln.startswith(begin + "END"):
            sent = None
        elif sent is not None:
            rows[sent].append([float(x) for x in ln.split()])
    return names, rows


def test_moses_mert_and_embedded_mert_agree_on_the_same_files(tiny_system, tmp_path):
    """mert and the embedded MERT on the same extractor output, from the same starting point, reach the same
    dev BLEU (within 0.1) and the same weights. Random restarts are left out: the two draw different random
    points, and on 8 dev sentences which local optimum a restart finds moves BLEU by points."""
    import numpy as np

    from phrase_rescore.moses_integration.embedded.mert import NBestPool, optimize
    from phrase_rescore.moses_integration.moses_ini import read_moses_ini

    s = tiny_system
    nb = tmp_path / "dev.nbest"
    decode_file(s.rescored_ini, s.dev_src, tmp_path / "dev.out", nbest_path=nb, nbest_size=50, stack_size=STACK)
    run([tool("extractor"), "--sctype", "BLEU", "--reference", s.dev_ref, "--nbest", nb,
         "--scfile", tmp_path / "scores.dat", "--ffile", tmp_path / "features.dat"])
    names, feats = _read_dat(tmp_path / "features.dat", "FEATURES_TXT_")
    _, stats = _read_dat(tmp_path / "scores.dat", "SCORES_TXT_")
    ini = read_moses_ini(s.rescored_ini)
    init = [w for name in dict.fromkeys(n.rsplit("_", 1)[0] for n in names)   # "TranslationModel0_3" etc.
            for w in ini.weights_for(name)]
    assert len(init) == len(names)
    (tmp_path / "init.opt").write_text(" ".join(map(str, init)) + "\n" + " ".join(["-1"] * len(init)) + "\n"
                                       + " ".join(["1"] * len(init)) + "\n")
    p = run([tool("mert"), "-d", str(len(init)), "--scfile", "scores.dat", "--ffile", "features.dat",
             "--ifile", "init.opt", "-n", "0", "-r", "1", "--sctype", "BLEU"], cwd=tmp_path)
    log = p.stderr.decode() + p.stdout.decode()
    best = log.split("Best point:")[-1].split("=>")
    moses_w, moses_bleu = [float(x) for x in best[0].split()], float(best[1].split()[0])
    pool = NBestPool(len(feats), len(init))
    for i in sorted(feats):
        for f, st in zip(feats[i], stats[i]):
            pool.add(i, np.array(f), np.array(st))
    ours = optimize(pool, init, [True] * len(init), restarts=0)
    assert 0 < moses_bleu < 1
    assert abs(100 * ours.score - 100 * moses_bleu) <= 0.1, (ours.score, moses_bleu)
    assert ours.weights == pytest.approx(moses_w, abs=1e-4)

"""rescore-nbest on n-best lists written by the real moses: the new feature is inserted at the end of the
features field and no other byte changes; Moses's extractor reads the result and sees the new feature."""
from __future__ import annotations

import re

import pytest
from _real_moses import cli, moses_decode, needs_moses, parse_nbest, run, tool  # noqa: F401

pytestmark = needs_moses

FLAGS = {
    "plain": [],
    "segmentation+alignment": ["-include-segmentation-in-n-best", "-print-alignment-info-in-n-best"],
}


@pytest.mark.parametrize("flags", list(FLAGS))
def test_rescore_nbest_of_real_moses_keeps_every_other_byte(tiny_system, tmp_path, flags, one_thread):
    s = tiny_system
    nb = tmp_path / "moses.nbest"
    moses_decode(s.ini, s.dev_src.read_text().splitlines(), nbest=nb, n=8, extra=FLAGS[flags])
    out_nb, out_1 = tmp_path / "rescored.nbest", tmp_path / "rescored.1best"
    cli("rescore-nbest", str(nb), str(s.dev_src), "--model", str(s.model), "--out-nbest", str(out_nb),
        "--out-1best", str(out_1), "--device", "cpu")
    before = nb.read_bytes().split(b"\n")
    after = out_nb.read_bytes().split(b"\n")
    assert len(before) == len(after) > 20 and before[-1] == after[-1] == b""
    added = re.compile(rb" RNNEncDec0= (-?[0-9.e+-]+)")
    for a, b in zip(before[:-1], after[:-1]):
        m = list(added.finditer(b))
        assert len(m) == 1, b
        assert b[:m[0].start()] + b[m[0].end():] == a                 # nothing else changed
        fields = b.split(b" ||| ")
        assert fields[2].endswith(m[0].group(0)) and float(m[0].group(1)) < 0   # at the end of the features
    assert len(out_1.read_text().splitlines()) == len(s.dev_src.read_text().splitlines())
    # Moses's extractor reads it, with the new feature as one more dense feature
    run([tool("extractor"), "--sctype", "BLEU", "--reference", s.dev_ref, "--nbest", out_nb,
         "--scfile", tmp_path / "scores.dat", "--ffile", tmp_path / "features.dat"])
    head = [ln for ln in (tmp_path / "features.dat").read_text().splitlines() if ln.startswith("FEATURES_TXT_BEGIN")]
    assert head and head[0].split()[-1] == "RNNEncDec0_0"          # its name for the first value
    feats = [ln.split() for ln in (tmp_path / "features.dat").read_text().splitlines()
             if ln and not ln.startswith("FEATURES_TXT")]
    ours = [e.features["RNNEncDec0"][0] for e in parse_nbest(out_nb)]
    assert [float(f[-1]) for f in feats] == pytest.approx(ours, rel=1e-5)

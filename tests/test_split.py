"""make-split and [split]: one held-out set into disjoint dev and test halves, deterministically."""
from __future__ import annotations

import gzip

import pytest
from click.testing import CliRunner

from phrase_rescore.app.cli import main
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.data.split import SplitConfig, split_heldout


def _pair(tmp_path, n, gz=False):
    src, ref = tmp_path / ("val.en.gz" if gz else "val.en"), tmp_path / ("val.fr.gz" if gz else "val.fr")
    for path, tag in ((src, "en"), (ref, "fr")):
        data = "".join(f"{tag} sentence {i}\n" for i in range(1, n + 1)).encode()
        path.write_bytes(gzip.compress(data) if gz else data)
    return src, ref


def _lines(path):
    return path.read_text(encoding="utf-8").splitlines()


def test_alternate_split_of_gzip_input(tmp_path):
    src, ref = _pair(tmp_path, 7, gz=True)
    res = split_heldout(src, ref, tmp_path / "out")
    assert (res["dev"], res["test"]) == (4, 3)
    assert _lines(tmp_path / "out" / "dev.src") == [f"en sentence {i}" for i in (1, 3, 5, 7)]
    assert _lines(tmp_path / "out" / "dev.ref") == [f"fr sentence {i}" for i in (1, 3, 5, 7)]
    assert _lines(tmp_path / "out" / "test.src") == [f"en sentence {i}" for i in (2, 4, 6)]
    assert _lines(tmp_path / "out" / "test.ref") == [f"fr sentence {i}" for i in (2, 4, 6)]


def test_halves_split_through_the_cli(tmp_path):
    src, ref = _pair(tmp_path, 5)
    r = CliRunner().invoke(main, ["make-split", str(src), str(ref), "--out", str(tmp_path / "o"), "--mode", "halves"])
    assert r.exit_code == 0, r.output
    assert "3 dev / 2 test pairs (halves)" in r.output
    assert _lines(tmp_path / "o" / "dev.src") == [f"en sentence {i}" for i in (1, 2, 3)]
    assert _lines(tmp_path / "o" / "test.ref") == [f"fr sentence {i}" for i in (4, 5)]


@pytest.mark.parametrize("mode, dev, test", [("alternate", (2, 4, 6), (1, 3, 5, 7)),
                                             ("halves", (5, 6, 7), (1, 2, 3, 4))])
def test_swap_trades_the_halves_places_and_keeps_their_order(tmp_path, mode, dev, test):
    src, ref = _pair(tmp_path, 7)
    res = split_heldout(src, ref, tmp_path / "out", SplitConfig(mode=mode, swap=True))
    assert (res["dev"], res["test"]) == (len(dev), len(test))
    assert _lines(tmp_path / "out" / "dev.src") == [f"en sentence {i}" for i in dev]
    assert _lines(tmp_path / "out" / "dev.ref") == [f"fr sentence {i}" for i in dev]
    assert _lines(tmp_path / "out" / "test.src") == [f"en sentence {i}" for i in test]
    assert _lines(tmp_path / "out" / "test.ref") == [f"fr sentence {i}" for i in test]
    r = CliRunner().invoke(main, ["make-split", str(src), str(ref), "--out", str(tmp_path / "o"), "--mode", mode,
                                  "--swap"])
    assert r.exit_code == 0, r.output
    assert f"{len(dev)} dev / {len(test)} test pairs ({mode}, swapped)" in r.output
    assert (tmp_path / "o" / "test.ref").read_bytes() == (tmp_path / "out" / "test.ref").read_bytes()


def test_unequal_lengths_are_refused(tmp_path):
    src, ref = _pair(tmp_path, 4)
    ref.write_text("one\ntwo\nthree\n")
    with pytest.raises(PhraseRescoreError, match="has 3 lines but the source .* has 4"):
        split_heldout(src, ref, tmp_path / "out", SplitConfig())
    assert not (tmp_path / "out" / "dev.src").exists()

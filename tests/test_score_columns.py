"""The extra neural columns: p(e|f) from a reverse model, an ensemble of two models in one column."""
from __future__ import annotations

import gzip
import math
import shutil

import pytest
from _encdec_data import TINY, make_learnable_table
from click.testing import CliRunner

from phrase_rescore.app.cli import main
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.moses_integration.configs import RewriteConfig
from phrase_rescore.moses_integration.moses_values import floor_log
from phrase_rescore.moses_integration.rewrite import rewrite_moses_ini
from phrase_rescore.moses_integration.table_columns import append_last_column, ensemble_column, swap_table
from phrase_rescore.pipeline.configs import PrepareConfig, ScoreConfig, TrainConfig
from phrase_rescore.pipeline.prepare import prepare
from phrase_rescore.pipeline.score import score_table
from phrase_rescore.pipeline.score_columns import score_with_extras
from phrase_rescore.pipeline.scoring.chunked import ChunkedOutput
from phrase_rescore.pipeline.train import train

pytestmark = pytest.mark.usefixtures("one_thread")


def _lines(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def _scores(line):
    return line.split(" ||| ")[2].split()


def test_swap_table_exchanges_phrases_and_alignment(tmp_path):
    t = tmp_path / "t.txt"
    t.write_text("a b ||| x ||| 0.1 0.2 0.3 0.4 ||| 0-0 1-0 ||| 2 1 1\nc ||| y z ||| 0.5 0.5 0.5 0.5\n")
    assert swap_table(t, tmp_path / "s.txt") == 2
    assert _lines(tmp_path / "s.txt") == ["x ||| a b ||| 0.1 0.2 0.3 0.4 ||| 0-0 0-1 ||| 2 1 1",
                                          "y z ||| c ||| 0.5 0.5 0.5 0.5"]


def test_merging_refuses_another_tables_lines(tmp_path):
    t, o = tmp_path / "t.txt", tmp_path / "o.txt"
    t.write_text("a ||| x ||| 0.5\nb ||| y ||| 0.5\n")
    o.write_text("x ||| a ||| 0.5 0.25\nz ||| b ||| 0.5 0.25\n")
    with pytest.raises(PhraseRescoreError, match="is not line 2 of .* swapped and scored"):
        append_last_column(t, o, tmp_path / "out.txt")
    assert not (tmp_path / "out.txt").exists()
    o.write_text("a ||| x ||| 0.5 0.25\n")
    with pytest.raises(PhraseRescoreError, match="fewer lines"):
        ensemble_column(t, o, tmp_path / "out.txt", column=0)


def test_ensemble_column_is_the_mean_log_probability(tmp_path):
    t, o = tmp_path / "t.txt", tmp_path / "o.txt"
    t.write_text("a ||| x ||| 0.3 0.25 2.718282 ||| 0-0\nb ||| y ||| 0.3 1e-45 1 ||| 0-0\n")
    o.write_text("a ||| x ||| 0.3 0.04\nb ||| y ||| 0.3 0.5\n")
    ensemble_column(t, o, tmp_path / "e.txt", column=-2)
    a, b = _lines(tmp_path / "e.txt")
    assert a == "a ||| x ||| 0.3 0.1 2.718282 ||| 0-0"            # sqrt(0.25 * 0.04)
    assert float(_scores(b)[1]) == pytest.approx(math.exp((-100 + math.log(0.5)) / 2), rel=1e-6)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("cols")
    make_learnable_table(d / "table.txt", n_pairs=60)
    swap_table(d / "table.txt", d / "swapped.txt")
    out = {"table": d / "table.txt", "swapped": d / "swapped.txt"}
    for name, table, seed in (("fwd", d / "table.txt", 3), ("fwd2", d / "table.txt", 4), ("rev", d / "swapped.txt", 3)):
        # 25 of the 30 words per side: some pairs have unknown words, so the WP column varies (moses-ini refuses
        # a constant one)
        prepare(table, d / f"pairs-{name}", PrepareConfig(vocab_size=25, valid_fraction=0.1, seed=1))
        train(d / f"pairs-{name}", d / name, TrainConfig(model_overrides=TINY, init_std=0.1, batch_size=16, max_steps=4,
                                                         valid_every=4, seed=seed, device="cpu"))
        out[name] = d / name / "model.pt"
    return out


def test_score_reverse_and_ensemble_through_the_cli(models, tmp_path):
    cfg = ScoreConfig(device="cpu", threads=1)
    score_table(models["fwd"], models["table"], tmp_path / "fwd.txt", cfg)
    score_table(models["rev"], models["swapped"], tmp_path / "rev.txt", ScoreConfig(columns=("logprob",), device="cpu",
                                                                                     threads=1))
    score_table(models["fwd2"], models["table"], tmp_path / "fwd2.txt", ScoreConfig(columns=("logprob",), device="cpu",
                                                                                     threads=1))
    r = CliRunner().invoke(main, ["score", str(models["fwd"]), str(models["table"]), "--out", str(tmp_path / "x.gz"),
                                  "--reverse-model", str(models["rev"]), "--ensemble-model", str(models["fwd2"]),
                                  "--device", "cpu", "--threads", "1"])
    assert r.exit_code == 0, r.output
    fwd, rev, fwd2, got = (_lines(tmp_path / n) for n in ("fwd.txt", "rev.txt", "fwd2.txt", "x.gz"))
    assert len(got) == len(fwd) == 60
    for f, rv, f2, g in zip(fwd, rev, fwd2, got):
        sf, sg = _scores(f), _scores(g)
        assert len(sg) == len(sf) + 1 and sg[:4] == sf[:4] and sg[5] == sf[5]     # the table's, +WP as it was
        assert sg[6] == _scores(rv)[-1]                                           # log p(e|f), the reverse model's
        mean = (floor_log(float(sf[4])) + floor_log(float(_scores(f2)[-1]))) / 2
        assert math.log(float(sg[4])) == pytest.approx(mean, abs=1e-6)            # the two models' mean log p
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fwd.txt", "fwd2.txt", "rev.txt", "x.gz"]
    # moses-ini takes one initial weight per added column: three here
    ini = tmp_path / "moses.ini"
    res = rewrite_moses_ini(RewriteConfig(old_ini=_ini(tmp_path), table=tmp_path / "x.gz", out=ini,
                                          weights=(0.2, -0.2, 0.2)))
    assert res.added_weights == [0.2, -0.2, 0.2]
    assert "TranslationModel0= 0.2 0.2 0.2 0.2 0.2 -0.2 0.2" in ini.read_text()


def test_out_extras_of_the_users_is_refused_and_a_rerun_resumes_in_its_own(models, tmp_path, monkeypatch):
    out, extras = tmp_path / "x.gz", tmp_path / "x.gz.extras"
    args = ["score", str(models["fwd"]), str(models["table"]), "--out", str(out), "--reverse-model",
            str(models["rev"]), "--device", "cpu", "--threads", "1", "--chunk-lines", "20"]
    extras.mkdir()
    (extras / "forward.gz").write_bytes(b"the user's forward.gz")
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 1 and r.stderr.startswith("error: ") and "x.gz.extras" in r.stderr, r.output
    assert "forward.gz" in r.stderr
    assert sorted(p.name for p in extras.iterdir()) == ["forward.gz"]
    assert (extras / "forward.gz").read_bytes() == b"the user's forward.gz"
    shutil.rmtree(extras)
    extras.write_bytes(b"a file of the user's")
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 1 and "x.gz.extras" in r.stderr and "found a file" in r.stderr, r.output
    assert extras.read_bytes() == b"a file of the user's"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.gz.extras"]
    extras.unlink()

    cfg = ScoreConfig(device="cpu", threads=1, chunk_lines=20)
    score_with_extras(models["fwd"], models["table"], tmp_path / "ref.gz", cfg, reverse_model=models["rev"])
    write_chunk = ChunkedOutput.write_chunk

    def interrupted(self, *a, **kw):          # the forward scoring stops after its first chunk
        write_chunk(self, *a, **kw)
        if self.path == extras / "forward.gz":
            raise KeyboardInterrupt

    monkeypatch.setattr(ChunkedOutput, "write_chunk", interrupted)
    with pytest.raises(KeyboardInterrupt):
        score_with_extras(models["fwd"], models["table"], out, cfg, reverse_model=models["rev"])
    monkeypatch.undo()
    assert (extras / "forward.gz.partial").exists() and not out.exists()
    res = score_with_extras(models["fwd"], models["table"], out, cfg, reverse_model=models["rev"])
    assert res.resumed_from_line == 20
    assert gzip.decompress(out.read_bytes()) == gzip.decompress((tmp_path / "ref.gz").read_bytes())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ref.gz", "x.gz"]


def _ini(tmp_path):
    p = tmp_path / "old.ini"
    p.write_text("[feature]\nPhraseDictionaryMemory name=TranslationModel0 num-features=4 path=/x/pt.gz "
                 "input-factor=0 output-factor=0\n\n[weight]\nTranslationModel0= 0.2 0.2 0.2 0.2\n")
    return p

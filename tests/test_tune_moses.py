"""Tuning hooks for a real Moses, driven end to end against a stand-in installation; moses-ini rewrite; argv."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from _moses_standin import add_process_phrase_table_min, make_standin_moses
from click.testing import CliRunner

from phrase_rescore.app.cli import main
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.moses_integration.backend import MosesBackend, get_backend
from phrase_rescore.moses_integration.configs import MosesTuneConfig, RewriteConfig, TuneConfig
from phrase_rescore.moses_integration.moses_ini import read_moses_ini
from phrase_rescore.moses_integration.moses_install import find_moses, require_moses
from phrase_rescore.moses_integration.rewrite import process_phrase_table_min_argv, rewrite_moses_ini
from phrase_rescore.moses_integration.table_filter import original_paths
from phrase_rescore.moses_integration.tune_moses import (
    MertProgress,
    mert_moses_argv,
    run_logged,
    tune_moses,
    without_finish_date,
)
from phrase_rescore.moses_integration.tuning import tune

FIX = Path(__file__).parent / "fixtures" / "moses"

# in LC_ALL=C sort order, as processPhraseTableMin needs
TABLE6 = ("das Haus ||| the home ||| 0.1 0.2 0.1 0.2 0.0011 2.718282 ||| 0-0 1-1 ||| 2 12 2 ||| |||\n"
          "das Haus ||| the house ||| 0.8 0.6 0.7 0.5 0.0123 1 ||| 0-0 1-1 ||| 10 12 8 ||| |||\n")


@pytest.fixture
def table6(tmp_path):
    p = tmp_path / "phrase-table.rnn.gz"
    with gzip.open(p, "wt", encoding="utf-8") as f:
        f.write(TABLE6)
    return p


@pytest.fixture
def moses_home(tmp_path, monkeypatch):
    root = make_standin_moses(tmp_path / "mosesdecoder")
    monkeypatch.setenv("MOSES_HOME", str(root))
    return root


def _expected_rescored(table_path: Path) -> str:
    return (FIX / "rescored.moses.ini").read_text().replace("/home/smt/work/rescore/phrase-table.rnn.gz",
                                                            str(table_path.resolve()))


def test_rewrite_4_scores_become_6_reordering_untouched(tmp_path, table6):
    out = tmp_path / "new.ini"
    res = rewrite_moses_ini(RewriteConfig(FIX / "train-model.moses.ini", table6, out))
    assert out.read_text() == _expected_rescored(table6)
    assert (res.feature, res.old_count, res.new_count, res.added_weights) == ("TranslationModel0", 4, 6, [0.2, 0.2])
    new = read_moses_ini(out)
    old = read_moses_ini(FIX / "train-model.moses.ini")
    lr_new, lr_old = new.feature("LexicalReordering0"), old.feature("LexicalReordering0")
    assert (lr_new.args, new.weights_for("LexicalReordering0")) == (lr_old.args, old.weights_for("LexicalReordering0"))


def test_rewrite_with_given_weights_and_wrong_count(tmp_path, table6):
    out = tmp_path / "new.ini"
    rewrite_moses_ini(RewriteConfig(FIX / "train-model.moses.ini", table6, out, weights=(0.5, -0.25)))
    assert read_moses_ini(out).weights_for("TranslationModel0") == [0.2, 0.2, 0.2, 0.2, 0.5, -0.25]
    with pytest.raises(PhraseRescoreError, match="gives 3 values but the table adds 2"):
        rewrite_moses_ini(RewriteConfig(FIX / "train-model.moses.ini", table6, tmp_path / "x.ini", weights=(1, 2, 3)))
    assert not (tmp_path / "x.ini").exists()


def test_rewrite_refuses_a_table_with_fewer_columns(tmp_path):
    t = tmp_path / "pt"
    t.write_text("a ||| b ||| 0.5 0.5 0.5 ||| 0-0\n")
    with pytest.raises(PhraseRescoreError, match="3 score columns, fewer than the 4"):
        rewrite_moses_ini(RewriteConfig(FIX / "train-model.moses.ini", t, tmp_path / "x.ini"))


def test_compact_table_is_binarized_with_process_phrase_table_min(tmp_path, table6, moses_home, many_cores):
    compact = tmp_path / "compact.ini"
    compact.write_text((FIX / "train-model.moses.ini").read_text().replace(
        "PhraseDictionaryMemory name=TranslationModel0", "PhraseDictionaryCompact name=TranslationModel0"))
    # without the tool: told what to run, not run
    res = rewrite_moses_ini(RewriteConfig(compact, table6, tmp_path / "a.ini", threads=4))
    prefix = str(table6.resolve())[:-3]
    assert res.binarize_argv == ["processPhraseTableMin", "-in", str(table6.resolve()), "-out", prefix,
                                 "-nscores", "6", "-threads", "4"]
    assert not res.binarized and "must be binarized" in res.summary()
    assert read_moses_ini(tmp_path / "a.ini").feature("TranslationModel0").get("path") == prefix + ".minphr"
    # with the tool: run, and the ini points at its output
    add_process_phrase_table_min(moses_home)
    res = rewrite_moses_ini(RewriteConfig(compact, table6, tmp_path / "b.ini", threads=4))
    assert res.binarized and res.binarize_argv[0] == str(moses_home / "bin" / "processPhraseTableMin")
    assert Path(prefix + ".minphr").read_text() == "minphr stand-in\n"
    tm = read_moses_ini(tmp_path / "b.ini").feature("TranslationModel0")
    assert (tm.type, tm.num_features, tm.get("path")) == ("PhraseDictionaryCompact", 6, prefix + ".minphr")


def test_process_phrase_table_min_argv(many_cores):
    assert process_phrase_table_min_argv("/m/bin/processPhraseTableMin", "/t/pt.gz", "/t/pt", 6, 8) == [
        "/m/bin/processPhraseTableMin", "-in", "/t/pt.gz", "-out", "/t/pt", "-nscores", "6", "-threads", "8"]


def test_mert_moses_argv_exact(tmp_path, moses_home, many_cores):
    install = require_moses()
    cfg = MosesTuneConfig(ini=Path("/m/moses.ini"), dev_src=Path("/d/dev.fr"), dev_ref=Path("/d/dev.en"),
                          workdir=Path("/w"), nbest=200, max_iterations=10, threads=4,
                          decoder_flags=" -threads 8 -s 500 ", batch_mira=True, return_best_dev=True,
                          predictable_seeds=True, historic_bests=True)
    root = str(moses_home.resolve())
    assert mert_moses_argv(cfg, install) == [
        f"{root}/scripts/training/mert-moses.pl", "/d/dev.fr", "/d/dev.en", f"{root}/bin/moses", "/m/moses.ini",
        f"--mertdir={root}/bin", "--working-dir=/w/mert-work", "--nbest=200", "--maximum-iterations=10",
        "--threads=4", "--decoder-flags=-threads 8 -s 500", "--batch-mira", "--return-best-dev",
        "--predictable-seeds", "--historic-bests"]
    plain = MosesTuneConfig(ini=Path("/m/moses.ini"), dev_src=Path("/d/dev.fr"), dev_ref=Path("/d/dev.en"),
                            workdir=Path("/w"), threads=1)
    # mert and kbmira run through the launchers in WORK/mert-bin, which seed each iteration
    assert mert_moses_argv(plain, install)[5:] == ["--mertdir=/w/mert-bin", "--working-dir=/w/mert-work",
                                                   "--nbest=100", "--maximum-iterations=25", "--threads=1"]


@pytest.mark.parametrize("options, want", [
    ({}, "1001"),                           # seed 1, iteration 1: mert would seed from the clock otherwise
    ({"seed": 7}, "7001"),
    ({"seed": 0}, "1"),
    ({"seed": 7, "predictable_seeds": True}, None),   # mert-moses.pl's own seeds: the real mert, no -r of ours
])
def test_the_seed_of_the_iteration_reaches_mert(tmp_path, table6, moses_home, options, want):
    """mert-moses.pl (the stand-in, which runs one iteration) runs mert from --mertdir, as the real one does."""
    src, ref = _dev(tmp_path)
    ini = tmp_path / "rescored.ini"
    rewrite_moses_ini(RewriteConfig(FIX / "train-model.moses.ini", table6, ini))
    cfg = MosesTuneConfig(ini=ini, dev_src=src, dev_ref=ref, workdir=tmp_path / "w", **options)
    tune_moses(cfg, echo=lambda s: None)
    mertdir = next(a for a in mert_moses_argv(cfg, require_moses()) if a.startswith("--mertdir="))
    got = json.loads((tmp_path / "w" / "mert-work" / "mert-argv.json").read_text())
    if want is None:
        assert mertdir == f"--mertdir={moses_home.resolve()}/bin" and "-r" not in got
        assert not (tmp_path / "w" / "mert-bin").exists()
    else:
        assert mertdir == f"--mertdir={tmp_path / 'w' / 'mert-bin'}" and got[-2:] == ["-r", want]


def test_another_seed_is_another_run_not_the_finished_one(tmp_path, table6, moses_home):
    """The seed reaches mert through the launchers, not mert-moses.pl's argv: it is still part of what
    makes a run the same one (to collect, or to continue)."""
    src, ref = _dev(tmp_path)
    ini = tmp_path / "rescored.ini"
    rewrite_moses_ini(RewriteConfig(FIX / "train-model.moses.ini", table6, ini))
    for seed, collected in ((1, False), (1, True), (2, False)):
        said = []
        tune_moses(MosesTuneConfig(ini=ini, dev_src=src, dev_ref=ref, workdir=tmp_path / "w", seed=seed),
                   echo=said.append)
        assert any("had finished this run" in s for s in said) == collected, seed
        got = json.loads((tmp_path / "w" / "mert-work" / "mert-argv.json").read_text())
        assert got[-2:] == ["-r", f"{seed}001"]


HEAD = b"# MERT optimized configuration\n# decoder /m/bin/moses\n# BLEU 0.42 on dev /d/dev.fr\n"


@pytest.mark.parametrize("theirs, ours", [
    # mert-moses.pl's opening comments: the date goes, the rest stays byte for byte
    (HEAD + b"# We were before running iteration 3\n# finished Sun Dec  6 12:37:06 UTC 2026\n[weight]\nLM0= 0.5\n",
     HEAD + b"# We were before running iteration 3\n[weight]\nLM0= 0.5\n"),
    (HEAD + b"# finished Sun Dec  6 12:37:06 UTC 2026\r\n[weight]\r\n", HEAD + b"[weight]\r\n"),
    # a comment after the first setting is the ini's own
    (b"[weight]\n# finished by hand\nLM0= 0.5\n", b"[weight]\n# finished by hand\nLM0= 0.5\n"),
    (HEAD + b"[weight]\n", HEAD + b"[weight]\n"),
    (b"", b""),
])
def test_the_tuned_ini_leaves_out_when_mert_moses_finished(theirs, ours):
    assert without_finish_date(theirs) == ours


def _dev(tmp_path):
    src, ref = tmp_path / "dev.fr", tmp_path / "dev.en"
    src.write_text("das haus\nes ist klein\n")
    ref.write_text("the house\nit is small\n")
    return src, ref


def test_tune_backend_moses_end_to_end_through_the_cli(tmp_path, table6, moses_home):
    src, ref = _dev(tmp_path)
    ini = tmp_path / "rescored.ini"
    rewrite_moses_ini(RewriteConfig(FIX / "train-model.moses.ini", table6, ini))
    work = tmp_path / "tune"
    r = CliRunner().invoke(main, ["tune", "--backend", "moses", str(ini), "--dev-src", str(src), "--dev-ref", str(ref),
                                  "--workdir", str(work), "--nbest", "50", "--max-iterations", "3",
                                  "--decoder-flags", "-threads 2", "--predictable-seeds"])
    assert r.exit_code == 0, r.output
    tuned = work / "moses.tuned.ini"
    assert str(tuned) in r.output
    # the stand-in received exactly the argv we build, and ran in the working directory layout mert-moses.pl uses
    got_argv = json.loads((work / "mert-work" / "standin-argv.json").read_text())
    # mert-moses.pl decodes with the tables filtered to the dev set, made once before it starts
    filtered = work / "filtered" / "moses.ini"
    want = mert_moses_argv(MosesTuneConfig(ini=filtered, dev_src=src, dev_ref=ref, workdir=work, nbest=50,
                                           max_iterations=3, decoder_flags="-threads 2", predictable_seeds=True),
                           require_moses())
    assert got_argv == want
    assert (work / "mert-work" / "run1.best50.out").is_file() and (work / "mert-work" / "weights.txt").is_file()
    log = (work / "mert-moses.log").read_text()
    assert "Executing:" in log and "Saved:" in log
    t = read_moses_ini(tuned)
    t.check_weights_match()
    assert t.feature("TranslationModel0").num_features == 6
    assert len(t.weights_for("TranslationModel0")) == 6
    assert t.weights_for("TranslationModel0") != [0.2] * 6
    # mert-moses.pl's tuned ini, naming the full table again
    # (this dev set can use no entry of the table, "das Haus", so the filtered ini keeps the full one)
    record = json.loads((work / "filtered" / "filtered.json").read_text())["tables"]["TranslationModel0"]
    assert record["lines"] == 2 and record["kept"] == 0 and record["file"] is None
    assert t.feature("TranslationModel0").get("path") == read_moses_ini(ini).feature("TranslationModel0").get("path")
    assert tuned.read_bytes() == without_finish_date(
        original_paths(work / "mert-work" / "moses.ini", ini).text().encode())


def test_mert_bleu_of_an_iteration_is_saved_when_it_arrives():
    """mert-moses.pl prints ``(i) BEST at i: WEIGHTS => BLEU at DATE`` after the line that closes
    iteration i: the row, written when the iteration closed, is written again with mert's BLEU."""
    rows, finished, best = {}, [], []
    progress = MertProgress(rows, finished.append, best.append)
    for t, line in [
            (10.0, "Executing: /opt/moses/bin/moses -threads 1 -config filtered/moses.ini -inputtype 0 -w 0.0 "
                   "-show-weights -n-best-list run1.best200.out 200 distinct  -input-file dev.src > run1.out"),
            (14.0, "Scoring the nbestlist."),
            (16.5, "Executing: \\cp -f weights.txt run1.weights.txt")]:
        progress.feed(line, t)
    assert finished == [1] and best == []
    assert rows == {1: {"seconds_decode": 4.0, "seconds_mert": 2.5}}
    progress.feed("(1) BEST at 1: 0.1 -0.2 0.3 => 0.583739 at Sun Dec  6 18:00:00 UTC 2026", 16.6)
    assert best == [1] and rows[1]["mert_bleu"] == pytest.approx(58.3739)
    progress.feed("(2) BEST at 2: 0.1 -0.2 0.3 => nan-ish at Sun Dec  6 18:01:00 UTC 2026", 17.0)
    assert best == [1] and 2 not in rows                 # what is not a number is not recorded


def test_failing_mert_moses_gives_clear_error_and_keeps_log(tmp_path, table6, moses_home, monkeypatch):
    src, ref = _dev(tmp_path)
    monkeypatch.setenv("STANDIN_FAIL", "1")
    work = tmp_path / "tune"
    with pytest.raises(PhraseRescoreError) as e:
        tune_moses(MosesTuneConfig(ini=FIX / "train-model.moses.ini", dev_src=src, dev_ref=ref, workdir=work),
                   echo=lambda s: None)
    msg = str(e.value)
    assert "mert-moses.pl failed with exit status 2" in msg and str(work / "mert-moses.log") in msg
    assert "ERROR: Failed to run" in msg
    log = (work / "mert-moses.log").read_text()
    assert "ERROR: Failed to run" in log and "# exit status: 2" in log


def test_run_logged_program_missing(tmp_path):
    with pytest.raises(PhraseRescoreError, match="could not run"):
        run_logged([str(tmp_path / "nope")], tmp_path / "l.log", echo=lambda s: None)


def test_no_moses_names_moses_home_and_embedded(tmp_path, monkeypatch):
    monkeypatch.delenv("MOSES_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_moses() is None
    with pytest.raises(PhraseRescoreError) as e:
        get_backend("moses")
    assert "MOSES_HOME" in str(e.value) and "--backend embedded" in str(e.value)
    r = CliRunner().invoke(main, ["tune", "--backend", "moses", str(FIX / "train-model.moses.ini"),
                                  "--dev-src", str(FIX / "moses.nbest"), "--dev-ref", str(FIX / "moses.nbest"),
                                  "--workdir", str(tmp_path / "w")])
    assert r.exit_code == 1 and "MOSES_HOME" in r.output and "--backend embedded" in r.output


def test_incomplete_moses_home_lists_what_is_missing(tmp_path, monkeypatch):
    (tmp_path / "m" / "bin").mkdir(parents=True)
    monkeypatch.setenv("MOSES_HOME", str(tmp_path / "m"))
    with pytest.raises(PhraseRescoreError, match="missing bin/moses, bin/mert, bin/extractor, scripts/training/mert"):
        find_moses()


def test_moses_found_on_path(tmp_path, monkeypatch):
    root = make_standin_moses(tmp_path / "inst")
    monkeypatch.delenv("MOSES_HOME", raising=False)
    monkeypatch.setenv("PATH", str(root / "bin"))
    assert find_moses().root == root.resolve()


def test_moses_backend_decodes_with_argv_list(tmp_path, moses_home):
    be = get_backend("moses")
    assert isinstance(be, MosesBackend)
    inp = tmp_path / "in.txt"
    inp.write_text("a b\nc\n")
    be.decode(FIX / "train-model.moses.ini", inp, tmp_path / "out.txt", nbest_path=tmp_path / "out.nbest", nbest=5)
    assert (tmp_path / "out.txt").read_text() == "a b\nc\n"
    assert be.argv("x.ini", "n.out", 5, 2)[1:] == ["-f", "x.ini", "-threads", "2", "-n-best-list", "n.out", "5",
                                                   "distinct"]
    from phrase_rescore.moses_integration.nbest import read_nbest
    assert [e.sent_id for e in read_nbest(tmp_path / "out.nbest")] == [0, 0, 1, 1]


def test_moses_ini_cli(tmp_path, table6):
    out = tmp_path / "new.ini"
    r = CliRunner().invoke(main, ["moses-ini", str(FIX / "train-model.moses.ini"), "--table", str(table6),
                                  "--out", str(out), "--weights", "0.3,-0.1"])
    assert r.exit_code == 0, r.output
    assert "num-features 4 -> 6" in r.output
    assert read_moses_ini(out).weights_for("TranslationModel0") == [0.2, 0.2, 0.2, 0.2, 0.3, -0.1]
    r = CliRunner().invoke(main, ["moses-ini", str(FIX / "old-format.moses.ini"), "--table", str(table6),
                                  "--out", str(tmp_path / "o.ini")])
    assert r.exit_code == 1 and "old-format.moses.ini:17: [ttable-file] is the old moses.ini format" in r.output


def test_tune_backend_embedded_dispatch(tmp_path):
    from _tiny_smt import make_tiny_system

    s = make_tiny_system(tmp_path / "sys")
    out = tmp_path / "tuned.ini"
    r = CliRunner().invoke(main, ["tune", "--backend", "embedded", str(s["ini"]), "--dev-src", str(s["src"]),
                                  "--dev-ref", str(s["ref"]), "--workdir", str(tmp_path / "w"), "--out", str(out),
                                  "--nbest", "5", "--max-iterations", "2", "--seed", "3"])
    assert r.exit_code == 0, r.output
    assert f"tuned moses.ini: {out}" in r.output
    t = read_moses_ini(out)
    t.check_weights_match()
    assert [f.name for f in t.features] == [f.name for f in read_moses_ini(s["ini"]).features]


def test_moses_only_options_are_refused_with_embedded(tmp_path):
    r = CliRunner().invoke(main, ["tune", "--backend", "embedded", str(FIX / "train-model.moses.ini"),
                                  "--dev-src", str(FIX / "moses.nbest"), "--dev-ref", str(FIX / "moses.nbest"),
                                  "--workdir", str(tmp_path / "w"), "--batch-mira"])
    assert r.exit_code == 1 and "--batch-mira only apply to --backend moses" in r.output


def test_tune_itself_refuses_moses_only_options_with_embedded(tmp_path):
    cfg = TuneConfig(ini=FIX / "train-model.moses.ini", dev_src=FIX / "moses.nbest", dev_ref=FIX / "moses.nbest",
                     workdir=tmp_path / "w", backend="embedded", decoder_flags=" -threads 4 ", batch_mira=True)
    with pytest.raises(PhraseRescoreError, match=r"^--decoder-flags and --batch-mira only apply to --backend moses"):
        tune(cfg)
    assert not (tmp_path / "w").exists()


def test_the_console_gets_one_line_per_iteration_and_the_log_gets_the_decoder(tmp_path, table6, moses_home):
    """Moses's per-sentence decoder output, nearly all of what mert-moses.pl prints, goes to mert-moses.log
    only; the console shows where the output is kept and one line per finished iteration."""
    src, ref = _dev(tmp_path)
    ini = tmp_path / "rescored.ini"
    rewrite_moses_ini(RewriteConfig(FIX / "train-model.moses.ini", table6, ini))
    said = []
    tune_moses(MosesTuneConfig(ini=ini, dev_src=src, dev_ref=ref, workdir=tmp_path / "w", max_iterations=3),
               echo=said.append)
    log = (tmp_path / "w" / "mert-moses.log").read_text()
    assert "Translating: das haus" in log and "Executing:" in log
    assert not any("Translating" in s or "Executing" in s for s in said), said
    assert len(said) == 2 and str(tmp_path / "w" / "mert-moses.log") in said[0]
    assert said[1].startswith("tune: iteration 1/3: dev BLEU ") and "decoding" in said[1]

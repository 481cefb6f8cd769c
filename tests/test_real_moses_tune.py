"""``tune --backend moses`` runs the real mert-moses.pl; ``evaluate --backend moses`` reports from its tuned ini."""
from __future__ import annotations

import csv

import _real_moses
import pytest
from _real_moses import cli, moses_decode, needs_moses, run, tool  # noqa: F401

from phrase_rescore.moses_integration.moses_ini import read_moses_ini
from phrase_rescore.moses_integration.table_filter import original_paths

pytestmark = needs_moses
tiny_system = _real_moses.tiny_system     # the session's fixture, taken by name


def _tune(s, work):
    return cli("tune", str(s.rescored_ini), "--backend", "moses", "--dev-src", str(s.dev_src), "--dev-ref",
               str(s.dev_ref), "--workdir", str(work), "--nbest", "20", "--max-iterations", "2",
               "--decoder-flags", "-threads 1 -stack 50", "--seed", "7", "--historic-bests",
               "--moses-home", str(tool("moses").parent.parent))


@pytest.fixture(scope="module")
def tuned(tiny_system, tmp_path_factory):
    work = tmp_path_factory.mktemp("tune")
    return work, _tune(tiny_system, work)


def test_real_mert_moses_two_iterations_and_the_tuned_ini(tiny_system, tuned):
    work, out = tuned
    tuned_ini = work / "moses.tuned.ini"
    assert f"tuned moses.ini: {tuned_ini}" in out
    mw = work / "mert-work"
    # mert-moses.pl's ini, less the line saying when it finished, naming the full tables again: the decoder
    # that mert-moses.pl ran read the tables filtered to the dev set
    theirs = original_paths(mw / "moses.ini", tiny_system.rescored_ini).text().splitlines(keepends=True)
    assert theirs[4].startswith("# finished ") and tuned_ini.read_text() == "".join(theirs[:4] + theirs[5:])
    for name in ("TranslationModel0", "LexicalReordering0"):
        assert read_moses_ini(mw / "moses.ini").feature(name).get("path").startswith(str(work / "filtered"))
        assert read_moses_ini(tuned_ini).feature(name).get("path") == \
            read_moses_ini(tiny_system.rescored_ini).feature(name).get("path")
    # two decoder runs and two optimisations, no third decoding
    for i in (1, 2):
        assert (mw / f"run{i}.best20.out.gz").is_file() and (mw / f"run{i}.mert.log").is_file()
    assert not (mw / "run3.best20.out.gz").exists()
    log = (work / "mert-moses.log").read_text()
    assert ("Maximum number of iterations exceeded" in log or "None of the weights changed" in log)
    # the console: where the log is and one line per iteration; the decoder's chatter stays in the log
    said = [line for line in out.splitlines() if line.startswith("tune: ")]
    assert said[0].startswith("tune: mert-moses.pl, at most 2 iterations") and str(work / "mert-moses.log") in said[0]
    assert [line.split(":")[1] for line in said[1:]] == [" iteration 1/2", " iteration 2/2"], out
    assert len(out.splitlines()) < 10 < len(log.splitlines()), out
    assert log.rstrip().endswith("# exit status: 0")
    # --historic-bests: the second optimisation also starts from the weights the first decode used
    assert "--ifile run1.init.opt,run2.init.opt" in log and log.count("--ifile run1.init.opt ") == 2
    # --seed 7: mert seeds its random restarts with 7001, then 7002 (a new draw each iteration), not the clock
    for i in (1, 2):
        assert f"Seeding random numbers with {7000 + i}\n" in (mw / f"run{i}.mert.log").read_text()
    ini = read_moses_ini(tuned_ini)
    ini.check_weights_match()
    tm = ini.weights_for("TranslationModel0")
    assert len(tm) == 6 and tm != [0.2] * 6
    # the real decoder loads it with exactly these weights
    shown = {}
    for ln in run([tool("moses"), "-f", tuned_ini, "-show-weights"]).stdout.decode().splitlines():
        if "=" in ln:
            name, vals = ln.split("=")
            shown[name] = [float(v) for v in vals.split()]
    for name, w in shown.items():
        assert w == pytest.approx(ini.weights_for(name), abs=1e-6), name


def test_the_same_seed_tunes_to_the_same_weights(tiny_system, tuned, tmp_path):
    work, _ = tuned
    _tune(tiny_system, tmp_path)
    assert (tmp_path / "moses.tuned.ini").read_bytes() == (work / "moses.tuned.ini").read_bytes()


def test_batch_mira_runs_through_the_seeding_launcher(tiny_system, tmp_path):
    """kbmira, like mert, runs from WORK/mert-bin with -r added: the real one takes it and tunes."""
    s = tiny_system
    out = cli("tune", str(s.rescored_ini), "--backend", "moses", "--dev-src", str(s.dev_src), "--dev-ref",
              str(s.dev_ref), "--workdir", str(tmp_path), "--nbest", "20", "--max-iterations", "1",
              "--decoder-flags", "-threads 1 -stack 50", "--seed", "7", "--batch-mira",
              "--moses-home", str(tool("moses").parent.parent))
    assert f"tuned moses.ini: {tmp_path / 'moses.tuned.ini'}" in out
    log = (tmp_path / "mert-moses.log").read_text()
    assert any(ln.startswith(f"Executing: {tmp_path / 'mert-bin' / 'kbmira'} ") for ln in log.splitlines())
    assert "Initialising random seed to 7001\n" in (tmp_path / "mert-work" / "run1.mert.log").read_text()
    read_moses_ini(tmp_path / "moses.tuned.ini").check_weights_match()


def test_evaluate_with_the_real_moses_reports_from_the_tuned_ini(tiny_system, tuned, tmp_path):
    s = tiny_system
    work, _ = tuned
    tuned_ini = work / "moses.tuned.ini"
    ev = tmp_path / "eval"
    cli("evaluate", "--system", f"baseline={s.ini}", "--system", f"rnn+wp={tuned_ini}", "--model",
        f"rnn+wp={s.model}", "--test-src", str(s.test_src), "--test-ref", str(s.test_ref), "--target-lang", "fr",
        "--workdir", str(ev), "--backend", "moses", "--bootstrap-samples", "50",
        "--moses-home", str(tool("moses").parent.parent))
    rows = list(csv.DictReader((ev / "table1.csv").open()))
    assert [r[next(iter(r))] for r in rows] == ["baseline", "rnn+wp"]
    md = (ev / "table1.md").read_text()
    assert "rnn+wp" in md and "baseline" in md
    # the report's translations are the real decoder's with the tuned weights
    src = s.test_src.read_text().splitlines()
    direct, _ = moses_decode(tuned_ini, src)
    assert [ln.rstrip(" ") for ln in (ev / "test.rnn+wp.tok").read_text().splitlines()] == direct

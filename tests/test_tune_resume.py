"""Embedded tuning is resumable per iteration: a run killed after iteration k continues at k + 1 and ends
with the same tuned moses.ini as an uninterrupted run; a changed input or option starts afresh, removing
only the tuner's own files; tune-log.csv has the decode and optimise seconds of every iteration."""
from __future__ import annotations

import csv
import os
import signal
from pathlib import Path

import numpy as np
import pytest
from _real_moses import moses_home, needs_moses
from click.testing import CliRunner

from phrase_rescore.app.cli import main
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.moses_integration.embedded import tune as tune_mod
from phrase_rescore.moses_integration.embedded.decoder import Decoder
from phrase_rescore.moses_integration.embedded.tune import EmbeddedTuneConfig, tune_embedded
from phrase_rescore.moses_integration.mert_seeds import iteration_seed

ITERATIONS = 4


def _system(d: Path, seed: int = 1, n_words: int = 10, n_sent: int = 20) -> None:
    """Three translations per word with random scores and references that mix them: MERT keeps moving
    the weights as the pool grows, so a run takes all its iterations."""
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(n_words):
        for t in "abc":
            p = " ".join(f"{x:.3f}" for x in rng.uniform(0.05, 0.95, 4))
            lines.append(f"s{i} ||| {t}{i} ||| {p} ||| 0-0 ||| 1 1 1")
        j = (i + 1) % n_words
        lines.append(f"s{i} s{j} ||| a{i} b{j} ||| 0.5 0.5 0.5 0.5 ||| 0-0 1-1 ||| 1 1 1")
    (d / "phrase-table").write_text("\n".join(lines) + "\n")
    words = [f"{p}{i}" for p in "abc" for i in range(n_words)]
    arpa = ["\\data\\", f"ngram 1={len(words) + 3}", "ngram 2=1", "", "\\1-grams:", "-1.0\t<unk>", "-99\t<s>\t0",
            "-1.0\t</s>"] + [f"{-rng.uniform(1, 2):.3f}\t{w}\t0" for w in words]
    arpa += ["", "\\2-grams:", "-1.5\t<s> a0", "", "\\end\\", ""]
    (d / "lm.arpa").write_text("\n".join(arpa))
    (d / "moses.ini").write_text(
        "[distortion-limit]\n2\n\n[feature]\nUnknownWordPenalty\nWordPenalty\nPhrasePenalty\n"
        f"PhraseDictionaryMemory name=TranslationModel0 num-features=4 path={d / 'phrase-table'} "
        "input-factor=0 output-factor=0\nDistortion\n"
        f"KENLM name=LM0 factor=0 path={d / 'lm.arpa'} order=2\n\n[weight]\nUnknownWordPenalty0= 1\n"
        "WordPenalty0= -1\nPhrasePenalty0= 0.2\nTranslationModel0= 0.2 0.2 0.2 0.2\nDistortion0= 0.3\nLM0= 0.5\n")
    src, ref = [], []
    for _ in range(n_sent):
        ids = rng.integers(0, n_words, rng.integers(3, 7))
        src.append(" ".join(f"s{i}" for i in ids))
        ref.append(" ".join(f"{'abc'[rng.integers(0, 3)]}{i}" for i in ids))
    (d / "dev.src").write_text("\n".join(src) + "\n")
    (d / "dev.ref").write_text("\n".join(ref) + "\n")


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    d = tmp_path_factory.mktemp("tune-resume")
    _system(d)
    return d


def _config(d: Path, work: Path, **kw) -> EmbeddedTuneConfig:
    values = dict(nbest=5, max_iterations=ITERATIONS, seed=1, restarts=2, threads=1) | kw
    return EmbeddedTuneConfig(str(d / "moses.ini"), str(d / "dev.src"), str(d / "dev.ref"), str(work), **values)


def _log(work: Path, timing: bool = False) -> list[dict]:
    with open(work / "tune-log.csv") as f:
        rows = list(csv.DictReader(f))
    return rows if timing else [{k: v for k, v in r.items() if not k.startswith("seconds_")} for r in rows]


@pytest.fixture(scope="module")
def uninterrupted(system, tmp_path_factory):
    work = tmp_path_factory.mktemp("whole")
    ini = tune_embedded(_config(system, work))
    rows = _log(work, timing=True)
    assert len(rows) == ITERATIONS, "the test system should not converge before its last iteration"
    return Path(ini).read_bytes(), rows


@pytest.fixture
def decoded(monkeypatch):
    """The iterations a run decodes, from the progress label of each Decoder.translate_all call."""
    seen = []
    original = Decoder.translate_all

    def counting(self, *args, **kw):
        seen.append(int(kw["desc"].rsplit(" ", 1)[1]))      # "tune iteration 3"
        return original(self, *args, **kw)

    monkeypatch.setattr(Decoder, "translate_all", counting)
    return seen


def _fail_in_iteration(monkeypatch, k: int, how):
    """Make MERT of iteration ``k`` (seed 1) fail with ``how()``, after its decode."""
    original = tune_mod.optimize

    def optimize(pool, init, tuned, seed=0, **kw):
        if seed == iteration_seed(1, k):
            how()
        return original(pool, init, tuned, seed=seed, **kw)

    monkeypatch.setattr(tune_mod, "optimize", optimize)


def test_the_log_has_decode_and_optimise_seconds(uninterrupted):
    _, rows = uninterrupted
    assert [int(r["iteration"]) for r in rows] == list(range(1, ITERATIONS + 1))
    for r in rows:
        assert float(r["seconds_decode"]) > 0 and float(r["seconds_mert"]) > 0


def test_each_iteration_draws_its_restarts_from_a_seed_of_its_own(system, tmp_path, monkeypatch):
    """Seed 1's iterations use 1001, 1002, ...; seed 2's first is 2001, not seed 1's second."""
    seen = []
    original = tune_mod.optimize

    def optimize(pool, init, tuned, seed=0, **kw):
        seen.append(seed)
        return original(pool, init, tuned, seed=seed, **kw)

    monkeypatch.setattr(tune_mod, "optimize", optimize)
    tune_embedded(_config(system, tmp_path / "a", max_iterations=2))
    tune_embedded(_config(system, tmp_path / "b", max_iterations=2, seed=2))
    assert seen == [1001, 1002, 2001, 2002]


@pytest.mark.parametrize("k", [1, 3])
def test_a_failed_run_resumes_after_its_last_finished_iteration(system, uninterrupted, tmp_path, monkeypatch,
                                                                decoded, k):
    work = tmp_path / "work"

    def fail():
        raise RuntimeError("injected")

    with monkeypatch.context() as m:
        _fail_in_iteration(m, k + 1, fail)
        with pytest.raises(RuntimeError, match="injected"):
            tune_embedded(_config(system, work))
    assert decoded == list(range(1, k + 2))            # iteration k + 1 was decoded, not finished
    assert not (work / "moses.ini").exists()
    first = {p.name: p.stat().st_mtime_ns for p in work.glob("run1.*")}
    decoded.clear()
    lines = []
    ini = tune_embedded(_config(system, work), echo=lines.append)
    assert decoded == list(range(k + 1, ITERATIONS + 1))   # the finished iterations are not redone
    assert lines == [f"tune: resuming after iteration {k} (its n-best lists and weights are in {work})"]
    assert Path(ini).read_bytes() == uninterrupted[0]
    assert _log(work) == [{k_: v for k_, v in r.items() if not k_.startswith("seconds_")} for r in uninterrupted[1]]
    assert {p.name: p.stat().st_mtime_ns for p in work.glob("run1.*")} == first
    # a finished run run again decodes nothing and writes the same moses.ini
    decoded.clear()
    assert Path(tune_embedded(_config(system, work))).read_bytes() == uninterrupted[0] and decoded == []


def test_a_killed_process_resumes(system, uninterrupted, tmp_path, decoded):
    work = tmp_path / "work"
    pid = os.fork()
    if pid == 0:                                       # the child is killed in MERT of iteration 3
        try:
            mp = pytest.MonkeyPatch()
            _fail_in_iteration(mp, 3, lambda: os.kill(os.getpid(), signal.SIGKILL))
            tune_embedded(_config(system, work))
        finally:
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert (work / "run3.out").exists()                # decoded, not finished: redone
    decoded.clear()
    ini = tune_embedded(_config(system, work))
    assert decoded == [3, 4]
    assert Path(ini).read_bytes() == uninterrupted[0]


def test_an_iteration_whose_files_are_gone_is_redone(system, uninterrupted, tmp_path, decoded):
    work = tmp_path / "work"
    tune_embedded(_config(system, work, max_iterations=2))
    (work / "run2.candidates.npz").unlink()
    decoded.clear()
    assert Path(tune_embedded(_config(system, work))).read_bytes() == uninterrupted[0]
    assert decoded == [2, 3, 4]


def test_a_changed_input_or_option_starts_afresh_keeping_other_files(system, uninterrupted, tmp_path, decoded):
    work = tmp_path / "work"
    tune_embedded(_config(system, work, max_iterations=2))
    (work / "notes.txt").write_text("mine\n")
    # more iterations: the same run, continued
    decoded.clear()
    assert Path(tune_embedded(_config(system, work))).read_bytes() == uninterrupted[0] and decoded == [3, 4]
    # another n-best size: everything the tuner wrote for size 5 goes, nothing else
    decoded.clear()
    lines = []
    tune_embedded(_config(system, work, nbest=3, max_iterations=2), echo=lines.append)
    assert lines == ["tune: started afresh (nbest changed since the earlier run)"]
    assert decoded == [1, 2]
    assert (work / "notes.txt").read_text() == "mine\n"
    assert sorted(p.name for p in work.glob("run*")) == [f"run{i}.{x}" for i in (1, 2)
                                                         for x in ("best3.out", "candidates.npz", "out")]
    # a changed dev reference
    ref = (system / "dev.ref").read_text().splitlines()
    changed = tmp_path / "dev2.ref"
    changed.write_text("\n".join(["a0 b1 c2"] + ref[1:]) + "\n")
    cfg = _config(system, work, nbest=3, max_iterations=1)
    cfg.dev_ref = str(changed)
    decoded.clear()
    lines.clear()
    tune_embedded(cfg, echo=lines.append)
    assert lines == ["tune: started afresh (files dev_ref changed since the earlier run)"]
    assert decoded == [1] and not (work / "run2.out").exists() and (work / "notes.txt").exists()


def test_historic_bests_start_mert_from_every_earlier_iteration_and_resume(system, uninterrupted, tmp_path,
                                                                           monkeypatch, decoded):
    """mert-moses.pl --historic-bests: iteration k's MERT also starts from the weights iterations 1..k-1
    decoded with; an interrupted run resumes to the same bytes, and switching it on starts afresh."""
    starts = []
    original = tune_mod.optimize

    def spy(pool, init, tuned, **kw):
        starts.append([list(p) for p in kw.get("more_starts", ())])
        return original(pool, init, tuned, **kw)

    monkeypatch.setattr(tune_mod, "optimize", spy)
    whole = tmp_path / "whole"
    ini = Path(tune_embedded(_config(system, whole, historic_bests=True))).read_bytes()
    used = [[float(x) for x in list(r.values())[6:]] for r in _log(whole, timing=True)]
    assert starts == [used[:k] for k in range(ITERATIONS)]
    assert ini != uninterrupted[0]          # the extra starts find other weights on this system
    work = tmp_path / "work"
    tune_embedded(_config(system, work, max_iterations=2))
    lines = []
    decoded.clear()
    tune_embedded(_config(system, work, max_iterations=2, historic_bests=True), echo=lines.append)
    assert lines == ["tune: started afresh (historic_bests changed since the earlier run)"] and decoded == [1, 2]
    decoded.clear()
    assert Path(tune_embedded(_config(system, work, historic_bests=True))).read_bytes() == ini
    assert decoded == [3, 4]


def test_the_tune_command_says_it_resumes(system, tmp_path):
    argv = ["--quiet", "tune", str(system / "moses.ini"), "--backend", "embedded", "--dev-src",
            str(system / "dev.src"), "--dev-ref", str(system / "dev.ref"), "--workdir", str(tmp_path / "w"),
            "--nbest", "5", "--seed", "1"]
    r = CliRunner().invoke(main, argv + ["--max-iterations", "1"])
    assert r.exit_code == 0 and "resuming" not in r.stderr, r.output
    r = CliRunner().invoke(main, argv + ["--max-iterations", "2"])
    assert r.exit_code == 0, r.output
    assert f"tune: resuming after iteration 1 (its n-best lists and weights are in {tmp_path / 'w'})" in r.stderr
    assert len((tmp_path / "w" / "tune-log.csv").read_text().splitlines()) == 3


def test_nbest_order_of_tied_scores_does_not_follow_memory_addresses(system, monkeypatch):
    """With only the word penalty weighted, all candidates of a length tie; their order in the n-best list
    must not depend on where the hypotheses lie in memory (a resumed tuning run decodes with a new
    Decoder): decoding with ``id()`` reversed in the search module gives the same lists."""
    from phrase_rescore.moses_integration.embedded import search

    src = [s.split() for s in (system / "dev.src").read_text().splitlines()]
    dec = Decoder.from_ini(system / "moses.ini", sentences=src, progress=False)
    w = np.zeros(dec.spec.dim)
    w[dec.spec.index("WordPenalty")] = -1.0
    dec.set_weights(w)
    lists = [[dec.nbest_lines(i, dec.translate(s, 20).nbest) for i, s in enumerate(src)]]
    monkeypatch.setattr(search, "id", lambda obj: -id(obj), raising=False)
    lists.append([dec.nbest_lines(i, dec.translate(s, 20).nbest) for i, s in enumerate(src)])
    assert lists[0] == lists[1]


def test_an_interrupted_workflow_tune_stage_resumes(system, tmp_path, monkeypatch, decoded):
    from phrase_rescore.app.stages import default_registry
    from phrase_rescore.app.workflow import load_workflow, run_workflow

    data = {"workflow": {"name": "t", "stages": ["tune-baseline"]},
            "inputs": {"moses_ini": str(system / "moses.ini"), "phrase_table": str(system / "phrase-table"),
                       "dev_src_tok": str(system / "dev.src"), "dev_ref_tok": str(system / "dev.ref")},
            "tune": {"backend": "embedded", "max_iterations": 2, "nbest": 5, "seed": 1}}
    registry = default_registry()
    said = []
    with monkeypatch.context() as m:
        def fail():
            raise PhraseRescoreError("injected")

        _fail_in_iteration(m, 2, fail)
        with pytest.raises(PhraseRescoreError, match="injected"):
            run_workflow(load_workflow(None, registry, data=data), registry, tmp_path / "w", echo=said.append)
    assert decoded == [1, 2]
    decoded.clear()
    run_workflow(load_workflow(None, registry, data=data), registry, tmp_path / "w", echo=said.append)
    assert "[tune-baseline] running (resuming an interrupted run)" in said
    assert decoded == [2]
    assert len(_log(tmp_path / "w" / "tune-baseline" / "work")) == 2


# ---------------------------------------------------------------------------- the moses backend, a real Moses

def _fake_moses_home(tmp_path: Path, real: Path) -> tuple[Path, Path]:
    """A MOSES_HOME with the real tools, whose bin/moses fails on iteration 2 while ``flag`` exists."""
    home = tmp_path / "moses-home"
    (home / "bin").mkdir(parents=True)
    for p in (real / "bin").iterdir():
        if p.name != "moses":
            (home / "bin" / p.name).symlink_to(p)
    (home / "scripts").symlink_to(real / "scripts")
    flag = tmp_path / "fail-iteration-2"
    moses = home / "bin" / "moses"
    moses.write_text(f'#!/bin/sh\ncase "$*" in *run2.best*) [ -e {flag} ] && exit 1;; esac\n'
                     f'exec {real / "bin" / "moses"} "$@"\n')
    moses.chmod(0o755)
    return home, flag


@needs_moses
def test_moses_backend_continues_an_interrupted_mert_moses(tmp_path):
    from _tiny_smt import make_tiny_system

    s = make_tiny_system(tmp_path / "sys")
    home, flag = _fake_moses_home(tmp_path, moses_home())

    def tune(work: Path, ok: bool = True):
        r = CliRunner().invoke(main, ["--quiet", "tune", str(s["ini"]), "--backend", "moses", "--dev-src",
                                      str(s["src"]), "--dev-ref", str(s["ref"]), "--workdir", str(work),
                                      "--nbest", "10", "--max-iterations", "2", "--seed", "3",
                                      "--decoder-flags", "-threads 1", "--moses-home", str(home)])
        assert (r.exit_code == 0) == ok, r.output
        return r

    tune(tmp_path / "whole")
    flag.touch()
    work = tmp_path / "work"
    r = tune(work, ok=False)
    assert "mert-moses.pl failed" in r.stderr
    # the log of the failed run has its finished iteration with mert's BLEU, which came after the iteration closed
    rows = list(csv.DictReader((work / "tune-log.csv").open()))
    assert [int(r["iteration"]) for r in rows] == [1] and 0 <= float(rows[0]["mert_bleu"]) <= 100
    first = (work / "mert-work" / "run1.out").stat().st_mtime_ns
    flag.unlink()
    r = tune(work)
    assert "tune: resuming mert-moses.pl after iteration 1 (--continue)" in r.stderr
    log = (work / "mert-moses.log").read_text()
    assert "--continue" in log and "Last finished step is 1" in log
    # the continued run's mert gets the second iteration's seed, as the uninterrupted run's did
    for w in (work, tmp_path / "whole"):
        assert "Seeding random numbers with 3002\n" in (w / "mert-work" / "run2.mert.log").read_text()
    assert (work / "mert-work" / "run1.out").stat().st_mtime_ns == first          # not decoded again
    def tuned(w: Path) -> list[str]:     # mert-moses.pl writes the time it finished into the ini
        return [ln for ln in (w / "moses.tuned.ini").read_text().splitlines() if not ln.startswith("# finished ")]

    assert tuned(work) == tuned(tmp_path / "whole")
    for w in (work, tmp_path / "whole"):
        rows = list(csv.DictReader((w / "tune-log.csv").open()))
        assert [int(r["iteration"]) for r in rows] == [1, 2]
        assert all(float(r["seconds_decode"]) > 0 and float(r["seconds_mert"]) > 0 for r in rows)
        assert all(0 <= float(r["dev_bleu"]) <= 100 and r["mert_bleu"] for r in rows)
    # a finished run is collected, not run again
    r = tune(work)
    assert "tune: mert-moses.pl had finished this run" in r.stderr

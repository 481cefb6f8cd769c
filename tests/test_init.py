"""``phrase-rescore init``: a ready workflow from a trained system's own files, every path said where it was found,
everything missing listed at once, and a casing, a phrase table or an output file that would give wrong numbers or
destroy a file refused. One scenario per test, on tiny systems made without a Moses (tests/_moses_layouts.py);
test_init_real_moses.py has the same recipe with the real tools."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _moses_layouts import build_truecased, cli, ems_layout, tutorial_layout

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(autouse=True)
def no_moses(monkeypatch, tmp_path):
    """No Moses installation unless a test makes one: MOSES_HOME unset, no moses on PATH."""
    monkeypatch.delenv("MOSES_HOME", raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_truecased(tmp_path_factory.mktemp("built"))


@pytest.fixture
def tutorial(built, tmp_path):
    return tutorial_layout(built["smt"], tmp_path / "home")


def _raw(built) -> list[str]:
    r = built["raw"]
    return ["--dev-src", str(r / "dev.en"), "--dev-ref", str(r / "dev.fr"), "--test-src", str(r / "test.en"),
            "--test-ref", str(r / "test.fr")]


def _init(*args):
    r = cli("init", *args)
    return r, r.output


def _toml(path: Path) -> dict:
    return tomllib.loads(path.read_text(encoding="utf-8"))


def test_init_on_a_build_smt_folder_writes_a_workflow_that_loads(built, tmp_path):
    out = tmp_path / "mine.toml"
    r, text = _init("--folder", str(built["smt"]), *_raw(built), "--out", str(out))
    assert r.exit_code == 0, text
    wf = _toml(out)
    smt = built["smt"].resolve()
    assert wf["inputs"]["smt_model"] == str(smt / "model")             # applied as build-smt applied them
    assert wf["inputs"]["train_tgt_tok"] == str(smt / "corpus" / "clean.tgt")
    assert wf["inputs"]["phrase_table"] == str(smt / "phrase-table.gz") and wf["inputs"]["lm"] == str(smt / "lm.arpa")
    assert wf["tokenize"] == {"source_lang": "en", "target_lang": "fr", "case": "truecase", "escape": True}
    assert wf["evaluate"]["case"] == "truecase" and wf["common"]["backend"] == "embedded"
    assert f"next: phrase-rescore run {out} --workdir runs/mine" in text
    from phrase_rescore.app.stages import default_registry
    from phrase_rescore.app.workflow import load_workflow, plan

    reg = default_registry()
    assert plan(load_workflow(out, reg), reg).order[0] == "tokenize"


def test_init_on_the_tutorial_layout_finds_every_part_and_says_where(tutorial, built, tmp_path):
    out = tmp_path / "mine.toml"
    r, text = _init("--moses-ini", str(tutorial["ini"]), *_raw(built), "--out", str(out), "--backend", "embedded")
    assert r.exit_code == 0, text
    wf, lines = _toml(out), out.read_text(encoding="utf-8").splitlines()
    corpus = tutorial["corpus"].resolve()
    assert wf["inputs"]["truecase_model_src"] == str(corpus / "truecase-model.en")
    assert wf["inputs"]["truecase_model_tgt"] == str(corpus / "truecase-model.fr")
    assert wf["inputs"]["train_tgt_tok"] == str(corpus / "train.clean.fr")
    assert wf["inputs"]["lm"] == str(tutorial["lm"].resolve())
    where: dict[str, str] = {}          # key -> its comment, the first section's ([tokenize] before [evaluate])
    for ln in lines:
        if " = " in ln and "#" in ln and not ln.startswith("#"):
            where.setdefault(ln.split(" = ")[0], ln.split("#", 1)[1])
    assert "moses.ini line 21: TranslationModel0 path=" in where["phrase_table"]
    assert "train-truecaser.perl's model for en, in" in where["truecase_model_src"]
    assert "its 300 lines are the sentence pairs train-model.perl read" in where["train_tgt_tok"]
    assert any("reordering table" in ln and "LexicalReordering0 path=" in ln for ln in lines)
    assert wf["tokenize"]["case"] == "truecase" and "a truecasing model" in where["case"]
    assert wf["tokenize"]["escape"] is True and "tokenizer.perl's escapes" in where["escape"]
    assert (wf["tokenize"]["source_lang"], wf["tokenize"]["target_lang"]) == ("en", "fr")
    assert "en.vcb holds the phrase table's source words" in where["source_lang"]


def test_the_shortlist_is_chosen_below_the_vocabulary(tutorial, built, tmp_path):
    """The paper's 15000 on a system of a few hundred words would make the unknown-word column 1 everywhere."""
    out = tmp_path / "mine.toml"
    r, text = _init("--moses-ini", str(tutorial["ini"]), *_raw(built), "--out", str(out), "--backend", "embedded")
    assert r.exit_code == 0, text
    vcb = {lang: [ln.split("\t") for ln in (tutorial["train"] / "corpus" / f"{lang}.vcb").read_text().splitlines()[1:]]
           for lang in ("en", "fr")}
    twice = min(sum(int(c) >= 2 for _, _, c in rows) for rows in vcb.values())
    assert _toml(out)["prepare"]["vocab_size"] == twice < min(len(rows) for rows in vcb.values())
    assert "the paper's 15,000 would hold all" in out.read_text()


def test_init_on_an_ems_folder(built, tmp_path):
    ems = ems_layout(built["smt"], tmp_path / "ems")
    out = tmp_path / "mine.toml"
    r, text = _init("--folder", str(ems["work"]), *_raw(built), "--out", str(out), "--backend", "embedded")
    assert r.exit_code == 0, text
    wf = _toml(out)
    work = ems["work"].resolve()
    assert wf["inputs"]["moses_ini"] == str(work / "model" / "moses.ini.1")
    assert wf["inputs"]["truecase_model_tgt"] == str(work / "truecaser" / "truecase-model.1.fr")
    assert wf["inputs"]["train_tgt_tok"] == str(work / "training" / "corpus.1.fr")
    assert wf["tokenize"]["source_lang"] == "en" and "input-extension" in out.read_text()


def test_every_missing_input_is_reported_at_once(tutorial, built, tmp_path):
    """A system moved away from its corpus and truecasing models, with a dev file that does not exist."""
    moved = tmp_path / "moved"
    shutil.copytree(tutorial["train"], moved / "train")
    ini = moved / "train" / "model" / "moses.ini"
    ini.write_text(ini.read_text().replace(str(tutorial["train"]), str(moved / "train"))
                   .replace(str(tutorial["lm"]), str(moved / "lm.arpa")))
    shutil.rmtree(tutorial["root"])
    out = tmp_path / "mine.toml"
    args = _raw(built)
    args[1] = str(tmp_path / "nope.en")
    r, text = _init("--moses-ini", str(ini), *args, "--out", str(out), "--backend", "embedded")
    assert r.exit_code == 1
    for key in ("lm: LM0's language model", "train_tgt_tok: the target side of the training corpus",
                "truecase_model_src: the truecasing models", "dev_src: raw text given with --dev-src"):
        assert key in text, (key, text)
    assert "4 input(s) or setting(s) missing" in text
    written = out.read_text()
    assert "# train_tgt_tok = \"\"   # MISSING" in written and "# dev_src = " in written
    assert "train_tgt_tok" not in _toml(out)["inputs"]


def test_a_phrase_table_that_is_not_the_inis_is_refused(tutorial, built, tmp_path):
    other = tmp_path / "other.gz"
    shutil.copy(tutorial["table"], other)
    r, text = _init("--moses-ini", str(tutorial["ini"]), "--phrase-table", str(other), *_raw(built),
                    "--out", str(tmp_path / "mine.toml"))
    assert r.exit_code == 1 and not (tmp_path / "mine.toml").exists()
    assert f"--phrase-table {other} is not the table the moses.ini reads" in text


def test_a_compact_systems_text_table_is_found_where_train_model_wrote_it(tutorial, built, tmp_path):
    """The tutorial's binarised-model/moses.ini reads phrase-table.minphr; the text table is in train/model/."""
    binarised = tutorial["train"].parent / "binarised-model"
    binarised.mkdir()
    (binarised / "phrase-table.minphr").write_bytes(b"")
    ini = binarised / "moses.ini"
    ini.write_text(tutorial["ini"].read_text().replace("PhraseDictionaryMemory", "PhraseDictionaryCompact")
                   .replace(str(tutorial["table"]), str(binarised / "phrase-table")))
    out = tmp_path / "mine.toml"
    r, text = _init("--moses-ini", str(ini), *_raw(built), "--out", str(out), "--backend", "embedded")
    assert _toml(out)["inputs"]["phrase_table"] == str(tutorial["table"].resolve()), text
    assert "PhraseDictionaryCompact (it reads" in out.read_text()


def test_a_stated_case_that_the_system_contradicts_is_refused(tutorial, built, tmp_path):
    r, text = _init("--moses-ini", str(tutorial["ini"]), *_raw(built), "--out", str(tmp_path / "mine.toml"),
                    "--case", "none")
    assert r.exit_code == 1 and not (tmp_path / "mine.toml").exists()
    assert "--case = 'none' contradicts the system, which is truecase-cased (a truecasing model:" in text


def test_init_never_overwrites_a_file_it_did_not_write(tutorial, built, tmp_path):
    out = tmp_path / "mine.toml"
    out.write_text("# my own workflow\n")
    r, text = _init("--moses-ini", str(tutorial["ini"]), *_raw(built), "--out", str(out))
    assert r.exit_code == 1 and "exists and is not a workflow init wrote" in text
    assert out.read_text() == "# my own workflow\n"


def test_init_rewrites_its_own_file_until_it_is_edited(tutorial, built, tmp_path):
    out = tmp_path / "mine.toml"
    args = ["--moses-ini", str(tutorial["ini"]), *_raw(built), "--out", str(out), "--backend", "embedded"]
    assert _init(*args)[0].exit_code == 0
    assert _init(*args)[0].exit_code == 0                     # its own, unedited: rewritten
    out.write_text(out.read_text().replace("max_iterations = 25", "max_iterations = 5"))
    r, text = _init(*args)
    assert r.exit_code == 1 and "(it was edited since)" in text and "max_iterations = 5" in out.read_text()


def test_the_backend_is_moses_when_an_installation_is_found(tutorial, built, tmp_path, monkeypatch):
    from _moses_standin import make_standin_moses

    home = make_standin_moses(tmp_path / "moses")
    monkeypatch.setenv("MOSES_HOME", str(home))
    out = tmp_path / "mine.toml"
    r, text = _init("--moses-ini", str(tutorial["ini"]), *_raw(built), "--out", str(out))
    assert r.exit_code == 0, text
    assert _toml(out)["common"]["backend"] == "moses" and f"the Moses installation at {home.resolve()}" in text


def test_the_workflow_keeps_step_with_rescore_existing(tutorial, built, tmp_path):
    """init writes workflows/rescore-existing.toml filled in: the same stages, sections and settings."""
    out = tmp_path / "mine.toml"
    assert _init("--moses-ini", str(tutorial["ini"]), *_raw(built), "--out", str(out))[0].exit_code == 0
    ours = _toml(out)
    shipped = _toml(Path(__file__).parent.parent / "workflows" / "rescore-existing.toml")
    assert ours["workflow"]["stages"] == shipped["workflow"]["stages"] and set(ours) == set(shipped)
    for sec in ("train", "train-cslm", "tune"):
        assert ours[sec] == shipped[sec], sec
    assert set(ours["inputs"]) == set(shipped["inputs"])


def test_the_table_on_a_truecased_system_detruecases_without_the_user_setting_it(tutorial, built, tmp_path):
    """tokenize and evaluate with no case in the workflow: the system's truecasing models decide, and the
    Table scores detruecased output (cased BLEU), as truecase.perl's recipe wants."""
    from phrase_rescore.app.stages import default_registry
    from phrase_rescore.app.workflow import load_workflow, run_workflow
    from phrase_rescore.moses_integration.embedded.detruecase import detruecase_line

    out = tmp_path / "mine.toml"
    assert _init("--moses-ini", str(tutorial["ini"]), *_raw(built), "--out", str(out),
                 "--backend", "embedded")[0].exit_code == 0
    data = _toml(out)
    data["workflow"]["stages"] = ["tokenize", "evaluate"]
    data = {k: data[k] for k in ("workflow", "inputs", "common", "tokenize", "evaluate")}
    del data["tokenize"]["case"], data["evaluate"]["case"]
    data["inputs"] = {k: v for k, v in data["inputs"].items() if k.startswith(("dev", "test", "truecase", "phrase"))}
    data["inputs"]["tuned_baseline"] = str(tutorial["ini"])        # the system as it is, as the tuned baseline
    data["common"]["threads"] = 1
    data["evaluate"]["bootstrap_samples"] = 10
    reg = default_registry()
    wf = load_workflow(out, reg, data=data)
    notes = []
    run_workflow(wf, reg, tmp_path / "work", echo=notes.append)
    manifest = json.loads((tmp_path / "work" / "evaluate" / "stage-manifest.json").read_text())
    assert manifest["params"]["case"] == "truecase"
    assert any(n.startswith("[evaluate] case = 'truecase', the system's: truecasing models are given") for n in notes)
    work = tmp_path / "work" / "evaluate" / "work"
    tok = (work / "test.Baseline.tok").read_text(encoding="utf-8").splitlines()
    detok = (work / "test.Baseline.detok").read_text(encoding="utf-8").splitlines()
    assert sum(s[:1].islower() for s in tok) > 10                   # the system writes truecased output ...
    assert all(d[:1] == detruecase_line(t)[:1] for d, t in zip(detok, tok))     # ... which the Table detruecases


def test_a_folder_and_raw_text_give_a_tuned_rescored_system_and_its_table(built, tmp_path):
    """The newcomer's path end to end, naming only the system's folder and raw dev and test text: init writes
    the workflow, run tunes every configuration and writes Table 1 (settings shrunk to seconds)."""
    from phrase_rescore.app.stages import default_registry
    from phrase_rescore.app.workflow import load_workflow, run_workflow

    out = tmp_path / "mine.toml"
    r, text = _init("--folder", str(built["smt"]), *_raw(built), "--out", str(out))
    assert r.exit_code == 0, text
    data = _toml(out)
    assert data["common"]["backend"] == "embedded"                  # no Moses here: init says which it chose
    data["common"]["threads"] = 1
    data["train"].update(max_steps=20, valid_every=10, model_overrides={"emb_dim": 8, "hidden_dim": 16,
                                                                        "maxout_units": 8, "rank": 8})
    data["train-cslm"].update(max_steps=20, valid_every=10)
    data["tune"].update(max_iterations=1, nbest=10)
    data.setdefault("evaluate", {}).update(bootstrap_samples=10, nbest_size=10)
    reg = default_registry()
    run_workflow(load_workflow(out, reg, data=data), reg, tmp_path / "work", echo=lambda _: None)
    table = (tmp_path / "work" / "evaluate" / "table1.csv").read_text(encoding="utf-8")
    rows = [line.split(",")[0] for line in table.splitlines()[1:]]
    assert rows[:1] == ["Baseline"] and {"+RNN", "+RNN+WP", "+CSLM+RNN"} <= set(rows), rows

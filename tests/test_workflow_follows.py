"""tokenize (and evaluate) prepare dev and test as build-smt prepared the training corpus, or refuse to."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from phrase_rescore.app.stages import default_registry
from phrase_rescore.app.workflow import MANIFEST, Registry, StageDef, load_workflow, run_workflow
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.moses_integration.embedded.tokenizer import TokenizeConfig, Tokenizer

DEMO = Path(__file__).parent.parent / "workflows" / "demo.toml"
TRAIN_DE = ["Wir fahren nach Berlin .", "In Berlin wohnt er seit dem 3. Mai .", "wir sehen Berlin .",
            "Berlin ist groß ."]
TRAIN_FR = ["Nous allons à Berlin .", "Il habite à Berlin depuis le 3 mai .", "nous voyons Berlin .",
            "Berlin est grand ."]
DEV_DE = "Heute sehen wir Berlin am 3. Mai ."


def test_tokenize_and_evaluate_take_build_smts_preprocessing():
    wf = load_workflow(DEMO, default_registry(), ["build-smt.case=truecase", "build-smt.source_lang=de",
                                                  "build-smt.target_lang=it", "build-smt.escape=true"])
    assert wf.params["tokenize"] == {"case": "truecase", "source_lang": "de", "target_lang": "it", "escape": True}
    assert wf.params["evaluate"]["case"] == "truecase" and wf.params["evaluate"]["target_lang"] == "it"
    # the same value set in both sections is no contradiction
    wf = load_workflow(DEMO, default_registry(), ["build-smt.source_lang=de", "tokenize.source_lang=de"])
    assert wf.params["tokenize"]["source_lang"] == "de"


@pytest.mark.parametrize("sets,message", [
    (["build-smt.case=truecase", "tokenize.case=lower"],
     r"demo.toml: \[tokenize\] case = 'lower' contradicts \[build-smt\] case = 'truecase': stage tokenize must "
     r"prepare its data as build-smt did; set the same value, or leave case out of \[tokenize\]"),
    (["build-smt.source_lang=de", "tokenize.source_lang=en"],
     r"\[tokenize\] source_lang = 'en' contradicts \[build-smt\] source_lang = 'de'"),
    (["tokenize.escape=true"], r"\[tokenize\] escape = True contradicts \[build-smt\] escape = False"),
    (["build-smt.case=none", "evaluate.case=lower"], r"\[evaluate\] case = 'lower' contradicts \[build-smt\] case = 'none'"),
])
def test_contradicting_preprocessing_is_refused(sets, message):
    with pytest.raises(PhraseRescoreError, match=message):
        load_workflow(DEMO, default_registry(), sets)


def test_without_build_smt_tokenize_keeps_its_own_parameters():
    wf = load_workflow(None, default_registry(), ["tokenize.source_lang=de", "tokenize.case=none"],
                       data={"workflow": {"stages": ["tokenize"]}})
    assert wf.params["tokenize"] == {"case": "none", "source_lang": "de", "target_lang": "fr", "escape": False}


def _fake_build_smt(ctx):
    """The parts of build-smt's output tokenize reads: truecase models and the manifest with the config."""
    p = ctx.params
    model = ctx.output("smt_model")
    model.mkdir(parents=True, exist_ok=True)
    for side, lang, art in (("src", p["source_lang"], "train_src"), ("tgt", p["target_lang"], "train_tgt")):
        tok = Tokenizer(TokenizeConfig(lang=lang, case=p["case"], escape=p["escape"]))
        tok.train_truecaser([tok.split(s) for s in ctx.input(art).read_text().splitlines()])
        tok.save_truecaser(model / f"truecase-model.{side}")
    with open(model.parent / "manifest.json", "w") as f:
        json.dump({"format": "phrase-rescore/build-smt", "config": p}, f)


def _registry() -> Registry:
    real = default_registry()
    build = real.stages["build-smt"]
    return Registry([StageDef("build-smt", "build-smt", _fake_build_smt, build.params, build.consumes,
                              {"smt_model": "smt/model"}, choices=build.choices, check=build.check),
                     real.stages["tokenize"]])


def _inputs(tmp_path) -> dict:
    files = {"train_src": TRAIN_DE, "train_tgt": TRAIN_FR, "dev_src": [DEV_DE], "dev_ref": ["Aujourd'hui ."],
             "test_src": [DEV_DE]}
    for name, lines in files.items():
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    return {name: str(tmp_path / name) for name in files}


def test_tokenize_stage_tokenizes_dev_and_test_as_build_smt_did(tmp_path):
    reg = _registry()
    data = {"workflow": {"stages": ["build-smt", "tokenize"]}, "common": {"case": "lower"},
            "inputs": _inputs(tmp_path)}
    wf = load_workflow(None, reg, ["build-smt.case=truecase", "build-smt.source_lang=de"], data=data)
    run_workflow(wf, reg, tmp_path / "work", echo=None)
    tok = Tokenizer(TokenizeConfig(lang="de", case="truecase"))
    tok.train_truecaser([tok.split(s) for s in TRAIN_DE])
    expected = " ".join(tok.tokenize(DEV_DE)) + "\n"
    lower_en = " ".join(Tokenizer(TokenizeConfig(lang="en", case="lower")).tokenize(DEV_DE)) + "\n"
    assert expected != lower_en  # German keeps "3." whole; truecasing keeps "Berlin"
    assert (tmp_path / "work" / "tokenize" / "dev.tok.src").read_text() == expected
    assert (tmp_path / "work" / "tokenize" / "test.tok.src").read_text() == expected
    m = json.loads((tmp_path / "work" / "tokenize" / MANIFEST).read_text())
    assert m["params"]["source_lang"] == "de" and m["params"]["case"] == "truecase"


def test_given_smt_model_built_otherwise_is_refused(tmp_path):
    inputs = _inputs(tmp_path)
    build = tmp_path / "my-build"
    (build / "model").mkdir(parents=True)
    (build / "model" / "truecase-model.src").write_text("")
    (build / "manifest.json").write_text(json.dumps({"format": "phrase-rescore/build-smt", "config": {
        "source_lang": "de", "target_lang": "fr", "case": "truecase", "escape": False, "lm_order": 5}}))
    reg = default_registry()
    data = {"workflow": {"stages": ["tokenize"]},
            "inputs": {k: inputs[k] for k in ("dev_src", "dev_ref", "test_src")} | {"smt_model": str(build / "model")}}
    with pytest.raises(PhraseRescoreError, match=r"manifest.json: the SMT system was built with other preprocessing "
                                                 r"than \[tokenize\] asks for: source_lang = 'en' \(the build's: 'de'\), "
                                                 r"case = 'lower' \(the build's: 'truecase'\)"):
        run_workflow(load_workflow(None, reg, data=data), reg, tmp_path / "work", echo=None)

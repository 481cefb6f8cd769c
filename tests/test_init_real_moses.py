"""``init`` on a system trained by the Moses tutorial's recipe with the real tools (MOSES_HOME): tokenizer.perl,
train-truecaser.perl, truecase.perl, clean-corpus-n.perl, lmplz and train-model.perl's own folder and moses.ini.
init finds every part where the recipe left it, and the workflow's tokenize stage prepares dev and test byte for
byte as tokenizer.perl and truecase.perl do."""
from __future__ import annotations

import pytest
from _moses_layouts import DEMO, cli, real_tutorial
from _real_moses import moses_home, needs_moses, run, script

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

pytestmark = needs_moses


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    from phrase_rescore.data.demo_corpus import generate

    root = tmp_path_factory.mktemp("tutorial")
    generate(root / "raw", **DEMO)
    s = real_tutorial(root / "raw", root / "home")
    out = root / "mine.toml"
    raw = root / "raw"
    r = cli("init", "--moses-ini", str(s["ini"]), "--dev-src", str(raw / "dev.en"), "--dev-ref", str(raw / "dev.fr"),
            "--test-src", str(raw / "test.en"), "--test-ref", str(raw / "test.fr"), "--out", str(out))
    assert r.exit_code == 0, r.output
    return {**s, "raw": raw, "out": out, "wf": tomllib.loads(out.read_text(encoding="utf-8"))}


def test_init_finds_what_the_tutorials_recipe_left(system):
    wf, corpus = system["wf"], system["corpus"].resolve()
    assert wf["inputs"]["moses_ini"] == str(system["ini"].resolve())
    assert wf["inputs"]["phrase_table"] == str((system["train"] / "model" / "phrase-table.gz").resolve())
    assert wf["inputs"]["lm"] == str(system["lm"].resolve())
    assert wf["inputs"]["truecase_model_src"] == str(corpus / "truecase-model.en")
    assert wf["inputs"]["train_tgt_tok"] == str(corpus / "train.clean.fr")     # not train.tok.fr nor train.true.fr
    assert wf["tokenize"] == {"source_lang": "en", "target_lang": "fr", "case": "truecase", "escape": True}
    assert wf["common"]["backend"] == "moses" and wf["evaluate"]["case"] == "truecase"
    assert "order 3" in system["out"].read_text()


def test_tokenize_prepares_dev_and_test_as_tokenizer_perl_and_truecase_perl(system, tmp_path):
    from phrase_rescore.app.stages import default_registry
    from phrase_rescore.app.workflow import load_workflow, run_workflow

    data = dict(system["wf"])
    data = {"workflow": {"name": "tok", "stages": ["tokenize"]}, "tokenize": data["tokenize"],
            "inputs": {k: v for k, v in data["inputs"].items() if k.startswith(("dev", "test", "truecase", "phrase"))}}
    reg = default_registry()
    run_workflow(load_workflow(system["out"], reg, data=data), reg, tmp_path / "work", echo=None)
    for raw, lang, ours in (("dev.en", "en", "dev.tok.src"), ("dev.fr", "fr", "dev.tok.ref"),
                            ("test.en", "en", "test.tok.src")):
        tok = run(["perl", script("tokenizer/tokenizer.perl"), "-l", lang, "-q"],
                  stdin=(system["raw"] / raw).read_bytes()).stdout
        true = run(["perl", script("recaser/truecase.perl"), "--model", system["corpus"] / f"truecase-model.{lang}"],
                   stdin=tok).stdout
        assert (tmp_path / "work" / "tokenize" / ours).read_bytes() == true, raw
    assert moses_home() is not None

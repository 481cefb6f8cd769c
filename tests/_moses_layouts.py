"""Tiny trained systems laid out as the Moses tutorial, train-model.perl and EMS leave them, for ``init``'s tests.

- :func:`build_truecased` builds a truecased, escaped system with ``build-smt`` on 300 demo pairs (no Moses).
- :func:`tutorial_layout` copies it into the Moses tutorial's folders: ``corpus/`` with the truecasing
  models and ``train.clean.LANG``, ``lm/``, and ``working/train/`` as train-model.perl leaves it
  (``corpus/LANG.vcb`` and the ``.snt`` of step 1, ``model/`` with the tables and a moses.ini of step 9's
  layout); no Moses program runs.
- :func:`ems_layout`: the same system in an EMS working folder (``steps/1/config.1``, ``model/moses.ini.1``,
  ``training/corpus.1.LANG``, ``truecaser/truecase-model.1.LANG``).
- :func:`real_tutorial` runs the tutorial's recipe with the real Moses (``MOSES_HOME``): tokenizer.perl,
  train-truecaser.perl, truecase.perl, clean-corpus-n.perl, lmplz, and train-model.perl (step 1, then
  steps 4-9 on an eflomal alignment: the build's mgiza may lack its shared libraries).
"""
from __future__ import annotations

import collections
import os
import shutil
from pathlib import Path

DEMO = {"n_train": 300, "n_dev": 30, "n_test": 30, "seed": 5}


def cli(*args: str):
    from click.testing import CliRunner

    from phrase_rescore.app.cli import main

    return CliRunner().invoke(main, ["--quiet", *args])


def build_truecased(root: Path) -> dict[str, Path]:
    """Demo corpus + build-smt (truecase, escaped): ``corpus`` (raw train/dev/test .en/.fr) and ``smt``."""
    from phrase_rescore.data.demo_corpus import generate

    corpus = root / "raw"
    generate(corpus, **DEMO)
    smt = root / "smt"
    r = cli("build-smt", str(corpus / "train.en"), str(corpus / "train.fr"), "--out", str(smt), "--lm-order", "3",
            "--max-phrase-length", "4", "--eflomal-model", "2", "--case", "truecase", "--escape")
    assert r.exit_code == 0, r.output
    return {"raw": corpus, "smt": smt}


def write_vcb(corpus: Path, out: Path) -> None:
    """train-model.perl's get_vocabulary: ``1 UNK 0``, then the words by decreasing count."""
    counts = collections.Counter(w for line in corpus.read_text(encoding="utf-8").splitlines() for w in line.split())
    rows = sorted(counts.items(), key=lambda wc: (f"{wc[1]:07d} {wc[0]}"), reverse=True)
    out.write_text("1\tUNK\t0\n" + "".join(f"{i}\t{w}\t{c}\n" for i, (w, c) in enumerate(rows, start=2)),
                   encoding="utf-8")


def write_snt(src: Path, tgt: Path, src_vcb: Path, tgt_vcb: Path, out: Path) -> None:
    """train-model.perl's numberize_txt_file: for each pair ``1``, the target's word ids, the source's."""
    ids = [{w: i for i, w, _ in (ln.split("\t") for ln in v.read_text(encoding="utf-8").splitlines())}
           for v in (src_vcb, tgt_vcb)]
    s, t = (f.read_text(encoding="utf-8").splitlines() for f in (src, tgt))
    assert len(s) == len(t)
    out.write_text("".join(f"1\n{' '.join(ids[1][w] for w in b.split())}\n{' '.join(ids[0][w] for w in a.split())}\n"
                           for a, b in zip(s, t)))


def _ini_for(smt_ini: Path, table: Path, reordering: Path, lm: Path) -> str:
    text = smt_ini.read_text(encoding="utf-8")
    for old, new in ((smt_ini.parent / "phrase-table.gz", table),
                     (smt_ini.parent / "reordering-table.wbe-msd-bidirectional-fe.gz", reordering),
                     (smt_ini.parent / "lm.arpa", lm)):
        assert str(old) in text, (old, text)
        text = text.replace(str(old), str(new))
    return text


def tutorial_layout(smt: Path, root: Path) -> dict[str, Path]:
    """The build-smt system ``smt`` copied into the tutorial's folders under ``root`` (see the module doc)."""
    corpus, lm, train = root / "corpus", root / "lm", root / "working" / "train"
    for d in (corpus, lm, train / "corpus", train / "model"):
        d.mkdir(parents=True)
    for side, lang in (("src", "en"), ("tgt", "fr")):
        shutil.copy(smt / "model" / f"truecase-model.{side}", corpus / f"truecase-model.{lang}")
        shutil.copy(smt / "corpus" / f"clean.{side}", corpus / f"train.clean.{lang}")
        write_vcb(corpus / f"train.clean.{lang}", train / "corpus" / f"{lang}.vcb")
    vcb = train / "corpus"
    write_snt(corpus / "train.clean.en", corpus / "train.clean.fr", vcb / "en.vcb", vcb / "fr.vcb",
              vcb / "en-fr-int-train.snt")
    write_snt(corpus / "train.clean.fr", corpus / "train.clean.en", vcb / "fr.vcb", vcb / "en.vcb",
              vcb / "fr-en-int-train.snt")
    shutil.copy(smt / "lm.arpa", lm / "train.arpa.fr")
    model = train / "model"
    for name in ("phrase-table.gz", "reordering-table.wbe-msd-bidirectional-fe.gz"):
        shutil.copy(smt / name, model / name)
    ini = model / "moses.ini"
    ini.write_text(_ini_for(smt / "moses.ini", model / "phrase-table.gz",
                            model / "reordering-table.wbe-msd-bidirectional-fe.gz", lm / "train.arpa.fr"),
                   encoding="utf-8")
    return {"root": root, "ini": ini, "train": train, "corpus": corpus, "lm": lm / "train.arpa.fr",
            "table": model / "phrase-table.gz"}


def ems_layout(smt: Path, work: Path) -> dict[str, Path]:
    """The build-smt system ``smt`` in an EMS working folder (version 1)."""
    for d in ("steps/1", "model", "training", "truecaser", "lm"):
        (work / d).mkdir(parents=True)
    (work / "steps" / "1" / "config.1").write_text(
        "[GENERAL]\nworking-dir = " + str(work) + "\ninput-extension = en\noutput-extension = fr\n")
    for side, lang in (("src", "en"), ("tgt", "fr")):
        shutil.copy(smt / "model" / f"truecase-model.{side}", work / "truecaser" / f"truecase-model.1.{lang}")
        shutil.copy(smt / "corpus" / f"clean.{side}", work / "training" / f"corpus.1.{lang}")
    shutil.copy(smt / "lm.arpa", work / "lm" / "lm.1")
    for name, new in (("phrase-table.gz", "phrase-table.1.gz"),
                      ("reordering-table.wbe-msd-bidirectional-fe.gz", "reordering-table.1.wbe-msd-bidirectional-fe.gz")):
        shutil.copy(smt / name, work / "model" / new)
    ini = work / "model" / "moses.ini.1"
    ini.write_text(_ini_for(smt / "moses.ini", work / "model" / "phrase-table.1.gz",
                            work / "model" / "reordering-table.1.wbe-msd-bidirectional-fe.gz", work / "lm" / "lm.1"),
                   encoding="utf-8")
    return {"work": work, "ini": ini}


def real_tutorial(raw: Path, root: Path) -> dict[str, Path]:
    """The Moses tutorial's recipe with the real tools on the raw demo corpus ``raw`` (needs MOSES_HOME)."""
    from _real_moses import moses_home, run, script, tool

    from phrase_rescore.moses_integration.embedded.align import align_eflomal, format_pharaoh, grow_diag_final_and

    corpus, lm, working = root / "corpus", root / "lm", root / "working"
    for d in (corpus, lm, working / "train" / "model"):
        d.mkdir(parents=True)
    for lang in ("en", "fr"):
        tok = run(["perl", script("tokenizer/tokenizer.perl"), "-l", lang, "-q"],
                  stdin=(raw / f"train.{lang}").read_bytes()).stdout
        (corpus / f"train.tok.{lang}").write_bytes(tok)
        run(["perl", script("recaser/train-truecaser.perl"), "--model", corpus / f"truecase-model.{lang}",
             "--corpus", corpus / f"train.tok.{lang}"])
        true = run(["perl", script("recaser/truecase.perl"), "--model", corpus / f"truecase-model.{lang}"],
                   stdin=tok).stdout
        (corpus / f"train.true.{lang}").write_bytes(true)
    run(["perl", script("training/clean-corpus-n.perl"), corpus / "train.true", "en", "fr", corpus / "train.clean",
         "1", "80"])
    arpa = lm / "train.arpa.fr"
    arpa.write_bytes(run([tool("lmplz"), "-o", "3", "--discount_fallback", "-S", "10%", "-T", root],
                         stdin=(corpus / "train.true.fr").read_bytes()).stdout)
    src = [ln.split() for ln in (corpus / "train.clean.en").read_text(encoding="utf-8").splitlines()]
    tgt = [ln.split() for ln in (corpus / "train.clean.fr").read_text(encoding="utf-8").splitlines()]
    fwd, rev = align_eflomal(src, tgt)
    aligned = working / "aligned.grow-diag-final-and"
    aligned.write_text("".join(format_pharaoh(grow_diag_final_and(a, b)) + "\n" for a, b in zip(fwd, rev)))
    env = {**os.environ, "LC_ALL": "C"}
    common = ["perl", script("training/train-model.perl"), "-root-dir", "train", "-corpus", corpus / "train.clean",
              "-f", "en", "-e", "fr", "-external-bin-dir", moses_home() / "tools", "-cores", "1"]
    run(common + ["-first-step", "1", "-last-step", "1"], cwd=working, env=env)
    run(common + ["-first-step", "4", "-last-step", "9", "-alignment", "grow-diag-final-and", "-alignment-file",
                  working / "aligned", "-reordering", "msd-bidirectional-fe", "-lm", f"0:3:{arpa}:8"],
        cwd=working, env=env)
    return {"root": root, "ini": working / "train" / "model" / "moses.ini", "corpus": corpus, "lm": arpa,
            "train": working / "train"}

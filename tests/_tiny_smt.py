"""A tiny real phrase-based system (2-gram ARPA LM, 4-score phrase table, moses.ini) for backend dispatch tests."""
from __future__ import annotations

from pathlib import Path

ARPA = """\\data\\
ngram 1=7
ngram 2=6

\\1-grams:
-1.2\t<unk>
-99\t<s>\t-0.4
-1.0\t</s>
-0.8\tthe\t-0.3
-1.1\thouse\t-0.2
-1.3\tsmall\t-0.2
-1.0\tis\t-0.2

\\2-grams:
-0.2\t<s> the
-0.3\tthe house
-0.4\thouse is
-0.5\tis small
-0.3\tsmall </s>
-0.6\thouse </s>

\\end\\
"""

TABLE = """das ||| the ||| 0.6 0.5 0.7 0.4 ||| 0-0 ||| 3 3 3
haus ||| house ||| 0.8 0.7 0.6 0.5 ||| 0-0 ||| 2 2 2
haus ||| home ||| 0.2 0.3 0.2 0.3 ||| 0-0 ||| 1 1 1
ist ||| is ||| 0.9 0.8 0.9 0.8 ||| 0-0 ||| 4 4 4
klein ||| small ||| 0.7 0.6 0.7 0.6 ||| 0-0 ||| 2 2 2
"""

INI = """[input-factors]
0

[mapping]
0 T 0

[distortion-limit]
6

[feature]
UnknownWordPenalty
WordPenalty
PhrasePenalty
PhraseDictionaryMemory name=TranslationModel0 num-features=4 path={pt} input-factor=0 output-factor=0
Distortion
KENLM name=LM0 factor=0 path={lm} order=2

[weight]
UnknownWordPenalty0= 1
WordPenalty0= -1
PhrasePenalty0= 0.2
TranslationModel0= 0.2 0.2 0.2 0.2
Distortion0= 0.3
LM0= 0.5
"""


def make_tiny_system(d: Path) -> dict[str, Path]:
    """Write lm.arpa, phrase-table, moses.ini and a 3-sentence dev/test set under ``d``."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "lm.arpa").write_text(ARPA)
    (d / "phrase-table").write_text(TABLE)
    (d / "moses.ini").write_text(INI.format(pt=d / "phrase-table", lm=d / "lm.arpa"))
    (d / "src").write_text("das haus ist klein\ndas haus\nhaus ist klein\n")
    (d / "ref").write_text("the house is small\nthe house\nhouse is small\n")
    return {"ini": d / "moses.ini", "src": d / "src", "ref": d / "ref"}


def run_tiny_workflow(d: Path, workflow: str, **more_inputs: Path) -> dict[str, Path]:
    """Run ``workflow`` (TOML without ``[inputs]``) on a tiny system made in ``d``, with ``more_inputs``
    beside the system's files; asserts that the run succeeds. :returns: the run's ``dir``, ``wf`` and ``work``."""
    from click.testing import CliRunner

    from phrase_rescore.app.cli import main

    sys_ = make_tiny_system(d / "smt")
    ins = {"phrase_table": d / "smt" / "phrase-table", "moses_ini": sys_["ini"], "lm": d / "smt" / "lm.arpa",
           "dev_src_tok": sys_["src"], "dev_ref": sys_["ref"], "dev_ref_tok": sys_["ref"],
           "test_src_tok": sys_["src"], "test_ref": sys_["ref"], **more_inputs}
    wf = d / "wf.toml"
    wf.write_text(workflow + "\n[inputs]\n" + "".join(f'{k} = "{v}"\n' for k, v in ins.items()))
    work = d / "work"
    r = CliRunner().invoke(main, ["--quiet", "run", str(wf), "--workdir", str(work)])
    assert r.exit_code == 0, r.output + repr(r.exception)
    return {"dir": d, "wf": wf, "work": work}

"""The Python API (``app/api.py``, ``docs/api.md``): its examples run, its results are typed and equal what the
commands write (score's columns, decode's 1-best and n-best, evaluate's table1.csv), it checks options and
guards files as the commands do, and ``import phrase_rescore`` stays light (no torch, no pandas)."""
from __future__ import annotations

import dataclasses
import doctest
import gzip
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from _tiny_smt import INI  # the tiny system's moses.ini: 4 phrase scores, a 2-gram LM
from click.testing import CliRunner

import phrase_rescore as pr
from phrase_rescore.app import api
from phrase_rescore.app.cli import main
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.moses_integration.moses_values import format_moses_float
from phrase_rescore.pipeline.configs import PrepareConfig, ScoreConfig
from phrase_rescore.pipeline.model.checkpoint import save_checkpoint
from phrase_rescore.pipeline.model.encdec import EncDecConfig, RNNEncoderDecoder
from phrase_rescore.pipeline.score import ScoreSummary
from phrase_rescore.pipeline.vocab import Vocab, Vocabularies

pytestmark = pytest.mark.usefixtures("one_thread")

ROOT = Path(__file__).resolve().parent.parent

# --------------------------------------------------------------------------------------------- a tiny system

TABLE = """house ||| demeure ||| 0.2 0.3 0.2 0.3 ||| 0-0 ||| 1 1 1
house ||| maison ||| 0.8 0.7 0.6 0.5 ||| 0-0 ||| 2 2 2
is ||| est ||| 0.9 0.8 0.9 0.8 ||| 0-0 ||| 4 4 4
small ||| petite ||| 0.7 0.6 0.7 0.6 ||| 0-0 ||| 2 2 2
the ||| la ||| 0.6 0.5 0.7 0.4 ||| 0-0 ||| 3 3 3
the house ||| la maison ||| 0.5 0.5 0.5 0.5 ||| 0-0 1-1 ||| 1 1 1
"""

ARPA = """\\data\\
ngram 1=8
ngram 2=7

\\1-grams:
-1.2\t<unk>
-99\t<s>\t-0.4
-1.0\t</s>
-0.8\tla\t-0.3
-1.1\tmaison\t-0.2
-1.5\tdemeure\t-0.2
-1.0\test\t-0.2
-1.3\tpetite\t-0.2

\\2-grams:
-0.2\t<s> la
-0.3\tla maison
-0.9\tla demeure
-0.4\tmaison est
-0.5\test petite
-0.3\tpetite </s>
-0.6\tmaison </s>

\\end\\
"""

SENTENCES_EN = ["the house is small", "the house", "house is small"]
SENTENCES_FR = ["la maison est petite", "la maison", "maison est petite"]


def make_en_fr_system(d: Path) -> Path:
    """The examples' folder: ``model/`` (phrase-table.gz, lm.arpa, moses.ini) and dev/test ``.en``/``.fr``."""
    (d / "model").mkdir(parents=True)
    with gzip.open(d / "model" / "phrase-table.gz", "wt", encoding="utf-8") as f:
        f.write(TABLE)
    (d / "model" / "lm.arpa").write_text(ARPA, encoding="utf-8")
    (d / "model" / "moses.ini").write_text(INI.format(pt=(d / "model" / "phrase-table.gz").resolve(),
                                                      lm=(d / "model" / "lm.arpa").resolve()), encoding="utf-8")
    for split in ("dev", "test"):
        (d / f"{split}.en").write_text("".join(s + "\n" for s in SENTENCES_EN), encoding="utf-8")
        (d / f"{split}.fr").write_text("".join(s + "\n" for s in SENTENCES_FR), encoding="utf-8")
    return d


@pytest.fixture
def system(tmp_path, monkeypatch):
    """A fresh copy of the examples' folder, the working directory."""
    from phrase_rescore.core import progress

    d = make_en_fr_system(tmp_path / "examples")
    monkeypatch.chdir(d)
    progress.set_quiet(True)
    yield d
    progress.set_quiet(False)


# --------------------------------------------------------------------------------------------- the examples

#: the API's docstring examples, in the pipeline's order: each builds on the files of those before it
EXAMPLE_ORDER = ["read_phrase_table", "write_phrase_table", "prepare", "train", "score_table", "score_pairs",
                 "rewrite_ini", "Decoder", "tune", "evaluate"]
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _run(tests: list[doctest.DocTest]) -> None:
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    for t in tests:
        runner.run(t)
    failed, attempted = runner.summarize(verbose=False)
    assert attempted > 0 and failed == 0, f"{failed} of {attempted} examples failed (the report is above)"


def test_the_docstring_examples_run_in_the_pipelines_order(system):
    found = {t.name.removeprefix(f"{api.__name__}."): t
             for t in doctest.DocTestFinder().find(api, globs={"pr": pr}) if t.examples}
    assert sorted(found) == sorted(EXAMPLE_ORDER)            # a new example is given its place in the order
    _run([found[name] for name in EXAMPLE_ORDER])
    assert (system / "eval" / "table1.csv").is_file()


def test_the_examples_of_docs_api_md_run(system):
    """docs/api.md is one walk-through; it runs as a doctest in the same folder as the docstrings'."""
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    test = doctest.DocTestParser().get_doctest(text, {}, "docs/api.md", str(ROOT / "docs" / "api.md"), 0)
    assert len(test.examples) > 20
    _run([test])


# --------------------------------------------------------------------------------------------- light import

def _modules_after(code: str) -> set[str]:
    res = subprocess.run([sys.executable, "-c", code + "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"],
                         capture_output=True, text=True, check=True)
    return set(json.loads(res.stdout.splitlines()[-1]))


@pytest.mark.parametrize("code", [
    "import phrase_rescore",
    "import phrase_rescore as pr\npr.score_pairs, pr.score_table, pr.prepare, pr.train, pr.evaluate, pr.tune",
    "import phrase_rescore as pr\npr.Decoder, pr.PairScore, pr.Hypothesis, pr.DecoderOutput, pr.PrepareSummary, "
    "pr.TuneResult, pr.rewrite_ini, pr.read_phrase_table, pr.PhraseEntry, pr.PhraseRescoreError",
    "from phrase_rescore import score_pairs, Decoder, evaluate",
    "import phrase_rescore.app.api",
])
def test_the_api_imports_neither_torch_nor_pandas_until_a_function_needs_them(code):
    loaded = {m.split(".")[0] for m in _modules_after(code)}
    assert not loaded & {"torch", "pandas", "click"}, sorted(loaded & {"torch", "pandas", "click"})


def test_a_result_type_of_the_neural_side_loads_torch_when_asked_for():
    """``pr.ScoreSummary`` and ``pr.TrainSummary`` live beside the code that returns them (docs/api.md says so)."""
    assert "torch" in {m.split(".")[0] for m in _modules_after("import phrase_rescore as pr\npr.ScoreSummary")}


def test_the_package_names_are_the_api_names():
    assert pr.__all__ == api.__all__
    for name in pr.__all__:
        assert getattr(pr, name) is getattr(api, name)
        assert name in dir(pr)
    assert pr.ScoreSummary is ScoreSummary and pr.PhraseRescoreError is PhraseRescoreError
    with pytest.raises(AttributeError, match="no attribute 'score_pair'"):
        _ = pr.score_pair
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = api.nothing


# --------------------------------------------------------------------------------------------- score

SRC_WORDS = ["the", "house", "is", "small", "a", "man", "and", "green"]
TGT_WORDS = ["la", "maison", "est", "petite", "un", "homme", "et", "vert"]


def _random_table(n_sources: int = 60, seed: int = 0) -> list[str]:
    """Lines of sources with 1-4 targets, words in and out of the shortlists (``x..``: unknown), sorted."""
    r = random.Random(seed)
    lines = set()
    src_words, tgt_words = SRC_WORDS + ["cat", "dog"], TGT_WORDS + ["chat", "chien"]
    for _ in range(n_sources):
        src = " ".join(r.choice(src_words) for _ in range(r.randint(1, 4)))
        for _ in range(r.randint(1, 4)):
            tgt = " ".join(r.choice(tgt_words) for _ in range(r.randint(1, 5)))
            lines.add(f"{src} ||| {tgt} ||| 0.5 0.25 0.125 1 ||| 0-0 ||| 1 1 1")
    return sorted(lines)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    """An untrained encoder-decoder with a vocabulary (log p is what matters here, not its quality)."""
    torch.manual_seed(5)
    vocabs = Vocabularies(Vocab(["<eos>", "<unk>"] + SRC_WORDS), Vocab(["<eos>", "<unk>"] + TGT_WORDS))
    cfg = EncDecConfig(len(vocabs.source), len(vocabs.target), emb_dim=8, hidden_dim=16, maxout_units=8, rank=6,
                       bias=True, init_std=0.3)
    path = tmp_path_factory.mktemp("model") / "model.pt"
    save_checkpoint(path, RNNEncoderDecoder(cfg), vocabs)
    return path


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("table") / "phrase-table.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in _random_table()))
    return path


def _new_columns(path: Path, n: int) -> list[tuple[str, ...]]:
    """The last ``n`` scores of every line of a scored table, as text."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [tuple(line.split("|||")[2].split()[-n:]) for line in f]


@pytest.mark.parametrize("options", [
    {},                                                         # the paper's columns, in Moses's form
    {"raw_logprob": True},                                      # log p and the count themselves
    {"columns": ("unk", "logprob")},
    {"columns": ("logprob",), "chunk_lines": 7},                # chunks cut through a source's lines
    {"threads": 2, "max_tokens": 8},                            # groups of a few pairs on two workers
    {"rare_words": "unigram"},                                  # rare words share <unk>'s probability
])
def test_score_pairs_gives_the_columns_score_writes(tmp_path, model_path, table, options):
    if options.get("rare_words") == "unigram":
        corpus = tmp_path / "corpus.fr"
        corpus.write_text("la maison chat chat chien\nun homme vert chat\n", encoding="utf-8")
        options = {**options, "rare_counts": str(corpus)}
    out = tmp_path / "scored.gz"
    s = pr.score_table(model_path, table, out, device="cpu", **options)
    cfg = s.config
    entries = list(pr.read_phrase_table(table))
    scores = pr.score_pairs(model_path, entries, device="cpu", **options)
    assert [(p.source, p.target) for p in scores] == [(e.source, e.target) for e in entries]
    assert [p.columns(cfg.columns, raw=cfg.raw_logprob) for p in scores] == _new_columns(out, len(cfg.columns))
    if cfg.raw_logprob:
        assert [float(c[0]) for c in _new_columns(out, 2)] == pytest.approx([p.logprob for p in scores], rel=1e-6)
    assert {p.unknown_words for p in scores} > {0}                 # the table has unknown words
    assert all(p.logprob <= 0 and p.wp == pytest.approx(2.718281828 ** p.unknown_words) for p in scores)
    # the same pairs one at a time: the same values to float32 precision (a pair's float32 sums run in another
    # order when its group of pairs differs, in score as here; docs/api.md says so)
    one = [pr.score_pairs(model_path, [(e.source, e.target)], device="cpu", **options)[0] for e in entries[:8]]
    assert [p.logprob for p in one] == pytest.approx([p.logprob for p in scores[:8]], rel=1e-5)
    assert [p.unknown_words for p in one] == [p.unknown_words for p in scores[:8]]


def test_score_table_returns_a_typed_summary_and_the_cli_prints_it_as_before(tmp_path, model_path, table):
    s = pr.score_table(model_path, table, tmp_path / "a.gz", device="cpu", chunk_lines=50)
    assert isinstance(s, ScoreSummary) and dataclasses.is_dataclass(s)
    n = len(_random_table())
    assert (s.lines, s.pairs, s.rejected, s.resumed_from_line, s.ranks, s.rank) == (n, n, 0, 0, 1, 0)
    assert s.pairs_done == n and s.device == "cpu" and s.out == str(tmp_path / "a.gz") and s.rejects is None
    assert isinstance(s.config, ScoreConfig) and s.config.chunk_lines == 50
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.lines = 0
    d = s.as_dict()
    assert d["config"]["chunk_lines"] == 50 and set(d) == {f.name for f in dataclasses.fields(s)}
    json.dumps(d)
    r = CliRunner().invoke(main, ["--quiet", "score", str(model_path), str(table), "--out", str(tmp_path / "b.gz"),
                                  "--device", "cpu", "--chunk-lines", "50"])
    assert r.exit_code == 0, r.output
    rate = r.output.split("pairs, ")[1].split(" pairs/s")[0]
    assert r.output == f"scored {n} lines ({n} pairs, {rate} pairs/s on cpu): {tmp_path / 'b.gz'}\n"
    assert gzip.open(tmp_path / "a.gz").read() == gzip.open(tmp_path / "b.gz").read()


# --------------------------------------------------------------------------------------------- decode

DECODE_INPUT = SENTENCES_EN + ["", "the dog is small", "small house"]


@pytest.mark.parametrize("options", [{}, {"stack_size": 2}, {"distortion_limit": 0}])
def test_the_decoders_1best_and_nbest_are_decodes(system, options):
    argv = {"stack_size": "-s", "distortion_limit": "-dl"}
    extra = [x for k, v in options.items() for x in (argv[k], str(v))]
    r = CliRunner().invoke(main, ["--quiet", "decode", "-f", "model/moses.ini", "-n-best-list", "nb.txt", "5", *extra],
                           input="".join(s + "\n" for s in DECODE_INPUT))
    assert r.exit_code == 0, r.output
    dec = pr.Decoder.from_ini("model/moses.ini", nbest_distinct=False, **options)   # -n-best-list F 5: not distinct
    outs = dec.translate(DECODE_INPUT, nbest=5)
    assert [o.source for o in outs] == [tuple(s.split()) for s in DECODE_INPUT]
    assert r.output.splitlines() == ["".join(w + " " for w in o.best.words) for o in outs]
    tuneable = [f.name for f in dec.spec.features if f.tuneable]
    lines = []
    for i, o in enumerate(outs):
        assert o.nbest[0] == o.best and len(o.nbest) <= 5
        for h in o.nbest:
            feats = " ".join(f"{name}= " + " ".join(format_moses_float(v) for v in h.features[name])
                             for name in tuneable)
            lines.append(f"{i} ||| {''.join(w + ' ' for w in h.words)} ||| {feats} ||| {format_moses_float(h.total)}")
    assert Path("nb.txt").read_text(encoding="utf-8").splitlines() == lines
    # the total is the weights times the features
    w = dec.weights
    for o in outs:
        assert o.best.total == pytest.approx(sum(a * b for n in w for a, b in zip(w[n], o.best.features[n])))


def test_the_decoder_filtered_to_its_sentences_and_with_weights_overwritten(system):
    full = pr.Decoder.from_ini("model/moses.ini").translate(SENTENCES_EN, nbest=3)
    kept = pr.Decoder.from_ini("model/moses.ini", sentences=SENTENCES_EN).translate(SENTENCES_EN, nbest=3)
    assert kept == full
    dec = pr.Decoder.from_ini("model/moses.ini", weight_overwrite="LM0= 0.1 WordPenalty0= -0.5")
    assert dec.weights["LM0"] == (0.1,) and dec.weights["WordPenalty0"] == (-0.5,)
    assert [o.text for o in dec.translate([["the", "house"], "the house"])] == ["la maison", "la maison"]
    assert pr.Decoder.from_ini("model/moses.ini").translate("the house")[0].text == "la maison"   # a str: one


# --------------------------------------------------------------------------------------------- evaluate

def test_evaluates_dataframe_holds_the_numbers_of_the_table1_csv_the_command_writes(system):
    args = ["--quiet", "evaluate", "--system", "baseline=model/moses.ini", "--system", "again=model/moses.ini",
            "--test-src", "test.en", "--test-ref", "test.fr", "--dev-src", "dev.en", "--dev-ref", "dev.fr",
            "--workdir", "cli", "--backend", "embedded", "--target-lang", "fr", "--bootstrap-samples", "100"]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    df = pr.evaluate({"baseline": "model/moses.ini", "again": "model/moses.ini"}, "test.en", "test.fr", "api",
                     dev_src="dev.en", dev_ref="dev.fr", backend="embedded", target_lang="fr", bootstrap_samples=100)
    assert isinstance(df, pd.DataFrame)
    csv = pd.read_csv("cli/table1.csv")
    assert list(df.columns) == list(csv.columns) and list(df.configuration) == ["baseline", "again"]
    numbers = [c for c in csv.columns if c.endswith(("_bleu", "_delta", "_p", "_chrf"))]
    assert len(numbers) == 8
    pd.testing.assert_frame_equal(df[numbers].astype(float), csv[numbers].astype(float))
    assert df.attrs["csv"] == "api/table1.csv"
    assert Path("api/table1.csv").read_bytes() == Path("cli/table1.csv").read_bytes()


# --------------------------------------------------------------------------------------------- checks

@pytest.mark.parametrize("call, error, fragment", [
    (lambda: pr.train("pairs", "rnn", max_steps=0), PhraseRescoreError, "max_steps = 0: expected"),
    (lambda: pr.train("pairs", "rnn", max_step=10), TypeError, "unknown option(s) max_step"),
    (lambda: pr.prepare("model/phrase-table.gz", "pairs", config=ScoreConfig()), TypeError, "a PrepareConfig"),
    (lambda: pr.prepare("model/phrase-table.gz", "pairs", PrepareConfig(), vocab_size=-1), PhraseRescoreError,
     "vocab_size = -1"),
    (lambda: pr.score_table("m.pt", "model/phrase-table.gz", "o.gz", precision="fp8"), PhraseRescoreError,
     "precision = 'fp8': expected one of"),
    (lambda: pr.score_pairs("m.pt", [("the", "")]), PhraseRescoreError, "pair 1: empty target phrase"),
    (lambda: pr.score_pairs("m.pt", ["the house"]), TypeError, "pair 1: expected a (source, target) tuple"),
    (lambda: pr.score_pairs("m.pt", [("the", "la")]), PhraseRescoreError, "model checkpoint not found"),
    (lambda: pr.write_phrase_table("t.gz", [("a", "b", (-0.5,))]), PhraseRescoreError, "entry 1: score '-0.5' is "
     "negative"),
    (lambda: pr.write_phrase_table("t.gz", [("a ||| b", "c", (0.5,))]), PhraseRescoreError, "without '|||'"),
    (lambda: pr.write_phrase_table("t.gz", ["a b c"]), TypeError, "entry 1: expected a PhraseEntry"),
    (lambda: pr.Decoder.from_ini("model/moses.ini").translate(["the"], nbest=-1), PhraseRescoreError,
     "nbest must be at least 0"),
    (lambda: pr.Decoder.from_ini("model/moses.ini", stack=5), TypeError, "unknown option(s) stack"),
    (lambda: pr.rewrite_ini("model/moses.ini", "model/phrase-table.gz", "model/moses.ini"), PhraseRescoreError,
     "out would overwrite the input old_ini"),
    (lambda: pr.tune("model/moses.ini", "dev.en", "dev.fr", "model"), PhraseRescoreError,
     "the output folder workdir holds the input"),
    (lambda: pr.evaluate({"b": "model/moses.ini"}, "test.en", "test.fr", "e", models={"x": "m.pt"}),
     PhraseRescoreError, "models for unknown configuration(s): x"),
])
def test_options_and_paths_are_checked_as_the_commands_check_them(system, call, error, fragment):
    with pytest.raises(error) as e:
        call()
    assert fragment in str(e.value)


def test_an_output_folder_of_the_users_is_refused_and_a_failed_call_leaves_no_folder(system):
    Path("mine").mkdir()
    Path("mine/notes.txt").write_text("mine")
    with pytest.raises(PhraseRescoreError, match="out: this folder already holds files phrase-rescore did not write"):
        pr.prepare("model/phrase-table.gz", "mine")
    assert Path("mine/notes.txt").read_text() == "mine"
    with pytest.raises(PhraseRescoreError):
        pr.prepare("missing.gz", "new/pairs")
    assert not Path("new").exists()
    s = pr.prepare("model/phrase-table.gz", "pairs")            # claimed as prepare's: the command may rerun it
    r = CliRunner().invoke(main, ["--quiet", "prepare", "model/phrase-table.gz", "--out", "pairs"])
    assert r.exit_code == 0 and f"{s.unique_pairs} unique pairs" in r.output, r.output


@pytest.mark.parametrize("result", [
    api.PairScore("a", "b", -1.0, 0),
    api.Hypothesis(("a",), -1.0, {"LM0": (-1.0,)}),
    api.DecoderOutput(("a",), api.Hypothesis(("b",), 0.0, {})),
    api.TuneResult(Path("x.ini"), {}),
    api.PrepareSummary(Path("p"), 1, 0, 1, 1, 0, 1, 0, 3, 3, "corpus"),
])
def test_results_are_frozen_dataclasses(result):
    assert dataclasses.is_dataclass(result)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(result, dataclasses.fields(result)[0].name, None)


def test_the_train_summary_is_trains_own(system):
    pr.prepare("model/phrase-table.gz", "pairs", PrepareConfig(valid_fraction=0.0))
    t = pr.train("pairs", "rnn", pr.TrainConfig(max_steps=4, valid_every=2, device="cpu",
                                                model_overrides={"hidden_dim": 8, "emb_dim": 4, "maxout_units": 4,
                                                                 "rank": 4}))
    assert isinstance(t, pr.TrainSummary) and t.steps == 4 and Path(t.model) == Path("rnn/model.pt")
    shutil.rmtree("rnn")

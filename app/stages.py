"""The pipeline's real stages for the workflow runner, each a thin adapter over one library function.

Artifacts (what the stages pass to each other; any of them can instead be given in ``[inputs]``):

=================  =========================================================================
train_src/tgt      raw training corpus (source = the phrase table's first field, e.g. English)
dev_src, dev_ref   raw dev set; test_src, test_ref: raw test set (references stay raw for BLEU)
phrase_table       the Moses phrase table to rescore; ``lm``: its ARPA LM; ``moses_ini``: its moses.ini
train_src_tok/tgt  the tokenized, cleaned training corpus (counts the vocabulary when present)
smt_model          build-smt's model directory (truecase models, alignments, lexical tables)
dev_src_tok, ...   dev/test tokenized and cased as the system's training data (decoder input)
pairs              prepare's directory: unique phrase pairs as Parquet + vocab.json
model              the trained RNN Encoder-Decoder checkpoint (model.pt)
table_rnn          phrase_table + the log p(f|e) column; ``table_rnn_wp``: + the unknown-word column
ini_rnn, ini_rnn_wp  moses.ini pointed at those tables, with one or two more initial weights
tuned_*            moses.ini tuned on the dev set (baseline, rnn, rnn_wp)
report_md/csv      the Table-1 report: dev and test BLEU per configuration, Δ, p-values, hashes
=================  =========================================================================

The parameter names and defaults of a stage are those of its library config dataclass, so a workflow
file's ``[build-smt]``/``[prepare]``/``[train]``/``[score]`` sections take exactly the options of the
matching ``phrase-rescore`` command.
"""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.fileio import atomic_open, open_text_read

from .workflow import Registry, StageContext, StageDef

CONFIGURATIONS = {  # configuration -> (display name, its ini artifact, its table artifact, tuned artifact)
    "baseline": ("Baseline", "moses_ini", "phrase_table", "tuned_baseline"),
    "rnn": ("+RNN", "ini_rnn", "table_rnn", "tuned_rnn"),
    "rnn-wp": ("+RNN+WP", "ini_rnn_wp", "table_rnn_wp", "tuned_rnn_wp"),
}


def _defaults(cls, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    """A config dataclass's fields and defaults as stage parameters (None defaults become "" or are kept)."""
    out = {}
    for f in dataclasses.fields(cls):
        if f.name in drop:
            continue
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            out[f.name] = f.default_factory()  # type: ignore[misc]
    return out


def _config(cls, params: dict, **fixed):
    """Build ``cls`` from the stage parameters it has (others belong to the adapter), plus ``fixed``."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in params.items() if k in names}, **fixed)


# ----------------------------------------------------------------------------- parameter checks
# Each stage's ``check`` runs before any stage does (the runner puts "[section] " in front of the message).

def _at_least(p: dict, lo: float, *keys: str, none_ok: bool = False) -> None:
    """Each of ``keys`` is a number >= ``lo`` (or None, with ``none_ok``)."""
    for k in keys:
        v = p[k]
        if v is None and none_ok:
            continue
        if v is None or v < lo:
            raise PhraseRescoreError(f"{k} = {v!r}: expected at least {lo}" + (" (or leave it unset)" if none_ok else ""))


def _above(p: dict, lo: float, *keys: str, none_ok: bool = False) -> None:
    """Each of ``keys`` is a number > ``lo`` (or None, with ``none_ok``)."""
    for k in keys:
        v = p[k]
        if v is None and none_ok:
            continue
        if v is None or v <= lo:
            raise PhraseRescoreError(f"{k} = {v!r}: expected a number above {lo}"
                                     + (" (or leave it unset)" if none_ok else ""))


def _check_device(p: dict) -> None:
    from phrase_rescore.pipeline.device import resolve_device

    try:
        resolve_device(p["device"])
    except PhraseRescoreError as e:
        raise PhraseRescoreError(f"device = {p['device']!r}: {e.message}") from None


def _check_demo_data(p: dict) -> None:
    _at_least(p, 1, "train", "dev", "test")
    if not 0.0 <= p["noise"] <= 1.0:
        raise PhraseRescoreError(f"noise = {p['noise']!r}: expected a share between 0 and 1")


def _check_build_smt(p: dict) -> None:
    from phrase_rescore.moses_integration.embedded.build import BuildConfig

    _at_least(p, 1, "max_sentence_length", "max_phrase_length", "lm_order", "eflomal_samplers")
    _above(p, 0, "max_length_ratio")
    _check_compresslevel(p)
    _config(BuildConfig, p)


def _check_compresslevel(p: dict) -> None:
    if not 0 <= p["compresslevel"] <= 9:
        raise PhraseRescoreError(f"compresslevel = {p['compresslevel']!r}: expected 0 to 9")


def _check_tokenize(p: dict) -> None:
    from phrase_rescore.moses_integration.embedded.tokenizer import TokenizeConfig

    TokenizeConfig(lang=p["source_lang"], case=p["case"], escape=p["escape"])


def _check_prepare(p: dict) -> None:
    _at_least(p, 1, "vocab_size", "partition_bytes", "buffer_pairs")
    if not 0.0 <= p["valid_fraction"] < 1.0:
        raise PhraseRescoreError(f"valid_fraction = {p['valid_fraction']!r}: expected at least 0 and below 1")


def _check_train(p: dict) -> None:
    from phrase_rescore.pipeline.model.encdec import EncDecConfig

    _at_least(p, 1, "batch_size", "max_steps", "valid_every", "valid_batch_tokens")
    _at_least(p, 1, "patience", "valid_max_pairs", none_ok=True)
    _above(p, 0, "lr", "eps", "clip_norm")
    _above(p, 0, "init_std", "time_budget_s", none_ok=True)
    if not 0.0 <= p["rho"] <= 1.0:
        raise PhraseRescoreError(f"rho = {p['rho']!r}: expected a number from 0 to 1")
    valid = sorted({f.name for f in dataclasses.fields(EncDecConfig)}
                   - {"src_vocab_size", "tgt_vocab_size", "gru", "bias", "init_std"})
    unknown = sorted(set(p["model_overrides"]) - set(valid))
    if unknown:
        raise PhraseRescoreError(f"model_overrides: unknown key(s) {', '.join(unknown)}; valid keys: {', '.join(valid)}")
    try:
        EncDecConfig.preset(p["preset"], 2, 2, **p["model_overrides"])
    except (TypeError, ValueError) as e:
        raise PhraseRescoreError(f"model_overrides = {p['model_overrides']!r}: {e}") from None
    _check_device(p)


def _check_score(p: dict) -> None:
    from phrase_rescore.pipeline.score import ScoreConfig

    _at_least(p, 1, "threads", none_ok=True)
    _check_compresslevel(p)
    _config(ScoreConfig, p, columns=("logprob", "unk"))
    _check_device(p)


def _check_tune(p: dict) -> None:
    _at_least(p, 1, "nbest", "max_iterations", "threads")
    if p["backend"] == "embedded":
        moses_only = [k for k, on in (("decoder_flags", bool(p["decoder_flags"].strip())),
                                      ("batch_mira", p["batch_mira"])) if on]
        if moses_only:
            raise PhraseRescoreError(f"{' and '.join(moses_only)} only apply to backend = \"moses\" (the embedded "
                                     "backend always runs MERT, seeded by seed)")


def _check_evaluate(p: dict) -> None:
    _at_least(p, 1, "bootstrap_samples", "seed", "threads")


# ----------------------------------------------------------------------------- demo data

DEMO_FILES = {"train_src": "corpus/train.en", "train_tgt": "corpus/train.fr", "dev_src": "corpus/dev.en",
              "dev_ref": "corpus/dev.fr", "test_src": "corpus/test.en", "test_ref": "corpus/test.fr"}


def run_demo_data(ctx: StageContext) -> dict:
    from phrase_rescore.data.demo_corpus import generate

    p = ctx.params
    paths = generate(ctx.dir / "corpus", n_train=p["train"], n_dev=p["dev"], n_test=p["test"], seed=p["seed"],
                     noise_rate=p["noise"])
    return json.loads(paths["manifest"].read_text(encoding="utf-8"))["noise_counts"]


# ----------------------------------------------------------------------------- build-smt and tokenize

def _build_params() -> dict:
    from phrase_rescore.moses_integration.embedded.build import BuildConfig
    return _defaults(BuildConfig)


def run_build_smt(ctx: StageContext) -> dict:
    from phrase_rescore.moses_integration.embedded.build import BuildConfig, build_smt

    res = build_smt(ctx.input("train_src"), ctx.input("train_tgt"), ctx.dir / "smt", _config(BuildConfig, ctx.params))
    return {"phrase_table": res.stats.get("phrase_table"), "timings": res.timings, "notes": res.notes}


TOKENIZE_PARAMS = {"source_lang": "en", "target_lang": "fr", "case": "lower", "escape": False}


def _tokenize_file(src: Path, out: Path, lang: str, params: dict, truecase_model: Path | None) -> int:
    from phrase_rescore.moses_integration.embedded.tokenizer import TokenizeConfig, Tokenizer

    tc = Tokenizer.load_truecaser(truecase_model) if params["case"] == "truecase" else None
    tok = Tokenizer(TokenizeConfig(lang=lang, case=params["case"], escape=params["escape"]), truecaser=tc)
    n = 0
    with open_text_read(src) as f, atomic_open(out, "w") as w:
        for line in f:
            w.write(" ".join(tok.tokenize(line.rstrip("\r\n"))).replace("|", "") + "\n")
            n += 1
    return n


def _check_same_preprocessing(params: dict, build_manifest: Path) -> None:
    """Refuse to tokenize dev and test otherwise than the build recorded in ``build_manifest`` (when
    there is one) prepared its training corpus."""
    try:
        m = json.loads(build_manifest.read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError, ValueError, UnicodeDecodeError):
        return
    if not isinstance(m, dict) or m.get("format") != "phrase-rescore/build-smt" or not isinstance(m.get("config"), dict):
        return
    differ = [f"{k} = {params[k]!r} (the build's: {m['config'][k]!r})" for k in TOKENIZE_PARAMS
              if k in m["config"] and m["config"][k] != params[k]]
    if differ:
        raise PhraseRescoreError("the SMT system was built with other preprocessing than [tokenize] asks for: "
                                 + ", ".join(differ) + "; set [tokenize] as the build was", build_manifest)


def run_tokenize(ctx: StageContext) -> dict:
    p = ctx.params
    model = ctx.input("smt_model")
    if p["case"] == "truecase" and model is None:
        raise PhraseRescoreError("tokenize with case = \"truecase\" needs build-smt's truecase models "
                                 "(artifact smt_model); add build-smt or give smt_model in [inputs]")
    tc = {"src": None if model is None else model / "truecase-model.src",
          "tgt": None if model is None else model / "truecase-model.tgt"}
    if model is not None:
        _check_same_preprocessing(p, model.parent / "manifest.json")
    counts = {}
    for art, out, side in (("dev_src", "dev_src_tok", "src"), ("dev_ref", "dev_ref_tok", "tgt"),
                           ("test_src", "test_src_tok", "src")):
        lang = p["source_lang"] if side == "src" else p["target_lang"]
        counts[out] = _tokenize_file(ctx.input(art), ctx.output(out), lang, p, tc[side])
    return counts


# ----------------------------------------------------------------------------- prepare, train, score

def _prepare_params() -> dict:
    from phrase_rescore.pipeline.prepare import PrepareConfig
    return {**_defaults(PrepareConfig, drop=("src_corpus", "tgt_corpus")), "vocab_from_corpus": True}


def run_prepare(ctx: StageContext) -> dict:
    from phrase_rescore.pipeline.prepare import PrepareConfig, prepare

    src, tgt = ctx.input("train_src_tok"), ctx.input("train_tgt_tok")
    use_corpus = ctx.params["vocab_from_corpus"] and src is not None and tgt is not None
    cfg = _config(PrepareConfig, ctx.params, src_corpus=os.fspath(src) if use_corpus else None,
                  tgt_corpus=os.fspath(tgt) if use_corpus else None)
    m = prepare(ctx.input("phrase_table"), ctx.output("pairs"), cfg)
    return {k: m.get(k) for k in ("lines", "unique_pairs", "train_pairs", "valid_pairs", "vocab_source",
                                  "vocab_target", "vocab_counted_from")}


def _train_params() -> dict:
    from phrase_rescore.pipeline.train import TrainConfig
    return _defaults(TrainConfig, drop=("resume",))


def run_train(ctx: StageContext) -> dict:
    from phrase_rescore.pipeline.train import TrainConfig, train

    out = ctx.output("model").parent
    resume = ctx.resume and (out / "last.pt").exists()
    s = train(ctx.input("pairs"), out, _config(TrainConfig, ctx.params, resume=resume))
    if Path(s["model"]).resolve() != ctx.output("model").resolve():
        raise PhraseRescoreError(f"training wrote its model to {s['model']}, expected {ctx.output('model')}")
    return {k: s.get(k) for k in ("steps", "stop_reason", "best_valid_ppl", "unigram_valid_ppl", "pairs_per_s",
                                  "device")}


def _score_params() -> dict:
    from phrase_rescore.pipeline.score import ScoreConfig
    # columns: fixed by the configurations; raw_logprob: Moses needs exp() values; rejects/vocab: paths
    return _defaults(ScoreConfig, drop=("columns", "raw_logprob", "rejects", "vocab", "restart"))


def run_score(ctx: StageContext) -> dict:
    """Score once with both columns (+RNN+WP), then derive the +RNN table from it without the model."""
    from phrase_rescore.pipeline.score import ScoreConfig, score_table

    cfg = _config(ScoreConfig, ctx.params, columns=("logprob", "unk"), restart=not ctx.resume)
    res = score_table(ctx.input("model"), ctx.input("phrase_table"), ctx.output("table_rnn_wp"), cfg)
    n = drop_last_column(ctx.input("phrase_table"), ctx.output("table_rnn_wp"), ctx.output("table_rnn"),
                         compresslevel=ctx.params.get("compresslevel", 6))
    return {"lines": n, "pairs_per_s": res.get("pairs_per_s"), "seconds": res.get("seconds"),
            "rejected": res.get("rejected"), "device": res.get("device"), "workers": res.get("workers"),
            "matmul": res.get("matmul")}


def drop_last_column(original: Path, rescored: Path, out: Path, compresslevel: int = 6) -> int:
    """Write ``original`` with only the first of the two columns ``rescored`` appended to it.

    Every line of ``rescored`` must be the same line of ``original`` with exactly two score columns
    appended (as ``score --columns logprob,unk`` writes it); the log p column's text is copied as it
    is, so the output is byte for byte what ``score --columns logprob`` would write.
    :returns: the number of lines.
    """
    import itertools

    from phrase_rescore.core.fileio import atomic_path, gzip_writer, open_binary_read, wants_gzip
    from phrase_rescore.moses_integration.phrase_table import FIELD_SEP, append_columns

    n = 0
    with open_binary_read(original) as fo, open_binary_read(rescored) as fr, atomic_path(out) as tmp, \
            open(tmp, "wb") as raw:
        # gzip without a name or time in its header, so the same lines always give the same bytes
        # (the workflow runner compares outputs by hash)
        w = gzip_writer(raw, compresslevel) if wants_gzip(out) else raw
        for n, (a, b) in enumerate(itertools.zip_longest(fo, fr), start=1):
            if a is None or b is None:
                raise PhraseRescoreError(f"has {'fewer' if a is None else 'more'} lines than the rescored table "
                                         f"{rescored}; expected the same number", original, n)
            nl = b"\n" if a.endswith(b"\n") else b""
            a, b = a[:len(a) - len(nl)], b.rstrip(b"\n")
            if a == b and append_columns(a, b"0") == a:  # no scores field (a line kept by --on-error keep)
                w.write(a + nl)
                continue
            fields = b.split(FIELD_SEP)
            cols = fields[2].split() if len(fields) >= 3 else []
            if len(cols) < 2 or append_columns(a, cols[-2] + b" " + cols[-1]) != b:
                raise PhraseRescoreError(f"is not line {n} of {original} with two score columns appended",
                                         rescored, n)
            w.write(append_columns(a, cols[-2]) + nl)
        if w is not raw:
            w.close()
    return n


# ----------------------------------------------------------------------------- moses-ini, tune, evaluate

MOSES_INI_PARAMS = {  # initial weights of the added columns (tuning replaces them); the phrase dictionary to repoint
    "rnn": {"rnn_weight": 0.2, "feature": ""},
    "rnn-wp": {"rnn_weight": 0.2, "wp_weight": -0.2, "feature": ""},
}


def _run_moses_ini(config: str):
    def run(ctx: StageContext) -> dict:
        from phrase_rescore.moses_integration.rewrite import RewriteConfig, rewrite_moses_ini

        _, ini_art, table_art, _ = CONFIGURATIONS[config]
        p = ctx.params
        weights = (p["rnn_weight"],) if config == "rnn" else (p["rnn_weight"], p["wp_weight"])
        res = rewrite_moses_ini(RewriteConfig(old_ini=ctx.input("moses_ini"), table=ctx.input(table_art),
                                              out=ctx.output(ini_art), feature=p["feature"] or None,
                                              weights=weights))
        return {"summary": res.summary()}
    return run


TUNE_PARAMS = {"backend": "embedded", "nbest": 100, "max_iterations": 25, "threads": 1, "seed": 1,
               "return_best_dev": False, "decoder_flags": "", "batch_mira": False, "predictable_seeds": False,
               "moses_home": ""}


def _run_tune(config: str):
    def run(ctx: StageContext) -> dict:
        from phrase_rescore.moses_integration.tuning import TuneConfig, tune

        _, ini_art, _, tuned_art = CONFIGURATIONS[config]
        p = ctx.params
        cfg = _config(TuneConfig, p, ini=ctx.input(ini_art), dev_src=ctx.input("dev_src_tok"),
                      dev_ref=ctx.input("dev_ref_tok"), workdir=ctx.dir / "work", out=ctx.output(tuned_art))
        cfg.moses_home = p["moses_home"] or None
        tuned = tune(cfg)
        log = ctx.dir / "work" / "tune-log.csv"
        return {"tuned_ini": os.fspath(tuned), "log": os.fspath(log) if log.exists() else None}
    return run


EVALUATE_PARAMS = {"backend": "embedded", "case": "lower", "target_lang": "fr", "bootstrap_samples": 1000,
                   "seed": 12345, "threads": 1, "moses_home": ""}


def _lowercased(src: Path, out: Path) -> Path:
    with open_text_read(src) as f, atomic_open(out, "w") as w:
        for line in f:
            w.write(line.rstrip("\r\n").lower() + "\n")
    return out


def run_evaluate(ctx: StageContext) -> dict:
    """Decode dev and test with each tuned configuration and write Table 1.

    BLEU is on detokenized output against the raw references; when the system is lowercased
    (``case = "lower"``) the references are lowercased too, so the scores are case-insensitive
    (as ``sacrebleu -lc``), and the report says so.
    """
    from phrase_rescore.moses_integration.report import EvaluateConfig, SystemSpec, evaluate

    p = ctx.params
    systems = []
    for config, (label, _, _, tuned_art) in CONFIGURATIONS.items():
        ini = ctx.input(tuned_art)
        if ini is not None:
            systems.append(SystemSpec(label, Path(ini), None if config == "baseline" else ctx.input("model")))
    if not systems or systems[0].name != "Baseline":
        raise PhraseRescoreError("evaluate needs the tuned baseline (tune-baseline, or tuned_baseline in [inputs])")
    refs = {"test": ctx.input("test_ref"), "dev": ctx.input("dev_ref")}
    if p["case"] == "lower":
        refs = {k: None if v is None else _lowercased(v, ctx.dir / "refs" / f"{k}.ref.lc") for k, v in refs.items()}
    dev_src = ctx.input("dev_src_tok")
    cfg = EvaluateConfig(systems=systems, test_src=ctx.input("test_src_tok"), test_ref=refs["test"],
                         workdir=ctx.dir / "work", dev_src=dev_src if refs["dev"] is not None else None,
                         dev_ref=refs["dev"] if dev_src is not None else None, backend=p["backend"],
                         moses_home=p["moses_home"] or None, detok_lang=p["target_lang"] or None,
                         bootstrap_samples=p["bootstrap_samples"], seed=p["seed"], threads=p["threads"],
                         out_md=ctx.output("report_md"), out_csv=ctx.output("report_csv"))
    df = evaluate(cfg)
    if p["case"] == "lower":
        text = ctx.output("report_md").read_text(encoding="utf-8")
        with atomic_open(ctx.output("report_md"), "w") as f:
            f.write(text + "\nBLEU and chrF are case-insensitive: the system is lowercased, so are the references.\n")
    cols = [c for c in ("configuration", "dev_bleu", "dev_p", "test_bleu", "test_p") if c in df.columns]
    return {"table": df[cols].to_dict(orient="records")}


# ----------------------------------------------------------------------------- the registry

def default_registry() -> Registry:
    """Every real stage, in pipeline order."""
    from phrase_rescore.moses_integration.backend import BACKENDS
    from phrase_rescore.moses_integration.embedded.tokenizer import CASES

    from phrase_rescore.pipeline.model.encdec import EncDecConfig
    from phrase_rescore.pipeline.model.gru import RESET_FORMS
    from phrase_rescore.moses_integration.phrase_table import ON_ERROR_CHOICES
    from phrase_rescore.pipeline.scoring.fast import MATMULS, PRECISIONS

    reg = Registry()
    reg.add(StageDef("demo-data", "demo-data", run_demo_data,
                     {"train": 10000, "dev": 500, "test": 500, "seed": 1, "noise": 0.04},
                     produces=DEMO_FILES, doc="generate the English-French demo corpus", check=_check_demo_data))
    reg.add(StageDef("build-smt", "build-smt", run_build_smt, _build_params(),
                     consumes=("train_src", "train_tgt"),
                     produces={"phrase_table": "smt/phrase-table.gz", "lm": "smt/lm.arpa", "moses_ini": "smt/moses.ini",
                               "train_src_tok": "smt/corpus/clean.src", "train_tgt_tok": "smt/corpus/clean.tgt",
                               "smt_model": "smt/model"},
                     doc="phrase table, LM and moses.ini from the training corpus (embedded toolkit)",
                     choices={"case": CASES, "eflomal_model": (1, 2, 3)}, check=_check_build_smt))
    # dev and test must be tokenized, cased and escaped as build-smt prepared the training corpus
    reg.add(StageDef("tokenize", "tokenize", run_tokenize, TOKENIZE_PARAMS,
                     consumes=("dev_src", "dev_ref", "test_src", "smt_model"), optional=frozenset({"smt_model"}),
                     produces={"dev_src_tok": "dev.tok.src", "dev_ref_tok": "dev.tok.ref",
                               "test_src_tok": "test.tok.src"},
                     doc="tokenize and case dev/test as the training corpus",
                     choices={"case": CASES}, check=_check_tokenize, follows={"build-smt": tuple(TOKENIZE_PARAMS)}))
    reg.add(StageDef("prepare", "prepare", run_prepare, _prepare_params(),
                     consumes=("phrase_table", "train_src_tok", "train_tgt_tok"),
                     optional=frozenset({"train_src_tok", "train_tgt_tok"}), produces={"pairs": "pairs"},
                     doc="unique phrase pairs, vocabulary and validation split",
                     choices={"on_error": ON_ERROR_CHOICES}, check=_check_prepare))
    reg.add(StageDef("train", "train", run_train, _train_params(), consumes=("pairs",),
                     produces={"model": "model/model.pt"}, doc="train the RNN Encoder-Decoder",
                     choices={"preset": tuple(EncDecConfig.PRESETS), "gru": RESET_FORMS}, check=_check_train,
                     resumable=True))
    reg.add(StageDef("score", "score", run_score, _score_params(), consumes=("model", "phrase_table"),
                     produces={"table_rnn": "phrase-table.rnn.gz", "table_rnn_wp": "phrase-table.rnn-wp.gz"},
                     doc="append log p(f|e) (and the unknown-word count) to the phrase table",
                     choices={"on_error": ON_ERROR_CHOICES, "matmul": ("auto",) + tuple(MATMULS),
                              "precision": tuple(PRECISIONS)}, check=_check_score, resumable=True))
    for config in ("rnn", "rnn-wp"):
        _, ini_art, table_art, _ = CONFIGURATIONS[config]
        reg.add(StageDef(f"moses-ini-{config}", "moses-ini", _run_moses_ini(config), MOSES_INI_PARAMS[config],
                         consumes=("moses_ini", table_art), produces={ini_art: "moses.ini"},
                         doc=f"moses.ini for {CONFIGURATIONS[config][0]}"))
    for config, (label, ini_art, table_art, tuned_art) in CONFIGURATIONS.items():
        # the table and LM are consumed too: the ini names them by path, so only their hashes show a change
        reg.add(StageDef(f"tune-{config}", "tune", _run_tune(config), TUNE_PARAMS,
                         consumes=(ini_art, table_art, "lm", "dev_src_tok", "dev_ref_tok"), optional=frozenset({"lm"}),
                         produces={tuned_art: "moses.ini"}, doc=f"tune {label} on the dev set",
                         choices={"backend": BACKENDS}, check=_check_tune))
    reg.add(StageDef("evaluate", "evaluate", run_evaluate, EVALUATE_PARAMS,
                     consumes=("tuned_baseline", "tuned_rnn", "tuned_rnn_wp", "phrase_table", "table_rnn",
                               "table_rnn_wp", "lm", "model", "test_src_tok", "test_ref", "dev_src_tok", "dev_ref"),
                     optional=frozenset({"tuned_rnn", "tuned_rnn_wp", "table_rnn", "table_rnn_wp", "lm", "model",
                                         "dev_src_tok", "dev_ref"}),
                     produces={"report_md": "table1.md", "report_csv": "table1.csv"},
                     doc="decode dev/test with each tuned configuration; Table 1 with BLEU and p-values",
                     choices={"backend": BACKENDS, "case": CASES}, check=_check_evaluate,
                     # references are lowercased and output detokenized as the system was built
                     follows={"build-smt": ("case", "target_lang")}))
    return reg

"""The pipeline's real stages for the workflow runner, each a thin adapter over one library function.

Artifacts (what the stages pass to each other; any of them can instead be given in ``[inputs]``):

=================  =========================================================================
train_src/tgt      raw training corpus (source = the phrase table's first field, e.g. English)
dev_src, dev_ref   raw dev set; test_src, test_ref: raw test set (references stay raw for BLEU)
heldout_src/ref    one raw held-out set that ``split`` divides into dev and test
phrase_table       the Moses phrase table to rescore; ``lm``: its ARPA LM; ``moses_ini``: its moses.ini
train_src_tok/tgt  the tokenized, cleaned training corpus (counts the vocabulary when present)
smt_model          build-smt's model directory (truecase models, alignments, lexical tables)
truecase_model_*   a Moses system's truecasing models (train-truecaser.perl's truecase-model.LANG), src and tgt
dev_src_tok, ...   dev/test tokenized and cased as the system's training data (decoder input)
pairs              prepare's directory: unique phrase pairs as Parquet + vocab.json
model              the trained RNN Encoder-Decoder checkpoint (model.pt)
pairs_reverse      ``prepare-reverse``'s pairs of the swapped table; ``model_reverse``: the p(e|f) model on them
model_ensemble     ``train-ensemble``'s second model on ``pairs``: ``score``'s log p(f|e) is the mean of the two
pictures_train     its training curves and t-SNE maps of word embeddings and phrase summaries c (PNGs)
table_rnn          phrase_table + the log p(f|e) column; ``table_rnn_wp``: + the unknown-word column
                   (with ``model_reverse``, both end with its log p(e|f) column)
ini_rnn, ini_rnn_wp  moses.ini pointed at those tables, with one or two more initial weights
tuned_*            moses.ini tuned on the dev set (baseline, rnn, rnn_wp)
cslm               the target-language CSLM checkpoint (train-cslm): the +CSLM rows re-rank n-best lists with it
report_md/csv      the Table-1 report: dev and test BLEU per configuration, Δ, p-values, hashes
report_html        the same as one self-contained page, with the tuning curves and the pictures embedded
=================  =========================================================================

A stage's parameters, defaults, valid values and checks are the settings of its library config dataclass
(:mod:`phrase_rescore.core.config`), from which the matching ``phrase-rescore`` command's options are
generated too: ``[demo-data]``, ``[split]``, ``[build-smt]``, ``[prepare]``, ``[train]``, ``[score]``,
``[tune]`` and ``[evaluate]`` take exactly the options of ``make-demo-data``, ``make-split``, ``build-smt``,
``prepare``, ``train``, ``score``, ``tune`` and ``evaluate`` that a workflow does not decide itself (the paths, which are artifacts;
``train --resume``, ``score --columns``/``--raw-logprob``/``--restart``); ``[moses-ini]`` takes
``moses-ini``'s options with ``rnn_weight`` and ``wp_weight`` for ``--weights``, since its two stages add
one column and two (``reverse_weight`` for the reverse model's column, when ``train-reverse`` makes one);
``[prepare-reverse]`` and ``[train-reverse]`` take the keys of ``[prepare]`` and ``[train]``: the first
follows ``[prepare]`` key for key when it is selected, the second inherits ``[train]``'s values except those
its own section sets, so the reverse model is made as the forward one unless asked otherwise;
``[train-ensemble]`` takes ``[train]``'s values in the same way, but its seed is ``[train]``'s + 1 unless it
sets another (the same seed would train the same model). ``[train-cslm]``
takes ``train-cslm``'s options; ``[evaluate]`` adds ``nbest_size``, ``cslm_weight``, ``rerank_restarts``
and ``rerank_tuner`` for the +CSLM rows (:class:`CSLMRerank`), which ``rescore-nbest`` makes one by one
outside a workflow.
"""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import NamedTuple

from phrase_rescore.core.config import check
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.stamps import is_current, write_stamp
from phrase_rescore.data.split import SplitConfig
from phrase_rescore.moses_integration.configs import BuildConfig, EvaluateConfig, RewriteConfig, SystemSpec, TuneConfig
from phrase_rescore.moses_integration.embedded.tokenizer import TokenizeConfig
from phrase_rescore.moses_integration.heldout_text import TOKENIZE_KEYS, check_same_preprocessing, tokenize_file
from phrase_rescore.moses_integration.moses_install import configured_home
from phrase_rescore.pipeline.configs import PrepareConfig, ScoreConfig, TrainConfig, TrainCSLMConfig

from .schema import stage_check, stage_choices, stage_params
from .seq2seq_stages import ROW_ARTIFACTS, add_stages, paper_systems
from .stage_settings import AddedWeights, CSLMRerank, DemoDataConfig
from .workflow import Registry, StageContext, StageDef


class Configuration(NamedTuple):
    """A system of Table 1 and the artifacts of its pipeline."""

    label: str      # its display name
    ini: str        # its moses.ini artifact
    table: str      # its phrase-table artifact
    tuned: str      # its tuned moses.ini artifact


class CSLMRow(NamedTuple):
    """A +CSLM row of Table 1: a configuration's n-best lists re-ranked with the CSLM."""

    label: str      # its display name
    base: str       # the configuration whose n-best lists it re-ranks


CONFIGURATIONS = {
    "baseline": Configuration("Baseline", "moses_ini", "phrase_table", "tuned_baseline"),
    "rnn": Configuration("+RNN", "ini_rnn", "table_rnn", "tuned_rnn"),
    "rnn-wp": Configuration("+RNN+WP", "ini_rnn_wp", "table_rnn_wp", "tuned_rnn_wp"),
}


CSLM_CONFIGURATIONS = {
    "cslm-rnn": CSLMRow("+CSLM+RNN", "rnn"),
    "cslm-rnn-wp": CSLMRow("+CSLM+RNN+WP", "rnn-wp"),
}
#: Table 1's rows in the paper's order, +RNN+WP (which the paper does not report without the CSLM) last
ROW_ORDER = ("baseline", "rnn", "cslm-rnn", "cslm-rnn-wp", "rnn-wp")


def _moses_home(params: dict) -> str | None:
    """The stage's ``moses_home``; None for the empty default (then ``MOSES_HOME`` or the PATH find Moses)."""
    return configured_home(params["moses_home"])


def _config(cls, params: dict, **fixed):
    """Build ``cls`` from the stage parameters it has (others belong to the adapter), plus ``fixed``."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in params.items() if k in names}, **fixed)


# ----------------------------------------------------------------------------- parameters
# Each stage's parameters, their checks and valid values are the settings of the config of the matching
# command (``phrase_rescore.app.schema``); the runner checks them all before any stage runs.

#: evaluate lowercases the references and detokenizes as the system was built
EVALUATE_BUILD_KEYS = ("case", "target_lang")


def _build_subset(keys: tuple[str, ...]) -> dict:
    return {k: v for k, v in stage_params(BuildConfig).items() if k in keys}


def _check_build_subset(keys: tuple[str, ...]):
    def run(p: dict) -> None:
        check(BuildConfig, {k: p[k] for k in keys})
    return run


# ----------------------------------------------------------------------------- demo data

DEMO_FILES = {"train_src": "corpus/train.en", "train_tgt": "corpus/train.fr", "dev_src": "corpus/dev.en",
              "dev_ref": "corpus/dev.fr", "test_src": "corpus/test.en", "test_ref": "corpus/test.fr"}


def run_demo_data(ctx: StageContext) -> dict:
    from phrase_rescore.data.demo_corpus import generate

    p = ctx.params
    paths = generate(ctx.dir / "corpus", n_train=p["train"], n_dev=p["dev"], n_test=p["test"], seed=p["seed"],
                     noise_rate=p["noise"])
    return json.loads(paths["manifest"].read_text(encoding="utf-8"))["noise_counts"]


# ----------------------------------------------------------------------------- split

SPLIT_FILES = {"dev_src": "split/dev.src", "dev_ref": "split/dev.ref", "test_src": "split/test.src",
               "test_ref": "split/test.ref"}


def run_split(ctx: StageContext) -> dict:
    from phrase_rescore.data.split import split_heldout

    res = split_heldout(ctx.input("heldout_src"), ctx.input("heldout_ref"), ctx.dir / "split",
                        _config(SplitConfig, ctx.params))
    return {"dev": res["dev"], "test": res["test"], "mode": ctx.params["mode"], "swap": ctx.params["swap"]}


# ----------------------------------------------------------------------------- build-smt and tokenize

def run_build_smt(ctx: StageContext) -> dict:
    from phrase_rescore.moses_integration.embedded.build import build_smt

    res = build_smt(ctx.input("train_src"), ctx.input("train_tgt"), ctx.dir / "smt", _config(BuildConfig, ctx.params))
    return {"phrase_table": res.stats.get("phrase_table"), "timings": res.timings, "notes": res.notes}


def run_tokenize(ctx: StageContext) -> dict:
    """Dev and test tokenized as the system's training corpus was (with build-smt's truecasing models, or a
    Moses system's)."""
    p = ctx.params
    model = ctx.input("smt_model")
    moses = {"src": ctx.input("truecase_model_src"), "tgt": ctx.input("truecase_model_tgt")}
    if p["case"] == "truecase" and model is None and None in moses.values():
        raise PhraseRescoreError("tokenize with case = \"truecase\" needs the truecase models: build-smt's "
                                 "(artifact smt_model: add build-smt or give smt_model in [inputs]) or a Moses "
                                 "system's (truecase_model_src and truecase_model_tgt in [inputs])")
    tc = {"src": None if model is None else model / "truecase-model.src",
          "tgt": None if model is None else model / "truecase-model.tgt"}
    if model is None:
        tc = moses
    else:
        check_same_preprocessing(p, model.parent / "manifest.json")
    counts = {}
    for art, out, side in (("dev_src", "dev_src_tok", "src"), ("dev_ref", "dev_ref_tok", "tgt"),
                           ("test_src", "test_src_tok", "src")):
        config = TokenizeConfig(lang=p["source_lang"] if side == "src" else p["target_lang"], case=p["case"],
                                escape=p["escape"])
        counts[out] = tokenize_file(ctx.input(art), ctx.output(out), config, tc[side], moses_truecaser=model is None)
    return counts


# ----------------------------------------------------------------------------- prepare, train, score

def _run_prepare(reverse: bool):
    """``prepare`` of the phrase table, or (``reverse``) of the table with source and target exchanged, the
    corpora with them: the pairs of the reverse model, whose log p(e|f) ``score`` appends as one more column."""
    def run(ctx: StageContext) -> dict:
        from phrase_rescore.moses_integration.table_columns import swap_table
        from phrase_rescore.pipeline.prepare import prepare, refuse_constant_unknown_words

        src, tgt = ctx.input("train_src_tok"), ctx.input("train_tgt_tok")
        if reverse:
            src, tgt = tgt, src
        use_corpus = ctx.params["vocab_from_corpus"] and src is not None and tgt is not None
        cfg = _config(PrepareConfig, ctx.params, src_corpus=os.fspath(src) if use_corpus else None,
                      tgt_corpus=os.fspath(tgt) if use_corpus else None)
        table = ctx.input("phrase_table")
        if reverse:
            table = ctx.dir / "swapped-table.gz"
            swap_table(ctx.input("phrase_table"), table, compresslevel=1)
        m = prepare(table, ctx.output("pairs_reverse" if reverse else "pairs"), cfg)
        if reverse:
            table.unlink()
        elif not ctx.stages or WP_STAGES & set(ctx.stages):
            refuse_constant_unknown_words(ctx.output("pairs"), m, ctx.params["vocab_size"])
        return {k: m.get(k) for k in ("lines", "unique_pairs", "train_pairs", "valid_pairs", "vocab_source",
                                      "vocab_target", "vocab_counted_from")}
    return run


#: the stages that use the unknown-word column (+RNN+WP)
WP_STAGES = frozenset({"moses-ini-rnn-wp", "tune-rnn-wp"})


def _run_train(pairs: str, model: str, pictures: str):
    def run(ctx: StageContext) -> dict:
        from phrase_rescore.pipeline.train import train

        out = ctx.output(model).parent
        resume = ctx.resume and (out / "last.pt").exists()
        s = train(ctx.input(pairs), out, _config(TrainConfig, ctx.params, resume=resume))
        if Path(s.model).resolve() != ctx.output(model).resolve():
            raise PhraseRescoreError(f"training wrote its model to {s.model}, expected {ctx.output(model)}")
        from .pictures import encdec_pictures  # training curves, word and phrase maps (section 4.4)

        drawn = encdec_pictures(ctx.output(model), ctx.input(pairs), ctx.output(pictures))
        return {**{k: v for k, v in dataclasses.asdict(s).items() if k != "history"},  # the log: train_log.csv
                "pictures": drawn}
    return run


def run_score(ctx: StageContext) -> dict:
    """Score once with both columns (+RNN+WP), then derive the +RNN table from it without the model. With a
    reverse model (``train-reverse``), both tables end with its log p(e|f) column."""
    from phrase_rescore.moses_integration.table_columns import drop_unk_column
    from phrase_rescore.pipeline.score import score_table
    from phrase_rescore.pipeline.score_columns import score_with_extras

    counts = {}
    if ctx.params.get("rare_words") == "unigram":   # the shares come from the corpora the table was built from
        for key, art in (("rare_counts", "train_tgt_tok"), ("rare_counts_reverse", "train_src_tok")):
            if ctx.input(art) is None:
                raise PhraseRescoreError(f"[score] rare_words = \"unigram\" needs the tokenized training corpora "
                                         f"({art}: build-smt, or [inputs] {art})")
            counts[key] = os.fspath(ctx.input(art))
    cfg = _config(ScoreConfig, ctx.params, columns=("logprob", "unk"), restart=not ctx.resume, **counts)
    reverse, ensemble = ctx.input("model_reverse"), ctx.input("model_ensemble")
    if reverse is None and ensemble is None:
        res = score_table(ctx.input("model"), ctx.input("phrase_table"), ctx.output("table_rnn_wp"), cfg)
    else:
        res = score_with_extras(ctx.input("model"), ctx.input("phrase_table"), ctx.output("table_rnn_wp"), cfg,
                                reverse_model=reverse, ensemble_model=ensemble)
    n = drop_unk_column(ctx.input("phrase_table"), ctx.output("table_rnn_wp"), ctx.output("table_rnn"),
                        appended=2 if reverse is None else 3, compresslevel=ctx.params.get("compresslevel", 6))
    return {"lines": n, "pairs_per_s": res.pairs_per_s, "seconds": res.seconds, "rejected": res.rejected,
            "device": res.device, "workers": res.workers, "matmul": res.matmul,
            **({"reverse_pairs_per_s": res.reverse_pairs_per_s} if reverse is not None else {}),
            **({"ensemble_pairs_per_s": res.ensemble_pairs_per_s} if ensemble is not None else {})}


def run_train_cslm(ctx: StageContext) -> dict:
    """The target-language CSLM on build-smt's clean target corpus, validated on the tokenized dev
    references (text neither LM saw), with the n-gram LM's perplexity on the same text beside its own."""
    from phrase_rescore.pipeline.train_cslm import train_cslm

    out = ctx.output("cslm").parent
    resume = ctx.resume and (out / "last.pt").exists()
    s = train_cslm(ctx.input("train_tgt_tok"), out, _config(TrainCSLMConfig, ctx.params, resume=resume),
                   valid=ctx.input("dev_ref_tok"), lm=ctx.input("lm"))
    if Path(s.model).resolve() != ctx.output("cslm").resolve():
        raise PhraseRescoreError(f"training wrote its model to {s.model}, expected {ctx.output('cslm')}")
    from .pictures import TRAINING_CURVES, training_curves

    curves = training_curves(out / "train_log.csv", ctx.output("pictures_cslm") / TRAINING_CURVES, "CSLM")
    return {**{k: v for k, v in dataclasses.asdict(s).items() if k != "history"},  # the log is in train_log.csv
            "pictures": {TRAINING_CURVES: curves}}


# ----------------------------------------------------------------------------- moses-ini, tune, evaluate


def _moses_ini_params(config: str) -> dict:
    weights = stage_params(AddedWeights, exclude=("wp_weight",) if config == "rnn" else ())
    return {**weights, **stage_params(RewriteConfig, exclude=("weights",))}


def _check_moses_ini(p: dict) -> None:
    stage_check(AddedWeights)(p)
    stage_check(RewriteConfig, exclude=("weights",))(p)


def _run_moses_ini(config: str):
    def run(ctx: StageContext) -> dict:
        from phrase_rescore.moses_integration.rewrite import rewrite_moses_ini

        c = CONFIGURATIONS[config]
        p = ctx.params
        weights = (p["rnn_weight"],) if config == "rnn" else (p["rnn_weight"], p["wp_weight"])
        if ctx.input("model_reverse") is not None:   # score appended its log p(e|f) column last
            weights += (p["reverse_weight"],)
        names = ("RNN log p(f|e)",) if config == "rnn" else ("RNN log p(f|e)", "WP, the unknown-word count")
        if ctx.input("model_reverse") is not None:
            names += ("the reverse model's log p(e|f)",)
        res = rewrite_moses_ini(RewriteConfig(old_ini=ctx.input("moses_ini"), table=ctx.input(c.table),
                                              out=ctx.output(c.ini), feature=p["feature"] or None,
                                              weights=weights, binarize=p["binarize"], threads=p["threads"],
                                              moses_home=_moses_home(p), column_names=names))
        return {"summary": res.summary()}
    return run


def _run_tune(config: str):
    def run(ctx: StageContext) -> dict:
        from phrase_rescore.moses_integration.tuning import tune

        c = CONFIGURATIONS[config]
        p = ctx.params
        cfg = _config(TuneConfig, p, ini=ctx.input(c.ini), dev_src=ctx.input("dev_src_tok"),
                      dev_ref=ctx.input("dev_ref_tok"), workdir=ctx.dir / "work", out=ctx.output(c.tuned))
        cfg.moses_home = _moses_home(p)
        tuned = tune(cfg)
        log = ctx.dir / "work" / "tune-log.csv"
        return {"tuned_ini": os.fspath(tuned), "log": os.fspath(log) if log.exists() else None}
    return run


def _check_evaluate(p: dict) -> None:
    stage_check(EvaluateConfig)(p)
    stage_check(CSLMRerank)(p)


class CSLMRowResult(NamedTuple):
    """A +CSLM row of Table 1 and what its re-ranking did."""

    row: SystemSpec     # the row evaluate scores
    summary: dict       # the stage summary's entry: the tuned weights' file, and the re-ranking's numbers when it ran


def _cslm_row(ctx: StageContext, config: str, base, cslm: Path, work: Path) -> CSLMRowResult:
    """The +CSLM row of ``config``: its tuned system's dev and test n-best lists (``base.nbest``) with CSLM0
    added, the weights retuned by MERT on the dev list (starting at the tuned system's, CSLM0 at
    ``cslm_weight``), both lists re-ranked by them. Reused when its stamp (the hashes of the lists, the
    CSLM, the tuned ini and the settings) matches."""
    from phrase_rescore.core.hashing import sha256_file
    from phrase_rescore.moses_integration.moses_ini import read_moses_ini
    from phrase_rescore.pipeline.retuned_rerank import SplitFiles, rerank_retuned

    p = ctx.params
    label = CSLM_CONFIGURATIONS[config].label
    out = {"dev": work / f"dev.{config}.tok", "test": work / f"test.{config}.tok"}
    weights_path = Path(f"{out['test']}.weights.ini")
    stamp = {"cslm": sha256_file(cslm), "ini": sha256_file(base.ini), "dev_ref": sha256_file(ctx.input("dev_ref_tok")),
             **{f"{k}_nbest": sha256_file(v) for k, v in base.nbest.items()},
             **{k: p[k] for k in ("cslm_weight", "rerank_restarts", "rerank_tuner")}}
    stamp_path = work / f"{config}.stamp.json"
    summary = {}
    if not is_current(stamp_path, stamp, [*out.values(), weights_path]):
        init = {**read_moses_ini(base.ini).weights, "CSLM0": [p["cslm_weight"]]}
        r = rerank_retuned(cslm, "CSLM0", init, SplitFiles(base.nbest["dev"], base.nbest["test"]),
                           SplitFiles(ctx.input("dev_src_tok"), ctx.input("test_src_tok")), ctx.input("dev_ref_tok"),
                           SplitFiles(out["dev"], out["test"]), work, config, p["rerank_restarts"],
                           p["rerank_tuner"], _moses_home(p))
        summary = {"hypotheses": r.hypotheses, "hyps_per_s": round(r.hyps_per_s), "mert_dev_bleu": r.dev_bleu,
                   "tuner": r.tuner, "tune_seconds": round(r.tune_seconds, 2),
                   "changed_test": r.changed_test, "changed_dev": r.changed_dev}
        write_stamp(stamp_path, stamp)
    row = SystemSpec(label, base.ini, base.model, outputs=dict(out), nbest=dict(base.nbest),
                     hashes={**base.hashes, "cslm_sha256": sha256_file(cslm),
                             "rerank_weights_sha256": sha256_file(weights_path)})
    return CSLMRowResult(row, {"weights": os.fspath(weights_path), **summary})


def _cslm_rows(ctx: StageContext, rows: dict, cslm: Path, work: Path) -> dict:
    """Add the +CSLM rows to ``rows``: each base configuration's tuned system decodes dev and test to n-best
    lists (its row becomes their first hypotheses), which :func:`_cslm_row` re-ranks with the CSLM; returns
    each +CSLM row's re-ranking summary."""
    from phrase_rescore.moses_integration.backend import get_backend
    from phrase_rescore.moses_integration.report import decode_split

    p, dev_src = ctx.params, ctx.input("dev_src_tok")
    if not any(row.base in rows for row in CSLM_CONFIGURATIONS.values()):
        raise PhraseRescoreError("the +CSLM rows re-rank the n-best lists of the tuned +RNN or +RNN+WP system; "
                                 "add tune-rnn or tune-rnn-wp to the workflow")
    if dev_src is None or ctx.input("dev_ref_tok") is None:
        raise PhraseRescoreError("the +CSLM rows retune their weights on the dev n-best list; they need the "
                                 "tokenized dev set (dev_src_tok, dev_ref_tok)")
    if p["rerank_tuner"] != "embedded":   # before any decoding
        from phrase_rescore.moses_integration.nbest_tuning import require_tuner

        require_tuner(p["rerank_tuner"], _moses_home(p), option="rerank_tuner =")
    backend = get_backend(p["backend"], _moses_home(p))
    reranked = {}
    for config, row in CSLM_CONFIGURATIONS.items():
        if row.base not in rows:
            continue
        spec = rows[row.base]
        for split, src in (("dev", dev_src), ("test", ctx.input("test_src_tok"))):
            spec.outputs[split] = decode_split(backend, spec, Path(src), work / f"{split}.{row.base}.tok",
                                               p["threads"], nbest_path=work / f"{split}.{row.base}.nbest",
                                               nbest=p["nbest_size"])
            spec.nbest[split] = work / f"{split}.{row.base}.nbest"
        made = _cslm_row(ctx, config, spec, cslm, work)
        rows[config], reranked[config] = made.row, made.summary
    return reranked


def run_evaluate(ctx: StageContext) -> dict:
    """Decode dev and test with each tuned configuration and write Table 1.

    BLEU is on detokenized output against the raw references; when the system is lowercased
    (``case = "lower"``) the references are lowercased too, so the scores are case-insensitive
    (as ``sacrebleu -lc``), and the report says so. With a CSLM (artifact ``cslm``) the +RNN and +RNN+WP
    systems decode to n-best lists (their rows are the lists' first hypotheses) and the +CSLM rows re-rank
    those lists (:func:`_cslm_rows`); the report gives the lists' oracle BLEU.
    """
    from phrase_rescore.core.hashing import sha256_file
    from phrase_rescore.moses_integration.report import evaluate

    p = ctx.params
    work = ctx.dir / "work"
    work.mkdir(parents=True, exist_ok=True)
    rows = {}
    more = {f"{what}_model_sha256": ctx.input(f"model_{what}") for what in ("ensemble", "reverse")}
    more = {k: sha256_file(v) for k, v in more.items() if v is not None}
    for config, c in CONFIGURATIONS.items():
        ini = ctx.input(c.tuned)
        if ini is not None:
            neural = config != "baseline"
            rows[config] = SystemSpec(c.label, Path(ini), ctx.input("model") if neural else None,
                                      hashes=more if neural else {})
    if "baseline" not in rows:
        raise PhraseRescoreError("evaluate needs the tuned baseline (tune-baseline, or tuned_baseline in [inputs])")
    dev_src, dev_ref = ctx.input("dev_src_tok"), ctx.input("dev_ref")
    cslm = ctx.input("cslm")
    reranked = {} if cslm is None else _cslm_rows(ctx, rows, cslm, work)
    systems = [rows[c] for c in ROW_ORDER if c in rows]
    systems += paper_systems(ctx, rows["baseline"].ini, dev_src is not None and dev_ref is not None)  # Sutskever's
    cfg = EvaluateConfig(systems=systems, test_src=ctx.input("test_src_tok"), test_ref=ctx.input("test_ref"),
                         workdir=work, dev_src=dev_src if dev_ref is not None else None,
                         dev_ref=dev_ref if dev_src is not None else None, backend=p["backend"],
                         moses_home=_moses_home(p), target_lang=p["target_lang"] or None, case=p["case"],
                         bootstrap_samples=p["bootstrap_samples"], seed=p["seed"], threads=p["threads"],
                         out_md=ctx.output("report_md"), out_csv=ctx.output("report_csv"))
    df = evaluate(cfg)
    cols = [c for c in ("configuration", "dev_bleu", "dev_p", "test_bleu", "test_p", "dev_oracle_bleu",
                        "test_oracle_bleu") if c in df.columns]
    from .pictures import stage_report  # tuning curves, then report.html beside table1.md

    report = stage_report(ctx.inputs, ctx.output("report_md"), ctx.dir,
                          {c.tuned: c.label for c in CONFIGURATIONS.values()})
    out = {"table": json.loads(df[cols].to_json(orient="records")), "report": report}
    if reranked:
        out["cslm_rerank"] = reranked
    return out


# ----------------------------------------------------------------------------- the registry

def default_registry() -> Registry:
    """Every real stage, in pipeline order."""
    from .preflight import CHECKS

    reg = Registry(checks=CHECKS)
    _add_corpus_stages(reg)
    _add_neural_stages(reg)
    add_stages(reg)   # Sutskever et al.'s rows: the deep LSTM, its translations and its re-ranking (seq2seq_stages)
    _add_moses_stages(reg)
    return reg


def _add_corpus_stages(reg: Registry) -> None:
    """The corpora and the phrase-based system: demo-data, split, build-smt, tokenize."""
    reg.add(StageDef("demo-data", "demo-data", run_demo_data,
                     stage_params(DemoDataConfig), produces=DEMO_FILES, doc="generate the English-French demo corpus",
                     check=stage_check(DemoDataConfig)))
    reg.add(StageDef("split", "split", run_split, stage_params(SplitConfig), consumes=("heldout_src", "heldout_ref"),
                     produces=SPLIT_FILES, doc="split one held-out set into dev and test halves",
                     choices=stage_choices(SplitConfig), check=stage_check(SplitConfig)))
    reg.add(StageDef("build-smt", "build-smt", run_build_smt, stage_params(BuildConfig),
                     consumes=("train_src", "train_tgt"),
                     produces={"phrase_table": "smt/phrase-table.gz", "lm": "smt/lm.arpa", "moses_ini": "smt/moses.ini",
                               "train_src_tok": "smt/corpus/clean.src", "train_tgt_tok": "smt/corpus/clean.tgt",
                               "smt_model": "smt/model"},
                     doc="phrase table, LM and moses.ini from the training corpus (embedded toolkit)",
                     choices=stage_choices(BuildConfig), check=stage_check(BuildConfig)))
    # dev and test must be tokenized, cased and escaped as build-smt prepared the training corpus
    reg.add(StageDef("tokenize", "tokenize", run_tokenize, _build_subset(TOKENIZE_KEYS),
                     consumes=("dev_src", "dev_ref", "test_src", "smt_model", "truecase_model_src",
                               "truecase_model_tgt"),
                     optional=frozenset({"smt_model", "truecase_model_src", "truecase_model_tgt"}),
                     produces={"dev_src_tok": "dev.tok.src", "dev_ref_tok": "dev.tok.ref",
                               "test_src_tok": "test.tok.src"},
                     doc="tokenize and case dev/test as the training corpus",
                     check=_check_build_subset(TOKENIZE_KEYS), follows={"build-smt": TOKENIZE_KEYS}))


def _add_neural_stages(reg: Registry) -> None:
    """The neural models and the scored tables: prepare, train (and its reverse and ensemble models), score,
    train-cslm."""
    reg.add(StageDef("prepare", "prepare", _run_prepare(False), stage_params(PrepareConfig),
                     consumes=("phrase_table", "train_src_tok", "train_tgt_tok"),
                     optional=frozenset({"train_src_tok", "train_tgt_tok"}), produces={"pairs": "pairs"},
                     doc="unique phrase pairs, vocabulary and validation split",
                     choices=stage_choices(PrepareConfig), check=stage_check(PrepareConfig)))
    train_keys = tuple(stage_params(TrainConfig))

    def train_stage(name: str, pairs: str, model: str, pictures: str, doc: str, **leads) -> StageDef:
        """An encoder-decoder's training stage: ``train``'s section keys, on ``pairs``, making ``model``."""
        return StageDef(name, name, _run_train(pairs, model, pictures), stage_params(TrainConfig), consumes=(pairs,),
                        produces={model: "model/model.pt", pictures: "pictures"}, doc=doc,
                        choices=stage_choices(TrainConfig), check=stage_check(TrainConfig), resumable=True, **leads)

    reg.add(train_stage("train", "pairs", "model", "pictures_train",
                        "train the RNN Encoder-Decoder; its training curves, word and phrase maps"))
    # the reverse model, p(e|f): prepared as the forward one is (every key follows, when selected), and trained
    # with [train]'s settings except those [train-reverse] sets itself (a seed, a budget)
    reg.add(StageDef("prepare-reverse", "prepare-reverse", _run_prepare(True), stage_params(PrepareConfig),
                     consumes=("phrase_table", "train_src_tok", "train_tgt_tok"),
                     optional=frozenset({"train_src_tok", "train_tgt_tok"}), produces={"pairs_reverse": "pairs"},
                     doc="unique phrase pairs of the swapped table, for the reverse model p(e|f)",
                     choices=stage_choices(PrepareConfig), check=stage_check(PrepareConfig),
                     follows={"prepare": tuple(stage_params(PrepareConfig))}))
    reg.add(train_stage("train-reverse", "pairs_reverse", "model_reverse", "pictures_train_reverse",
                        "train the reverse RNN Encoder-Decoder, p(e|f), whose column score appends last",
                        inherits={"train": train_keys}))
    # a second forward model for an ensemble: [train]'s settings but the seed, one above [train]'s
    reg.add(train_stage("train-ensemble", "pairs", "model_ensemble", "pictures_train_ensemble",
                        "train a second RNN Encoder-Decoder on the same pairs; score averages the two log p(f|e)",
                        inherits={"train": tuple(k for k in train_keys if k != "seed")},
                        reseeds={"train": ("seed",)}))
    reg.add(StageDef("score", "score", run_score, stage_params(ScoreConfig),
                     consumes=("model", "phrase_table", "model_reverse", "model_ensemble", "train_src_tok",
                               "train_tgt_tok"),
                     optional=frozenset({"model_reverse", "model_ensemble", "train_src_tok", "train_tgt_tok"}),
                     produces={"table_rnn": "phrase-table.rnn.gz", "table_rnn_wp": "phrase-table.rnn-wp.gz"},
                     doc="append log p(f|e) (and the unknown-word count) to the phrase table",
                     choices=stage_choices(ScoreConfig), check=stage_check(ScoreConfig), resumable=True))
    reg.add(StageDef("train-cslm", "train-cslm", run_train_cslm, stage_params(TrainCSLMConfig),
                     consumes=("train_tgt_tok", "dev_ref_tok", "lm"), optional=frozenset({"dev_ref_tok", "lm"}),
                     produces={"cslm": "model/model.pt", "pictures_cslm": "pictures"},
                     doc="train the target-language CSLM (held-out perplexity beside the n-gram LM's)",
                     choices=stage_choices(TrainCSLMConfig), check=stage_check(TrainCSLMConfig), resumable=True))


def _add_moses_stages(reg: Registry) -> None:
    """The tuned systems and Table 1: moses-ini, tune, evaluate."""
    for config in ("rnn", "rnn-wp"):
        c = CONFIGURATIONS[config]
        reg.add(StageDef(f"moses-ini-{config}", "moses-ini", _run_moses_ini(config), _moses_ini_params(config),
                         consumes=("moses_ini", c.table, "model_reverse"), optional=frozenset({"model_reverse"}),
                         produces={c.ini: "moses.ini"},
                         doc=f"moses.ini for {c.label}", check=_check_moses_ini))
    for config, c in CONFIGURATIONS.items():
        # the table and LM are consumed too: the ini names them by path, so only their hashes show a change
        reg.add(StageDef(f"tune-{config}", "tune", _run_tune(config), stage_params(TuneConfig),
                         consumes=(c.ini, c.table, "lm", "dev_src_tok", "dev_ref_tok"), optional=frozenset({"lm"}),
                         produces={c.tuned: "moses.ini"}, doc=f"tune {c.label} on the dev set",
                         choices=stage_choices(TuneConfig), check=stage_check(TuneConfig),
                         resumable=True))   # the embedded tuner continues after its last finished iteration
    reg.add(StageDef("evaluate", "evaluate", run_evaluate,
                     {**stage_params(EvaluateConfig), **stage_params(CSLMRerank)},
                     consumes=("tuned_baseline", "tuned_rnn", "tuned_rnn_wp", "phrase_table", "table_rnn",
                               "table_rnn_wp", "lm", "model", "model_reverse", "model_ensemble", "cslm", "test_src_tok",
                               "test_ref", "dev_src_tok", "dev_ref", "dev_ref_tok", "pictures_train", "pictures_cslm",
                               *ROW_ARTIFACTS),
                     optional=frozenset({"tuned_rnn", "tuned_rnn_wp", "table_rnn", "table_rnn_wp", "lm", "model",
                                         "model_reverse", "model_ensemble", "cslm", "dev_src_tok", "dev_ref",
                                         "dev_ref_tok", "pictures_train", "pictures_cslm", *ROW_ARTIFACTS}),
                     produces={"report_md": "table1.md", "report_csv": "table1.csv", "report_html": "report.html"},
                     doc="decode dev/test with each tuned configuration (+CSLM: re-rank n-best lists); Table 1",
                     choices=stage_choices(EvaluateConfig), check=_check_evaluate,
                     follows={"build-smt": EVALUATE_BUILD_KEYS}))

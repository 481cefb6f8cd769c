"""Sutskever et al.'s (2014) rows beside Cho et al.'s Table 1: the deep LSTM trained on the sentence pairs,
translating on its own, and re-ranking the phrase-based system's n-best lists.

Stages (each optional; a workflow selects them by name):

===================  ===================================================================================
train-seq2seq        the deep LSTM, source reversed (section 3.3), on build-smt's clean corpus
                     (``train-seq2seq``'s options; artifact ``seq2seq``)
train-seq2seq-       the same with the source read forward, the paper's comparison (``seq2seq_forward``);
forward              it takes ``[train-seq2seq]``'s values except those its own section sets
translate-seq2seq    direct translation of the test half (and of dev with ``dev = true``): the reversed
                     model at ``beam`` and ``small_beam``, the forward model and the ensemble of the two
                     at ``beam`` (``rows_translate``)
nbest-baseline,      dev and test decoded by the tuned baseline (+RNN+WP) to ``nbest_size``-best lists
nbest-rnn-wp         (``nbest_baseline``, ``nbest_rnn_wp``), decoded while the LSTM trains
rerank-seq2seq       the tuned baseline's lists with ``Seq2Seq0 = log p(e|f)`` added, re-ranked once by the paper's even average of the LSTM's and the
                     decoder's scores and once by weights retuned by MERT on the dev list
                     (``rows_rerank``); the report gives the lists' oracle BLEU beside them
rerank-stack         the tuned +RNN+WP system's lists with ``CSLM0 = log p(e)`` and ``Seq2Seq0`` added,
                     the weights of all retuned by MERT on the dev list (``rows_stack``)
===================  ===================================================================================

Each ``rows_*`` artifact is a JSON list of rows, ``{"name", "outputs": {split: file}, "nbest": {split:
file}, "model": file}`` (files relative to the JSON's folder), that ``evaluate`` scores beside the
baseline (:func:`paper_systems`), with the paired bootstrap against it like every other row.
"""
from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import NamedTuple

from phrase_rescore.core.atomic_write import atomic_open
from phrase_rescore.core.config import setting
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.moses_integration.configs import SystemSpec
from phrase_rescore.moses_integration.moses_install import configured_home
from phrase_rescore.pipeline.configs import TUNERS, RescoreConfig, TrainSeq2SeqConfig, TranslateConfig

from .schema import stage_check, stage_choices, stage_params
from .workflow import Registry, StageContext, StageDef

#: row key -> its name in Table 1
ROWS = {"lstm": "LSTM", "lstm-beam-small": "LSTM small beam", "lstm-forward": "LSTM forward",
        "lstm-ensemble": "LSTM ensemble", "rerank-even": "Baseline+LSTM even", "rerank-mert": "Baseline+LSTM",
        "stack": "+CSLM+LSTM+RNN+WP"}
#: the artifacts of rows that evaluate reads, in the order their rows are shown
ROW_ARTIFACTS = ("rows_translate", "rows_rerank", "rows_stack")
#: the stages that train a network (a run reusing another's models must not train them again)
TRAINERS = ("train-seq2seq", "train-seq2seq-forward")
#: what train-seq2seq's section does not hold: the files are artifacts, resuming is the runner's
TRAIN_EXCLUDE = ("resume",)


@dataclasses.dataclass
class Seq2SeqTranslate:
    """``[translate-seq2seq]``: direct translation by the LSTM (Sutskever et al., section 3.6, Table 1)."""

    beam: int = setting(12, at_least=1, help="Beam width of every row (the paper's best: 12).")
    small_beam: int = setting(2, at_least=0, help="A second beam width for the reversed model alone (the paper: 2, "
                                                  "nearly as good as 12); 0 leaves the row out.")
    dev: bool = setting(False, help="Translate the dev half too, for Table 1's dev column (evaluate refuses these rows "
                                    "without it when it scores dev).")
    batch_size: int = setting(64, at_least=1, help="Sentences decoded together.")
    device: str | None = setting(None, type=str, help="torch device (default: cuda when present).")


@dataclasses.dataclass
class NBestLists:
    """``[nbest]``: the n-best lists of a tuned system that the LSTM re-ranks."""

    backend: str = setting("moses", choices=("moses", "embedded"),
                           help="Who decodes the n-best lists: a real Moses (moses_home) or the embedded decoder.")
    moses_home: str | None = setting(None, type=str, envvar="MOSES_HOME",
                                     help="Moses installation root (default: $MOSES_HOME, or moses on PATH).")
    threads: int = setting(1, at_least=1, help="Decoder threads.")
    nbest_size: int = setting(100, at_least=1, help="Distinct hypotheses per sentence in the lists (the paper: 1000).")


@dataclasses.dataclass
class Seq2SeqRerank:
    """``[rerank-seq2seq]`` and ``[rerank-stack]``: re-ranking a tuned system's n-best lists with the LSTM's
    log p(e|f) (Sutskever et al., section 3.6; with the CSLM too, Cho et al., section 5)."""

    moses_home: str | None = setting(None, type=str, envvar="MOSES_HOME",
                                     help="Moses installation root, for rerank_tuner mert or kbmira.")
    seq2seq_weight: float = setting(0.1, help="Seq2Seq0's starting weight for MERT (the others start at the tuned ones).")
    cslm_weight: float = setting(0.1, help="CSLM0's starting weight for MERT (rerank-stack).")
    rerank_restarts: int = setting(20, at_least=1, help="MERT's random restarts on the dev n-best list.")
    rerank_tuner: str = setting("embedded", choices=TUNERS,
                                help="Who retunes the weights on the dev n-best list: the embedded MERT, or Moses's "
                                     "mert or kbmira (from moses_home / MOSES_HOME).")
    seed: int = setting(0, at_least=0, help="Seed of MERT's random restarts on the dev list.")
    device: str | None = setting(None, type=str, help="torch device of the models (default: cuda when present).")


# ----------------------------------------------------------------------------- training

def _run_train(artifact: str, reverse: bool):
    """Train the LSTM on build-smt's clean corpus, its validation pairs held out of it (``valid_size``)."""
    def run(ctx: StageContext) -> dict:
        from phrase_rescore.pipeline.train_seq2seq import train

        out = ctx.output(artifact).parent
        params = {k: v for k, v in ctx.params.items() if k != "reverse"}
        cfg = TrainSeq2SeqConfig(src=os.fspath(ctx.input("train_src_tok")), tgt=os.fspath(ctx.input("train_tgt_tok")),
                                 out_dir=os.fspath(out), reverse=reverse,
                                 resume=ctx.resume and (out / "last.pt").exists(), **params)
        s = train(cfg)
        if Path(s.model).resolve() != ctx.output(artifact).resolve():
            raise PhraseRescoreError(f"training wrote its model to {s.model}, expected {ctx.output(artifact)}")
        return {k: v for k, v in dataclasses.asdict(s).items() if k != "history"}   # the log: train_log.jsonl
    return run


# ----------------------------------------------------------------------------- rows files

def _write_rows(path: Path, rows: list[dict]) -> None:
    """The rows as evaluate reads them, their files relative to ``path``'s folder."""
    rel = lambda f: os.path.relpath(f, path.parent)  # noqa: E731
    out = [{**r, "outputs": {k: rel(v) for k, v in r["outputs"].items()},
            "nbest": {k: rel(v) for k, v in r.get("nbest", {}).items()}} for r in rows]
    with atomic_open(path, "w") as f:
        json.dump(out, f, indent=1)


def read_rows(path: Path) -> list[dict]:
    """A ``rows_*`` file: its rows with absolute paths; a row without a name or a test output is refused."""
    try:
        rows = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError) as e:
        raise PhraseRescoreError(f"cannot read the rows file: {e}", path) from e
    base = Path(path).parent
    if not isinstance(rows, list) or not all(isinstance(r, dict) and r.get("name") and "test" in r.get("outputs", {})
                                             for r in rows):
        raise PhraseRescoreError("expected a list of rows, each with a name and a test output", path)
    return [{**r, "outputs": {k: base / v for k, v in r["outputs"].items()},
             "nbest": {k: base / v for k, v in r.get("nbest", {}).items()}} for r in rows]


def paper_systems(ctx: StageContext, baseline_ini: Path, dev_scored: bool) -> list:
    """evaluate's rows from the ``rows_*`` artifacts the workflow made, as :class:`SystemSpec` with their
    translations: the baseline's moses.ini stands for their ini (the report hashes it); ``model`` is the LSTM.

    :param dev_scored: evaluate scores dev: a row without a dev translation is refused (it would be decoded
        with the baseline's ini and show the baseline's BLEU)."""
    out = []
    for art in ROW_ARTIFACTS:
        path = ctx.input(art)
        for r in read_rows(path) if path is not None else ():
            if dev_scored and "dev" not in r["outputs"]:
                raise PhraseRescoreError(f"row {r['name']!r} has no dev translation, and evaluate scores dev: set "
                                         "[translate-seq2seq] dev = true, or leave dev_ref out", path)
            out.append(SystemSpec(r["name"], baseline_ini, Path(r["model"]) if r.get("model") else None,
                                  outputs=dict(r["outputs"]), nbest=dict(r["nbest"])))
    return out


# ----------------------------------------------------------------------------- direct translation

def run_translate(ctx: StageContext) -> dict:
    """The test half (and dev, with ``dev``) translated by the reversed LSTM at ``beam`` and ``small_beam``,
    and by the forward model and the ensemble of the two at ``beam`` when the workflow trains both."""
    from phrase_rescore.pipeline.translate import translate_file

    p = ctx.params
    rev, fwd = ctx.input("seq2seq"), ctx.input("seq2seq_forward")
    plan = [("lstm", [rev], p["beam"])] + ([("lstm-beam-small", [rev], p["small_beam"])] if p["small_beam"] else [])
    if fwd is not None:
        plan += [("lstm-forward", [fwd], p["beam"]), ("lstm-ensemble", [rev, fwd], p["beam"])]
    splits = {"test": ctx.input("test_src_tok")}
    if p["dev"]:
        if ctx.input("dev_src_tok") is None:
            raise PhraseRescoreError("[translate-seq2seq] dev = true needs the tokenized dev source (dev_src_tok)")
        splits["dev"] = ctx.input("dev_src_tok")
    rows, seconds = [], {}
    for key, models, beam in plan:
        outs = {}
        for split, src in splits.items():
            outs[split] = ctx.dir / f"{split}.{key}.tok"
            s = translate_file(TranslateConfig([os.fspath(m) for m in models], os.fspath(src), os.fspath(outs[split]),
                                               beam=beam, batch_size=p["batch_size"], device=p["device"]))
            seconds[f"{split}.{key}"] = round(s.seconds, 1)
        name = ROWS[key] + (f" (beam {beam})" if key != "lstm-ensemble" else f" of {len(models)} (beam {beam})")
        rows.append({"name": name, "outputs": outs, "model": os.fspath(models[0]), "beam": beam,
                     "models": [os.fspath(m) for m in models]})
    _write_rows(ctx.output("rows_translate"), rows)
    return {"rows": [r["name"] for r in rows], "seconds": seconds}


# ----------------------------------------------------------------------------- re-ranking

#: an n-best stage's files in its artifact folder: each split's list and the decoder's 1-best
LIST_FILES = {split: (f"{split}.nbest", f"{split}.1best") for split in ("dev", "test")}


def _run_nbest(tuned: str, artifact: str):
    """Dev and test decoded by the tuned moses.ini ``tuned`` to ``nbest_size``-best lists (distinct hypotheses)."""
    def run(ctx: StageContext) -> dict:
        from phrase_rescore.moses_integration.backend import get_backend
        from phrase_rescore.moses_integration.report import decode_split

        p = ctx.params
        backend = get_backend(p["backend"], configured_home(p["moses_home"]))
        out = ctx.output(artifact)
        out.mkdir(parents=True, exist_ok=True)
        seconds = {}
        for split, (nbest, one) in LIST_FILES.items():
            t0 = time.perf_counter()
            decode_split(backend, SystemSpec(tuned, ctx.input(tuned)), ctx.input(f"{split}_src_tok"), out / one,
                         p["threads"], nbest_path=out / nbest, nbest=p["nbest_size"])
            seconds[split] = round(time.perf_counter() - t0, 1)
        return {"seconds": seconds}
    return run


def _lists(ctx: StageContext, artifact: str) -> dict[str, Path]:
    return {split: ctx.input(artifact) / nbest for split, (nbest, _) in LIST_FILES.items()}


def _add_feature(ctx: StageContext, lists: dict[str, Path], checkpoint: Path, tag: str) -> dict[str, Path]:
    """Both lists with one more feature (the model's log-probability of each hypothesis), nothing re-ranked."""
    from phrase_rescore.pipeline.rescore_nbest import rescore_nbest

    out = {}
    for split, nbest in lists.items():
        out[split] = ctx.dir / f"{split}.{tag}.nbest"
        rescore_nbest(RescoreConfig(os.fspath(nbest), os.fspath(ctx.input(f"{split}_src_tok")), [os.fspath(checkpoint)],
                      os.fspath(out[split]), os.fspath(ctx.dir / f"{split}.{tag}.even"), device=ctx.params["device"]))
    return out


class TunedLists(NamedTuple):
    """Both lists re-ranked with weights retuned on the dev list."""

    outputs: dict[str, Path]    # split -> the re-ranked 1-best
    scored: dict[str, Path]     # split -> the list with Seq2Seq0
    summary: dict               # the stage summary's ``mert`` entry


def _rerank_tuned(ctx: StageContext, lists: dict[str, Path], ini: Path, starts: dict[str, float],
                  tag: str) -> TunedLists:
    """The LSTM's ``Seq2Seq0`` added to both lists, the weights of every feature retuned by MERT on the dev list
    (from the tuned ini's and ``starts``) and both lists re-ranked by them."""
    from phrase_rescore.pipeline.retuned_rerank import SplitFiles, rerank_retuned

    p = ctx.params
    init = {**printed_weights(ini), **{k: [v] for k, v in starts.items()}}
    out = {"dev": ctx.dir / f"dev.{tag}.tok", "test": ctx.dir / f"test.{tag}.tok"}
    r = rerank_retuned(ctx.input("seq2seq"), "Seq2Seq0", init, SplitFiles(lists["dev"], lists["test"]),
                       SplitFiles(ctx.input("dev_src_tok"), ctx.input("test_src_tok")), ctx.input("dev_ref_tok"),
                       SplitFiles(out["dev"], out["test"]), ctx.dir, tag, p["rerank_restarts"], p["rerank_tuner"],
                       configured_home(p["moses_home"]), seed=p["seed"], device=p["device"])
    summary = {"hypotheses": r.hypotheses, "hyps_per_s": round(r.hyps_per_s), "mert_dev_bleu": r.dev_bleu,
               "tune_seconds": round(r.tune_seconds, 1), "changed_test": r.changed_test, "seconds": round(r.seconds, 1),
               "weights": {k: v for k, v in r.weights.items() if k in ("Seq2Seq0", "CSLM0")}}
    return TunedLists(out, r.scored._asdict(), summary)


def printed_weights(ini: Path) -> dict[str, list[float]]:
    """The ini's weights of the features Moses prints in an n-best list (the tuneable ones: not
    ``UnknownWordPenalty``, whose hypotheses' lines carry no value to weigh)."""
    from phrase_rescore.moses_integration.moses_ini import read_moses_ini

    read = read_moses_ini(ini)
    printed = {f.name for f in read.features if f.tuneable}
    return {k: v for k, v in read.weights.items() if k in printed}


def even_weights(ini: Path, feature: str = "Seq2Seq0") -> dict[str, list[float]]:
    """The paper's even average as weights of an n-best list's features: 0.5 × the LSTM's log p(e|f) + 0.5 ×
    the decoder's score, which is the tuned ini's weights times the features (:func:`rerank_nbest` then picks
    what ``rescore-nbest`` without ``--weights`` does)."""
    w = {k: [0.5 * x for x in v] for k, v in printed_weights(ini).items()}
    w[feature] = [0.5]
    return w


def run_rerank(ctx: StageContext) -> dict:
    """The tuned baseline's n-best lists re-ranked by the LSTM: by the paper's even average and by weights
    retuned on the dev list; both rows carry the lists, whose oracle BLEU the report gives."""
    from phrase_rescore.pipeline.rescore_nbest import read_sentences, rerank_nbest

    t0 = time.perf_counter()
    ini = ctx.input("tuned_baseline")
    lists = _lists(ctx, "nbest_baseline")
    tuned = _rerank_tuned(ctx, lists, ini, {"Seq2Seq0": ctx.params["seq2seq_weight"]}, "mert")
    even = {split: ctx.dir / f"{split}.even.tok" for split in ("dev", "test")}
    changed = {split: rerank_nbest(tuned.scored[split], even_weights(ini), even[split],
                                   len(read_sentences(ctx.input(f"{split}_src_tok")))) for split in even}
    model = os.fspath(ctx.input("seq2seq"))
    _write_rows(ctx.output("rows_rerank"), [
        {"name": ROWS["rerank-even"], "outputs": even, "nbest": lists, "model": model},
        {"name": ROWS["rerank-mert"], "outputs": tuned.outputs, "nbest": lists, "model": model}])
    return {"mert": tuned.summary, "even_changed": changed,
            "seconds": round(time.perf_counter() - t0, 1)}


def run_rerank_stack(ctx: StageContext) -> dict:
    """The whole stack: the tuned +RNN+WP system's lists with the CSLM's log p(e) and the LSTM's log p(e|f),
    the weights of all retuned by MERT on the dev list."""
    t0 = time.perf_counter()
    ini = ctx.input("tuned_rnn_wp")
    lists = _lists(ctx, "nbest_rnn_wp")
    with_cslm = _add_feature(ctx, lists, ctx.input("cslm"), "rnn-wp.cslm")
    p = ctx.params
    tuned = _rerank_tuned(ctx, with_cslm, ini, {"CSLM0": p["cslm_weight"], "Seq2Seq0": p["seq2seq_weight"]}, "stack")
    _write_rows(ctx.output("rows_stack"), [{"name": ROWS["stack"], "outputs": tuned.outputs, "nbest": lists,
                                            "model": os.fspath(ctx.input("seq2seq"))}])
    return {"mert": tuned.summary, "seconds": round(time.perf_counter() - t0, 1)}


# ----------------------------------------------------------------------------- the registry

def add_stages(reg: Registry) -> None:
    """Register the stages of Sutskever et al.'s rows (none runs unless a workflow selects it)."""
    train = stage_params(TrainSeq2SeqConfig, exclude=TRAIN_EXCLUDE)
    fwd = stage_params(TrainSeq2SeqConfig, exclude=(*TRAIN_EXCLUDE, "reverse"))
    for name, art, reverse, params, leads in (
            ("train-seq2seq", "seq2seq", True, {k: v for k, v in train.items() if k != "reverse"}, {}),
            ("train-seq2seq-forward", "seq2seq_forward", False, fwd, {"inherits": {"train-seq2seq": tuple(fwd)}})):
        reg.add(StageDef(name, name, _run_train(art, reverse), params, consumes=("train_src_tok", "train_tgt_tok"),
                         produces={art: "model/model.pt"}, resumable=True,
                         doc=f"train the deep LSTM (Sutskever et al.), source {'reversed' if reverse else 'forward'}",
                         choices=stage_choices(TrainSeq2SeqConfig, exclude=TRAIN_EXCLUDE),
                         check=stage_check(TrainSeq2SeqConfig, exclude=(*TRAIN_EXCLUDE, "reverse")), **leads))
    reg.add(StageDef("translate-seq2seq", "translate-seq2seq", run_translate, stage_params(Seq2SeqTranslate),
                     consumes=("seq2seq", "seq2seq_forward", "test_src_tok", "dev_src_tok"),
                     optional=frozenset({"seq2seq_forward", "dev_src_tok"}), produces={"rows_translate": "rows.json"},
                     doc="translate test (dev) with the LSTM, its ensemble and the forward model",
                     check=stage_check(Seq2SeqTranslate)))
    for tuned, art, table in (("tuned_baseline", "nbest_baseline", "phrase_table"),
                              ("tuned_rnn_wp", "nbest_rnn_wp", "table_rnn_wp")):
        # the table and LM are consumed too: the ini names them by path, so only their hashes show a change
        reg.add(StageDef(art.replace("_", "-", 1).replace("_", "-"), "nbest", _run_nbest(tuned, art),
                         stage_params(NBestLists), consumes=(tuned, table, "lm", "dev_src_tok", "test_src_tok"),
                         optional=frozenset({table, "lm"}), produces={art: "lists"},
                         doc=f"decode dev and test to n-best lists with {tuned}, for the LSTM to re-rank",
                         choices=stage_choices(NBestLists), check=stage_check(NBestLists)))
    lists = ("dev_src_tok", "dev_ref_tok", "test_src_tok", "seq2seq")
    reg.add(StageDef("rerank-seq2seq", "rerank-seq2seq", run_rerank, stage_params(Seq2SeqRerank),
                     consumes=("tuned_baseline", "nbest_baseline", *lists),
                     produces={"rows_rerank": "rows.json"},
                     doc="re-rank the tuned baseline's n-best lists with the LSTM (even average; MERT)",
                     choices=stage_choices(Seq2SeqRerank), check=stage_check(Seq2SeqRerank)))
    reg.add(StageDef("rerank-stack", "rerank-stack", run_rerank_stack, stage_params(Seq2SeqRerank),
                     consumes=("tuned_rnn_wp", "nbest_rnn_wp", "cslm", *lists), produces={"rows_stack": "rows.json"},
                     doc="re-rank the tuned +RNN+WP system's n-best lists with the CSLM and the LSTM (MERT)",
                     choices=stage_choices(Seq2SeqRerank), check=stage_check(Seq2SeqRerank)))

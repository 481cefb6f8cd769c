"""The `phrase-rescore` command line: thin click commands over library functions.

Each command builds a typed config, calls one library function and prints its summary.
A :class:`~phrase_rescore.core.errors.PhraseRescoreError` becomes ``error: <message>`` and exit status 1.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import zlib

import click

from phrase_rescore.core import locks
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.outdir import claim_output_dir, forget_created, lock_output, release_unused
from phrase_rescore.core.output_paths import check_outputs
from phrase_rescore.core.version import code_version
from phrase_rescore.data.split import SplitConfig
from phrase_rescore.moses_integration.configs import BuildConfig, EvaluateConfig, RewriteConfig, TuneConfig
from phrase_rescore.pipeline.configs import (
    PrepareConfig,
    RescoreConfig,
    SampleConfig,
    ScoreConfig,
    TrainConfig,
    TrainCSLMConfig,
    TrainSeq2SeqConfig,
    TranslateConfig,
)
from phrase_rescore.pipeline.ranks import is_rank_zero
from phrase_rescore.plots.map_config import MapConfig

from .schema import SettingsCommand, collect, options
from .stage_settings import DemoDataConfig


def summary(command: click.Command) -> str:
    """A command's one-line description in ``--help``'s list: its short help, else its description's first
    paragraph, whole."""
    text = command.short_help or (command.help or "").split("\n\n")[0]
    return " ".join(text.split())


class _Group(click.Group):
    """A click group that turns PhraseRescoreError into a message and a non-zero exit."""

    command_class = SettingsCommand  # options generated from a config's settings, on first use

    ORDER = ("init", "run", "make-demo-data", "make-split", "build-smt", "prepare", "train", "sample", "score",
             "train-cslm", "rescore-nbest", "moses-ini", "tune", "evaluate", "decode", "plot", "train-seq2seq",
             "translate")

    def format_commands(self, ctx, formatter):
        """List every command with the whole first paragraph of its description (click cuts it at 45
        characters, or at the first word ending in a full stop: "Cho et al.")."""
        rows = [(name, summary(self.commands[name])) for name in self.list_commands(ctx)
                if not self.commands[name].hidden]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def list_commands(self, ctx):  # the pipeline's order in --help, not the alphabet
        rank = {name: i for i, name in enumerate(self.ORDER)}
        return sorted(self.commands, key=lambda name: (rank.get(name, len(rank)), name))

    def invoke(self, ctx):
        # the outputs' locks (:func:`_check_paths`) are held until the command ends; a command that fails
        # removes the folders it created that hold none of its outputs; SIGTERM ends it as Ctrl-C does, so
        # that it cleans up alike (its helper programs end with it either way: core/children.py)
        ok = False
        previous = _on_sigterm(_terminated)
        try:
            result = super().invoke(ctx)
            ok = True
            return result
        except PhraseRescoreError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(1)
        except (OSError, EOFError, UnicodeDecodeError, zlib.error) as e:
            # a safety net for a user's file that a stage did not check: one that vanished, a full
            # disk, a truncated or corrupt gzip, text that is not UTF-8; other exceptions are bugs
            from phrase_rescore.core.file_errors import describe_file_error

            if isinstance(e, OSError) and e.filename is None and e.errno is not None and locks.held_outputs():
                # a write that names no file (a library's own): the outputs this command was writing
                e.filename = " or ".join(map(str, locks.held_outputs()))
            click.echo(f"error: {describe_file_error(e)}", err=True)
            sys.exit(1)
        finally:
            if ok:
                forget_created()
            else:
                release_unused()
            locks.release_all()
            _on_sigterm(previous)


def _terminated(signum, _frame):
    raise SystemExit(128 + signum)


def _on_sigterm(handler):
    """Set the SIGTERM handler (in the main thread only, where Python runs handlers); the one before."""
    if handler is None or threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, handler)


def _check_paths(inputs: dict, outputs: dict, out_dirs: dict | None = None) -> None:
    """Refuse outputs that would destroy an input or each other, then claim the output folders.

    A folder named by an option must be new, empty or an earlier output of phrase-rescore
    (:mod:`phrase_rescore.core.outdir`), so a user's file that shares a name with one of ours is never overwritten.
    """
    check_outputs(inputs, outputs, out_dirs)
    _lock(outputs, out_dirs)
    command = click.get_current_context().info_name
    for option, folder in (out_dirs or {}).items():
        if folder is not None and is_rank_zero():  # under torchrun rank 0 claims for all
            claim_output_dir(folder, option, command)


def _lock(outputs: dict, out_dirs: dict | None = None) -> None:
    """Hold the lock of every output file and folder until the command ends (:mod:`phrase_rescore.core.locks`):
    a second command writing one of them meanwhile is refused, naming this one's PID and host."""
    if not is_rank_zero():   # under torchrun rank 0 holds them for all
        return
    command = click.get_current_context().info_name
    for option, value in {**outputs, **(out_dirs or {})}.items():
        for path in [value] if value is None or isinstance(value, (str, os.PathLike)) else value:
            if path is not None:
                lock_output(path, option, command)


def _ini_models(ini: str) -> dict:
    """The model files a moses.ini names, as inputs for :func:`_check_paths` (no output may overwrite one)."""
    from phrase_rescore.moses_integration.moses_ini import read_moses_ini

    return read_moses_ini(ini).model_files()


def _print_version(ctx, _param, value):
    """``--version``: the code version, hashed only when asked for (not at every start)."""
    if value and not ctx.resilient_parsing:
        click.echo(f"phrase-rescore, version {code_version()}")
        ctx.exit()


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the version (package version + source hash) and exit.")
@click.option("--quiet", is_flag=True, help="No progress bars.")
@click.pass_context
def main(ctx, quiet):
    """Rescore a Moses phrase table with the RNN Encoder-Decoder of Cho et al. (2014).

    The stages, in pipeline order: build-smt, prepare, train, score, train-cslm, moses-ini, tune, evaluate
    (rescore-nbest re-ranks n-best lists with the CSLM); `run` runs a whole workflow file of them.
    `phrase-rescore COMMAND --help` gives a command's options.
    """
    ctx.ensure_object(dict)
    from phrase_rescore.core import progress

    progress.set_quiet(quiet)


# Commands are registered below, one section per area.


# --- foundation: prepare ------------------------------------------------------------------------------

@main.command("prepare")
@click.argument("table", type=click.Path(exists=True, dir_okay=False))
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Pairs directory to write.")
@options(PrepareConfig, exclude=("src_corpus", "tgt_corpus"))
@click.option("--src-corpus", type=click.Path(dir_okay=False), help="Tokenized source corpus to count the vocabulary from.")
@click.option("--tgt-corpus", type=click.Path(dir_okay=False), help="Tokenized target corpus (with --src-corpus).")
def prepare_cmd(table, out_dir, src_corpus, tgt_corpus, **kw):
    """Unique phrase pairs as Parquet with ids, a vocabulary and a validation split."""
    from phrase_rescore.pipeline.prepare import prepare

    cfg = PrepareConfig(src_corpus=src_corpus, tgt_corpus=tgt_corpus, **collect(PrepareConfig, kw))
    if not cfg.vocab_from_corpus and src_corpus is not None:
        raise click.UsageError("--src-corpus counts the vocabulary from the corpus: leave out --no-vocab-from-corpus")
    _check_paths({"TABLE": table, "--src-corpus": src_corpus, "--tgt-corpus": tgt_corpus}, {}, {"--out": out_dir})
    m = prepare(table, out_dir, cfg)
    click.echo(f"{m['lines']} lines ({m['rejected']} rejected), {m['unique_pairs']} unique pairs: "
               f"{m['train_pairs']} train / {m['valid_pairs']} valid; vocabulary {m['vocab_source']} + "
               f"{m['vocab_target']} ({m['vocab_counted_from']}) -> {out_dir}")


# --- demo data and workflows: make-demo-data, run -----------------------------------------------------

@main.command("make-demo-data")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Directory to write.")
@options(DemoDataConfig)
def make_demo_data_cmd(out_dir, **kw):
    """Generate the English-French demo corpus (train/dev/test .en/.fr)."""
    import json

    from phrase_rescore.data.demo_corpus import generate

    c = DemoDataConfig(**collect(DemoDataConfig, kw))
    _lock({}, {"--out": out_dir})
    paths = generate(out_dir, n_train=c.train, n_dev=c.dev, n_test=c.test, seed=c.seed, noise_rate=c.noise)
    noise = json.loads(paths["manifest"].read_text(encoding="utf-8"))["noise_counts"]
    click.echo(f"{c.train} train / {c.dev} dev / {c.test} test pairs (seed {c.seed}; noisy train pairs: "
               + ", ".join(f"{k} {v}" for k, v in noise.items()) + f") -> {out_dir}")


@main.command("make-split")
@click.argument("src", type=click.Path(exists=True, dir_okay=False))
@click.argument("ref", type=click.Path(exists=True, dir_okay=False))
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Directory to write.")
@options(SplitConfig)
def make_split_cmd(src, ref, out_dir, **kw):
    """Split one held-out parallel set (SRC, REF; plain or gzip) into dev and test halves."""
    from phrase_rescore.data.split import split_heldout

    cfg = SplitConfig(**collect(SplitConfig, kw))
    _check_paths({"SRC": src, "REF": ref}, {}, {"--out": out_dir})
    res = split_heldout(src, ref, out_dir, cfg)
    click.echo(f"{res['dev']} dev / {res['test']} test pairs ({cfg.mode}{', swapped' if cfg.swap else ''}) -> {out_dir}")


@main.command("init")
@click.option("--moses-ini", type=click.Path(dir_okay=False), help="The system's moses.ini (train-model.perl's "
              "model/moses.ini, or a tuned one).")
@click.option("--folder", type=click.Path(file_okay=False), help="The folder train-model.perl (--root-dir) or EMS "
              "trained the system in, instead of --moses-ini (or besides it, to search for its corpus and models).")
@click.option("--dev-src", required=True, type=click.Path(dir_okay=False), help="Raw dev source (tuning set).")
@click.option("--dev-ref", required=True, type=click.Path(dir_okay=False), help="Raw dev reference.")
@click.option("--test-src", required=True, type=click.Path(dir_okay=False), help="Raw test source.")
@click.option("--test-ref", required=True, type=click.Path(dir_okay=False), help="Raw test reference.")
@click.option("--out", required=True, type=click.Path(dir_okay=False),
              help="The workflow file to write (never one init did not write).")
@click.option("--phrase-table", type=click.Path(dir_okay=False),
              help="The text phrase table: needed only when the ini reads a binarized one; it must be the ini's.")
@click.option("--source-lang", help="Source language code, when the system's folder does not tell.")
@click.option("--target-lang", help="Target language code, when the system's folder does not tell.")
@click.option("--truecase-model-src", type=click.Path(dir_okay=False),
              help="The source truecasing model (train-truecaser.perl), when not beside the corpus.")
@click.option("--truecase-model-tgt", type=click.Path(dir_okay=False), help="The target truecasing model.")
@click.option("--train-src", type=click.Path(dir_okay=False),
              help="The training corpus's source side as train-model.perl read it (tokenized, cased, cleaned).")
@click.option("--train-tgt", type=click.Path(dir_okay=False), help="Its target side (the CSLM's text).")
@click.option("--case", type=click.Choice(["lower", "truecase", "none"]),
              help="The system's casing, when its files do not tell (one they contradict is refused).")
@click.option("--backend", type=click.Choice(["auto", "moses", "embedded"]), default="auto", show_default=True,
              help="Who decodes and tunes: auto is moses when a Moses installation is found, else embedded.")
@click.option("--moses-home", help="Moses installation root (default: $MOSES_HOME, or moses on PATH).")
@click.option("--feature", help="The phrase dictionary to rescore, when the ini has several.")
@click.option("--threads", type=click.IntRange(min=1), default=4, show_default=True, help="[common] threads.")
def init_cmd(moses_ini, folder, dev_src, dev_ref, test_src, test_ref, out, phrase_table, source_lang, target_lang,
             truecase_model_src, truecase_model_tgt, train_src, train_tgt, case, backend, moses_home, feature,
             threads):
    """Write a ready workflow for rescoring a trained Moses system: its paths, casing and languages found."""
    from pathlib import Path

    from .init_workflow import InitConfig, init_workflow

    def p(x):
        return None if x is None else Path(x)

    res = init_workflow(InitConfig(Path(out), Path(dev_src), Path(dev_ref), Path(test_src), Path(test_ref),
                                   moses_ini=p(moses_ini), folder=p(folder), phrase_table=p(phrase_table),
                                   source_lang=source_lang, target_lang=target_lang,
                                   truecase_model_src=p(truecase_model_src), truecase_model_tgt=p(truecase_model_tgt),
                                   train_src=p(train_src), train_tgt=p(train_tgt), case=case, backend=backend,
                                   moses_home=moses_home, feature=feature, threads=threads))
    click.echo(res.summary())
    if res.missing:
        raise PhraseRescoreError(f"{len(res.missing)} input(s) or setting(s) missing, listed above and in {out}; "
                                 "the workflow will not run until they are given")


@main.command("run")
@click.argument("workflow_file", type=click.Path(dir_okay=False))
@click.option("--workdir", type=click.Path(file_okay=False),
              help="Working directory for every stage's outputs (default: runs/<workflow name>).")
@click.option("--set", "sets", multiple=True, metavar="SECTION.KEY=VALUE",
              help="Override a workflow value, e.g. --set train.max_steps=500 (repeatable).")
@click.option("--from", "from_stage", metavar="STAGE", help="Rerun this stage (or section) and all after it.")
def run_cmd(workflow_file, workdir, sets, from_stage):
    """Run a workflow file's stages, skipping those whose outputs are current."""
    from pathlib import Path

    from .stages import default_registry
    from .workflow import load_workflow, run_workflow

    registry = default_registry()
    wf = load_workflow(workflow_file, registry, sets)
    work = Path(workdir) if workdir else Path("runs") / wf.name
    if any(registry.stages[s].section in ("build-smt", "moses-ini") for s in wf.stages):
        # their moses.ini files name paths under the workdir: refuse one Moses cannot read before any stage runs
        from phrase_rescore.moses_integration.moses_ini import check_ini_path

        check_ini_path(work.resolve(), "the workdir, whose files the workflow's moses.ini files name,")
    results = run_workflow(wf, registry, work, from_stage=from_stage, echo=lambda m: click.echo(m, err=True))
    ran = [r.name for r in results if r.status == "ran"]
    click.echo(f"{wf.name}: {len(ran)} stage(s) ran, {len(results) - len(ran)} current -> {work}")
    report = work / "evaluate" / "table1.md"
    if "evaluate" in wf.stages and report.exists():
        click.echo("")
        click.echo(report.read_text(encoding="utf-8"))
        pictures = sorted(work.glob("*/*.png")) + sorted(work.glob("*/pictures/*.png"))
        if (report.parent / "report.html").exists():
            click.echo(f"report page: {report.parent / 'report.html'}"
                       + (f"; pictures: {', '.join(str(p.relative_to(work)) for p in pictures)}" if pictures else ""))


# --- Moses integration: moses-ini, tune, evaluate -----------------------------------------------------

@main.command("moses-ini")
@click.argument("old_ini", type=click.Path(exists=True, dir_okay=False))
@click.option("--table", required=True, type=click.Path(exists=True, dir_okay=False), help="The rescored phrase table.")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="The new moses.ini to write.")
@click.option("--binarized-prefix", type=click.Path(dir_okay=False),
              help="PhraseDictionaryCompact: processPhraseTableMin -out prefix (default: the table's name without .gz).")
@options(RewriteConfig)
def moses_ini_cmd(old_ini, table, out, binarized_prefix, **kw):
    """Point a moses.ini at the rescored table: more num-features, matching weights."""
    from pathlib import Path

    from phrase_rescore.moses_integration.rewrite import BINARIZER_LOG, MINPHR, default_binarized_prefix

    from .api import rewrite_ini

    values = collect(RewriteConfig, kw)
    # processPhraseTableMin writes PREFIX.minphr and its log (for a PhraseDictionaryCompact only)
    prefix = binarized_prefix or default_binarized_prefix(Path(table).resolve()) if values["binarize"] else None
    binarized = [f"{prefix}{MINPHR}", f"{prefix}{BINARIZER_LOG}"] if prefix else None
    _check_paths({"OLD_INI": old_ini, "--table": table, **_ini_models(old_ini)},
                 {"--out": out, "--binarized-prefix": binarized})
    res = rewrite_ini(old_ini, table, out, binarized_prefix=binarized_prefix, **values)
    click.echo(res.summary())


@main.command("tune")
@click.argument("ini", type=click.Path(exists=True, dir_okay=False))
@click.option("--dev-src", required=True, type=click.Path(exists=True, dir_okay=False), help="Tokenized dev source.")
@click.option("--dev-ref", required=True, type=click.Path(exists=True, dir_okay=False), help="Tokenized dev reference.")
@click.option("--workdir", required=True, type=click.Path(file_okay=False), help="Working directory (log, mert-work/).")
@click.option("--out", type=click.Path(dir_okay=False),
              help="Tuned moses.ini (default: WORKDIR/moses.tuned.ini with --backend moses, WORKDIR/moses.ini with "
                   "--backend embedded).")
@options(TuneConfig)
def tune_cmd(ini, dev_src, dev_ref, workdir, out, **kw):
    """Tune the weights of a moses.ini on a dev set (mert-moses.pl or the embedded MERT)."""
    from .api import tune

    values = collect(TuneConfig, kw)
    _check_paths({"INI": ini, "--dev-src": dev_src, "--dev-ref": dev_ref, **_ini_models(ini)}, {"--out": out},
                 {"--workdir": workdir})
    tuned = tune(ini, dev_src, dev_ref, workdir, out=out, echo=lambda line: click.echo(line, err=True), **values)
    click.echo(f"tuned moses.ini: {tuned.ini}")


def _named_paths(values, what):
    out = {}
    for v in values:
        name, eq, path = v.partition("=")
        if not eq or not name or not path:
            raise click.BadParameter(f"expected NAME=PATH, got {v!r}", param_hint=what)
        if name in out:
            raise click.BadParameter(f"{name!r} given twice", param_hint=what)
        out[name] = path
    return out


@main.command("evaluate")
@click.option("--system", "systems", multiple=True, required=True, metavar="NAME=INI",
              help="A configuration to evaluate; repeat; the first is the baseline (e.g. baseline=tuned.base.ini).")
@click.option("--model", "models", multiple=True, metavar="NAME=MODEL", help="The model behind a configuration (hashed).")
@click.option("--test-src", required=True, type=click.Path(exists=True, dir_okay=False), help="Tokenized test source.")
@click.option("--test-ref", required=True, type=click.Path(exists=True, dir_okay=False), help="Raw (untokenized) test reference.")
@click.option("--dev-src", type=click.Path(exists=True, dir_okay=False), help="Tokenized dev source.")
@click.option("--dev-ref", type=click.Path(exists=True, dir_okay=False), help="Raw dev reference.")
@click.option("--workdir", required=True, type=click.Path(file_okay=False), help="Where outputs and the report go.")
@options(EvaluateConfig)
def evaluate_cmd(systems, models, test_src, test_ref, dev_src, dev_ref, workdir, **kw):
    """Decode, score (sacrebleu BLEU/chrF, paired bootstrap) and write Table 1 as Markdown and CSV."""
    from pathlib import Path

    from .api import evaluate

    named = _named_paths(systems, "--system")
    mods = _named_paths(models, "--model")
    unknown = set(mods) - set(named)
    if unknown:
        raise click.BadParameter(f"--model for unknown configuration(s): {', '.join(sorted(unknown))}")
    values = collect(EvaluateConfig, kw)
    models_of = {k: v for ini in named.values() for k, v in _ini_models(ini).items()}  # each ini read as Moses reads it
    _check_paths({"--system": list(named.values()), "--model": list(mods.values()), "--test-src": test_src,
                   "--test-ref": test_ref, "--dev-src": dev_src, "--dev-ref": dev_ref, **models_of}, {},
                 {"--workdir": workdir})
    df = evaluate(named, test_src, test_ref, workdir, dev_src=dev_src, dev_ref=dev_ref, models=mods, **values)
    from phrase_rescore.app.pictures import command_report

    page = command_report(Path(df.attrs["markdown"]), Path(workdir), {n: Path(p) for n, p in named.items()},
                          {n: Path(p) for n, p in mods.items()})
    click.echo(Path(df.attrs["markdown"]).read_text(encoding="utf-8"))
    click.echo(f"wrote {df.attrs['markdown']}, {df.attrs['csv']} and {page['report_html']}")


@main.command("decode", add_help_option=False,
              context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def decode_cmd(argv):
    """Translate stdin to stdout with the embedded decoder, as `moses -f INI` does, with its options (-h lists them)."""
    import io

    from .decode_cli import run_decode

    out = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", newline="\n", write_through=True)
    try:
        run_decode(argv, sys.stdin.buffer, out)
    finally:
        out.detach()


# --- embedded SMT toolkit: build-smt ------------------------------------------------------------------

def _lang_from_suffix(path: str) -> str | None:
    """'train.en' / 'train.en.gz' -> 'en'; None when the suffix is not a language sacremoses knows."""
    from sacremoses.corpus import NonbreakingPrefixes

    name = path[:-3] if path.endswith(".gz") else path
    suffix = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    return suffix if 2 <= len(suffix) <= 3 and suffix in NonbreakingPrefixes().available_langs else None


@main.command("build-smt")
@click.argument("train_src", type=click.Path(exists=True, dir_okay=False))
@click.argument("train_tgt", type=click.Path(exists=True, dir_okay=False))
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Output directory.")
@options(BuildConfig)
def build_smt_cmd(train_src, train_tgt, out_dir, **kw):
    """Build phrase-table.gz, lm.arpa and moses.ini from raw parallel text, Moses-compatible, no Moses needed."""
    from click.core import ParameterSource

    from phrase_rescore.moses_integration.embedded.build import build_smt

    ctx = click.get_current_context()
    unset = {k for k in ("source_lang", "target_lang") if ctx.get_parameter_source(k) != ParameterSource.COMMANDLINE}
    values = collect(BuildConfig, kw)
    for key, path in (("source_lang", train_src), ("target_lang", train_tgt)):
        if key in unset and values[key] == BuildConfig.__dataclass_fields__[key].default:
            values[key] = _lang_from_suffix(path) or values[key]  # the default gives way to the file's suffix
    config = BuildConfig(**values)
    _check_paths({"TRAIN_SRC": train_src, "TRAIN_TGT": train_tgt}, {}, {"--out": out_dir})
    result = build_smt(train_src, train_tgt, out_dir, config)
    click.echo(result.summary())


# --- Sequence to Sequence: train-seq2seq, translate, rescore-nbest ------------------------------------

@main.command("train-seq2seq")
@click.argument("src", type=click.Path(exists=True, dir_okay=False))
@click.argument("tgt", type=click.Path(exists=True, dir_okay=False))
@click.option("--out-dir", "-o", required=True, type=click.Path(file_okay=False), help="model.pt, last.pt, vocab.json, train_log.jsonl.")
@click.option("--valid-src", type=click.Path(exists=True, dir_okay=False), help="Validation source (default: hold out --valid-size pairs).")
@click.option("--valid-tgt", type=click.Path(exists=True, dir_okay=False), help="Validation target.")
@click.option("--vocab", type=click.Path(exists=True, dir_okay=False), help="Share an existing vocabulary JSON.")
@options(TrainSeq2SeqConfig)
def train_seq2seq_cmd(src, tgt, out_dir, valid_src, valid_tgt, vocab, **kw):
    """Train a deep LSTM encoder-decoder (Sutskever, Vinyals & Le 2014) on tokenized sentence pairs SRC/TGT."""
    from phrase_rescore.pipeline.train_seq2seq import train

    values = collect(TrainSeq2SeqConfig, kw)
    _check_paths({"SRC": src, "TGT": tgt, "--valid-src": valid_src, "--valid-tgt": valid_tgt, "--vocab": vocab},
                  {}, {"--out-dir": out_dir})
    s = train(TrainSeq2SeqConfig(src=src, tgt=tgt, out_dir=out_dir, valid_src=valid_src, valid_tgt=valid_tgt,
                                 vocab=vocab, **values))
    if is_rank_zero():  # under torchrun rank 0 reports for all ranks
        click.echo(f"{s.steps} steps, {s.epochs:g} epochs in {s.seconds:.1f}s ({s.target_tokens_per_s:.0f} target "
                   f"tokens/s); validation perplexity {s.last_valid_ppl:.3f} (best {s.best_valid_ppl:.3f}); {s.model}")
    _training_curves(out_dir, "train_log.jsonl", "Seq2Seq (LSTM encoder-decoder)")


@main.command("translate")
@click.argument("source", type=click.Path(exists=True, dir_okay=False))
@click.option("--model", "-m", "models", multiple=True, required=True, type=click.Path(exists=True, dir_okay=False),
              help="A Seq2Seq checkpoint; repeat for an ensemble.")
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False), help="Translations, one per line.")
@click.option("--scores", type=click.Path(dir_okay=False), help="Also write each translation's log-probability.")
@options(TranslateConfig, exclude=("scores",))
def translate_cmd(source, models, output, scores, **kw):
    """Translate tokenized SOURCE with beam search over one Seq2Seq model or an ensemble."""
    from phrase_rescore.pipeline.translate import translate_file

    values = collect(TranslateConfig, kw)
    _check_paths({"SOURCE": source, "--model": models}, {"--output": output, "--scores": scores})
    s = translate_file(TranslateConfig(list(models), source, output, scores=scores, **values))
    click.echo(f"translated {s.sentences} sentences with {s.models} model(s) in {s.seconds:.1f}s "
               f"({s.unk_source_tokens} unknown source tokens): {s.output}")


@main.command("train-cslm")
@click.argument("corpus", type=click.Path(exists=True, dir_okay=False))
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="OUT: model.pt (best), last.pt, train_log.csv, summary.json.")
@click.option("--valid", type=click.Path(exists=True, dir_okay=False),
              help="Held-out tokenized text (default: hold out --valid-size sentences of CORPUS).")
@click.option("--lm", type=click.Path(exists=True, dir_okay=False),
              help="An ARPA n-gram LM whose perplexity on the same held-out text is reported beside the CSLM's.")
@options(TrainCSLMConfig)
def train_cslm_cmd(corpus, out_dir, valid, lm, **kw):
    """Train the target-language CSLM (Schwenk's feedforward LM, Cho et al. section 5) on a tokenized CORPUS."""
    from phrase_rescore.pipeline.train_cslm import train_cslm

    cfg = TrainCSLMConfig(**collect(TrainCSLMConfig, kw))
    _check_paths({"CORPUS": corpus, "--valid": valid, "--lm": lm}, {}, {"--out": out_dir})
    s = train_cslm(corpus, out_dir, cfg, valid=valid, lm=lm)
    ngram = "" if s.ngram_valid_ppl is None else f", the n-gram LM's {s.ngram_valid_ppl:.3f}"
    click.echo(f"{s.steps} steps ({s.stop_reason}), {s.events_per_s:.0f} words/s on {s.device}; validation "
               f"perplexity {s.best_valid_ppl:.3f} on {s.valid_tokens} tokens{ngram} -> {s.model}")


@main.command("rescore-nbest")
@click.argument("nbest", type=click.Path(exists=True, dir_okay=False))
@click.argument("src", type=click.Path(exists=True, dir_okay=False))
@click.option("--model", "-m", "models", multiple=True, required=True, type=click.Path(exists=True, dir_okay=False),
              help="Seq2Seq checkpoint(s) (several = ensemble) or one phrase-level encoder-decoder checkpoint.")
@click.option("--out-nbest", required=True, type=click.Path(dir_okay=False), help="The n-best list with the new feature.")
@click.option("--out-1best", required=True, type=click.Path(dir_okay=False), help="The re-ranked 1-best translations.")
@click.option("--weights", "weights_ini", type=click.Path(exists=True, dir_okay=False),
              help="Re-rank by a moses.ini's [weight] section (with a weight for the new feature) "
                   "instead of the paper's even average of model and SMT scores.")
@click.option("--dev-nbest", type=click.Path(exists=True, dir_okay=False),
              help="Tune the re-ranking weights on this dev n-best list (with --dev-src, --dev-ref; see --tuner).")
@click.option("--dev-src", type=click.Path(exists=True, dir_okay=False), help="Tokenized dev source.")
@click.option("--dev-ref", type=click.Path(exists=True, dir_okay=False), help="Tokenized dev reference.")
@options(RescoreConfig)
def rescore_nbest_cmd(nbest, src, models, out_nbest, out_1best, weights_ini, dev_nbest, dev_src, dev_ref, **kw):
    """Add log p(hyp|src) to every hypothesis of a Moses NBEST list of SRC and re-rank it."""
    from phrase_rescore.pipeline.rescore_nbest import rescore_nbest

    values = collect(RescoreConfig, kw)
    _check_paths({"NBEST": nbest, "SRC": src, "--model": models, "--weights": weights_ini, "--dev-nbest": dev_nbest,
                   "--dev-src": dev_src, "--dev-ref": dev_ref}, {"--out-nbest": out_nbest, "--out-1best": out_1best})
    s = rescore_nbest(RescoreConfig(nbest, src, list(models), out_nbest, out_1best, weights_ini=weights_ini,
                                    dev_nbest=dev_nbest, dev_src=dev_src, dev_ref=dev_ref, **values))
    if s.tuned_weights:
        who = "the embedded MERT" if s.tuner == "embedded" else f"Moses {s.tuner}"
        click.echo(f"{who} on the dev n-best ({s.tune_seconds:.1f} s): BLEU {100 * s.dev_bleu:.2f}; "
                   f"weights {s.tuned_weights}")
    click.echo(f"rescored {s.hypotheses} hypotheses of {s.sentences} sentences with {s.model_kind} "
               f"({s.hyps_per_s:.0f} hyp/s); feature {s.feature_name}; 1-best changed for {s.changed_1best}: {out_1best}")


# --- RNN Encoder-Decoder: train, sample ---------------------------------------------------------------

@main.command("train")
@click.argument("pairs_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="MODEL_DIR: model.pt (best), last.pt, train_log.csv.")
@options(TrainConfig)
def train_cmd(pairs_dir, out_dir, **kw):
    """Train the RNN Encoder-Decoder on prepared phrase pairs (PAIRS_DIR from `prepare`)."""
    from phrase_rescore.pipeline.train import train

    cfg = TrainConfig(**collect(TrainConfig, kw))
    _check_paths({"PAIRS_DIR": pairs_dir}, {}, {"--out": out_dir})
    s = train(pairs_dir, out_dir, cfg)
    if is_rank_zero():  # under torchrun rank 0 reports for all ranks
        valid = (f"validation perplexity {s.last_valid_ppl:.3f}, best {s.best_valid_ppl:.3f} (unigram "
                 f"{s.unigram_valid_ppl:.3f})" if s.best_valid_ppl < float("inf") else
                 "no validation (prepare held out no pairs): the model is the last step's weights")
        click.echo(f"{s.steps} steps ({s.stop_reason}), {s.pairs_per_s:.0f} pairs/s on {s.device}; {valid} -> {s.model}")
    _training_curves(out_dir, "train_log.csv", "RNN Encoder-Decoder")


@main.command("sample")
@click.argument("model", type=click.Path(exists=True))
@click.argument("phrase")
@click.option("--greedy", is_flag=True, help="Same as --mode greedy.")
@click.option("--device", default="auto", show_default=True, help="auto (CUDA when present), cpu, cuda or cuda:N.")
@options(SampleConfig)
def sample_cmd(model, phrase, greedy, device, **kw):
    """Target phrases for a tokenized source PHRASE from MODEL (a .pt or a training directory), as in Table 3."""
    from click.core import ParameterSource

    from phrase_rescore.pipeline.sample import format_table, sample_phrase

    ctx = click.get_current_context()
    beam_given = ctx.get_parameter_source("beam") == ParameterSource.COMMANDLINE
    mode_given = ctx.get_parameter_source("mode") == ParameterSource.COMMANDLINE
    if greedy and (beam_given or mode_given):
        raise click.UsageError(f"choose one of --greedy and {'--beam' if beam_given else '--mode'}")
    values = collect(SampleConfig, kw)
    if greedy or (beam_given and not mode_given):  # --greedy and --beam K choose the mode themselves
        values["mode"] = "greedy" if greedy else "beam"
    cfg = SampleConfig(**values)
    mode = cfg.mode
    click.echo(format_table(sample_phrase(model, phrase, cfg, device=device), mode))


# --- score: log p(f|e) and the unknown-word penalty as new phrase-table columns -----------------------

@main.command("score")
@click.argument("model", type=click.Path(exists=True))
@click.argument("table", type=click.Path(exists=True, dir_okay=False))
@click.option("--out", "-o", required=True, type=click.Path(dir_okay=False),
              help="The new phrase table (gzip when it ends in .gz).")
@options(ScoreConfig, exclude=("rejects", "vocab"))
@click.option("--rejects", type=click.Path(dir_okay=False), help="Where --on-error keep lists bad lines.")
@click.option("--vocab", type=click.Path(exists=True, dir_okay=False),
              help="Vocabulary JSON, for a checkpoint that carries none (for one that carries its own: only the "
                   "same words).")
@click.option("--reverse-model", type=click.Path(exists=True),
              help="A model trained in the other direction (prepare on the swapped table): appends log p(e|f) "
                   "as one more column.")
@click.option("--ensemble-model", type=click.Path(exists=True),
              help="A second model of the same direction: the logprob column becomes the two models' mean log p.")
def score_cmd(model, table, out, rejects, vocab, reverse_model, ensemble_model, **kw):
    """Append log p(f|e) and the unknown-word penalty to every line of a phrase TABLE (resumable)."""
    from .api import score_table

    cfg = ScoreConfig(rejects=rejects, vocab=vocab, **collect(ScoreConfig, kw))
    if reverse_model or ensemble_model:
        _check_paths({"MODEL": model, "TABLE": table, "--reverse-model": reverse_model,
                      "--ensemble-model": ensemble_model, "--rare-counts": cfg.rare_counts,
                      "--rare-counts-reverse": cfg.rare_counts_reverse}, {"--out": out})
        s = score_table(model, table, out, cfg, reverse_model=reverse_model, ensemble_model=ensemble_model)
        click.echo(f"scored {s.lines} lines ({s.pairs_per_s:.0f} pairs/s forward"
                   + (", ensemble" if ensemble_model else "") + (", reverse column" if reverse_model else "")
                   + f"): {out}")
        return
    _lock({"--out": out})
    s = score_table(model, table, out, cfg)
    if s.rank:  # under torchrun rank 0 reports for all ranks
        return
    if s.restart_reason:
        click.echo(f"note: started afresh ({s.restart_reason})", err=True)
    resumed = f", resumed after line {s.resumed_from_line}" if s.resumed_from_line else ""
    if s.ranks > 1:
        resumed = f", {s.ranks} ranks" + (f", {s.resumed_from_line} lines done before" if resumed else "")
    rej = f"; {s.rejected} rejected lines listed in {s.rejects}" if s.rejected else ""
    click.echo(f"scored {s.lines} lines ({s.pairs} pairs, {s.pairs_per_s:.0f} pairs/s on {s.device}"
               f"{resumed}){rej}: {s.out}")


# --- pictures: plot KIND redraws what a stage drew ----------------------------------------------------

def _training_curves(out_dir: str, log_name: str, title: str) -> None:
    """Draw a trained model's curves from ``OUT_DIR/log_name`` into ``OUT_DIR/training-curves.png``."""
    import os

    from phrase_rescore.app.pictures import TRAINING_CURVES, training_curves

    log = os.path.join(out_dir, log_name)
    if os.path.isfile(log) and is_rank_zero():  # under torchrun, rank 0 draws
        s = training_curves(log, os.path.join(out_dir, TRAINING_CURVES), title)
        click.echo(f"training curves: {s['file']}")


class _PlotGroup(click.Group):
    command_class = SettingsCommand

    format_commands = _Group.format_commands


@main.group("plot", cls=_PlotGroup)
def plot_group():
    """Draw a picture again from the files its stage drew it from (training, tuning, embeddings, report)."""


@plot_group.command("training")
@click.argument("log", type=click.Path(exists=True, dir_okay=False))
@click.option("--out", "-o", required=True, type=click.Path(dir_okay=False), help="The PNG to write.")
@click.option("--title", default="Training", show_default=True, help="The picture's title.")
def plot_training_cmd(log, out, title):
    """Training loss and validation perplexity by step from any model's LOG (train_log.csv, train_log.jsonl)."""
    from phrase_rescore.app.pictures import training_curves

    _check_paths({"LOG": log}, {"--out": out})
    s = training_curves(log, out, title)
    click.echo(f"wrote {s['file']} ({s['bytes']} bytes)")


@plot_group.command("tuning")
@click.argument("logs", nargs=-1, required=True, metavar="NAME=TUNE_LOG...")
@click.option("--out", "-o", required=True, type=click.Path(dir_okay=False), help="The PNG to write.")
def plot_tuning_cmd(logs, out):
    """Dev BLEU by MERT iteration, one line per configuration, from each tuning's work/tune-log.csv."""
    from phrase_rescore.plots.curves import write_tuning_curves

    named = _named_paths(logs, "NAME=TUNE_LOG")
    _check_paths({"TUNE_LOG": list(named.values())}, {"--out": out})
    n = write_tuning_curves(list(named.items()), out, "MERT tuning: dev BLEU by iteration")
    click.echo(f"wrote {out} ({n} bytes)")


@plot_group.command("embeddings")
@click.argument("model", type=click.Path(exists=True))
@click.option("--pairs", type=click.Path(exists=True, file_okay=False),
              help="prepare's pairs folder: also map the phrase representations c of its source phrases.")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Folder for words-source.png, words-target.png (and phrases.png).")
@options(MapConfig)
def plot_embeddings_cmd(model, pairs, out_dir, **kw):
    """2-D Barnes-Hut t-SNE maps of an encoder-decoder MODEL's word embeddings and phrase summaries c."""
    from phrase_rescore.app.pictures import embedding_maps

    cfg = MapConfig(**collect(MapConfig, kw))
    _check_paths({"MODEL": model, "--pairs": pairs}, {}, {"--out": out_dir})
    for name, s in embedding_maps(model, pairs, out_dir, cfg).items():
        click.echo(f"wrote {out_dir}/{name}: {s['points']} points, {s['bytes']} bytes, {s['seconds']:.1f}s")


@plot_group.command("report")
@click.argument("table_md", type=click.Path(exists=True, dir_okay=False))
@click.argument("pictures", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@click.option("--out", "-o", required=True, type=click.Path(dir_okay=False), help="The HTML page to write.")
def plot_report_cmd(table_md, pictures, out):
    """One self-contained HTML page of evaluate's TABLE_MD (table1.md) and PNG PICTURES, embedded."""
    from pathlib import Path

    from phrase_rescore.app.pictures import caption_of
    from phrase_rescore.plots.report_html import Picture, write_report

    _check_paths({"TABLE_MD": table_md, "PICTURES": list(pictures)}, {"--out": out})
    n = write_report(table_md, [Picture(caption_of(Path(p)), Path(p)) for p in pictures], out)
    click.echo(f"wrote {out} ({n} bytes, {len(pictures)} pictures)")

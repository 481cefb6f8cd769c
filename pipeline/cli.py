"""The `phrase-rescore` command line: thin click commands over library functions.

Each command builds a typed config, calls one library function and prints its summary.
A :class:`~pipeline.errors.PhraseRescoreError` becomes ``error: <message>`` and exit status 1.
"""
from __future__ import annotations

import sys

import click

from . import __version__
from .errors import PhraseRescoreError


class _Group(click.Group):
    """A click group that turns PhraseRescoreError into a message and a non-zero exit."""

    def list_commands(self, ctx):  # keep the pipeline's order in --help, not the alphabet
        return list(self.commands)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except PhraseRescoreError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(1)
        except (FileNotFoundError, IsADirectoryError, PermissionError) as e:
            # a safety net: stages check their inputs, but a file can vanish while a stage runs
            click.echo(f"error: {e.filename}: {e.strerror}", err=True)
            sys.exit(1)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="phrase-rescore")
@click.option("--quiet", is_flag=True, help="No progress bars.")
@click.pass_context
def main(ctx, quiet):
    """Rescore a Moses phrase table with the RNN Encoder-Decoder of Cho et al. (2014).

    Stages, in pipeline order: build-smt, prepare, train, score, moses-ini, tune, evaluate;
    `run` runs a whole workflow file.
    """
    ctx.ensure_object(dict)
    from . import progress

    progress.set_quiet(quiet)


# Commands are registered below, one section per area, in pipeline order.


# --- foundation (issue 2): prepare ------------------------------------------------------------------

@main.command("prepare")
@click.argument("table", type=click.Path(exists=True, dir_okay=False))
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Pairs directory to write.")
@click.option("--vocab-size", default=15000, show_default=True, help="Shortlist size per side (the paper: 15000).")
@click.option("--valid-fraction", default=0.01, show_default=True, help="Share of source phrases held out.")
@click.option("--seed", default=1234, show_default=True, help="Seed choosing the held-out sources.")
@click.option("--src-corpus", type=click.Path(dir_okay=False), help="Tokenized source corpus to count the vocabulary from.")
@click.option("--tgt-corpus", type=click.Path(dir_okay=False), help="Tokenized target corpus (with --src-corpus).")
@click.option("--on-error", type=click.Choice(["raise", "keep"]), default="raise", show_default=True,
              help="keep: skip bad lines, listed in OUT/rejects.txt.")
def prepare_cmd(table, out_dir, vocab_size, valid_fraction, seed, src_corpus, tgt_corpus, on_error):
    """Unique phrase pairs as Parquet with ids, a vocabulary and a validation split."""
    from .prepare import PrepareConfig, prepare

    m = prepare(table, out_dir, PrepareConfig(vocab_size=vocab_size, valid_fraction=valid_fraction, seed=seed,
                                              src_corpus=src_corpus, tgt_corpus=tgt_corpus, on_error=on_error))
    click.echo(f"{m['lines']} lines ({m['rejected']} rejected), {m['unique_pairs']} unique pairs: "
               f"{m['train_pairs']} train / {m['valid_pairs']} valid; vocabulary {m['vocab_source']} + "
               f"{m['vocab_target']} ({m['vocab_counted_from']}) -> {out_dir}")


# --- demo data and workflows (issue 8): make-demo-data, run -----------------------------------------

@main.command("make-demo-data")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Directory to write.")
@click.option("--train", "n_train", default=10000, show_default=True, help="Training sentence pairs.")
@click.option("--dev", "n_dev", default=500, show_default=True, help="Development (tuning) sentence pairs.")
@click.option("--test", "n_test", default=500, show_default=True, help="Test sentence pairs.")
@click.option("--seed", default=1, show_default=True, help="Seed; the corpus is a function of it.")
@click.option("--noise", "noise_rate", default=0.04, show_default=True,
              help="Share of training pairs misaligned or loosely translated.")
def make_demo_data_cmd(out_dir, n_train, n_dev, n_test, seed, noise_rate):
    """Generate the English-French demo corpus (train/dev/test .en/.fr)."""
    import json

    from data.demo_corpus import generate

    paths = generate(out_dir, n_train=n_train, n_dev=n_dev, n_test=n_test, seed=seed, noise_rate=noise_rate)
    noise = json.loads(paths["manifest"].read_text(encoding="utf-8"))["noise_counts"]
    click.echo(f"{n_train} train / {n_dev} dev / {n_test} test pairs (seed {seed}; noisy train pairs: "
               + ", ".join(f"{k} {v}" for k, v in noise.items()) + f") -> {out_dir}")


# --- Moses integration (issue 5): moses-ini, tune, evaluate -----------------------------------------

def _floats(text):
    """'0.2,-0.1' -> (0.2, -0.1); None stays None."""
    if text is None:
        return None
    try:
        return tuple(float(x) for x in text.replace(",", " ").split())
    except ValueError:
        raise click.BadParameter(f"expected numbers separated by commas, got {text!r}") from None


@main.command("moses-ini")
@click.argument("old_ini", type=click.Path(exists=True, dir_okay=False))
@click.option("--table", required=True, type=click.Path(exists=True, dir_okay=False), help="The rescored phrase table.")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="The new moses.ini to write.")
@click.option("--feature", help="Phrase dictionary to repoint (default: the only one, else TranslationModel0).")
@click.option("--weights", help="Initial weights of the added columns, comma-separated (default: 0.2 each, "
                                "train-model.perl's value for phrase-table scores).")
@click.option("--binarized-prefix", type=click.Path(dir_okay=False),
              help="PhraseDictionaryCompact: processPhraseTableMin -out prefix (default: the table's name without .gz).")
@click.option("--no-binarize", is_flag=True, help="PhraseDictionaryCompact: only print the processPhraseTableMin command.")
@click.option("--threads", default=1, show_default=True, help="processPhraseTableMin -threads.")
@click.option("--moses-home", envvar="MOSES_HOME", help="Moses installation root (default: $MOSES_HOME, or moses on PATH).")
def moses_ini_cmd(old_ini, table, out, feature, weights, binarized_prefix, no_binarize, threads, moses_home):
    """Point a moses.ini at the rescored table: more num-features, matching weights."""
    from pathlib import Path

    from moses_integration.rewrite import RewriteConfig, rewrite_moses_ini

    res = rewrite_moses_ini(RewriteConfig(Path(old_ini), Path(table), Path(out), feature=feature,
                                          weights=_floats(weights),
                                          binarized_prefix=Path(binarized_prefix) if binarized_prefix else None,
                                          binarize=not no_binarize, threads=threads, moses_home=moses_home))
    click.echo(res.summary())


@main.command("tune")
@click.argument("ini", type=click.Path(exists=True, dir_okay=False))
@click.option("--backend", type=click.Choice(["moses", "embedded"]), default="moses", show_default=True,
              help="moses: a real Moses's mert-moses.pl (MOSES_HOME); embedded: the project's decoder and MERT.")
@click.option("--dev-src", required=True, type=click.Path(exists=True, dir_okay=False), help="Tokenized dev source.")
@click.option("--dev-ref", required=True, type=click.Path(exists=True, dir_okay=False), help="Tokenized dev reference.")
@click.option("--workdir", required=True, type=click.Path(file_okay=False), help="Working directory (log, mert-work/).")
@click.option("--out", type=click.Path(dir_okay=False), help="Tuned moses.ini (default WORKDIR/moses.tuned.ini).")
@click.option("--nbest", default=100, show_default=True, help="n-best list size per iteration.")
@click.option("--maximum-iterations", default=25, show_default=True, help="Most MERT iterations.")
@click.option("--threads", default=1, show_default=True,
              help="moses: mert-moses.pl --threads (the optimizer); embedded: decoder processes.")
@click.option("--decoder-flags", default="", help="moses: passed as mert-moses.pl --decoder-flags, e.g. '-threads 8'.")
@click.option("--batch-mira", is_flag=True, help="moses: tune with batch MIRA instead of MERT.")
@click.option("--return-best-dev", is_flag=True, help="Keep the weights of the best dev iteration, not the last.")
@click.option("--predictable-seeds", is_flag=True, help="moses: deterministic random restarts.")
@click.option("--seed", default=1, show_default=True, help="embedded: MERT's random seed.")
@click.option("--moses-home", envvar="MOSES_HOME", help="Moses installation root (default: $MOSES_HOME, or moses on PATH).")
def tune_cmd(ini, backend, dev_src, dev_ref, workdir, out, nbest, maximum_iterations, threads, decoder_flags,
             batch_mira, return_best_dev, predictable_seeds, seed, moses_home):
    """Tune the weights of a moses.ini on a dev set (mert-moses.pl or the embedded MERT)."""
    from pathlib import Path

    from moses_integration.tuning import TuneConfig, tune

    tuned = tune(TuneConfig(backend=backend, ini=Path(ini), dev_src=Path(dev_src), dev_ref=Path(dev_ref),
                            workdir=Path(workdir), out=Path(out) if out else None, nbest=nbest,
                            max_iterations=maximum_iterations, threads=threads, decoder_flags=decoder_flags,
                            batch_mira=batch_mira, return_best_dev=return_best_dev,
                            predictable_seeds=predictable_seeds, seed=seed, moses_home=moses_home),
                 echo=lambda line: click.echo(line, err=True))
    click.echo(f"tuned moses.ini: {tuned}")


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
@click.option("--backend", type=click.Choice(["moses", "embedded"]), default="moses", show_default=True)
@click.option("--detok-lang", default="en", show_default=True, help="Target language for detokenization; 'none' to skip.")
@click.option("--bootstrap", default=1000, show_default=True, help="Paired bootstrap resamples (sacrebleu --paired-bs-n).")
@click.option("--seed", default=12345, show_default=True, help="Bootstrap seed (sacrebleu's default).")
@click.option("--threads", default=1, show_default=True, help="Decoder threads.")
@click.option("--moses-home", envvar="MOSES_HOME", help="Moses installation root (default: $MOSES_HOME, or moses on PATH).")
def evaluate_cmd(systems, models, test_src, test_ref, dev_src, dev_ref, workdir, backend, detok_lang, bootstrap,
                 seed, threads, moses_home):
    """Decode, score (sacrebleu BLEU/chrF, paired bootstrap) and write Table 1 as Markdown and CSV."""
    from pathlib import Path

    from moses_integration.report import EvaluateConfig, SystemSpec, evaluate

    named = _named_paths(systems, "--system")
    mods = _named_paths(models, "--model")
    unknown = set(mods) - set(named)
    if unknown:
        raise click.BadParameter(f"--model for unknown configuration(s): {', '.join(sorted(unknown))}")
    specs = [SystemSpec(n, Path(p), Path(mods[n]) if n in mods else None) for n, p in named.items()]
    df = evaluate(EvaluateConfig(systems=specs, test_src=Path(test_src), test_ref=Path(test_ref),
                                 workdir=Path(workdir), dev_src=Path(dev_src) if dev_src else None,
                                 dev_ref=Path(dev_ref) if dev_ref else None, backend=backend, moses_home=moses_home,
                                 detok_lang=None if detok_lang.lower() == "none" else detok_lang,
                                 bootstrap_samples=bootstrap, seed=seed, threads=threads))
    click.echo(Path(df.attrs["markdown"]).read_text(encoding="utf-8"))
    click.echo(f"wrote {df.attrs['markdown']} and {df.attrs['csv']}")

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

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

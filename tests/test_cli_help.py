"""``phrase-rescore --help`` lists every command with its whole one-line description; so does ``plot --help``."""
from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from phrase_rescore.app.cli import main, summary


def _groups():
    yield [], main
    for name, cmd in main.commands.items():
        if isinstance(cmd, click.Group):
            yield [name], cmd


@pytest.mark.parametrize("path, group", list(_groups()), ids=lambda x: " ".join(x) if isinstance(x, list) else "")
def test_help_lists_every_registered_command_with_its_whole_description(path, group):
    out = CliRunner().invoke(main, path + ["--help"], terminal_width=200)
    assert out.exit_code == 0, out.output
    listing = out.output.split("Commands:", 1)[1]
    rows = {line.split()[0]: " ".join(line.split()[1:]) for line in listing.splitlines() if line.strip()}
    visible = [n for n, c in group.commands.items() if not c.hidden]
    assert sorted(rows) == sorted(visible)                                  # train-cslm among them
    for name in visible:
        assert rows[name] == summary(group.commands[name]), name           # not cut at "Cho et al."
    assert rows.get("train-cslm", "").endswith("on a tokenized CORPUS.") or path


def test_the_group_description_names_every_pipeline_stage():
    text = " ".join((main.help or "").split())
    for stage in ("build-smt", "prepare", "train", "score", "train-cslm", "moses-ini", "tune", "evaluate"):
        assert f" {stage}," in text or f" {stage} " in text, stage


def _commands(group: click.Group, path: list[str]):
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, path + [name])
        else:
            yield path + [name], cmd


@pytest.mark.parametrize("path, cmd", list(_commands(main, [])), ids=lambda x: " ".join(x) if isinstance(x, list) else "")
def test_every_option_a_command_takes_is_in_its_help(path, cmd):
    """A command takes only the options its --help lists: no hidden spelling."""
    with click.Context(cmd, info_name=path[-1]) as ctx:
        hidden = [p.opts for p in cmd.get_params(ctx) if isinstance(p, click.Option) and p.hidden]
    assert not hidden, hidden

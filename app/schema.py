"""Click options and workflow parameters generated from a config's settings (:mod:`phrase_rescore.core.config`).

``@options(TrainConfig)`` gives a command one option per setting
(``--max-steps`` for ``max_steps``, the setting's default and help) and ``--config FILE``, a TOML file
of the same keys as the workflow section; :func:`collect` merges default < environment < file < command
line and checks the result with the config's own check, so the command line and the workflow refuse a
bad value in the same words. :func:`stage_params`, :func:`stage_choices` and :func:`stage_check` give a
workflow stage the same settings.
"""
from __future__ import annotations

from typing import Any, Callable

import click
from click.core import ParameterSource

from phrase_rescore.core.config import (
    Setting,
    check,
    defaults,
    flag_name,
    parse_float,
    parse_number,
    parse_value,
    read_config_file,
    settings,
)

from .stage_settings import AddedWeights, CSLMRerank

CONFIG_HELP = ("A TOML file of option values, key = value with the names in snake_case (as in a workflow section); "
               "options given on the command line override it.")


class Number(click.ParamType):
    """A number option read by the project's one number parser (:func:`~phrase_rescore.core.config.parse_number`:
    ASCII digits as strtol/strtod read a whole token), not by Python's ``int``/``float``, which also take
    ``0_1``, ``٤`` and ``０.５``. A text that is not such a number is passed on as text, for the setting's check
    to refuse in the same words as a ``--config`` file or a workflow (``--lr 0_1: expected a number above 0``)."""

    def __init__(self, kind: type):
        self.kind = kind
        self.name = "integer" if kind is int else "float"

    def convert(self, value, param, ctx):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
        parsed = parse_number(value, self.kind) if isinstance(value, str) else None
        return value if parsed is None else parsed


INT = Number(int)
FLOAT = Number(float)


def _option_of(s: Setting) -> click.Option:
    """The click option of one setting."""
    show = s.default is not None and s.default != {} and s.default != ()
    common = dict(help=s.help, show_default=show, envvar=s.envvar)
    if s.type is bool:
        off = s.secondary or f"no-{s.flag}"
        return click.Option([f"--{s.flag}/--{off}", s.name], default=s.default, **common)
    kind = {int: INT, float: FLOAT}.get(s.type, str) if s.choices is None or s.type is int else str
    default = (",".join(str(v) for v in s.default) if s.type is tuple and s.default is not None
               else None if s.type is dict else s.default)
    metavar = s.metavar or ("[" + "|".join(str(c) for c in s.choices) + "]" if s.choices else None)
    decls = [f"--{s.flag}"] + ([f"-{s.short}"] if s.short else [])
    return click.Option(decls + [s.name], type=kind, default=default, metavar=metavar, **common)


def options(config: type, exclude: tuple[str, ...] = (), config_file: bool = True) -> Callable:
    """Give a command the settings of ``config`` (less ``exclude``) as options, and ``--config``.

    ``config`` is the config class, from a module that loads none of torch, pandas, numpy or sacremoses
    (``pipeline/configs.py``, ``moses_integration/configs.py``), so that ``phrase-rescore --help`` and every
    command start without them; the options themselves are made when the command parses its arguments or
    shows its help (:class:`SettingsCommand`).
    """
    def deco(f):
        f.__settings__ = (config, tuple(exclude), config_file)
        return f
    return deco


class SettingsCommand(click.Command):
    """A click command whose setting options are generated from its config class on first use (see :func:`options`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._settings = getattr(self.callback, "__settings__", None)

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        if self._settings is not None:
            config, exclude, config_file = self._settings
            self._settings = None
            generated = [_option_of(s) for s in settings(config) if s.name not in exclude]
            if config_file:
                generated.insert(0, click.Option(["--config", "config_file"], type=click.Path(dir_okay=False),
                                                 help=CONFIG_HELP))
            self.params.extend(generated)
        return super().get_params(ctx)


def _from_text(s: Setting, text: Any) -> Any:
    """A command-line string as the setting's type: ``0.2,-0.1`` for a list, a TOML table for a dict."""
    if not isinstance(text, str):
        return text
    if s.type is tuple:
        items = [t for t in text.replace(",", " ").split()]
        if s.item is float:
            values = [parse_float(t) for t in items]
            return text if None in values else tuple(values)   # the setting's check refuses the text
        return tuple(items)
    if s.type is dict:
        return parse_value(text, f"--{s.flag} {text}")
    return text


def collect(cls, kwargs: dict, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    """Take ``cls``'s settings (and ``--config``) out of a command's ``kwargs``, merged and checked.

    Order of precedence: the option given on the command line, then the config file, then the environment
    (an ``envvar``), then the default.
    :raises PhraseRescoreError: a bad value, as ``--flag VALUE: expected ...`` (or naming the file and key).
    """
    ctx = click.get_current_context()
    chosen = [s for s in settings(cls) if s.name not in exclude]
    values: dict[str, Any] = {}
    given: set[str] = set()
    for s in chosen:
        value = kwargs.pop(s.name)
        values[s.name] = s.default if s.type is dict and value is None else value  # a table has no text default
        if ctx.get_parameter_source(s.name) == ParameterSource.COMMANDLINE:
            given.add(s.name)
    path = kwargs.pop("config_file", None)
    if path is not None:
        from_file = read_config_file(path, cls, exclude=exclude + tuple(s.name for s in settings(cls)
                                                                          if not s.workflow))
        values.update({k: v for k, v in from_file.items() if k not in given})
    values = {s.name: _from_text(s, values[s.name]) for s in chosen}
    return check(cls, values, flag_name)


def stage_params(cls, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    """A workflow section's parameters and defaults: ``cls``'s settings that a workflow holds."""
    return {k: v for k, v in defaults(cls, workflow_only=True).items() if k not in exclude}


def stage_choices(cls, exclude: tuple[str, ...] = ()) -> dict[str, tuple]:
    """``{key: valid values}`` of the section's settings that have choices."""
    return {s.name: s.choices for s in settings(cls) if s.choices is not None and s.workflow and s.name not in exclude}


def stage_check(cls, exclude: tuple[str, ...] = ()) -> Callable[[dict], None]:
    """A workflow stage's ``check``: the config's own check of the section's values."""
    def run(params: dict) -> None:
        check(cls, {k: v for k, v in params.items() if k in stage_params(cls, exclude)})
    return run


#: Settings a workflow has that no command's options carry: ``(section, config class)``.
WORKFLOW_ONLY = (("moses-ini", AddedWeights), ("evaluate", CSLMRerank))


def _limit_words(s: Setting) -> str | None:
    """A setting's declared limit in words, or None when it declares none beyond a lower bound (a count of
    threads is capped at the cores; a number with an upper bound has its range)."""
    from phrase_rescore.core.config import expected

    if s.cores:
        return f"{expected(s)}; above the machine's cores: the cores, with a note"
    if s.high is not None:
        return expected(s)
    return None


def declared_limits(group: click.Group) -> list[tuple[str, str, str]]:
    """``(command, option, limit)`` of every setting of ``group``'s commands (and of :data:`WORKFLOW_ONLY`'s
    workflow sections) that declares an upper bound or a cap at the cores, in command order; a table setting's
    keys (``--model-overrides hidden_dim``) each on a row of their own. ``docs/promises.md`` ("Limits") lists them."""
    specs: list[tuple[str, str, tuple]] = []

    def walk(g: click.Group, prefix: str) -> None:
        for name in g.list_commands(click.Context(g)):
            cmd = g.commands[name]
            if isinstance(cmd, click.Group):
                walk(cmd, f"{prefix}{name} ")
                continue
            spec = getattr(cmd.callback, "__settings__", None)
            if spec is not None:
                specs.append((f"{prefix}{name}", "--", spec))

    walk(group, "")
    rows = []
    for command, _, (spec, exclude, _config_file) in specs:
        for s in settings(spec):
            if s.name in exclude:
                continue
            words = _limit_words(s)
            if words is not None:
                rows.append((command, f"--{s.flag}", words))
            for key, entry in s.table or ():
                entry_words = _limit_words(entry)
                if entry_words is not None:
                    rows.append((command, f"--{s.flag} {key}", entry_words))
    for section, cls in WORKFLOW_ONLY:
        for s in settings(cls):
            words = _limit_words(s)
            if words is not None:
                rows.append((f"[{section}]", s.name, words))
    return rows


def limits_markdown(group: click.Group) -> str:
    """:func:`declared_limits` as the Markdown table of ``docs/promises.md``."""
    lines = ["| command | option | valid values |", "| --- | --- | --- |"]
    lines += [f"| `{c}` | `{o}` | {w} |" for c, o, w in declared_limits(group)]
    return "\n".join(lines) + "\n"

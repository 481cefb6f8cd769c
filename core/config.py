"""Typed settings: each option of a command is one field of its config dataclass, declared once.

A config dataclass declares every value a user sets with :func:`setting` (the default, a help string,
the valid values or range, the command-line spelling where it must differ). The command's click
options and its workflow section are generated from these declarations (``phrase_rescore.app.schema``),
so both have the same names (``--max-steps`` is ``max_steps``), the same default and the same help,
and :func:`check` refuses a bad value from either with the same words::

    error: --batch-size 0: expected at least 1
    error: wf.toml: [train] batch_size = 0: expected at least 1

A class may add checks of several values together as a static method ``check_settings(values, name)``,
which :func:`check` calls after the per-value checks; ``name(key)`` names a value as the message should
(``--device tpu`` or ``device = 'tpu'``), ``name(key, with_value=False)`` only the option.
"""
from __future__ import annotations

import dataclasses
import datetime
import math
import os
from typing import Any, Callable

from .errors import PhraseRescoreError
from .fileio import BOM

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser as the tomli package
    import tomli as tomllib

_KEY = "phrase_rescore.setting"
TYPES = (bool, int, float, str, tuple, dict)


@dataclasses.dataclass(frozen=True)
class Setting:
    """One declared option: its name, type, default, help and valid values.

    :ivar type: ``bool``, ``int``, ``float``, ``str``, ``tuple`` (of ``item``) or ``dict``.
    :ivar optional: None is a valid value (the default of an option one may leave unset).
    :ivar low, high: the range; ``low_open``/``high_open``: the bound itself is outside it.
    :ivar flag: the long option without dashes (``--{flag}``); the kebab-case of the name unless set.
    :ivar aliases: older spellings the command line still accepts, hidden from ``--help``.
    :ivar secondary: a boolean's off switch without dashes (``no-{flag}`` unless set); ``short``: a one-letter
        option (``-b``) besides the long one.
    :ivar workflow: False for an option the workflow runner decides itself (resuming, the columns it needs).
    """

    name: str
    type: type
    default: Any
    help: str
    choices: tuple | None = None
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    optional: bool = False
    flag: str = ""
    aliases: tuple[str, ...] = ()
    secondary: str = ""
    envvar: str | None = None
    item: type | None = None
    workflow: bool = True
    metavar: str | None = None
    short: str = ""


def setting(default: Any = dataclasses.MISSING, *, help: str, type: type | None = None, choices=None,
            at_least=None, above=None, at_most=None, below=None, optional: bool | None = None, flag: str = "",
            aliases: tuple[str, ...] = (), secondary: str = "", envvar: str | None = None, item: type | None = None,
            workflow: bool = True, metavar: str | None = None, short: str = "",
            default_factory: Any = dataclasses.MISSING):
    """A dataclass field declared as a user setting (see :class:`Setting` for the arguments)."""
    value = default_factory() if default_factory is not dataclasses.MISSING else default
    kind = type or (tuple if isinstance(value, list) else value.__class__)
    assert kind in TYPES, f"a setting's type is one of {TYPES}, not {kind!r} (give type=)"
    meta = dict(type=kind, help=help, choices=None if choices is None else tuple(choices),
                low=above if above is not None else at_least, low_open=above is not None,
                high=below if below is not None else at_most, high_open=below is not None,
                optional=value is None if optional is None else optional, flag=flag, aliases=tuple(aliases),
                secondary=secondary, envvar=envvar, item=item, workflow=workflow, metavar=metavar,
                short=short)
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata={_KEY: meta})
    return dataclasses.field(default=default, metadata={_KEY: meta})


def setting_values(config) -> dict[str, Any]:
    """``{name: value}`` of a config instance's settings."""
    return {s.name: getattr(config, s.name) for s in settings(type(config))}


def settings(cls) -> list[Setting]:
    """The declared settings of a config dataclass, in field order."""
    out = []
    for f in dataclasses.fields(cls):
        meta = f.metadata.get(_KEY)
        if meta is None:
            continue
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        meta = dict(meta, flag=meta["flag"] or f.name.replace("_", "-"))
        out.append(Setting(name=f.name, default=default, **meta))
    return out


def defaults(cls, workflow_only: bool = False) -> dict[str, Any]:
    """``{name: default}`` of the settings (only those a workflow section holds, with ``workflow_only``)."""
    return {s.name: s.default for s in settings(cls) if s.workflow or not workflow_only}


def flag_name(s: Setting, value: Any) -> str:
    """How an error names a command-line value: ``--batch-size 0``."""
    shown = ",".join(str(v) for v in value) if isinstance(value, (list, tuple)) else value
    return f"--{s.flag} {shown}"


def key_name(s: Setting, value: Any) -> str:
    """How an error names a workflow value: ``batch_size = 0`` (a date or time as TOML spells it)."""
    return f"{s.name} = {shown_value(value)}"


#: the TOML date and time values (offset and local date-times, local dates, local times)
DATE_TIME_TYPES = (datetime.date, datetime.time)   # datetime.datetime is a datetime.date


def holds_date_time(value: Any) -> bool:
    """``value`` is a TOML date or time, or a list or table holding one (values no setting takes)."""
    if isinstance(value, DATE_TIME_TYPES):
        return True
    if isinstance(value, (list, tuple)):
        return any(holds_date_time(v) for v in value)
    if isinstance(value, dict):
        return any(holds_date_time(v) for v in value.values())
    return False


def shown_value(value: Any) -> str:
    """A value as a message shows it: ``repr``, but a date or time as TOML spells it (``1979-05-27``,
    ``07:32:00``, ``1979-05-27T07:32:00+00:00``), in a list or table too."""
    if isinstance(value, DATE_TIME_TYPES):
        return value.isoformat()
    if isinstance(value, (list, tuple)) and holds_date_time(value):
        return "[" + ", ".join(shown_value(v) for v in value) + "]"
    if isinstance(value, dict) and holds_date_time(value):
        return "{" + ", ".join(f"{k} = {shown_value(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _range_words(s: Setting) -> str:
    lo = None if s.low is None else f"{'above' if s.low_open else 'at least'} {s.low:g}"
    hi = None if s.high is None else f"{'below' if s.high_open else 'at most'} {s.high:g}"
    if lo and hi and not s.low_open and not s.high_open:
        words = f"from {s.low:g} to {s.high:g}"
        if s.type is int:
            words = f"{s.low:g} to {s.high:g}"
    else:
        words = " and ".join(w for w in (lo, hi) if w)
    if s.type is float and not words.startswith(("at ", "below ")):
        words = "a number " + words
    return words


def expected(s: Setting) -> str:
    """What a valid value of ``s`` is, in words (``at least 1``, ``one of 'raise', 'keep'``)."""
    if s.choices is not None:
        words = "one of " + ", ".join(repr(c) for c in s.choices)
    elif s.low is not None or s.high is not None:
        words = _range_words(s)
    else:
        words = {bool: "true or false", int: "a whole number", float: "a finite number", str: "a string",
                 tuple: f"a list of {'finite numbers' if s.item is float else 'values'}",
                 dict: "a table of key = value"}[s.type]
    return words + (" (or leave it unset)" if s.optional else "")


def _coerce(s: Setting, value: Any, kind: type) -> tuple[bool, Any]:
    """(valid type?, the value as ``kind``): an int is a valid float, a list a valid tuple."""
    if kind is bool or isinstance(value, bool):
        return kind is bool and isinstance(value, bool), value
    if kind is float and isinstance(value, (int, float)):
        return math.isfinite(value), float(value)
    if kind is tuple and isinstance(value, (list, tuple)):
        items = [_coerce(s, v, s.item)[1] if s.item else v for v in value]
        return all(_coerce(s, v, s.item)[0] for v in value) if s.item else True, tuple(items)
    return isinstance(value, kind), value


def check_value(s: Setting, value: Any, name: Callable[[Setting, Any], str]) -> Any:
    """``value`` as ``s`` takes it (an int given for a float becomes a float).

    :raises PhraseRescoreError: ``<name>: expected <what is valid>``.
    """
    if value is None and s.optional:
        return None
    ok, out = _coerce(s, value, s.type)
    if ok and s.choices is not None:
        ok = out in s.choices
    elif ok and s.type in (int, float):
        ok = not ((s.low is not None and (out < s.low or (s.low_open and out == s.low)))
                  or (s.high is not None and (out > s.high or (s.high_open and out == s.high))))
    if not ok:
        words = expected(s)
        number = not isinstance(value, bool) and isinstance(value, int if s.type is int else (int, float))
        if s.choices is None and s.type in (int, float) and (s.low, s.high) != (None, None) and not number:
            kind = "a whole number" if s.type is int else "a number"     # a range alone would not say it
            words = words if words.startswith(kind) else f"{kind} {words}"
        raise PhraseRescoreError(f"{name(s, value)}: expected {words}")
    return out


def check(cls, values: dict[str, Any], name: Callable[[Setting, Any], str] = key_name,
          combined: bool = True) -> dict[str, Any]:
    """Check every setting of ``cls`` that ``values`` holds, then (with ``combined``) the class's ``check_settings``.

    :param name: names a bad value in the message: :func:`key_name` (a workflow) or :func:`flag_name`.
    :returns: the values as the settings take them.
    :raises PhraseRescoreError: the first bad value, with what was expected.
    """
    out = dict(values)
    for s in settings(cls):
        if s.name in out:
            out[s.name] = check_value(s, out[s.name], name)
    together = getattr(cls, "check_settings", None) if combined else None
    if together is not None:
        by_name = {s.name: s for s in settings(cls)}

        def named(key: str, with_value: bool = True) -> str:
            shown = name(by_name[key], out[key])
            return shown if with_value else shown.split(" ")[0]
        together(out, named)
    return out


def parse_value(text: str) -> Any:
    """A value typed on a command line: a TOML value when it parses as one (3, 0.5, true, "x", [1, 2],
    {a = 1}) other than a date or time, else the text itself."""
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text
    return text if holds_date_time(value) else value     # no setting takes a date or time: keep the text


def read_toml(path: str | os.PathLike, what: str = "file") -> dict[str, Any]:
    """The table of a TOML file (a workflow, a ``--config`` file).

    :param what: what the file is, for the message ("workflow file").
    :raises PhraseRescoreError: the file is missing, not a file, not UTF-8 or not TOML.

    A UTF-8 byte-order mark starting the file is dropped, as for every text read for its content
    (:mod:`.fileio`); TOML parsers would otherwise refuse line 1.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
        return tomllib.loads(data[len(BOM):].decode("utf-8") if data.startswith(BOM) else data.decode("utf-8"))
    except FileNotFoundError:
        raise PhraseRescoreError(f"{what} not found", path) from None
    except IsADirectoryError:
        raise PhraseRescoreError(f"expected a {what}, found a directory", path) from None
    except UnicodeDecodeError as e:
        raise PhraseRescoreError(f"not UTF-8 text (byte {e.start}): expected a TOML {what}", path) from None
    except tomllib.TOMLDecodeError as e:
        raise PhraseRescoreError(f"not a valid TOML file: {e}", path) from None


def read_config_file(path: str | os.PathLike, cls, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    """The settings in a TOML file of ``key = value`` lines (the keys of the command's workflow section).

    :raises PhraseRescoreError: not TOML, an unknown key (listing the valid ones), a bad value.
    """
    data = read_toml(path, "config file")
    valid = {s.name: s for s in settings(cls) if s.name not in exclude}
    for k in data:
        if k not in valid:
            raise PhraseRescoreError(f"unknown key {k!r}; valid keys: {', '.join(sorted(valid))}", path)
    try:
        return {k: check_value(valid[k], v, key_name) for k, v in data.items()}
    except PhraseRescoreError as e:
        raise PhraseRescoreError(e.message, path) from None

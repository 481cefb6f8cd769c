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
import re
import sys
from typing import Any, Callable

from .bom import drop_bom
from .cores import available_cores
from .errors import PhraseRescoreError

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
    :ivar secondary: a boolean's off switch without dashes (``no-{flag}`` unless set); ``short``: a one-letter
        option (``-b``) besides the long one.
    :ivar workflow: False for an option the workflow runner decides itself (resuming, the columns it needs).
    :ivar cores: a count of threads or processes: a value above the machine's cores is used as the cores, with a
        one-line note (:func:`cap_to_cores`), never refused.
    :ivar table: for a ``dict`` setting, the keys it may hold, each ``{"type": int, "at_least": 1, "at_most": N}``
        (the arguments of :func:`setting` for one value); a key not declared is refused.
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
    secondary: str = ""
    envvar: str | None = None
    item: type | None = None
    workflow: bool = True
    metavar: str | None = None
    short: str = ""
    cores: bool = False
    table: tuple | None = None


def setting(default: Any = dataclasses.MISSING, *, help: str, type: type | None = None, choices=None,
            at_least=None, above=None, at_most=None, below=None, optional: bool | None = None, flag: str = "",
            secondary: str = "", envvar: str | None = None, item: type | None = None,
            workflow: bool = True, metavar: str | None = None, short: str = "", cores: bool = False,
            table: dict | None = None, default_factory: Any = dataclasses.MISSING):
    """A dataclass field declared as a user setting (see :class:`Setting` for the arguments).

    The range (``at_least``/``above``, ``at_most``/``below``) is part of the declaration: every value of the
    setting, from the command line, a ``--config`` file or a workflow, is checked against it before anything
    runs (:func:`check_value`), and ``docs/promises.md`` ("Limits") lists them. A ``tuple`` of numbers checks
    each item against it.
    """
    value = default_factory() if default_factory is not dataclasses.MISSING else default
    kind = type or (tuple if isinstance(value, list) else value.__class__)
    assert kind in TYPES, f"a setting's type is one of {TYPES}, not {kind!r} (give type=)"
    meta = dict(type=kind, help=help, choices=None if choices is None else tuple(choices),
                low=above if above is not None else at_least, low_open=above is not None,
                high=below if below is not None else at_most, high_open=below is not None,
                optional=value is None if optional is None else optional, flag=flag,
                secondary=secondary, envvar=envvar, item=item, workflow=workflow, metavar=metavar,
                short=short, cores=cores, table=None if table is None else tuple(
                    (k, _entry(k, **v)) for k, v in table.items()))
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata={_KEY: meta})
    return dataclasses.field(default=default, metadata={_KEY: meta})


def _entry(key: str, type: type, at_least=None, above=None, at_most=None, below=None) -> Setting:
    """One declared value of a table setting, as a :class:`Setting` of its own."""
    return Setting(name=key, type=type, default=None, help="", low=above if above is not None else at_least,
                   low_open=above is not None, high=below if below is not None else at_most,
                   high_open=below is not None)


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


# ----------------------------------------------------------------------------- numbers
# The one parser of every number a user types: a flag, a --config file, a workflow key, --set, a table such as
# --model-overrides, moses-ini --weights, a moses.ini and an n-best list. A number is read as C's strtol (an
# integer) and C++'s strtod / double-conversion (a decimal) read a whole token: ASCII digits only. Python's int()
# and float() also take '0_2', full-width '０.５' and Arabic-Indic '٤', which C reads as another number or not
# at all, so a tool that took them would run with values no other reader of the same text sees.

#: An integer as strtol (base 10) reads a whole token: an optional sign and ASCII digits.
INT_TOKEN = r"[+-]?[0-9]+"
#: A decimal number as strtod / double-conversion's ``StringToFloat`` reads a whole token: an optional sign,
#: ASCII digits with at most one point (``5.``, ``.5``), an optional exponent; no hex, ``inf``, ``nan`` or ``_``.
FLOAT_TOKEN = r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
#: A count as Moses's ``Scan<size_t>`` reads it whole: ASCII digits only.
COUNT_TOKEN = r"[0-9]+"
INT_TOKEN_RE = re.compile(INT_TOKEN)
FLOAT_TOKEN_RE = re.compile(FLOAT_TOKEN)
COUNT_TOKEN_RE = re.compile(COUNT_TOKEN)
#: The largest finite float32 (FLT_MAX): Moses reads weights and scores as C ``float``.
FLOAT32_MAX = 3.4028234663852886e38
#: The largest size of a model's layer (embedding, hidden, maxout, rank) a setting accepts: 16 times the paper's
#: 1,000 hidden units, far above any preset, and small enough that one layer's matrices fit in memory.
MODEL_DIM_MAX = 16_384
#: The largest seed every consumer takes (torch, numpy and Moses's mert read a seed as a signed 64-bit integer).
SEED_MAX = 2 ** 63 - 1
NUMBER_SYNTAX = "ASCII digits with an optional sign, point and exponent, e.g. 0.2, -1 or 3e-05"


def parse_int(text: str) -> int | None:
    """``text`` as an integer when it is one whole strtol token (``-12``), else None (``1_0``, ``١``, ``1.0``)."""
    return int(text) if isinstance(text, str) and INT_TOKEN_RE.fullmatch(text) else None


def parse_float(text: str) -> float | None:
    """``text`` as a finite float when it is one whole strtod token (``0.5``, ``-3e-05``, ``7``), else None
    (``0_5``, ``０.５``, ``inf``, ``nan``, ``1e999``)."""
    if not isinstance(text, str) or FLOAT_TOKEN_RE.fullmatch(text) is None:
        return None
    x = float(text)
    return x if math.isfinite(x) else None


def spells_non_finite(token: str) -> bool:
    """``token`` spells an infinity or a NaN as C's strtod would read one (``inf``, ``-Infinity``, ``NaN``):
    a token that is no number here (:data:`FLOAT_TOKEN`) for being not finite rather than malformed."""
    return token.lstrip("+-").lower() in ("inf", "infinity", "nan")


def parse_number(text: str, kind: type = float) -> int | float | None:
    """:func:`parse_int` for ``kind`` int, else :func:`parse_float`."""
    return parse_int(text) if kind is int else parse_float(text)


_TOML_BARE_RE = re.compile(r"[A-Za-z0-9_+\-.:]+")
_TOML_NUMBER_START_RE = re.compile(r"[+-]?[0-9]")


def toml_number_outside_syntax(text: str) -> tuple[int, str] | None:
    """The first number literal of a (valid) TOML text that is not written as the command line reads numbers,
    as ``(line, literal)``: TOML also takes ``1_000``, ``0x1f``, ``0o17`` and ``0b1``; None when there is none.
    Strings and comments are skipped; a bare key spelled like such a number counts as one."""
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif c == "#":
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c in "\"'":
            triple = text.startswith(c * 3, i)
            quote = c * 3 if triple else c
            j = i + len(quote)
            while j < n and not text.startswith(quote, j):
                if c == '"' and text[j] == "\\":
                    j += 1
                j += 1
            while triple and text.startswith(c, j + len(quote)):   # a closing """" ends the string with a quote
                j += 1
            line += text.count("\n", i, j)
            i = j + len(quote)
        else:
            m = _TOML_BARE_RE.match(text, i)
            if m is None:
                i += 1
                continue
            tok = m.group()
            if _TOML_NUMBER_START_RE.match(tok):
                body = tok.lstrip("+-")
                if "_" in tok or body[:2].lower() in ("0x", "0o", "0b"):
                    return line, tok
            i = m.end()
    return None


def _toml_number_message(literal: str) -> str:
    return (f"{literal} is not a number as this tool reads numbers ({NUMBER_SYNTAX}; no '_' and no 0x, 0o or 0b "
            "prefix, which TOML takes and the command line does not)")


_NOTED: set = set()


def machine_cores() -> int:
    """The cores this process may run on (:func:`.cores.available_cores`, the one home of that rule)."""
    return available_cores()


def cap_to_cores(value: int, what: str) -> int:
    """``value`` threads or processes, at most the machine's cores; a value above them is used as the cores,
    with a one-line note on stderr (once per value in a process).

    :param what: how the note names the value (``--threads``, ``[tune] threads``, ``-threads``).
    """
    cores = machine_cores()
    if value <= cores:
        return value
    if value not in _NOTED:       # one note for a value, however many places cap it
        _NOTED.add(value)
        print(f"note: {what} {value} is more than this machine's {cores} cores: using {cores}", file=sys.stderr,
              flush=True)
    return cores



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


def _bound(x: float) -> str:
    """A bound as a message shows it: an integer in full (``9223372036854775807``), others as ``%g``."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e16 or isinstance(x, int) else f"{x:g}"


def _range_words(s: Setting) -> str:
    lo = None if s.low is None else f"{'above' if s.low_open else 'at least'} {_bound(s.low)}"
    hi = None if s.high is None else f"{'below' if s.high_open else 'at most'} {_bound(s.high)}"
    if lo and hi and not s.low_open and not s.high_open:
        words = f"from {_bound(s.low)} to {_bound(s.high)}"
        if s.type is int:
            words = f"{_bound(s.low)} to {_bound(s.high)}"
    else:
        words = " and ".join(w for w in (lo, hi) if w)
    if s.type is float and not words.startswith(("at ", "below ")):
        words = "a number " + words
    return words


def expected(s: Setting) -> str:
    """What a valid value of ``s`` is, in words (``at least 1``, ``one of 'raise', 'keep'``)."""
    ranged = s.low is not None or s.high is not None
    if s.choices is not None:
        words = "one of " + ", ".join(repr(c) for c in s.choices)
    elif s.type is tuple and s.item in (int, float) and ranged:
        words = f"a list of {'whole numbers' if s.item is int else 'numbers'} {_range_words(s).removeprefix('a number ')}"
    elif s.type is dict and s.table:
        words = "a table of " + ", ".join(f"{k} = {expected(e)}" for k, e in s.table)
    elif ranged:
        words = _range_words(s)
    else:
        words = {bool: "true or false", int: "a whole number", float: "a finite number", str: "a string",
                 tuple: f"a list of {'finite numbers' if s.item is float else 'values'}",
                 dict: "a table of key = value"}[s.type]
    return words + (" (or leave it unset)" if s.optional else "")


def _finite(value: int | float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:           # an int too large for a float
        return False


def _coerce(s: Setting, value: Any, kind: type) -> tuple[bool, Any]:
    """(valid type?, the value as ``kind``): an int is a valid float, a list a valid tuple."""
    if kind is bool or isinstance(value, bool):
        return kind is bool and isinstance(value, bool), value
    if kind is float and isinstance(value, (int, float)):
        return (True, float(value)) if _finite(value) else (False, value)
    if kind is tuple and isinstance(value, (list, tuple)):
        items = [_coerce(s, v, s.item)[1] if s.item else v for v in value]
        return all(_coerce(s, v, s.item)[0] for v in value) if s.item else True, tuple(items)
    return isinstance(value, kind), value


def _in_range(s: Setting, x: int | float) -> bool:
    return not ((s.low is not None and (x < s.low or (s.low_open and x == s.low)))
                or (s.high is not None and (x > s.high or (s.high_open and x == s.high))))


def _in_bounds(s: Setting, out: Any) -> bool:
    """Whether a value of the setting's type is one of its choices and within its range (each item of a list)."""
    if s.choices is not None:
        return out in s.choices
    if s.type in (int, float):
        return _in_range(s, out)
    if s.type is tuple and s.item in (int, float):
        return all(_in_range(s, x) for x in out)
    return True


def _check_table(s: Setting, table: dict, value: Any, name: Callable[[Setting, Any], str]) -> dict:
    """A table setting's value with each key checked as its declared entry; an undeclared key is refused."""
    entries = dict(s.table)
    unknown = sorted(str(k) for k in table if k not in entries)
    if unknown:
        raise PhraseRescoreError(f"{name(s, value)}: unknown key(s) {', '.join(unknown)}; valid keys: "
                                 f"{', '.join(sorted(entries))}")
    out = dict(table)
    for k, v in out.items():
        out[k] = check_value(entries[k], v, lambda e, x: f"{name(s, value)}: {e.name} = {shown_value(x)}")
    return out


def _expected_of(s: Setting, value: Any) -> str:
    """What a message says a valid value is, naming the kind of number when a range alone would not say it
    (``--lr x: expected a number above 0``)."""
    words = expected(s)
    number = not isinstance(value, bool) and isinstance(value, int if s.type is int else (int, float))
    if s.choices is None and s.type in (int, float) and (s.low, s.high) != (None, None) and not number:
        kind = "a whole number" if s.type is int else "a number"
        words = words if words.startswith(kind) else f"{kind} {words}"
    return words


def _option_of(shown: str) -> str:
    """The option or key of a named value, without the value (``--threads`` of ``--threads 64``)."""
    return shown.split(" = ")[0] if " = " in shown else shown.rsplit(" ", 1)[0]


def check_value(s: Setting, value: Any, name: Callable[[Setting, Any], str]) -> Any:
    """``value`` as ``s`` takes it (an int given for a float becomes a float; a count of threads above the
    machine's cores becomes the cores, with a note: :func:`cap_to_cores`).

    :raises PhraseRescoreError: ``<name>: expected <what is valid>``.
    """
    if value is None and s.optional:
        return None
    ok, out = _coerce(s, value, s.type)
    ok = ok and _in_bounds(s, out)
    if ok and s.choices is None and s.type is dict and s.table:
        out = _check_table(s, out, value, name)
    if not ok:
        raise PhraseRescoreError(f"{name(s, value)}: expected {_expected_of(s, value)}")
    if s.cores and isinstance(out, int):
        out = cap_to_cores(out, _option_of(name(s, value)))
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


def parse_value(text: str, what: str | None = None) -> Any:
    """A value typed on a command line: a TOML value when it parses as one (3, 0.5, true, "x", [1, 2],
    {a = 1}) other than a date or time, else the text itself.

    :param what: how a message names the value (``--set train.seed=1_0``).
    :raises PhraseRescoreError: a number TOML takes that the command line does not (``1_000``, ``0x10``):
        every number is read as :func:`parse_number` reads it.
    """
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text
    if holds_date_time(value):
        return text       # no setting takes a date or time: keep the text
    bad = toml_number_outside_syntax(f"v = {text}")
    if bad is not None:
        raise PhraseRescoreError(f"{what or text}: {_toml_number_message(bad[1])}")
    return value


def read_toml(path: str | os.PathLike, what: str = "file") -> dict[str, Any]:
    """The table of a TOML file (a workflow, a ``--config`` file).

    :param what: what the file is, for the message ("workflow file").
    :raises PhraseRescoreError: the file is missing, not a file, not UTF-8 or not TOML, or it writes a number
        as TOML reads it and the command line does not (``1_000``, ``0x10``: :func:`toml_number_outside_syntax`).

    A UTF-8 byte-order mark starting the file is dropped, as for every text read for its content
    (:mod:`.bom`); TOML parsers would otherwise refuse line 1.
    """
    try:
        with open(path, "rb") as f:
            raw = f.read()
        text = drop_bom(raw, "strip", path).decode("utf-8")
        data = tomllib.loads(text)
    except FileNotFoundError:
        raise PhraseRescoreError(f"{what} not found", path) from None
    except IsADirectoryError:
        raise PhraseRescoreError(f"expected a {what}, found a directory", path) from None
    except UnicodeDecodeError as e:
        raise PhraseRescoreError(f"not UTF-8 text (byte {e.start}): expected a TOML {what}", path) from None
    except tomllib.TOMLDecodeError as e:
        raise PhraseRescoreError(f"not a valid TOML file: {e}", path) from None
    bad = toml_number_outside_syntax(text)
    if bad is not None:
        raise PhraseRescoreError(_toml_number_message(bad[1]), path, bad[0])
    return data


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

"""Output paths: the one home of refusing, before a command writes anything, an output that would destroy
one of its inputs or another of its outputs.

:func:`check_outputs` refuses an output that is one of the command's inputs (by path, symbolic link or hard
link), another of its outputs, or a folder holding an input.
"""
from __future__ import annotations

import os
from typing import Mapping, Sequence, Union

from .errors import PhraseRescoreError

PathArg = Union[str, os.PathLike]
PathsArg = Union[PathArg, Sequence[PathArg], None]


def _named(paths: Mapping[str, PathsArg] | None) -> list[tuple[str, str]]:
    """(name, path) for every path given; a value may be one path, several, or None."""
    out = []
    for name, value in (paths or {}).items():
        values = [value] if value is None or isinstance(value, (str, os.PathLike)) else list(value)
        out.extend((name, os.fspath(v)) for v in values if v is not None)
    return out


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except (OSError, ValueError):
        return None


def _same_file(a: str, b: str) -> str | None:
    """How ``a`` and ``b`` are one file ("", "through a symbolic link", "a hard link"), None when not."""
    sa, sb = _stat(a), _stat(b)
    if sa is not None and sb is not None:
        if (sa.st_dev, sa.st_ino) != (sb.st_dev, sb.st_ino):
            return None
    elif os.path.realpath(a) != os.path.realpath(b):
        return None
    if os.path.abspath(a) == os.path.abspath(b):
        return ""
    if os.path.realpath(a) == os.path.realpath(b):
        return " (through a symbolic link)"
    return " (a hard link to it)"


def _inside(path: str, folder: str) -> bool:
    """``path`` is ``folder`` or lies below it, as written or with symbolic links resolved."""
    for p in {os.path.abspath(path), os.path.realpath(path)}:
        for d in {os.path.abspath(folder), os.path.realpath(folder)}:
            if p == d or p.startswith(d.rstrip(os.sep) + os.sep):
                return True
    return False


def check_outputs(inputs: Mapping[str, PathsArg], outputs: Mapping[str, PathsArg],
                  out_dirs: Mapping[str, PathsArg] | None = None) -> None:
    """Refuse a command's outputs that would destroy one of its inputs or another of its outputs.

    Keys name the option or argument (``"--out"``, ``"TABLE"``); a value is a path, a list of paths
    or None (not given). An output file may not be an input (the same path, a symbolic link to it
    or a hard link: ``st_dev``/``st_ino`` when both exist, resolved paths otherwise), nor another
    output. An output folder may not be an input nor hold one, since a command may write or
    replace any name inside its folder; a folder inside an input folder is fine.

    :raises PhraseRescoreError: naming the output's path and both options.
    """
    ins, files, dirs = _named(inputs), _named(outputs), _named(out_dirs)
    for out_name, out in files:
        for in_name, inp in ins:
            how = _same_file(out, inp)
            if how is not None:
                raise PhraseRescoreError(f"{out_name} would overwrite the input {in_name} {inp}{how}: "
                                         "choose another path", out)
    for dir_name, folder in dirs:
        for in_name, inp in ins:
            if _same_file(folder, inp) is not None or _inside(inp, folder):
                what = "is" if _same_file(folder, inp) is not None else "holds"
                raise PhraseRescoreError(f"the output folder {dir_name} {what} the input {in_name} {inp}, and the "
                                         "command writes and replaces files there: choose another folder", folder)
    everything = files + dirs
    for i, (a_name, a) in enumerate(everything):
        for b_name, b in everything[i + 1:]:
            how = _same_file(a, b)
            if how is not None:
                raise PhraseRescoreError(f"{a_name} and {b_name} ({b}) are one file{how}: one would overwrite "
                                         "the other; choose different paths", a)

"""Training curves (training loss and validation perplexity by step) and tuning curves (dev BLEU by MERT
iteration, one line per configuration), each drawn from the log its command writes.

A log is read generically, so every model's log draws the same way: a CSV file with a header line (as
``train``'s ``train_log.csv`` and MERT's ``tune-log.csv``) or JSON lines, one object per row (as
``train-seq2seq``'s ``train_log.jsonl``). The x axis is the first of :data:`STEP_COLUMNS` the log has;
columns whose name holds ``loss`` are losses, those holding ``ppl`` or ``perplexity`` (a ``best_``
running minimum aside) are perplexities.
"""
from __future__ import annotations

import csv
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.reading import read_lines

from .render import COLOURS, new_figure, png_bytes, styled, write_png

STEP_COLUMNS = ("step", "steps", "updates", "iteration", "epoch")
TRAINING_SIZE = (1000, 400)   # pixels: loss | perplexity
TUNING_SIZE = (800, 450)


@dataclass
class Log:
    """A numeric log: its column names in file order and one float array per column (NaN where empty)."""

    path: str
    columns: list[str]
    values: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(next(iter(self.values.values()))) if self.values else 0


def _number(text, column: str, path, line: int) -> float:
    if text is None or text == "":
        return math.nan
    if isinstance(text, bool) or not isinstance(text, (int, float, str)):
        raise PhraseRescoreError(f"column {column!r}: {text!r} is not a number; expected a number or nothing",
                                 path, line)
    try:
        return float(text)
    except ValueError:
        raise PhraseRescoreError(f"column {column!r}: {text!r} is not a number; expected a number or nothing",
                                 path, line) from None


def read_log(path: str | os.PathLike) -> Log:
    """Read a CSV (header line first) or JSON-lines log of numbers.

    :raises PhraseRescoreError: a missing file, a row with another number of fields than the header, a
        value that is not a number, a line that is not a JSON object, no rows; naming the file and line.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise PhraseRescoreError("log file not found", path)
    lines = [(n, text) for n, text, _ in read_lines(path) if text.strip()]
    if not lines:
        raise PhraseRescoreError("the log is empty: expected a header line and at least one row", path)
    if lines[0][1].lstrip().startswith("{"):
        return _read_json_lines(path, lines)
    return _read_csv(path, lines)


def _read_json_lines(path: str, lines: list[tuple[int, str]]) -> Log:
    """A log of one JSON object per line; its columns are the keys whose values are not strings, lists or
    objects, in the order they first appear."""
    columns: list[str] = []
    rows: list[tuple[int, dict]] = []
    for n, text in lines:
        try:
            rec = json.loads(text)
        except json.JSONDecodeError as e:
            raise PhraseRescoreError(f"not a JSON object ({e.msg}); expected one JSON object per line",
                                     path, n) from None
        if not isinstance(rec, dict):
            raise PhraseRescoreError("not a JSON object; expected one JSON object per line", path, n)
        columns += [k for k in rec if k not in columns and not isinstance(rec[k], (dict, list, str))]
        rows.append((n, rec))
    values = {c: np.array([_number(rec.get(c), c, path, n) for n, rec in rows]) for c in columns}
    return Log(path, columns, values)


def _read_csv(path: str, lines: list[tuple[int, str]]) -> Log:
    """A CSV log: a header of distinct, non-empty names, then rows of as many fields."""
    header = next(csv.reader([lines[0][1]]))
    if len(set(header)) != len(header) or any(not h.strip() for h in header):
        raise PhraseRescoreError(f"bad header {header}: expected distinct, non-empty column names", path, lines[0][0])
    if len(lines) == 1:
        raise PhraseRescoreError("the log has a header but no rows: expected at least one row", path)
    cols: list[list[float]] = [[] for _ in header]
    for n, text in lines[1:]:
        fields = next(csv.reader([text]))
        if len(fields) != len(header):
            raise PhraseRescoreError(f"{len(fields)} fields; expected {len(header)} as in the header", path, n)
        for i, (h, v) in enumerate(zip(header, fields)):
            cols[i].append(_number(v.strip(), h, path, n))
    return Log(path, list(header), {h: np.array(c) for h, c in zip(header, cols)})


def step_column(log: Log) -> str:
    for c in STEP_COLUMNS:
        if c in log.values:
            return c
    raise PhraseRescoreError(f"no step column (columns: {', '.join(log.columns)}); expected one of "
                             f"{', '.join(STEP_COLUMNS)}", log.path, 1)


def curve_columns(log: Log) -> tuple[list[str], list[str]]:
    """(loss columns, perplexity columns) of a training log, in file order."""
    loss = [c for c in log.columns if "loss" in c.lower()]
    ppl = [c for c in log.columns if ("ppl" in c.lower() or "perplexity" in c.lower())
           and not c.lower().startswith("best")]
    if not loss and not ppl:
        raise PhraseRescoreError(f"no loss or perplexity column (columns: {', '.join(log.columns)}); expected a "
                                 "column named like train_loss or valid_ppl", log.path, 1)
    return loss, ppl


def _plot_columns(ax, x: np.ndarray, log: Log, columns: Sequence[str]) -> None:
    for i, c in enumerate(columns):
        y = log.values[c]
        ok = np.isfinite(x) & np.isfinite(y)
        ax.plot(x[ok], y[ok], color=COLOURS[i % len(COLOURS)], marker="." if ok.sum() < 60 else None,
                linewidth=1.5, label=c)
    ax.legend(loc="upper right", fontsize=9)


def training_curves(log_path: str | os.PathLike, title: str = "Training") -> bytes:
    """PNG bytes (:data:`TRAINING_SIZE`): the log's losses (left) and perplexities (right, log scale) by step."""
    log = read_log(log_path)
    x_col = step_column(log)
    loss, ppl = curve_columns(log)
    x = log.values[x_col]
    with styled():
        fig = new_figure(*TRAINING_SIZE)
        panels = [(cols, name) for cols, name in ((loss, "loss"), (ppl, "perplexity"))
                  if cols]
        axes = fig.subplots(1, len(panels), squeeze=False)[0]
        for ax, (cols, name) in zip(axes, panels):
            _plot_columns(ax, x, log, cols)
            ax.set_xlabel(x_col)
            ax.set_ylabel(name)
            if name == "perplexity" and all(np.nanmin(log.values[c]) > 0 for c in cols
                                            if np.isfinite(log.values[c]).any()):
                ax.set_yscale("log")
        fig.suptitle(f"{title}: {Path(log.path).name}, {len(log)} rows")
        fig.subplots_adjust(left=0.07, right=0.98, bottom=0.13, top=0.88, wspace=0.22)
        return png_bytes(fig)


def tuning_curves(logs: Sequence[tuple[str, str | os.PathLike]], title: str = "MERT tuning") -> bytes:
    """PNG bytes (:data:`TUNING_SIZE`): dev BLEU by MERT iteration, one line per ``(configuration, tune-log.csv)``;
    each configuration's best iteration is ringed."""
    if not logs:
        raise PhraseRescoreError("no tuning log to draw: expected at least one configuration's tune-log.csv")
    read = []
    for name, path in logs:
        log = read_log(path)
        for c in ("iteration", "dev_bleu"):
            if c not in log.values:
                raise PhraseRescoreError(f"no {c!r} column (columns: {', '.join(log.columns)}); expected MERT's "
                                         "tune-log.csv with iteration and dev_bleu", log.path, 1)
        read.append((name, log))
    with styled():
        fig = new_figure(*TUNING_SIZE)
        ax = fig.add_subplot(1, 1, 1)
        for i, (name, log) in enumerate(read):
            x, y = log.values["iteration"], log.values["dev_bleu"]
            ok = np.isfinite(x) & np.isfinite(y)
            colour = COLOURS[i % len(COLOURS)]
            ax.plot(x[ok], y[ok], color=colour, marker="o", markersize=4, linewidth=1.5, label=name)
            if ok.any():
                best = int(np.argmax(np.where(ok, y, -np.inf)))
                ax.plot([x[best]], [y[best]], marker="o", markersize=11, markerfacecolor="none",
                        markeredgecolor=colour, linestyle="none")
        ax.set_xlabel("MERT iteration")
        ax.set_ylabel("dev BLEU (1-best of the iteration's decode)")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.legend(loc="lower right")
        ax.set_title(title)
        fig.subplots_adjust(left=0.1, right=0.97, bottom=0.12, top=0.91)
        return png_bytes(fig)


def write_training_curves(log_path, out_png, title: str = "Training") -> int:
    """Draw :func:`training_curves` into ``out_png``; returns the bytes written."""
    return write_png(training_curves(log_path, title), out_png)


def write_tuning_curves(logs, out_png, title: str = "MERT tuning") -> int:
    """Draw :func:`tuning_curves` into ``out_png``; returns the bytes written."""
    return write_png(tuning_curves(logs, title), out_png)

"""``phrase-rescore moses-ini``: point a moses.ini at the rescored phrase table.

The phrase dictionary's ``path`` becomes the new table, ``num-features`` grows by the number of score
columns ``score`` added, and the same number of initial weights is appended to its ``[weight]`` line, so
features and weights always agree (Moses stops with "Mismatch in number of features and number of
weights" otherwise). Every other line of the file is kept byte for byte.

The added columns are the new table's score count (read from its first line, not assumed) minus the
count of the table the ini points at now. That count must equal the ini's ``num-features``: an ini that
already disagrees with its own table (Moses would stop with "Size of scoreVector != number") is refused,
naming both files and both counts, rather than having the difference taken for new columns. Where the
old table cannot be read (a binarized table, a path that does not exist here), the count is checked
against ``num-features`` plus the number of ``--weights`` given; without either, it rests on
``num-features`` alone and the summary says so.

An added column that holds the same value on every line of the new table is refused, naming it: Moses
adds ln(value) for each phrase pair a hypothesis uses, so such a feature is zero (value 1) or a multiple of
the phrase count that PhrasePenalty already is; MERT can measure nothing about it, and its tuned weight, and
the BLEU of the configuration that adds it, would be noise (a table of one line is not judged). (The unknown-word column is constant when the networks' shortlists hold every word
of the table: ``prepare --vocab-size`` at or above the vocabulary.)

Initial weights of the added columns default to :data:`DEFAULT_NEW_WEIGHT` (0.2 each, the value
``train-model.perl`` gives every phrase-table score); tuning replaces them.

A ``PhraseDictionaryCompact`` reads a binarized table (``.minphr``), so the new text table must be
binarized with ``processPhraseTableMin -in NEW -out PREFIX -nscores N -threads T`` (it writes
``PREFIX.minphr``). With a Moses installation that has the tool, this is run and the ini points at the
result; without one, the command is reported for the user to run and the ini already points at
``PREFIX.minphr``.

Nothing the old system reads is overwritten: before anything is written, ``out``, and for a
PhraseDictionaryCompact ``PREFIX.minphr`` and processPhraseTableMin's log ``PREFIX.processPhraseTableMin.log``,
are checked against the inputs (the old ini, the new table and every model file the old ini names,
:meth:`~.moses_ini.MosesIni.model_files`). The default prefix of ``/m/phrase-table.gz`` is ``/m/phrase-table``,
whose ``.minphr`` is the old system's own binarized table when it was built beside it: that is refused
with advice to choose another prefix. The path written into the new ini must be one Moses reads back
(:func:`~.moses_ini.check_ini_path`).
"""
from __future__ import annotations

import math
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from phrase_rescore.core import children
from phrase_rescore.core.atomic_write import atomic_path, fsync_dir, fsync_file
from phrase_rescore.core.config import cap_to_cores
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.file_errors import naming
from phrase_rescore.core.output_paths import check_outputs
from phrase_rescore.core.reading import open_binary_read
from phrase_rescore.core.temp_names import temp_dir_beside

from .configs import RewriteConfig
from .moses_ini import check_ini_path, read_moses_ini
from .moses_install import find_moses
from .moses_system import pick_phrase_dictionary
from .phrase_table import FIELD_SEP, num_scores

DEFAULT_NEW_WEIGHT = 0.2
MINPHR = ".minphr"
BINARIZER_LOG = ".processPhraseTableMin.log"


@dataclass
class RewriteResult:
    """What ``moses-ini`` did."""

    out: Path
    feature: str
    old_count: int
    new_count: int
    added_weights: list[float]
    table_path_in_ini: str
    binarize_argv: list[str] | None = None
    binarized: bool = False
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        lines = [f"wrote {self.out}: {self.feature} num-features {self.old_count} -> {self.new_count}, "
                 f"path={self.table_path_in_ini}, added weights {' '.join(map(str, self.added_weights))}"]
        return "\n".join(lines + self.notes)


def process_phrase_table_min_argv(binary: str | os.PathLike, table: str | os.PathLike, out_prefix: str | os.PathLike,
                                  nscores: int, threads: int = 1) -> list[str]:
    """The argv that binarizes a text phrase table for PhraseDictionaryCompact (writes ``out_prefix.minphr``)."""
    return [os.fspath(binary), "-in", os.fspath(table), "-out", os.fspath(out_prefix),
            "-nscores", str(int(nscores)), "-threads", str(cap_to_cores(int(threads), "threads"))]


def default_binarized_prefix(table: Path) -> Path:
    """``/x/phrase-table.rnn.gz`` → ``/x/phrase-table.rnn`` (processPhraseTableMin adds ``.minphr``)."""
    name = table.name
    for suffix in (".gz", ".txt"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return table.with_name(name)


def constant_columns(table: str | os.PathLike, first: int, count: int) -> tuple[dict[int, bytes], int]:
    """The score columns ``first`` .. ``first + count - 1`` (0-based) that hold one value on every line of
    ``table``: ``({column: its text}, lines read)``. A column is dropped at the first line where its number
    differs; the scan stops when none is left, so a table whose columns vary is read only that far.
    Lines without that many scores are skipped."""
    value: dict[int, bytes] = {}
    alive = set(range(first, first + count))
    n = 0
    with open_binary_read(table) as f:
        for raw in f:
            n += 1
            fields = raw.split(FIELD_SEP)
            if len(fields) < 3:
                continue
            cols = fields[2].split()
            for c in list(alive):
                if c >= len(cols):
                    continue
                if c not in value:
                    value[c] = cols[c]
                elif cols[c] != value[c] and not _same_number(cols[c], value[c]):
                    alive.discard(c)
            if not alive:
                return {}, n
    return {c: value[c] for c in sorted(alive) if c in value}, n


def _same_number(a: bytes, b: bytes) -> bool:
    try:
        return float(a) == float(b)
    except ValueError:
        return False


def _refuse_constant(table: Path, old_count: int, added: int, names: Sequence[str] | None) -> None:
    """Refuse added columns that hold one value on every line (see the module docstring)."""
    const, lines = constant_columns(table, old_count, added)
    if not const or lines < 2:      # one line has nothing to vary over
        return
    shown, unknown_word = [], names is None
    for c, v in const.items():
        k = c - old_count
        name = f" ({names[k]})" if names is not None and k < len(names) else ""
        unknown_word = unknown_word or "unknown" in name
        shown.append(f"added column {k + 1} of {added}{name}, score {c + 1} of the line, is {v.decode()} on every "
                     f"one of the {lines} lines")
    wp = (" The unknown-word column is constant when the shortlists hold every word of the table: lower "
          "[prepare] vocab_size (prepare --vocab-size) below the vocabulary of each side." if unknown_word else "")
    raise PhraseRescoreError("; ".join(shown) + ": Moses adds ln(value) for each phrase pair a hypothesis uses, "
                             "so such a column is zero (value 1) or a multiple of the phrase count PhrasePenalty "
                             "already has; MERT can learn nothing from it, and its weight and the BLEU of this "
                             "configuration would be noise. Leave the column out (score --columns) or make it "
                             "vary." + wp, table)


def _check_old_table(feat, old_count: int, ini_path) -> str | None:
    """Check ``num-features`` against the text table the ini points at now (see the module docstring).

    :returns: None when checked, else why it cannot be (the table is not one this tool reads here).
    :raises PhraseRescoreError: when the two counts differ, naming both files and both counts.
    """
    path = feat.get("path")
    if feat.type != "PhraseDictionaryMemory" or path is None:
        return f"the old table of a {feat.type} is not a text table this tool reads"
    old_table = Path(path)
    if not old_table.is_file():
        return f"its old table {path} does not exist here"
    count = num_scores(old_table)
    if count != old_count:
        raise PhraseRescoreError(
            f"the moses.ini and its phrase table disagree: {feat.name} declares num-features={old_count} here but "
            f"its table {old_table} has {count} scores per line (Moses would stop with 'Size of scoreVector != "
            f"number'); correct num-features and the weights of {feat.name} first, so that the columns score "
            "added can be counted", ini_path, feat.line_no or None)
    return None


def rewrite_moses_ini(cfg: RewriteConfig) -> RewriteResult:
    """Write ``cfg.out``: ``cfg.old_ini`` with its phrase dictionary pointed at ``cfg.table`` (see module doc)."""
    ini = read_moses_ini(cfg.old_ini)
    feat = pick_phrase_dictionary(ini, cfg.feature)
    old_count = feat.num_features
    if old_count is None:
        raise PhraseRescoreError(f"{feat.name} has no num-features=...; expected the count of its table's scores",
                                 cfg.old_ini, feat.line_no)
    old_weights = ini.weights_for(feat.name)
    if len(old_weights) != old_count:
        raise PhraseRescoreError(f"{feat.name} has num-features={old_count} but {len(old_weights)} weights already",
                                 cfg.old_ini, feat.line_no)
    table = Path(cfg.table).resolve()
    new_count = num_scores(table)
    unchecked = _check_old_table(feat, old_count, cfg.old_ini)
    if new_count < old_count:
        raise PhraseRescoreError(f"the table has {new_count} score columns, fewer than the {old_count} of {feat.name}; "
                                 "expected the rescored table (the original columns plus the new ones)", table, 1)
    added = new_count - old_count
    if added == 0:
        raise PhraseRescoreError(f"the table has the {old_count} score columns {feat.name} already declares and no "
                                 "more; expected the rescored table (the original columns plus the new ones)",
                                 table, 1)
    if cfg.weights is not None and not all(math.isfinite(w) for w in cfg.weights):
        raise PhraseRescoreError(f"--weights {','.join(map(str, cfg.weights))}: expected finite numbers")
    if cfg.weights is not None:
        if len(cfg.weights) != added:
            raise PhraseRescoreError(
                f"--weights gives {len(cfg.weights)} values but the table adds {added} column(s) "
                f"({old_count} -> {new_count}): the table and num-features={old_count} of {feat.name} in "
                f"{cfg.old_ini} disagree, or --weights does", table)
        new_w = [float(w) for w in cfg.weights]
    else:
        new_w = [DEFAULT_NEW_WEIGHT] * added

    result = RewriteResult(Path(cfg.out), feat.name, old_count, new_count, new_w, "")
    result.notes.extend(ini.folded)        # [weight-overwrite]/[feature-overwrite] applied, as Moses applies them
    if unchecked is not None and cfg.weights is None:
        result.notes.append(f"the {added} added column(s) are counted from num-features={old_count} alone: "
                            f"{unchecked}; give --weights (one per added column) to have the count checked")
    inputs = {"OLD_INI": os.fspath(cfg.old_ini), "--table": os.fspath(cfg.table), **ini.model_files()}
    check_outputs(inputs, {"--out": os.fspath(cfg.out)})
    if feat.type == "PhraseDictionaryCompact":
        prefix = Path(cfg.binarized_prefix).resolve() if cfg.binarized_prefix else default_binarized_prefix(table)
        table_in_ini = check_ini_path(f"{prefix}{MINPHR}", "the binarized phrase table")
        _check_binarizer_outputs(prefix, inputs, cfg.out)  # before processPhraseTableMin writes them
        _refuse_constant(table, old_count, added, cfg.column_names)
        install = find_moses(cfg.moses_home)
        tool = install.tool("processPhraseTableMin") if install else None
        argv = process_phrase_table_min_argv(tool or "processPhraseTableMin", table, prefix, new_count, cfg.threads)
        result.binarize_argv = argv
        result.notes.append(f"{feat.name} is a PhraseDictionaryCompact: the new table must be binarized "
                            f"(sorted as Moses sorts it, LC_ALL=C) with: {' '.join(argv)}")
        if tool is not None and cfg.binarize:
            _run_binarizer(argv, prefix, table)
            result.binarized = True
            result.notes.append(f"binarized into {prefix}{MINPHR}")
        else:
            result.notes.append("Moses's processPhraseTableMin was not found (set MOSES_HOME): run the command above "
                                "before decoding" if tool is None else "not run (--no-binarize): run it before decoding")
    else:
        table_in_ini = check_ini_path(table, "the new phrase table")
        _refuse_constant(table, old_count, added, cfg.column_names)

    feat.set("path", table_in_ini)
    feat.set("num-features", str(new_count))
    ini.mark_feature_changed(feat)
    ini.set_weights(feat.name, list(old_weights) + new_w)
    ini.check_weights_match()
    ini.write(cfg.out)
    result.table_path_in_ini = table_in_ini
    return result


def _check_binarizer_outputs(prefix: Path, inputs: dict, out) -> None:
    """Refuse a binarized prefix whose ``.minphr`` or log would overwrite an input or the new moses.ini."""
    outputs = {"--out": os.fspath(out), f"the binarized table PREFIX{MINPHR}": f"{prefix}{MINPHR}",
               f"processPhraseTableMin's log PREFIX{BINARIZER_LOG}": f"{prefix}{BINARIZER_LOG}"}
    try:
        check_outputs(inputs, outputs)
    except PhraseRescoreError as e:
        raise PhraseRescoreError(f"{e.message}; PREFIX is {prefix} (--binarized-prefix; by default the new "
                                 "table's name without .gz): give --binarized-prefix a prefix that names no file "
                                 "the old system reads", e.path) from None


def check_c_sorted(table: str | os.PathLike) -> None:
    """Refuse a text phrase table that is not in ``LC_ALL=C sort`` order, the order processPhraseTableMin needs.

    Lines are compared as bytes up to and including the separator after the target phrase (the source and
    target phrases, as written); a table sorted by ``LC_ALL=C sort`` whole lines always passes.

    :raises PhraseRescoreError: naming the first line that sorts before the line above it.
    """
    prev = b""
    with open_binary_read(table) as f:
        for line_no, raw in enumerate(f, start=1):
            i = raw.find(b"|||")
            j = raw.find(b"|||", i + 3) if i >= 0 else -1
            key = raw[: j + 3] if j >= 0 else raw.rstrip(b"\r\n")
            if key < prev:
                raise PhraseRescoreError("this line sorts before the line above it, but processPhraseTableMin needs "
                                         "the table in LC_ALL=C sort order (sort it with: LC_ALL=C sort)",
                                         table, line_no)
            prev = key


def _run_binarizer(argv: Sequence[str], prefix: Path, table: str | os.PathLike | None = None) -> None:
    """Run processPhraseTableMin (``argv``) after checking ``table``'s order; its output goes to a log file.

    It writes into a temporary folder beside ``PREFIX.minphr`` (its ``-out`` prefix replaced), and the
    table is renamed to ``PREFIX.minphr`` only when it succeeded: a run killed or failed midway leaves an
    earlier ``PREFIX.minphr`` as it was. It dies with this process (:mod:`~phrase_rescore.core.children`).
    """
    if table is not None:
        check_c_sorted(table)
    log = Path(f"{prefix}{BINARIZER_LOG}")
    final = Path(f"{prefix}{MINPHR}")
    with temp_dir_beside(final) as work:
        tmp_prefix = work / "table"
        run_argv = list(argv)
        run_argv[run_argv.index("-out") + 1] = os.fspath(tmp_prefix)
        with atomic_path(log) as tmp, open(tmp, "wb") as lf:
            rc = children.run(run_argv, stdout=lf, stderr=subprocess.STDOUT).returncode
        if rc != 0:
            tail = [ln for ln in log.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()][-4:]
            raise PhraseRescoreError(f"processPhraseTableMin exited with status {rc}; its output is in {log}; last "
                                     "lines:\n  " + "\n  ".join(tail))
        written = Path(f"{tmp_prefix}{MINPHR}")
        if not written.is_file():
            raise PhraseRescoreError(f"processPhraseTableMin succeeded but wrote no {MINPHR} file; see {log}", final)
        with naming(final):
            fsync_file(written)
            os.replace(written, final)
        fsync_dir(final.parent)

"""A moses.ini whose text tables are filtered to the phrases of some input sentences, made once and reused.

Tuning decodes the same dev set in every iteration; a decoder that loads a text phrase table reads all
of it each time, which for a table of 10^8 lines is most of the iteration. As Moses's
``filter-model-given-input.pl`` (what ``mert-moses.pl --filter`` runs) does, the text tables of a moses.ini
(``PhraseDictionaryMemory``'s phrase table and ``LexicalReordering``'s table, plain or gzip) are read
once and every entry whose source phrase occurs in an input sentence, as a run of at most
``max-phrase-length`` words (the ini's, else Moses's default 20), is kept, in the table's order. Every
other entry is one the decoder could never look up for that input, so decoding the input with the
filtered ini gives the same translations. Binary tables (``PhraseDictionaryCompact``, which
``moses-ini --binarized-prefix`` writes; ``.minlexr`` reordering tables) are left as they are: Moses reads
only the entries it looks up, so they are the way to decode with a huge table outside tuning.

The result lives in a folder of its own (``filtered.json``, ``moses.ini``, one file per filtered table),
keyed by the SHA-256 of each table, of each input file, the maximum phrase length and this format: a
later run with the same key reuses it, anything else filters anew. The table's hash is taken in the
same pass that filters it, so a run reads each full table once: to filter it, or to check that the
filtered one still belongs to it.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from phrase_rescore.core.atomic_write import atomic_open
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.file_errors import GZIP_READ_ERRORS, gzip_read_error
from phrase_rescore.core.hashing import sha256_file
from phrase_rescore.core.progress import bar
from phrase_rescore.core.reading import is_gzip, read_sentences
from phrase_rescore.core.words import SEPARATORS

from .embedded.translation_options import source_phrases
from .moses_ini import MosesIni, read_moses_ini, resolve_model_path
from .phrase_table import line_blocks

FORMAT = "phrase-rescore filtered tables 1"
RECORD = "filtered.json"
INI = "moses.ini"
#: the feature types whose ``path=`` is a text table this module filters
TEXT_TABLE_TYPES = ("PhraseDictionaryMemory", "LexicalReordering")
DEFAULT_MAX_PHRASE_LENGTH = 20          # Moses's max-phrase-length
_BLOCK = 1 << 24
_SEP = SEPARATORS.encode("ascii")


def input_phrases(sentences: Iterable[Sequence[str]], max_len: int) -> set[bytes]:
    """Every run of at most ``max_len`` words of the sentences, space-joined, as UTF-8: the embedded
    decoder's :func:`~.embedded.translation_options.source_phrases`, as bytes to match the table's lines."""
    return {p.encode("utf-8") for p in source_phrases(sentences, max_len)}


class _Hashing(io.RawIOBase):
    """A raw reader that hashes the bytes it passes on (the file as stored, compressed or not)."""

    def __init__(self, f):
        self.f, self.sha = f, hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = self.f.readinto(b)
        if n:
            self.sha.update(memoryview(b)[:n])
        return n


def filter_table(path: str, keep: set[bytes], out_path: str | os.PathLike) -> dict:
    """Copy to ``out_path`` (atomically; gzip when it ends in .gz) the lines of the text table ``path``
    whose source phrase (the first field, trimmed of spaces and tabs as Moses trims it) is in ``keep``.

    :returns: ``{"sha256": of path's bytes as stored, "lines": lines read, "kept": lines written}``.
    """
    lines = kept = 0
    with open(path, "rb", buffering=0) as raw, atomic_open(out_path, "wb") as out:
        hashing = _Hashing(raw)
        buffered = io.BufferedReader(hashing, buffer_size=1 << 20)
        f = gzip.GzipFile(fileobj=buffered, mode="rb") if is_gzip(path) else buffered
        with bar(desc=f"filtering {os.path.basename(path)}", unit="line") as progress:
            try:
                for pieces, ended in line_blocks(f, _BLOCK):
                    chosen = [line for line in pieces if _source(line) in keep]
                    out.write(b"".join(line + b"\n" for line in chosen))
                    kept += len(chosen)
                    lines += len(pieces)
                    if ended:
                        progress.update(len(pieces))
            except GZIP_READ_ERRORS as e:
                raise gzip_read_error(e, path, lines) from None
        while buffered.read(_BLOCK):        # the hash covers the whole file, past the end of a gzip stream
            pass
    return {"sha256": hashing.sha.hexdigest(), "lines": lines, "kept": kept}


def _source(line: bytes) -> bytes:
    j = line.find(b"|||")
    return (line if j < 0 else line[:j]).strip(_SEP)


@dataclass
class FilteredModels:
    """What :func:`filtered_ini` made: the filtered ini and, by feature name, the tables it filtered."""

    ini: Path
    tables: dict            # feature name -> {"path": as in the original ini, "file", "sha256", "lines", ...}
    reused: bool


def _text_tables(ini: MosesIni, ini_path: str) -> dict[str, str]:
    """Feature name -> the text table file it reads, for the features of :data:`TEXT_TABLE_TYPES`."""
    out = {}
    for f in ini.features:
        p = f.get("path")
        if f.type not in TEXT_TABLE_TYPES or p is None:
            continue
        if f.type == "LexicalReordering" and os.path.exists(p + ".minlexr"):
            continue                                        # Moses reads the compact table first
        for q in (p, p + ".gz") if f.type == "LexicalReordering" else (p,):
            found = resolve_model_path(q, ini_path)
            if os.path.isfile(found):
                out[f.name] = found
                break
    return out


def max_phrase_length(ini: MosesIni) -> int:
    """The ini's ``[max-phrase-length]``, else Moses's default (20)."""
    value = ini.get_value("max-phrase-length")
    try:
        return int(value) if value is not None else DEFAULT_MAX_PHRASE_LENGTH
    except ValueError:
        raise PhraseRescoreError(f"[max-phrase-length] must be a whole number, found {value!r}", ini.path) from None


def filtered_ini(ini_path: str | os.PathLike, inputs: Sequence[str | os.PathLike], folder: str | os.PathLike,
                 max_len: int | None = None, echo=None) -> FilteredModels:
    """``folder/moses.ini``: ``ini_path`` with its text tables filtered to the sentences of ``inputs``
    (see the module docstring), made anew or reused; its other model paths are made absolute.
    ``max_len``: the longest source phrase the decoder looks up (default: the ini's, see
    :func:`max_phrase_length`).

    :returns: the filtered ini, the filtered tables (``"sha256"`` of each original table) and whether
        an earlier run's files were reused.
    """
    echo = echo or (lambda _line: None)
    ini_path = os.fspath(ini_path)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    ini = read_moses_ini(ini_path)
    max_len = max_phrase_length(ini) if max_len is None else int(max_len)
    tables = _text_tables(ini, ini_path)
    key = {"format": FORMAT, "max_phrase_length": max_len,
           "inputs": [sha256_file(p) for p in inputs], "ini": sha256_file(ini_path)}
    old = _read_record(folder / RECORD)
    if old is not None and old.get("key") == key and _reusable(old, tables, folder):
        echo(f"tune: reusing the tables filtered to the input in {folder}")
        return FilteredModels(folder / INI, old["tables"], True)
    keep = input_phrases((s for p in inputs for s in read_sentences(p)), max_len)
    record = {"key": key, "tables": {}}
    for i, (name, path) in enumerate(sorted(tables.items())):
        file = f"table{i}.filtered" + (".gz" if is_gzip(path) else "")
        info = filter_table(path, keep, folder / file)
        if info["kept"] == 0:       # a decoder refuses an empty table: it reads the full one, as without filtering
            os.unlink(folder / file)
            file = None
        record["tables"][name] = {"path": path, "file": file, **info,
                                  "filtered_sha256": None if file is None else sha256_file(folder / file)}
    _write_ini(ini, ini_path, {n: folder / t["file"] for n, t in record["tables"].items() if t["file"]},
               folder / INI)
    with atomic_open(folder / RECORD, "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    return FilteredModels(folder / INI, record["tables"], False)


def _reusable(old: dict, tables: dict[str, str], folder: Path) -> bool:
    """Whether an earlier run's record names the same tables, unchanged (one read of each to hash it),
    and its filtered files and ini are still there as it wrote them."""
    if set(old.get("tables", {})) != set(tables) or not (folder / INI).is_file():
        return False
    for name, path in tables.items():
        t = old["tables"][name]
        if t.get("sha256") != sha256_file(path):
            return False
        if t.get("file") is not None and not ((folder / t["file"]).is_file()
                                              and sha256_file(folder / t["file"]) == t.get("filtered_sha256")):
            return False
    return True


def _write_ini(ini: MosesIni, ini_path: str, filtered: dict, out: Path) -> None:
    for f in ini.features:
        p = f.get("path")
        if p is None:
            continue
        if f.name in filtered:
            new = os.path.abspath(filtered[f.name])
            if f.type == "LexicalReordering" and new.endswith(".gz"):
                new = new[:-3]                              # Moses adds the .gz of a reordering table
        else:
            found = resolve_model_path(p, ini_path)
            new = os.path.abspath(found) if os.path.exists(found) or os.path.exists(found + ".gz") else p
        if new != p:
            f.set("path", new)
            ini.mark_feature_changed(f)
    ini.write(out)


def _read_record(path: Path) -> dict | None:
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) else None


def original_paths(tuned_ini: str | os.PathLike | MosesIni, original_ini: str | os.PathLike) -> MosesIni:
    """The tuned ini (of a run on a filtered ini; a path, or the ini already read) with every feature's
    ``path=`` set back to the original ini's, so that it names the full tables."""
    tuned = tuned_ini if isinstance(tuned_ini, MosesIni) else read_moses_ini(tuned_ini)
    original = read_moses_ini(original_ini)
    paths = {f.name: f.get("path") for f in original.features}
    for f in tuned.features:
        if paths.get(f.name) is not None and f.get("path") != paths[f.name]:
            f.set("path", paths[f.name])
            tuned.mark_feature_changed(f)
    return tuned

"""Sharded scoring: a table cut into one range per rank, each range scored into a part, the parts joined.

Under ``torchrun`` (``WORLD_SIZE`` > 1) the `score` stage of :mod:`phrase_rescore.pipeline.score` runs as:

1. **Split** (rank 0, broadcast to the others): one streaming pass over the table finds the byte
   offset of every ``chunk_lines``-th line (:func:`chunk_offsets`; a gzip table is decompressed on the
   way, nothing is written) and gives each of the N ranks a run of whole chunks (:func:`plan`). The
   plan is kept in ``OUT.shards.json`` so that a relaunched job does not scan the table again. Before
   it writes anything, rank 0 refuses a file in the place of one the job writes that is not score's
   (:func:`check_own_files`).
2. **Score**: each rank reads its byte range (a gzip table: decompressed from its start up to the
   range, at zlib's speed, without parsing) and scores it resumably, as a single run does, into
   ``OUT.part-RRRRR-of-NNNNN`` (:func:`part_path`) through that part's own chunk manifest.
3. **Join** (rank 0, once every rank is done): the parts in order into ``OUT``, atomically
   (:func:`join_parts`), then the parts, their manifests and the plan are removed.

Ranges start at multiples of ``chunk_lines``, not merely at source boundaries, because a pair's
float32 log p may depend on the group of sources it is scored with (a level's matrix products, and
the softmax's choice of an unshifted sum, span the group: :mod:`.fast`) and groups are cut per chunk:
with the same chunks as a single run, every group is the same, so ``OUT`` is a single run's bytes.
gzip included: a part is the chunks' raw deflate pieces without header and trailer
(:class:`~.chunked.ChunkedOutput` with ``part=True``), and the join writes one header, the parts and
one trailer whose CRC-32 :func:`~.chunked.crc32_combine` makes from the parts' -- one gzip member,
byte-identical to an uninterrupted single-process run's.

Every rank must see the same paths: on several nodes, TABLE, the model and OUT's folder are on a
shared filesystem.
"""
from __future__ import annotations

import glob
import json
import os
import re
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from phrase_rescore.core.atomic_write import atomic_path
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.file_errors import GZIP_READ_ERRORS, gzip_read_error
from phrase_rescore.core.gzip_writing import GZIP_HEADER, gzip_trailer
from phrase_rescore.core.reading import open_binary_read

from .chunked import MANIFEST_FORMAT, ChunkedOutput, crc32_combine, read_own_json

PLAN_FORMAT = "phrase-rescore-score-shards"
_BLOCK = 1 << 24        # bytes per read of the split pass
_PART_NAME = re.compile(r"\.part-\d{5}-of-\d{5}")


@dataclass(frozen=True)
class Shard:
    """Rank ``index`` of ``count``: the table's lines ``lines_before + 1 .. lines_before + lines``,
    bytes ``[start, stop)`` of the uncompressed table, from chunk ``first_chunk`` on."""

    index: int
    count: int
    first_chunk: int
    lines_before: int
    lines: int
    start: int
    stop: int

    @property
    def span(self) -> tuple[int, int, int]:
        """``span`` for :class:`~phrase_rescore.moses_integration.phrase_table.PhraseTableReader`."""
        return self.start, self.stop, self.lines_before


def chunk_offsets(table, chunk_lines: int) -> tuple[list[int], int, int]:
    """One streaming pass: (byte offsets of lines 1, 1 + chunk_lines, 1 + 2 chunk_lines ... in the
    uncompressed table -- one per chunk of a single run --, the line count, the uncompressed size)."""
    offsets, lines, pos, last = [0], 0, 0, 10
    next_line = chunk_lines                       # 0-based line that starts the next chunk
    with open_binary_read(table) as f:
        try:
            while True:
                block = f.read(_BLOCK)
                if not block:
                    break
                nl = np.flatnonzero(np.frombuffer(block, np.uint8) == 10)   # this block's newlines
                while next_line <= lines + len(nl):                          # after newline number next_line
                    offsets.append(pos + int(nl[next_line - lines - 1]) + 1)
                    next_line += chunk_lines
                lines += len(nl)
                pos += len(block)
                last = block[-1]
        except GZIP_READ_ERRORS as e:
            raise gzip_read_error(e, table, lines) from None
    if last != 10:                                # a last line without a newline
        lines += 1
    if len(offsets) > 1 and offsets[-1] == pos:   # the table ends at a chunk boundary
        offsets.pop()
    return offsets, lines, pos


def plan(table, chunk_lines: int, count: int) -> list[Shard]:
    """The table's chunks in ``count`` runs of consecutive chunks, as even as whole chunks allow
    (ranks beyond the chunk count get empty ranges)."""
    offsets, lines, size = chunk_offsets(table, chunk_lines)
    k = len(offsets) if lines else 0
    shards = []
    for r in range(count):
        a, b = r * k // count, (r + 1) * k // count
        first, end = min(a * chunk_lines, lines), min(b * chunk_lines, lines)
        shards.append(Shard(r, count, a, first, end - first, offsets[a] if a < k else size,
                            offsets[b] if b < k else size))
    return shards


def plan_path(out) -> Path:
    out = Path(out)
    return out.with_name(out.name + ".shards.json")


def _is_ours(path: Path, fmt: str) -> bool:
    """``path`` is a regular file holding a JSON object with ``"format": fmt`` (as score writes them)."""
    return not path.is_symlink() and path.is_file() and read_own_json(path, fmt) is not None


def _not_ours(what: str, fmt: str, path: Path) -> PhraseRescoreError:
    return PhraseRescoreError(f"expected {what} (JSON with \"format\": \"{fmt}\"), found another file: it was not "
                              "written by `score`, and a sharded run would replace it; move it away or choose "
                              "another --out", path)


def check_part(part: ChunkedOutput) -> None:
    """Refuse the files in the places of one part's files that are not score's: ``PART.json`` and
    ``PART.partial.json`` that are not score's manifests, ``PART`` without ``PART.json`` and ``PART.partial``
    without its manifest. score's own files, an earlier job's included, may be replaced."""
    for manifest in (part.done_path, part.manifest_path):
        if os.path.lexists(manifest) and not _is_ours(manifest, MANIFEST_FORMAT):
            raise _not_ours("the manifest of a part of a sharded `score` output", MANIFEST_FORMAT, manifest)
    for path, manifest in ((part.path, part.done_path), (part.partial, part.manifest_path)):
        if os.path.lexists(path) and not os.path.lexists(manifest):
            raise PhraseRescoreError(f"exists without its manifest {manifest.name}, so it was not written by "
                                     "`score`; move it away or choose another --out", path)


def check_own_files(out, count: int) -> None:
    """Refuse, before a job of ``count`` ranks writes anything, a file in the place of one it writes
    beside OUT that is not score's: the plan ``OUT.shards.json`` and each part's files (:func:`check_part`)."""
    path = plan_path(out)
    if os.path.lexists(path) and not _is_ours(path, PLAN_FORMAT):
        raise _not_ours("the plan of a sharded `score` run", PLAN_FORMAT, path)
    for index in range(count):
        check_part(ChunkedOutput(part_path(out, Shard(index, count, 0, 0, 0, 0, 0)), {}, part=True))


def load_or_plan(table, out, chunk_lines: int, count: int, fresh: bool = False) -> list[Shard]:
    """:func:`plan`, kept in ``OUT.shards.json`` for a relaunch of the same job on the same table
    (``fresh``: cut the table again); first refuses files in the job's way (:func:`check_own_files`)."""
    check_own_files(out, count)
    st = os.stat(table)
    key = {"table": os.path.abspath(table), "table_size": st.st_size, "table_mtime_ns": st.st_mtime_ns,
           "chunk_lines": chunk_lines, "count": count}
    path = plan_path(out)
    try:
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        if saved.get("format") == PLAN_FORMAT and saved.get("key") == key and not fresh:
            return [Shard(**s) for s in saved["shards"]]
    except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError, TypeError, KeyError):
        pass
    shards = plan(table, chunk_lines, count)
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps({"format": PLAN_FORMAT, "key": key, "shards": [asdict(s) for s in shards]},
                                  indent=1) + "\n", encoding="utf-8")
    return shards


def part_path(out, shard: Shard) -> Path:
    """Where rank ``shard.index`` writes its part: beside OUT (``OUT.part-00001-of-00008``)."""
    out = Path(out)
    return out.with_name(f"{out.name}.part-{shard.index:05d}-of-{shard.count:05d}")


def part_output(out, shard: Shard, identity: dict, compresslevel: int, gzip: bool) -> ChunkedOutput:
    """The resumable writer of one rank's part; a file with the name of one of the part's files that is
    not score's is refused (:func:`check_part`)."""
    part = ChunkedOutput(part_path(out, shard), identity, compresslevel=compresslevel, part=True, gzip=gzip)
    check_part(part)
    return part


def join_parts(out, parts: list[ChunkedOutput], states: list[dict], gzip: bool) -> None:
    """Write OUT from the finished parts (``states``: each :meth:`ChunkedOutput.finished`), in order,
    atomically: for gzip one header, the parts' deflate pieces and one trailer."""
    crc, length = 0, 0
    with atomic_path(out) as tmp, open(tmp, "wb") as f:
        if gzip:
            f.write(GZIP_HEADER)
        for part, state in zip(parts, states):
            _append(part.path, f)
            crc = crc32_combine(crc, state["crc32"], state["length"])
            length += state["length"]
        if gzip:
            f.write(gzip_trailer(crc, length))


def join_files(out, paths: list[Path]) -> None:
    """Concatenate ``paths`` into ``out``, atomically (the parts' reject lists)."""
    with atomic_path(out) as tmp, open(tmp, "wb") as f:
        for p in paths:
            _append(p, f)


def _append(path: Path, f) -> None:
    """Append the file ``path`` to the open file ``f``: in the kernel (``copy_file_range``, no copy
    through Python; a reflink on filesystems that share blocks) where it can, else by 16 MiB reads."""
    f.flush()
    with open(path, "rb") as src:
        left = os.fstat(src.fileno()).st_size
        try:
            while left > 0:
                n = os.copy_file_range(src.fileno(), f.fileno(), left)
                if n == 0:
                    break
                left -= n
        except (AttributeError, OSError):   # no copy_file_range here, or not between these files
            pass
        if left > 0:
            src.seek(os.fstat(src.fileno()).st_size - left)
            f.seek(0, os.SEEK_END)
            shutil.copyfileobj(src, f, _BLOCK)


def stale_parts(out) -> list[Path]:
    """The files of parts of OUT that an earlier job with another rank count left: each part file
    (``OUT.part-RRRRR-of-NNNNN`` and its ``.partial``, ``.rejects``) whose manifest says it is score's,
    and the manifests."""
    out = Path(out)
    found = []
    for manifest in out.parent.glob(f"{glob.escape(out.name)}.part-*-of-*.json"):
        stem = manifest.name[:-len(".json")]
        if stem.endswith(".partial"):
            stem = stem[:-len(".partial")]
        if not _PART_NAME.fullmatch(stem[len(out.name):]):
            continue
        try:
            with open(manifest, encoding="utf-8") as f:
                if json.load(f).get("format") != MANIFEST_FORMAT:
                    continue
        except (OSError, ValueError):
            continue
        found += [manifest] + [out.parent / (stem + s) for s in ("", ".partial", ".rejects")
                               if (out.parent / (stem + s)).exists()]
    return found


def remove(paths) -> None:
    """Remove the tool's own files, those that exist."""
    for p in paths:
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass

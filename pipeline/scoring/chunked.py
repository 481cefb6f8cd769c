"""A resumable output file written in chunks: ``OUT.partial`` plus a manifest ``OUT.partial.json``.

Each chunk's lines are appended to ``OUT.partial`` (fsync'ed), then the manifest is replaced
atomically with the cumulative state after that chunk: lines done, bytes written, and for gzip the
running CRC-32 and length. After a crash or kill, :meth:`ChunkedOutput.open` truncates
``OUT.partial`` to the last completed chunk and reports the first line still to do; when the whole
input is done, :meth:`ChunkedOutput.finish` closes the file and renames it to ``OUT``.

gzip output is ONE gzip member written piece by piece (:func:`~phrase_rescore.core.gzip_writing.gzip_piece`:
a fixed header, each chunk as raw deflate from a fresh compressor, then the trailer), byte-identical
however often the run was interrupted: the bytes of a chunk depend only on its lines, so a resumed run
writes the same bytes as an uninterrupted one.

A part (``part=True``: one rank's range of a sharded run, :mod:`.sharded`) is the same without the
gzip header and trailer, so that parts joined in order with one header and one trailer
(:func:`crc32_combine` joins their CRCs) are the bytes a single run writes; a finished part keeps
its manifest as ``PART.json``.

A manifest is only resumed when its ``identity`` (the input table's size and mtime, the model's hash
and every option that changes the output) equals the current run's; otherwise the run starts afresh.
A file in the manifest's place that is not one of score's manifests (JSON carrying
:data:`MANIFEST_FORMAT`) is refused, never replaced: only a manifest of score's, of any version, is.
The manifest is replaced through :func:`~phrase_rescore.core.atomic_write.atomic_path` (a temporary file of a
name no other file has, fsync'ed and renamed), so no other file beside it is written over.
It also carries a digest of the input lines already done (:func:`chain_digest`, chunk by chunk), which
the resumed run checks against the lines it skips before it writes anything.

Nothing of ``OUT.partial`` is trusted unverified: the manifest carries a chained digest of the file's own
bytes (:class:`OutputDigest`: :func:`chain_digest` over each :data:`DIGEST_BLOCK` bytes, then over the rest),
and a resumed run reads the bytes the manifest counts, recomputes it and appends only when the two agree.
A partial file changed or damaged after it was written (a flipped byte, a block of zeros left by a crash
of the file system), or a manifest that records no such digest, starts the output afresh, and the run
says why. A finished part (:meth:`ChunkedOutput.finished`) is checked the same way before it is joined.
"""
from __future__ import annotations

import hashlib
import json
import os
import zlib
from pathlib import Path

from phrase_rescore.core.atomic_write import atomic_path
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.file_errors import naming
from phrase_rescore.core.gzip_writing import GZIP_HEADER, gzip_piece, gzip_trailer, wants_gzip
from phrase_rescore.core.output_paths import check_outputs

MANIFEST_FORMAT = "phrase-rescore-score-manifest"
MANIFEST_VERSION = 1
#: the bytes of an output each link of its digest covers (:class:`OutputDigest`)
DIGEST_BLOCK = 1 << 16


def chain_digest(previous: str, data: bytes) -> str:
    """The input digest after one more chunk: sha256(previous digest + sha256(the chunk's input bytes))."""
    return hashlib.sha256(previous.encode("ascii") + hashlib.sha256(data).digest()).hexdigest()


class OutputDigest:
    """The chained digest of a file's bytes as they are written: :func:`chain_digest` over every whole
    :data:`DIGEST_BLOCK` bytes, then a last link over the bytes after them; only the last block's bytes
    are kept, so that a manifest can record it after every chunk, and a resumed run can go on from it."""

    def __init__(self):
        self.chain = ""
        self.tail = bytearray()

    def update(self, data: bytes) -> None:
        self.tail += data
        whole = len(self.tail) - len(self.tail) % DIGEST_BLOCK
        for i in range(0, whole, DIGEST_BLOCK):
            self.chain = chain_digest(self.chain, bytes(self.tail[i:i + DIGEST_BLOCK]))
        del self.tail[:whole]

    def hexdigest(self) -> str:
        return chain_digest(self.chain, bytes(self.tail))

    @classmethod
    def of_file(cls, f, size: int) -> "OutputDigest | None":
        """The digest of the first ``size`` bytes of the open binary file ``f``; None when it is shorter."""
        d = cls()
        f.seek(0)
        left = size
        while left > 0:
            block = f.read(min(left, 1 << 22))
            if not block:
                return None
            d.update(block)
            left -= len(block)
        return d


def _gf2_times(mat: list[int], vec: int) -> int:
    out, i = 0, 0
    while vec:
        if vec & 1:
            out ^= mat[i]
        vec >>= 1
        i += 1
    return out


def _gf2_square(mat: list[int]) -> list[int]:
    return [_gf2_times(mat, mat[n]) for n in range(32)]


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """``zlib.crc32(a + b)`` from ``crc1 = zlib.crc32(a)``, ``crc2 = zlib.crc32(b)`` and ``len(b)``, in
    O(log len2) steps: zlib's ``crc32_combine`` (crc32.c), which shifts ``crc1`` over ``len2`` zero
    bytes by squaring the GF(2) matrix of a one-bit shift. (zlib alternates two matrices to spare a copy;
    here one matrix is squared in place of the other, the same sequence of shifts.)"""
    if len2 <= 0:
        return crc1
    shift = [0xEDB88320] + [1 << n for n in range(31)]    # shift by one bit (the reflected polynomial)
    for _ in range(3):                                      # 2, 4, then 8 bits: one zero byte
        shift = _gf2_square(shift)
    while True:                                             # apply len2 bytes: one squaring per bit of len2
        if len2 & 1:
            crc1 = _gf2_times(shift, crc1)
        len2 >>= 1
        if not len2:
            break
        shift = _gf2_square(shift)
    return crc1 ^ crc2


def read_own_json(path: str | os.PathLike, fmt: str) -> dict | None:
    """The JSON object in ``path`` when it carries ``"format": fmt`` (a file score wrote); None when the
    file cannot be read as one (a folder, unreadable, not UTF-8, not JSON, another object)."""
    try:
        with open(path, "rb") as f:
            m = json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):   # JSONDecodeError is a ValueError
        return None
    return m if isinstance(m, dict) and m.get("format") == fmt else None


class ChunkedOutput:
    """Append-only, resumable writer for the scored table (see the module docstring).

    :param path: the final output; gzip when it ends in ``.gz``.
    :param identity: JSON-serialisable description of everything the output depends on.
    :param compresslevel: zlib level for gzip output.
    :param part: write one part of a sharded output (see the module docstring).
    :param gzip: compress [when ``path`` ends in ``.gz``].
    """

    def __init__(self, path: str | os.PathLike, identity: dict, compresslevel: int = 6, part: bool = False,
                 gzip: bool | None = None):
        self.path = Path(path)
        self.partial = self.path.with_name(self.path.name + ".partial")
        self.manifest_path = self.path.with_name(self.path.name + ".partial.json")
        self.identity = identity
        self.gzip = wants_gzip(path) if gzip is None else gzip
        self.compresslevel = compresslevel
        self.part = part
        self.done_path = self.path.with_name(self.path.name + ".json")   # a finished part's manifest
        self.length = 0         # uncompressed bytes written
        self.lines = 0          # input lines already in the output
        self.chunks = 0
        self.crc = 0
        self.isize = 0
        self.stats: dict = {}   # cumulative counters carried across resumes
        self.notes: dict = {}   # choices a resumed run must repeat (see :meth:`note`)
        self.input_digest: str | None = ""  # :func:`chain_digest` of the input lines done (None: not recorded)
        self.restart_reason: str | None = None
        self.created = False    # True when this run started OUT.partial afresh (see :meth:`discard`)
        self.digest = OutputDigest()    # of OUT.partial's bytes (see the module docstring)
        self._f = None

    # ------------------------------------------------------------------ start / resume
    def open(self, restart: bool = False) -> int:
        """Open for appending; returns the number of input lines already done (0 on a fresh start)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        state = self._read_manifest()         # refuses a file in the manifest's place that is not score's
        if restart:
            state, self.restart_reason = None, None
        if state is not None and self.partial.exists() and self.partial.stat().st_size >= state["bytes"]:
            digest = self._verified(state)
            if digest is not None:
                self._f = open(self.partial, "r+b")
                self._f.truncate(state["bytes"])          # drop a chunk that was half written
                self._f.seek(state["bytes"])
                self.lines, self.chunks = state["lines"], state["chunks"]
                self.crc, self.isize, self.stats = state["crc32"], state["isize"], state.get("stats", {})
                self.length = state.get("length", state["isize"])
                self.notes = state.get("notes", {})
                self.input_digest = state.get("input_sha256")
                self.digest = digest
                return self.lines
        elif state is not None:
            self.restart_reason = f"{self.partial} is shorter than its manifest says"
        if self.partial.exists() and not self.manifest_path.exists():
            raise PhraseRescoreError(f"exists without its manifest {self.manifest_path.name}, so it was not "
                                     "written by `score`; move it away or choose another --out", self.partial)
        # the manifest first: whenever OUT.partial exists, a manifest says that it is score's own
        head = GZIP_HEADER if self.gzip and not self.part else b""
        self.lines = self.chunks = self.crc = self.isize = self.length = 0
        self.stats, self.notes, self.input_digest = {}, {}, ""
        self.digest = OutputDigest()
        self.digest.update(head)
        self._save_manifest(len(head))
        with naming(self.partial):
            self._f = open(self.partial, "wb")
            self._f.write(head)
        self.created = True
        return 0

    def _verified(self, state: dict) -> OutputDigest | None:
        """The digest of the ``state["bytes"]`` bytes of ``OUT.partial`` when it is the one the manifest
        records, to go on from; else None, with :attr:`restart_reason` saying why."""
        recorded = state.get("output_sha256")
        if not isinstance(recorded, str):
            self.restart_reason = (f"its manifest records no digest of {self.partial.name}'s bytes (written by an "
                                   "earlier version), so they cannot be checked")
            return None
        with naming(self.partial), open(self.partial, "rb") as f:
            digest = OutputDigest.of_file(f, state["bytes"])
        if digest is None or digest.hexdigest() != recorded:
            self.restart_reason = (f"the first {state['bytes']} bytes of {self.partial} differ from the digest its "
                                   "manifest records (changed or damaged after they were written)")
            return None
        return digest

    def _read_manifest(self) -> dict | None:
        """The state to resume from, or None to start afresh (:attr:`restart_reason` says why).

        :raises PhraseRescoreError: a file in the manifest's place is not one of score's manifests.
        """
        if not self.manifest_path.exists():
            return None
        m = read_own_json(self.manifest_path, MANIFEST_FORMAT)
        if m is None:
            raise PhraseRescoreError(f"expected the manifest of a partial `score` output (JSON with \"format\": "
                                     f"\"{MANIFEST_FORMAT}\"), found another file: it was not written by `score`; "
                                     "move it away or choose another --out", self.manifest_path)
        if m.get("version") != MANIFEST_VERSION or not isinstance(m.get("state"), dict):
            self.restart_reason = f"manifest {self.manifest_path} has another format version"
            return None
        if m.get("identity") != self.identity:
            old, new = m.get("identity"), self.identity
            old = old if isinstance(old, dict) else {}
            diff = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
            self.restart_reason = f"the earlier partial run differs in: {', '.join(diff)}"
            return None
        return m["state"]

    def _save_manifest(self, size: int | None = None, path: Path | None = None) -> None:
        m = {"format": MANIFEST_FORMAT, "version": MANIFEST_VERSION, "identity": self.identity,
             "state": {"lines": self.lines, "chunks": self.chunks, "bytes": self._f.tell() if size is None else size,
                       "crc32": self.crc, "isize": self.isize, "length": self.length, "stats": self.stats,
                       "notes": self.notes, "input_sha256": self.input_digest,
                       "output_sha256": self.digest.hexdigest()}}
        with atomic_path(path or self.manifest_path) as tmp, open(tmp, "w", encoding="utf-8") as f:
            json.dump(m, f, indent=1, sort_keys=True)
            f.write("\n")

    def note(self, key: str, value) -> None:
        """Record a choice made on the first run (e.g. the BLAS picked by timing) that a resumed run
        must repeat for its bytes to match; read it back from :attr:`notes` after :meth:`open`."""
        self.notes[key] = value
        self._save_manifest()

    # ------------------------------------------------------------------ chunks
    def write_chunk(self, data: bytes, n_lines: int, stats: dict | None = None, source: bytes | None = None) -> None:
        """Append one chunk (``n_lines`` input lines as ``data``) and record it in the manifest;
        ``source``: the chunk's input bytes, for the input digest."""
        written = gzip_piece(data, self.compresslevel) if self.gzip else data
        with naming(self.partial):      # a full disk names the file
            self._f.write(written)
            self._f.flush()
            os.fsync(self._f.fileno())
        self.digest.update(written)
        if self.gzip:
            self.crc = zlib.crc32(data, self.crc)
            self.isize = (self.isize + len(data)) & 0xFFFFFFFF
        self.length += len(data)
        self.lines += n_lines
        self.chunks += 1
        if source is not None and self.input_digest is not None:
            self.input_digest = chain_digest(self.input_digest, source)
        if stats:
            for k, v in stats.items():
                self.stats[k] = self.stats.get(k, 0) + v
        self._save_manifest()

    def finish(self) -> None:
        """Close the stream (gzip trailer), rename ``OUT.partial`` to ``OUT`` and drop the manifest;
        a part keeps its final state in ``PART.json`` (see :meth:`finished`)."""
        with naming(self.partial):
            if self.gzip and not self.part:
                self._f.write(gzip_trailer(self.crc, self.isize))
            self._f.flush()
            os.fsync(self._f.fileno())
        if self.part:
            self._save_manifest(path=self.done_path)
        self._f.close()
        self._f = None
        os.replace(self.partial, self.path)
        try:
            os.unlink(self.manifest_path)
        except FileNotFoundError:
            pass

    def finished(self) -> dict | None:
        """A finished part's final state (``lines``, ``bytes``, ``crc32``, ``length``, ``stats``...) when
        ``PART`` and ``PART.json`` exist, the identity is this run's and the size the recorded one; else None."""
        try:
            with open(self.done_path, encoding="utf-8") as f:
                m = json.load(f)
        except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
            return None
        if not isinstance(m, dict):
            return None
        if (m.get("format"), m.get("version"), m.get("identity")) != (MANIFEST_FORMAT, MANIFEST_VERSION, self.identity):
            return None
        state = m["state"]
        try:
            if self.path.stat().st_size != state["bytes"]:
                return None
            with open(self.path, "rb") as f:        # its bytes are the ones its manifest records
                digest = OutputDigest.of_file(f, state["bytes"])
        except FileNotFoundError:
            return None
        if digest is None or digest.hexdigest() != state.get("output_sha256"):
            return None
        return state

    def close(self) -> None:
        """Close without finishing (after an error): the partial file and manifest stay for a resume (a
        write that failed, and fails again here, is not reported twice: the manifest never counted it)."""
        if self._f is not None:
            f, self._f = self._f, None
            try:
                f.close()
            except OSError:
                pass

    def discard(self) -> None:
        """After an error that a rerun would meet again: close, and remove ``OUT.partial`` and its
        manifest when this run created them (a partial output resumed from an earlier run stays)."""
        self.close()
        if self.created:
            for path in (self.partial, self.manifest_path):
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass


def check_not_same_file(table: str | os.PathLike, out: str | os.PathLike, rejects: str | os.PathLike | None = None,
                        model: str | os.PathLike | None = None, vocab: str | os.PathLike | None = None,
                        counts: str | os.PathLike | None = None) -> None:
    """Refuse outputs of a scoring run (``out``, its ``OUT.partial`` and manifest, the reject list)
    that would overwrite an input (the table, the model checkpoint, the vocabulary, the rare words'
    corpus) or each other (see :func:`~phrase_rescore.core.output_paths.check_outputs`)."""
    chunked = ChunkedOutput(out, {})
    check_outputs({"TABLE": table, "MODEL": model, "--vocab": vocab, "--rare-counts": counts},
                  {"--out": out, "the partial output": chunked.partial, "its manifest": chunked.manifest_path,
                   "--rejects": rejects})

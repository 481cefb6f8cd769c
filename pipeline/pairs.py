"""Prepared phrase pairs: the Parquet layout written by ``prepare`` and its in-memory form for training.

A pairs directory holds ``train.parquet`` and ``valid.parquet`` (columns below), the same pairs' ids as
flat arrays that training reads from disk as it needs them (``train-src-ids.npy``, ``train-src-offsets.npy``,
``train-tgt-ids.npy``, ``train-tgt-offsets.npy`` and ``valid-...``: :class:`PairFile`), ``vocab.json``,
``rejects.txt`` with ``--on-error keep``, and ``manifest.json``, written last, with the sha256 of every
part (``"parts"``): :func:`check_pairs_dir` refuses a folder whose parts are not the ones its manifest
names (a prepare killed while it replaced them, a part copied from elsewhere). Parquet schema metadata
carries ``phrase_rescore_format`` = :data:`FORMAT_VERSION`.

======== ================ ==========================================================
column   type             meaning
======== ================ ==========================================================
source   string           the source phrase as in the table (trimmed)
target   string           the target phrase
src_ids  list<int32>      source word ids, ending with ``<eos>`` (id 0)
tgt_ids  list<int32>      target word ids, ending with ``<eos>``
src_len  int32            len(src_ids), the ``<eos>`` included
tgt_len  int32            len(tgt_ids)
n_unk    int32            words of the pair outside the shortlists
======== ================ ==========================================================

Sampling and batching helpers live in :mod:`phrase_rescore.pipeline.batching` and are re-exported here.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.hashing import sha256_file

from .batching import UniformSampler, length_batches, pad_batch  # noqa: F401  (re-exported)

FORMAT_KEY = b"phrase_rescore_format"
FORMAT_VERSION = "1"
#: the manifest's ``format_version``: 2 lists every part with its sha256; 3 adds the id arrays
MANIFEST_FORMAT_VERSION = 3
#: the id arrays of the two splits, which training reads from disk (see :class:`PairFile`)
ARRAY_PARTS = tuple(f"{split}-{name}.npy" for split in ("train", "valid")
                    for name in ("src-ids", "src-offsets", "tgt-ids", "tgt-offsets"))
#: the files ``prepare`` may write into a pairs directory besides ``manifest.json``
PART_NAMES = ("train.parquet", "valid.parquet", "vocab.json", "rejects.txt") + ARRAY_PARTS
#: the parts training reads, whose hashes :func:`check_pairs_dir` checks
TRAINING_PARTS = ("train.parquet", "valid.parquet", "vocab.json") + ARRAY_PARTS

SCHEMA = pa.schema([
    ("source", pa.string()),
    ("target", pa.string()),
    ("src_ids", pa.list_(pa.int32())),
    ("tgt_ids", pa.list_(pa.int32())),
    ("src_len", pa.int32()),
    ("tgt_len", pa.int32()),
    ("n_unk", pa.int32()),
], metadata={FORMAT_KEY: FORMAT_VERSION.encode()})


class RaggedIds:
    """A list of id sequences stored as one flat array plus offsets; ``r[i]`` is an (L_i,) int64 view."""

    def __init__(self, values: np.ndarray, offsets: np.ndarray):
        self.values = values
        self.offsets = offsets
        self.lengths = np.diff(offsets)

    @classmethod
    def from_arrow(cls, column: pa.ChunkedArray) -> "RaggedIds":
        arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        if len(arr) == 0:
            return cls(np.zeros(0, np.int64), np.zeros(1, np.int64))
        offsets = arr.offsets.to_numpy().astype(np.int64)
        values = arr.values.to_numpy().astype(np.int64)
        return cls(values[offsets[0]:offsets[-1]], offsets - offsets[0])

    @classmethod
    def from_lists(cls, seqs) -> "RaggedIds":
        lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
        offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        values = np.fromiter((int(t) for q in seqs for t in q), dtype=np.int64, count=int(offsets[-1]))
        return cls(values, offsets)

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, i: int) -> np.ndarray:
        return self.values[self.offsets[i]:self.offsets[i + 1]]

    def padded(self, index: np.ndarray, pad_id: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Rows ``index`` as an (n, max length) int64 matrix padded with ``pad_id``, and their lengths
        (vectorised: no Python per row)."""
        index = np.asarray(index, dtype=np.int64)
        lengths = self.lengths[index]
        width = int(lengths.max()) if len(index) else 0
        cols = np.arange(width)
        inside = cols[None, :] < lengths[:, None]
        if not len(self.values):
            return np.full((len(index), width), pad_id, dtype=np.int64), lengths
        pos = np.minimum(self.offsets[index][:, None] + cols[None, :], len(self.values) - 1)
        return np.where(inside, self.values[pos], pad_id).astype(np.int64, copy=False), lengths


class PairSet:
    """The prepared pairs of one split, held as flat arrays (about 20 bytes per token)."""

    def __init__(self, src: RaggedIds, tgt: RaggedIds, n_unk: np.ndarray, source=None, target=None):
        assert len(src) == len(tgt) == len(n_unk)
        self.src, self.tgt, self.n_unk = src, tgt, n_unk
        self.source, self.target = source, target  # phrase strings when loaded with_text

    def __len__(self) -> int:
        return len(self.src)

    def lengths(self, n: int | None = None) -> np.ndarray:
        """(n, 2) source and target lengths of the first ``n`` pairs (all when None), ``<eos>`` included."""
        return np.stack([self.src.lengths, self.tgt.lengths], axis=1)[:n]

    def target_ids(self, n: int | None = None):
        """The target ids of the first ``n`` pairs (all when None), as one array in a list."""
        n = len(self) if n is None else min(n, len(self))
        return [self.tgt.values[:self.tgt.offsets[n]]]

    def batch(self, indices, device=None):
        """Padded tensors for ``indices``: ``(src_ids, src_mask, tgt_ids, tgt_mask)``, each (B, T)."""
        src_ids, src_mask = pad_batch([self.src[i] for i in indices], device=device)
        tgt_ids, tgt_mask = pad_batch([self.tgt[i] for i in indices], device=device)
        return src_ids, src_mask, tgt_ids, tgt_mask


def read_pairs_table(path: str | os.PathLike, columns=None) -> pa.Table:
    """Read a pairs Parquet file, checking its format version."""
    if not os.path.exists(path):
        raise PhraseRescoreError("pairs file not found (run `phrase-rescore prepare` first)", path)
    try:
        meta = pq.read_schema(path).metadata or {}
    except pa.ArrowInvalid as e:
        raise PhraseRescoreError(f"not a Parquet file ({e})", path) from None
    version = meta.get(FORMAT_KEY, b"").decode()
    if version != FORMAT_VERSION:
        raise PhraseRescoreError(f"pairs format version {version or 'missing'}; expected {FORMAT_VERSION} "
                                 "(re-run `phrase-rescore prepare`)", path)
    return pq.read_table(path, columns=columns)


def load_pairs(path: str | os.PathLike, with_text: bool = False) -> PairSet:
    """Load one split (``train.parquet`` or ``valid.parquet``) for training or evaluation."""
    cols = ["src_ids", "tgt_ids", "n_unk"] + (["source", "target"] if with_text else [])
    table = read_pairs_table(path, cols)
    return PairSet(RaggedIds.from_arrow(table["src_ids"]), RaggedIds.from_arrow(table["tgt_ids"]),
                   table["n_unk"].to_numpy().astype(np.int64),
                   table["source"].to_pylist() if with_text else None,
                   table["target"].to_pylist() if with_text else None)


def pairs_paths(pairs_dir: str | os.PathLike) -> dict[str, Path]:
    """The files of a pairs directory, by role."""
    d = Path(pairs_dir)
    return {"train": d / "train.parquet", "valid": d / "valid.parquet",
            "vocab": d / "vocab.json", "manifest": d / "manifest.json"}


def check_pairs_dir(pairs_dir: str | os.PathLike) -> dict:
    """The manifest of a complete pairs directory whose training parts are those it names, byte for byte.

    :returns: the manifest; ``manifest["parts"][name]["sha256"]`` for each part.
    :raises PhraseRescoreError: no manifest, one from an interrupted or older prepare, a missing part, or a
        part whose sha256 is not the manifest's (naming the folder and the part).
    """
    d = Path(pairs_dir)
    path = d / "manifest.json"
    rerun = "rerun `phrase-rescore prepare` into this folder"
    if not path.exists():
        raise PhraseRescoreError(f"no manifest.json in this folder (expected a folder written by `phrase-rescore "
                                 f"prepare`; a prepare that was killed before it finished leaves none): {rerun}", d)
    try:
        m = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise PhraseRescoreError(f"not a JSON manifest ({e})", path) from None
    if not isinstance(m, dict) or m.get("stage") != "prepare":
        raise PhraseRescoreError("not the manifest of `phrase-rescore prepare`", path)
    if m.get("format_version") != MANIFEST_FORMAT_VERSION or not isinstance(m.get("parts"), dict):
        raise PhraseRescoreError(f"written by an older prepare (manifest format {m.get('format_version')}, without "
                                 f"the parts' hashes or the id arrays training reads; expected "
                                 f"{MANIFEST_FORMAT_VERSION}): {rerun}", path)
    if m.get("complete") is not True:
        raise PhraseRescoreError(f"prepare was interrupted while it replaced this folder's files, so they may "
                                 f"come from two runs: {rerun}", d)
    missing = [n for n in TRAINING_PARTS if n not in m["parts"]]
    if missing:
        raise PhraseRescoreError(f"the manifest names no {', '.join(missing)}", path)
    for name, info in m["parts"].items():
        if name not in TRAINING_PARTS:        # rejects.txt: a report for the user, not read by training
            continue
        part = d / name
        if not part.exists():
            raise PhraseRescoreError(f"{name} is missing from {d} (its manifest.json names it): {rerun}", part)
        if sha256_file(part) != info.get("sha256"):
            raise PhraseRescoreError(f"{name} does not belong with the other files of {d}: its sha256 is not the "
                                     f"one manifest.json records (a prepare killed while it replaced them, or a "
                                     f"file copied in from elsewhere): {rerun}", part)
    return m


# --- the id arrays training reads from disk -------------------------------------------------------------

#: the arrays of one split, ``{split}-{name}.npy``: ids int32 (every pair's ids, one after another) and
#: offsets int64 (pair i is ``ids[offsets[i]:offsets[i + 1]]``), for each side
ARRAY_NAMES = ("src-ids", "src-offsets", "tgt-ids", "tgt-offsets")
ARRAY_DTYPES = {"src-ids": np.int32, "src-offsets": np.int64, "tgt-ids": np.int32, "tgt-offsets": np.int64}
_NPY_HEADER = 128      # bytes: the .npy header this module writes (room for any shape below 10^40)
CHUNK_ITEMS = 1 << 20  # items per read of a whole array (4 MB of ids)


def array_part(split: str, name: str) -> str:
    """The file name of one array of a split: ``train-src-ids.npy``."""
    return f"{split}-{name}.npy"


def _npy_header(dtype, count: int) -> bytes:
    """A .npy (format 1.0) header for a 1-d array of ``count`` items, exactly :data:`_NPY_HEADER` bytes."""
    text = f"{{'descr': '{np.dtype(dtype).str}', 'fortran_order': False, 'shape': ({count},), }}"
    text = text.ljust(_NPY_HEADER - 10 - 1) + "\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode("latin1")


class NpyAppender:
    """Writes a 1-d ``.npy`` file whose length is known only at the end: chunks are appended after a
    header of fixed size, rewritten with the final length by :meth:`close`. ``np.load`` reads the result."""

    def __init__(self, path: str | os.PathLike, dtype):
        self.dtype, self.count = np.dtype(dtype), 0
        self.f = open(path, "wb", buffering=1 << 20)
        self.f.write(_npy_header(self.dtype, 0))

    def append(self, values: np.ndarray) -> None:
        self.f.write(np.ascontiguousarray(values, dtype=self.dtype).tobytes())
        self.count += len(values)

    def close(self) -> None:
        if self.f.closed:
            return
        self.f.seek(0)
        self.f.write(_npy_header(self.dtype, self.count))
        self.f.close()


class SplitWriter:
    """Appends encoded pairs to the four arrays of one split (see :data:`ARRAY_NAMES`)."""

    def __init__(self, folder: Path, split: str):
        self.files = {n: NpyAppender(folder / array_part(split, n), ARRAY_DTYPES[n]) for n in ARRAY_NAMES}
        self.ends = {"src": 0, "tgt": 0}
        for side in self.ends:
            self.files[f"{side}-offsets"].append(np.zeros(1, np.int64))

    def append(self, src_ids: pa.Array, tgt_ids: pa.Array) -> None:
        """Append list<int32> columns of equal length (one entry per pair)."""
        for side, column in (("src", src_ids), ("tgt", tgt_ids)):
            arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
            if len(arr) == 0:
                continue
            offsets = arr.offsets.to_numpy().astype(np.int64)
            self.files[f"{side}-ids"].append(arr.values.to_numpy()[offsets[0]:offsets[-1]])
            self.files[f"{side}-offsets"].append(offsets[1:] - offsets[0] + self.ends[side])
            self.ends[side] += int(offsets[-1] - offsets[0])

    def close(self) -> None:
        for f in self.files.values():
            f.close()


class _NpyFile:
    """Positional reads (``os.pread``) of a 1-d .npy array on disk: nothing is mapped or kept, so the
    memory a read takes is the size of what it returns."""

    def __init__(self, path: Path):
        self.path = path
        try:
            with open(path, "rb") as f:
                major, _ = np.lib.format.read_magic(f)
                read_header = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
                shape, fortran, dtype = read_header(f)
                self.start = f.tell()
        except (OSError, ValueError) as e:
            raise PhraseRescoreError(f"not a NumPy array file ({e}): rerun `phrase-rescore prepare`", path) from None
        if len(shape) != 1 or dtype.byteorder == ">":
            raise PhraseRescoreError(f"expected a 1-d little-endian array, found shape {shape} of {dtype}", path)
        self.dtype, self.len = dtype, shape[0]
        self.fd = os.open(path, os.O_RDONLY)

    def read(self, start: int, stop: int) -> np.ndarray:
        """Items ``start:stop`` (within the array)."""
        n = stop - start
        if n <= 0:
            return np.zeros(0, self.dtype)
        size = self.dtype.itemsize
        data = os.pread(self.fd, n * size, self.start + start * size)
        if len(data) != n * size:
            raise PhraseRescoreError(f"truncated: items {start}:{stop} of {self.len} are not all there", self.path)
        return np.frombuffer(data, self.dtype)

    def chunks(self, stop: int | None = None, chunk: int | None = None):
        """Items ``0:stop`` in arrays of at most ``chunk`` (:data:`CHUNK_ITEMS`)."""
        stop = self.len if stop is None else stop
        chunk = chunk or CHUNK_ITEMS
        for i in range(0, stop, chunk):
            yield self.read(i, min(stop, i + chunk))

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self):
        self.close()


class PairFile:
    """The pairs of one split, read from its arrays on disk as they are needed (:class:`SplitWriter`'s):
    the memory it takes is that of the pairs asked for, whatever the number of pairs. Every process
    (every ``torchrun`` rank) opens the same files."""

    def __init__(self, folder: str | os.PathLike, split: str):
        folder = Path(folder)
        self.files = {n: _NpyFile(folder / array_part(split, n)) for n in ARRAY_NAMES}
        n = self.files["src-offsets"].len - 1
        if n < 0 or self.files["tgt-offsets"].len - 1 != n:
            raise PhraseRescoreError(f"the {split} arrays disagree on the number of pairs: rerun `phrase-rescore "
                                     "prepare`", folder)
        self.n = n

    def __len__(self) -> int:
        return self.n

    def _rows(self, side: str, indices) -> list[np.ndarray]:
        offsets, ids = self.files[f"{side}-offsets"], self.files[f"{side}-ids"]
        out = []
        for i in indices:
            a, b = offsets.read(int(i), int(i) + 2)
            out.append(ids.read(int(a), int(b)).astype(np.int64))
        return out

    def batch(self, indices, device=None):
        """Padded tensors for ``indices``: ``(src_ids, src_mask, tgt_ids, tgt_mask)``, each (B, T)."""
        src_ids, src_mask = pad_batch(self._rows("src", indices), device=device)
        tgt_ids, tgt_mask = pad_batch(self._rows("tgt", indices), device=device)
        return src_ids, src_mask, tgt_ids, tgt_mask

    def lengths(self, n: int | None = None) -> np.ndarray:
        """(n, 2) source and target lengths of the first ``n`` pairs (all when None), ``<eos>`` included."""
        n = self.n if n is None else min(n, self.n)
        return np.stack([np.diff(self.files[f"{side}-offsets"].read(0, n + 1)) for side in ("src", "tgt")], axis=1)

    def target_ids(self, n: int | None = None):
        """The target ids of the first ``n`` pairs (all when None), in arrays of bounded size."""
        n = self.n if n is None else min(n, self.n)
        stop = int(self.files["tgt-offsets"].read(n, n + 1)[0])
        return self.files["tgt-ids"].chunks(stop)

    def close(self) -> None:
        for f in self.files.values():
            f.close()


# --- corpora of sentences turned into id arrays, for the sentence-level trainers ----------------------

#: one array read by position (:class:`PairFile`'s reader), for trainers whose events are not pairs
NpyFile = _NpyFile


def corpus_arrays(parent: str | os.PathLike, key: dict, write, is_main: bool = True, barrier=None) -> Path:
    """The folder of id arrays that ``write(folder)`` makes from a corpus, written once per ``key`` (the
    corpus's sha256, the vocabulary's, the held-out lines): ``parent/corpus-ids-<sha256 of key>``. It is
    written in a temporary folder beside it and renamed into place only when complete (with ``key.json``),
    so a run killed while writing leaves nothing that a later run would read; folders of other keys that
    this function wrote in ``parent`` are removed. Under ``torchrun`` rank 0 writes and the others wait at
    ``barrier``. An error of a write that names no file (a full disk) names the folder."""
    import shutil

    from phrase_rescore.core.atomic_write import fsync_dir, fsync_file
    from phrase_rescore.core.file_errors import naming
    from phrase_rescore.core.temp_names import temp_dir_beside

    text = json.dumps(key, sort_keys=True)
    folder = Path(parent) / f"corpus-ids-{hashlib.sha256(text.encode()).hexdigest()[:16]}"
    if is_main and not ((folder / "key.json").exists() and (folder / "key.json").read_text() == text):
        with temp_dir_beside(folder) as tmp, naming(folder):    # a full disk names the folder being written
            write(tmp)
            (tmp / "key.json").write_text(text)
            for f in tmp.iterdir():
                if f.name.startswith("."):      # the marker of a temporary folder
                    f.unlink()
                else:
                    fsync_file(f)
            if folder.exists():
                shutil.rmtree(folder)
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o777 & ~umask)       # mkdtemp makes 0700; the mode a plain mkdir would give
            os.replace(tmp, folder)
        fsync_dir(folder.parent)
        for old in Path(parent).glob("corpus-ids-*"):
            if old != folder and (old / "key.json").exists():
                shutil.rmtree(old)
    if barrier is not None:
        barrier()
    return folder

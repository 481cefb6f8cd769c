"""The prepare stage: a phrase table's unique pairs as Parquet with token ids (and the ids again as flat
arrays that training reads from disk), a vocabulary, a split.

Bounded memory for any table size: one streaming pass hash-partitions the (source, target) pairs by
source into Arrow files on disk; each partition is then deduplicated, counted and encoded on its own
with pyarrow's vectorised kernels. Because the partition and the validation split are both functions of
the source phrase alone, the split is disjoint by source (no source is in both) and exact duplicates of
a pair always meet in one partition, wherever they are in the table.

An existing output folder is replaced all at once as far as any reader can tell: every part is built in
a temporary folder inside it (``.prepare-HOST-PID.RANDOM.tmp``), then the manifest is replaced by one
marked incomplete, the parts are renamed into place and the complete manifest, with every part's
sha256, is written last. A kill at any point leaves either the old folder, or one whose manifest says
it is incomplete, or the new one; ``train`` checks the hashes (:func:`phrase_rescore.pipeline.pairs.check_pairs_dir`).
The next run removes the temporary folders of killed runs. Nothing in the folder but the parts an
earlier prepare's manifest names is ever replaced or removed.
"""
from __future__ import annotations

import collections
import json
import math
import os
import secrets
import shutil
import zlib
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from phrase_rescore.core.atomic_write import fsync_dir, fsync_file
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.hashing import sha256_file
from phrase_rescore.core.progress import bar
from phrase_rescore.core.temp_names import HOST_TAG, writer_gone
from phrase_rescore.core.version import code_version
from phrase_rescore.moses_integration.phrase_table import read_phrase_table

from .configs import PrepareConfig
from .pairs import MANIFEST_FORMAT_VERSION, PART_NAMES, SCHEMA, SplitWriter, pairs_paths
from .vocab import Vocabularies, build_vocab, count_corpus, encode_phrases, split_words

_PAIR_SCHEMA = pa.schema([("source", pa.string()), ("target", pa.string())])


def _num_partitions(table_path: str, partition_bytes: int) -> int:
    size = os.path.getsize(table_path)
    with open(table_path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    return max(1, min(4096, math.ceil(size * (5 if gz else 1) / partition_bytes)))


def _is_valid(source: str, seed_bytes: bytes, threshold: int) -> bool:
    return zlib.crc32(source.encode("utf-8"), zlib.crc32(seed_bytes)) % 1_000_000 < threshold


def prepare(table_path: str | os.PathLike, out_dir: str | os.PathLike,
            config: PrepareConfig | None = None) -> dict:
    """Write the unique pairs of ``table_path`` with ids, the vocabulary and a manifest to ``out_dir``.

    :returns: the manifest (counts of lines, unique pairs, train/valid pairs and sources, rejects).
    """
    config = config or PrepareConfig()
    table_path = os.fspath(table_path)
    if not os.path.isfile(table_path):
        raise PhraseRescoreError("phrase table not found", table_path)
    if not 0 <= config.valid_fraction < 1:
        raise PhraseRescoreError(f"valid_fraction must be in [0, 1), got {config.valid_fraction}")
    if (config.src_corpus is None) != (config.tgt_corpus is None):
        raise PhraseRescoreError("give both src_corpus and tgt_corpus, or neither")
    if not config.vocab_from_corpus:
        config = replace(config, src_corpus=None, tgt_corpus=None)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise PhraseRescoreError("--out: expected a folder to write into, found a file", out)
    previous = _previous_parts(out)
    out.mkdir(parents=True, exist_ok=True)
    remove_stale_temp_dirs(out)
    tmp = out / f"{TMP_PREFIX}{HOST_TAG}-{os.getpid()}.{secrets.token_hex(4)}{TMP_SUFFIX}"
    tmp.mkdir()
    try:
        (tmp / TMP_MARKER).write_text(TMP_MARKER_TEXT, encoding="utf-8")
        new = pairs_paths(tmp)
        parts_dir = tmp / "partitions"
        parts_dir.mkdir()
        stats = _partition(table_path, parts_dir, config, tmp / "rejects.txt")
        counts_src, counts_tgt, n_unique = _dedup_and_count(parts_dir, stats["partitions"], config)
        if config.src_corpus is not None:
            counts_src = count_corpus(config.src_corpus)
            counts_tgt = count_corpus(config.tgt_corpus)
        vocabs = Vocabularies(build_vocab(counts_src, config.vocab_size), build_vocab(counts_tgt, config.vocab_size))
        vocabs.save(new["vocab"])
        split = _encode_and_write(parts_dir, stats["partitions"], vocabs, new, config)
        shutil.rmtree(parts_dir)
        names = [n for n in PART_NAMES if (tmp / n).exists()]
        manifest = {
            "stage": "prepare", "format_version": MANIFEST_FORMAT_VERSION, "tool_version": code_version(),
            "input": table_path, "config": asdict(config),
            "lines": stats["lines"], "rejected": stats["rejected"], "unique_pairs": n_unique,
            "vocab_source": len(vocabs.source), "vocab_target": len(vocabs.target),
            "vocab_counted_from": "corpus" if config.src_corpus else "unique phrase pairs",
            **split,
            "parts": {n: {"sha256": sha256_file(tmp / n), "bytes": (tmp / n).stat().st_size} for n in names},
        }
        manifest = _install(tmp, out, manifest, previous)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return manifest


TMP_PREFIX, TMP_SUFFIX = ".prepare-", ".tmp"
TMP_MARKER = ".phrase-rescore-prepare-tmp"
TMP_MARKER_TEXT = "A temporary folder of `phrase-rescore prepare`; removed by its next run once its process is gone.\n"


def _previous_parts(out: Path) -> set[str]:
    """The parts an earlier prepare wrote in ``out``, which this run may replace or remove.

    Proved by its manifest: the parts it lists (and, while it is incomplete, those it replaces); beside
    a manifest without that list (format 1) the parts are those of fixed names that prepare writes.
    :raises PhraseRescoreError: a part's name is taken by a file no prepare manifest accounts for.
    """
    manifest_path = out / "manifest.json"
    names: set[str] = set()
    if manifest_path.exists():
        try:
            m = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            m = None
        if not isinstance(m, dict) or m.get("stage") != "prepare":
            raise PhraseRescoreError("this manifest.json was not written by `phrase-rescore prepare`; "
                                     "choose another --out", manifest_path)
        if isinstance(m.get("parts"), dict):
            names = set(m["parts"]) | set(m.get("replacing", []))
        else:
            names = {"train.parquet", "valid.parquet", "vocab.json", "rejects.txt"}  # it wrote them under these names
        names.add("manifest.json")
    foreign = [n for n in PART_NAMES + ("manifest.json",) if n not in names and (out / n).exists()]
    if foreign:
        raise PhraseRescoreError(f"this folder holds {', '.join(foreign)}, which `phrase-rescore prepare` did not "
                                 "write (no prepare manifest.json here names them): move them away or choose "
                                 "another --out", out)
    return names - {"manifest.json"}


def _install(tmp: Path, out: Path, manifest: dict, previous: set[str]) -> dict:
    """Move the parts built in ``tmp`` into ``out``: first a manifest marked incomplete (naming the
    parts it replaces), then the parts by rename, then the earlier run's parts this one does not
    write are removed, then the complete manifest. Every file reaches ``out`` by a rename from ``tmp``."""
    parts = list(manifest["parts"])
    for name in parts:
        fsync_file(tmp / name)
    _write_manifest(tmp, out, {**manifest, "complete": False, "replacing": sorted(previous - set(parts))})
    for name in parts:
        os.replace(tmp / name, out / name)
    for name in sorted(previous - set(parts)):
        try:
            os.unlink(out / name)
        except FileNotFoundError:
            pass
    fsync_dir(out)
    manifest = {**manifest, "complete": True}
    _write_manifest(tmp, out, manifest)
    return manifest


def _write_manifest(tmp: Path, out: Path, manifest: dict) -> None:
    """Write ``out/manifest.json`` through ``tmp`` (fsync'ed, renamed, the folder fsync'ed)."""
    staged = tmp / "manifest.json"
    with open(staged, "w", encoding="utf-8", newline="\n") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(staged, out / "manifest.json")
    fsync_dir(out)


def remove_stale_temp_dirs(out: Path) -> list[Path]:
    """Remove the temporary folders that killed prepare runs left in ``out``: only those named like
    ours, holding our marker file, made on this machine by a process that no longer runs."""
    removed = []
    for d in out.glob(f"{TMP_PREFIX}*{TMP_SUFFIX}"):
        owner = d.name[len(TMP_PREFIX):-len(TMP_SUFFIX)].split(".", 1)[0]     # HOST-PID
        host, _, pid = owner.partition("-")
        if not (d.is_dir() and (d / TMP_MARKER).is_file() and pid.isdigit() and writer_gone(host, int(pid))):
            continue
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    return removed


def _partition(table_path: str, tmp: Path, config: PrepareConfig, rejects_path: Path) -> dict:
    """Stream the table once, appending each good line's (source, target) to its source's partition."""
    n_parts = _num_partitions(table_path, config.partition_bytes)
    writers: dict[int, ipc.RecordBatchStreamWriter] = {}
    buffers = collections.defaultdict(lambda: ([], []))
    buffered = 0

    def flush():
        for p, (srcs, tgts) in buffers.items():
            if p not in writers:
                writers[p] = ipc.new_stream(str(tmp / f"part-{p:05d}.arrow"), _PAIR_SCHEMA)
            writers[p].write_batch(pa.record_batch([pa.array(srcs, pa.string()), pa.array(tgts, pa.string())],
                                                   schema=_PAIR_SCHEMA))
        buffers.clear()

    reader = read_phrase_table(table_path, on_error=config.on_error,
                               rejects_path=rejects_path if config.on_error == "keep" else None)
    crc = zlib.crc32
    with bar(desc="prepare: read", unit="lines") as progress:
        for entry in reader:
            if entry.error is None:
                p = crc(entry.source.encode("utf-8")) % n_parts
                srcs, tgts = buffers[p]
                srcs.append(entry.source)
                tgts.append(entry.target)
                buffered += 1
                if buffered >= config.buffer_pairs:
                    flush()
                    buffered = 0
            progress.update()
    flush()
    for w in writers.values():
        w.close()
    if reader.stats.lines == reader.stats.rejected:
        raise PhraseRescoreError("no usable phrase pairs in the table", table_path)
    return {"partitions": sorted(writers), "lines": reader.stats.lines, "rejected": reader.stats.rejected}


def _read_partition(tmp: Path, p: int) -> pa.Table:
    with ipc.open_stream(str(tmp / f"part-{p:05d}.arrow")) as r:
        return r.read_all()


def _dedup_and_count(tmp: Path, partitions: list[int], config: PrepareConfig):
    """Deduplicate each partition in place (sorted by source, target) and count words over unique pairs."""
    counts_src, counts_tgt = collections.Counter(), collections.Counter()
    n_unique = 0
    for p in bar(partitions, desc="prepare: dedup", unit="parts"):
        table = _read_partition(tmp, p).group_by(["source", "target"]).aggregate([])
        table = table.sort_by([("source", "ascending"), ("target", "ascending")])
        n_unique += table.num_rows
        with ipc.new_stream(str(tmp / f"part-{p:05d}.arrow"), _PAIR_SCHEMA) as w:
            w.write_table(table.select(["source", "target"]))
        if config.src_corpus is None:
            for column, counter in (("source", counts_src), ("target", counts_tgt)):
                vc = pc.value_counts(split_words(table[column])[0])
                counter.update(dict(zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist())))
    return counts_src, counts_tgt, n_unique


def _encode_and_write(tmp: Path, partitions: list[int], vocabs: Vocabularies, paths: dict, config: PrepareConfig):
    """Encode every partition with the vocabularies and stream it into train/valid Parquet files."""
    src_vocab, tgt_vocab = vocabs.source, vocabs.target
    seed_bytes = str(config.seed).encode()
    threshold = round(config.valid_fraction * 1_000_000)
    counts = {"train_pairs": 0, "valid_pairs": 0, "train_sources": 0, "valid_sources": 0}
    writers = {"train": pq.ParquetWriter(str(paths["train"]), SCHEMA),
               "valid": pq.ParquetWriter(str(paths["valid"]), SCHEMA)}
    arrays = {name: SplitWriter(paths["train"].parent, name) for name in ("train", "valid")}
    try:
        for p in bar(partitions, desc="prepare: encode", unit="parts"):
            table = _read_partition(tmp, p)
            src_ids, src_unk = encode_phrases(table["source"], src_vocab)
            tgt_ids, tgt_unk = encode_phrases(table["target"], tgt_vocab)
            encoded = pa.table({
                "source": table["source"], "target": table["target"],
                "src_ids": src_ids, "tgt_ids": tgt_ids,
                "src_len": pc.cast(pc.list_value_length(src_ids), pa.int32()),
                "tgt_len": pc.cast(pc.list_value_length(tgt_ids), pa.int32()),
                "n_unk": pa.array((src_unk + tgt_unk).astype(np.int32)),
            }, schema=SCHEMA)
            sources = table["source"].to_pylist()
            valid = np.fromiter((_is_valid(s, seed_bytes, threshold) for s in sources), bool, len(sources))
            for name, sel in (("train", ~valid), ("valid", valid)):
                part = encoded.filter(pa.array(sel))
                if part.num_rows:
                    writers[name].write_table(part)
                    arrays[name].append(part["src_ids"], part["tgt_ids"])
                    counts[f"{name}_pairs"] += part.num_rows
                    counts[f"{name}_sources"] += len(pc.unique(part["source"]))
    finally:
        for w in (*writers.values(), *arrays.values()):
            w.close()
    return counts


def refuse_constant_unknown_words(pairs: Path, manifest: dict, vocab_size: int) -> None:
    """Refuse a shortlist under which every phrase pair has the same number of unknown words (none, when the
    shortlists hold the whole vocabulary of both sides): the unknown-word column of +RNN+WP would be one value
    on every line, and MERT would tune its weight on noise. Refused rather than changed: the shortlist decides
    the model and the column, and a size the tool picked in the middle of a run would be a silent change of the
    experiment (``phrase-rescore init`` proposes one from the vocabulary, in the workflow file)."""
    lo = hi = None
    for part in ("train.parquet", "valid.parquet"):
        path = pairs / part
        if not path.is_file():
            continue
        col = pq.read_table(path, columns=["n_unk"])["n_unk"]
        if len(col):
            mm = pc.min_max(col).as_py()
            lo = mm["min"] if lo is None else min(lo, mm["min"])
            hi = mm["max"] if hi is None else max(hi, mm["max"])
    if lo is None or lo != hi:
        return
    words_src, words_tgt = manifest["vocab_source"] - 2, manifest["vocab_target"] - 2
    raise PhraseRescoreError(
        f"[prepare] vocab_size = {vocab_size}: every one of the {manifest['unique_pairs']} phrase pairs has {lo} "
        f"words outside the shortlists (of {words_src} source and {words_tgt} target words, counted from "
        f"{manifest['vocab_counted_from']}), so the +RNN+WP configuration's unknown-word column would be "
        f"exp({lo}) on every line of the table and MERT would tune its weight on noise. Set [prepare] vocab_size "
        f"below the vocabulary of both sides (below {min(words_src, words_tgt)}; phrase-rescore init proposes one: "
        "the words seen at least twice), or leave tune-rnn-wp and moses-ini-rnn-wp out of the workflow")

"""Deterministic gzip output: the one home of writing gzip whose bytes depend only on the data.

A gzip output carries no file name and mtime 0 in its header, so the same content always gives the same
bytes (the workflow compares outputs by hash): :func:`gzip_writer` for a stream written at once, and
:func:`gzip_piece` / :func:`gzip_trailer` for one member written piece by piece (an output that is
appended to and resumed): a fixed header (:data:`GZIP_HEADER`), each piece as raw deflate from a fresh
compressor ended by a sync flush (as pigz does), then an empty final block and the CRC-32/length trailer.
A piece's bytes depend only on its data, so a member written in any number of sittings is the same bytes
as one written at once.
"""
from __future__ import annotations

import gzip
import os
import zlib
from typing import IO

#: The header of a gzip member by :func:`gzip_piece`: deflate, no flags, no name, mtime 0, OS unknown.
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
_FINAL_EMPTY_BLOCK = b"\x03\x00"  # BFINAL=1, fixed Huffman, end-of-block


def wants_gzip(path: str | os.PathLike) -> bool:
    """An output is gzip-compressed when its name ends in .gz."""
    return os.fspath(path).endswith(".gz")


def gzip_writer(fileobj: IO[bytes], compresslevel: int = 6) -> gzip.GzipFile:
    """A gzip stream onto ``fileobj`` whose bytes depend only on the data: no name, mtime 0.

    Closing it writes the trailer but leaves ``fileobj`` open.
    """
    return gzip.GzipFile(filename="", mode="wb", fileobj=fileobj, mtime=0, compresslevel=compresslevel)


def gzip_piece(data: bytes, compresslevel: int = 6) -> bytes:
    """``data`` as raw deflate from a fresh compressor, sync-flushed: one piece of a gzip member that
    starts with :data:`GZIP_HEADER` and ends with :func:`gzip_trailer`."""
    comp = zlib.compressobj(compresslevel, zlib.DEFLATED, -15)
    return comp.compress(data) + comp.flush(zlib.Z_SYNC_FLUSH)


def gzip_trailer(crc: int, size: int) -> bytes:
    """The end of a gzip member of :func:`gzip_piece` pieces: ``crc`` is ``zlib.crc32`` of all their
    data, ``size`` its length (mod 2**32)."""
    return _FINAL_EMPTY_BLOCK + crc.to_bytes(4, "little") + (size & 0xFFFFFFFF).to_bytes(4, "little")

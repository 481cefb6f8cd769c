"""Opening plain or gzip files by content, reading lines, atomic writes, file hashes and output-path checks.

Every text a user gives is read through :func:`read_lines` (or :func:`read_text_lines`,
:func:`read_sentences`): lines end at ``\n`` only, so every command counts a file's lines alike, and
invalid UTF-8 or broken gzip data is an error naming the file and the line.

A UTF-8 byte-order mark (:data:`BOM`, bytes EF BB BF) at the start of a file is not text: left in, it
would glue itself to the first word (an unknown source word, a reference word no hypothesis matches).
This module is its one home, with one rule per kind of file:

* text that is read for its words -- raw and tokenized corpora, sources and references -- has the mark
  dropped (:func:`read_lines` with ``bom="strip"``, the default): the result is the one the same file
  without the mark gives, and nothing else of the file changes (sacrebleu and Moses's scripts keep the
  mark as part of the first word; a BLEU here is theirs for the file saved without it);
* files whose lines are copied to an output byte for byte -- phrase tables (rewritten by ``score``),
  moses.ini files (rewritten with new weights), n-best lists (re-ranked or given a feature) -- are
  refused with an error naming the file and line 1 (:func:`open_binary_read`, and :func:`read_lines`
  with ``bom="refuse"``): dropping the mark silently would make the output differ from its input in
  bytes that were not ours to change, and keeping it would keep the first line broken. Moses never
  writes the mark, so only a file edited by hand meets this, and saving it again without the mark
  is the fix.

Every stage writes through :func:`atomic_path` / :func:`atomic_open` so a crash never leaves a
half-written output under the final name: the data is written to a temporary file beside the
target, fsync'ed, renamed over the target, and the folder is fsync'ed so the rename survives a
power loss too. gzip outputs carry no file name and mtime 0 in their header, so the same content
always gives the same bytes (the workflow compares outputs by hash).

A temporary file is named ``.{name}.{host}-{pid}.{random}.tmp``: ``host`` is a short hash of the
machine's name and ``pid`` the writing process. The next atomic write of the same target removes
the temporary files of processes of this machine that are gone (a killed run's); those of live
processes, or of other machines sharing the folder, are left alone (a file whose process id was
reused by a live process stays until a later write finds that process gone); :func:`writer_gone` is
that test, for every temporary the tool names after its process.

:func:`check_outputs` refuses, before a command writes anything, an output that is one of its
inputs (by path, symbolic link or hard link), another of its outputs, or a folder holding an input.
"""
from __future__ import annotations

import contextlib
import errno
import gzip
import hashlib
import io
import os
import re
import shutil
import stat
import tempfile
import zlib
from pathlib import Path
from typing import IO, Iterator, Mapping, Sequence, Union

from .errors import PhraseRescoreError
from .words import words

GZIP_MAGIC = b"\x1f\x8b"

def process_umask() -> int:
    """The process's umask, read without changing it (Linux's ``/proc/self/status``): setting and restoring it
    with ``os.umask`` would race with any other thread creating files. Elsewhere, set and restored."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0)
    os.umask(mask)
    return mask


_HOST = hashlib.sha256(os.uname().nodename.encode("utf-8", "replace")).hexdigest()[:8]

# the attribute naming the file an exception was raised while reading (see :func:`describe_file_error`)
READ_PATH_ATTR = "phrase_rescore_path"
#: what decoding a broken gzip stream raises
GZIP_READ_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile)
_READ_ERRORS = (UnicodeDecodeError,) + GZIP_READ_ERRORS


# --------------------------------------------------------------------------------------------- reading

def _note_read_path(exc: BaseException | None, path) -> None:
    """Remember on a decoding error which file was being read, unless an inner reader already did."""
    if isinstance(exc, _READ_ERRORS) and getattr(exc, READ_PATH_ATTR, None) is None:
        setattr(exc, READ_PATH_ATTR, os.fspath(path))


class _GzipReader(gzip.GzipFile):
    """A gzip reader whose ``with`` block names the file in a decoding error raised inside it."""

    def __exit__(self, exc_type, exc, tb):
        _note_read_path(exc, self.name)
        return super().__exit__(exc_type, exc, tb)


class _PlainReader(io.BufferedReader):
    """A buffered reader whose ``with`` block names the file in a decoding error raised inside it."""

    def __exit__(self, exc_type, exc, tb):
        _note_read_path(exc, self.raw.name)
        return super().__exit__(exc_type, exc, tb)


class _TextReader(io.TextIOWrapper):
    """UTF-8 text whose ``with`` block names the file in a decoding error raised inside it."""

    def __exit__(self, exc_type, exc, tb):
        _note_read_path(exc, self._path)
        return super().__exit__(exc_type, exc, tb)


def is_gzip(path: str | os.PathLike) -> bool:
    """True when the file starts with the gzip magic bytes (the suffix is not trusted)."""
    try:
        with open(path, "rb") as f:
            return f.read(2) == GZIP_MAGIC
    except FileNotFoundError:
        raise PhraseRescoreError("file not found", path) from None
    except IsADirectoryError:
        raise PhraseRescoreError("expected a file, found a directory", path) from None


#: the UTF-8 byte-order mark (U+FEFF encoded), which may start a file saved by some editors
BOM = b"\xef\xbb\xbf"
BOM_CHOICES = ("refuse", "strip", "keep")


def bom_error(path: str | os.PathLike) -> PhraseRescoreError:
    """The error for a file whose bytes are copied to an output and that starts with :data:`BOM`."""
    return PhraseRescoreError("starts with a UTF-8 byte-order mark (bytes EF BB BF); expected the file without "
                              "one: files of this kind (phrase tables, moses.ini, n-best lists) are copied to "
                              "outputs byte for byte, so the mark is refused rather than dropped silently (save "
                              "the file as UTF-8 without BOM)", path, 1)


def _open_binary(path: str | os.PathLike) -> IO[bytes]:
    if is_gzip(path):
        return _GzipReader(os.fspath(path), "rb")
    return _PlainReader(io.FileIO(os.fspath(path), "rb"), buffer_size=1 << 20)


def _starts_with_bom(f: IO[bytes], path: str | os.PathLike) -> bool | None:
    """Whether the open, unread ``f`` starts with :data:`BOM` (nothing is consumed); None when the
    (gzip) data is broken already there."""
    try:
        head = f.peek(len(BOM))[:len(BOM)]
        if 0 < len(head) < len(BOM):    # a first gzip block may decompress to fewer bytes
            with _open_binary(path) as g:
                head = g.read(len(BOM))
    except GZIP_READ_ERRORS:
        return None
    return head == BOM


def open_binary_read(path: str | os.PathLike, bom: str = "refuse") -> IO[bytes]:
    """Open for reading bytes, decompressing gzip when the content is gzip.

    A truncated or corrupt gzip stream, or (through :func:`open_text_read`) invalid UTF-8, raised
    inside the file's ``with`` block carries the path for :func:`describe_file_error`.

    :param bom: ``"refuse"``: a file starting with :data:`BOM` is an error (:func:`bom_error`), for the
        files whose lines are copied through (see the module's docstring); ``"keep"``: the bytes as
        stored, for a caller that deals with the mark itself.
    :raises PhraseRescoreError: the file is missing, a directory, or (``"refuse"``) starts with the mark.
    """
    assert bom in ("refuse", "keep"), bom
    f = _open_binary(path)
    if bom == "refuse":
        starts = _starts_with_bom(f, path)
        if starts is None:       # broken gzip: a fresh reader meets it where the caller's reads expect it
            f.close()
            return _open_binary(path)
        if starts:
            f.close()
            raise bom_error(path)
    return f


def open_text_read(path: str | os.PathLike, bom: str = "refuse") -> IO[str]:
    """Open for reading UTF-8 text (gzip by content), newline handling left to the caller; ``bom`` as
    for :func:`open_binary_read`."""
    f = _TextReader(open_binary_read(path, bom), encoding="utf-8", newline="")
    f._path = os.fspath(path)
    return f


def _gzip_problem(exc: BaseException) -> str:
    """What a gzip decoding error says about the file."""
    if isinstance(exc, gzip.BadGzipFile):
        return "not a valid gzip file"
    if isinstance(exc, EOFError):
        return "the file ends too early, truncated?"
    return "corrupt compressed data"


def gzip_read_error(exc: BaseException, path: str | os.PathLike, lines_read: int) -> PhraseRescoreError:
    """The error for gzip data of ``path`` that breaks after ``lines_read`` good lines (one of
    :data:`GZIP_READ_ERRORS`), naming the line it breaks in."""
    after = f"after line {lines_read}: " if lines_read else ""
    return PhraseRescoreError(f"{_gzip_problem(exc)} ({after}{exc})", path, lines_read + 1)


#: the errors of a write to a full disk (or past a quota, or past the size a process may write)
FULL_DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def describe_file_error(exc: BaseException) -> str:
    """A one-line account of an error reading or writing a user's file, naming the file when known."""
    path = getattr(exc, READ_PATH_ATTR, None)
    where = f"{path}: " if path else ""
    if isinstance(exc, GZIP_READ_ERRORS):
        return f"{where}{_gzip_problem(exc)} ({exc})"
    if isinstance(exc, UnicodeDecodeError):
        return f"{where}not valid UTF-8 text (byte {exc.object[exc.start:exc.start + 1]!r}: {exc.reason})"
    if isinstance(exc, OSError):
        what = exc.strerror or str(exc) or type(exc).__name__
        if exc.errno in FULL_DISK_ERRNOS:     # the system's words, not a library's ("Error writing bytes...")
            what = os.strerror(exc.errno)
        if exc.filename is not None and exc.filename2 is not None:
            return f"{exc.filename} -> {exc.filename2}: {what}"
        return f"{exc.filename}: {what}" if exc.filename is not None else what
    return f"{where}{exc}"


# --------------------------------------------------------------------------------------------- output paths

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


# --------------------------------------------------------------------------------------------- writing

def wants_gzip(path: str | os.PathLike) -> bool:
    """An output is gzip-compressed when its name ends in .gz."""
    return os.fspath(path).endswith(".gz")


def gzip_writer(fileobj: IO[bytes], compresslevel: int = 6) -> gzip.GzipFile:
    """A gzip stream onto ``fileobj`` whose bytes depend only on the data: no name, mtime 0.

    Closing it writes the trailer but leaves ``fileobj`` open.
    """
    return gzip.GzipFile(filename="", mode="wb", fileobj=fileobj, mtime=0, compresslevel=compresslevel)


# A gzip member written piece by piece, for an output that is appended to and resumed: a fixed header,
# each piece as raw deflate from a fresh compressor ended by a sync flush (as pigz does), then an empty
# final block and the CRC-32/length trailer. A piece's bytes depend only on its data, so a member
# written in any number of sittings is the same bytes as one written at once.

#: The header of a gzip member by :func:`gzip_piece`: deflate, no flags, no name, mtime 0, OS unknown.
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
_FINAL_EMPTY_BLOCK = b"\x03\x00"  # BFINAL=1, fixed Huffman, end-of-block


def gzip_piece(data: bytes, compresslevel: int = 6) -> bytes:
    """``data`` as raw deflate from a fresh compressor, sync-flushed: one piece of a gzip member that
    starts with :data:`GZIP_HEADER` and ends with :func:`gzip_trailer`."""
    comp = zlib.compressobj(compresslevel, zlib.DEFLATED, -15)
    return comp.compress(data) + comp.flush(zlib.Z_SYNC_FLUSH)


def gzip_trailer(crc: int, size: int) -> bytes:
    """The end of a gzip member of :func:`gzip_piece` pieces: ``crc`` is ``zlib.crc32`` of all their
    data, ``size`` its length (mod 2**32)."""
    return _FINAL_EMPTY_BLOCK + crc.to_bytes(4, "little") + (size & 0xFFFFFFFF).to_bytes(4, "little")


def _temp_pattern(name: str) -> re.Pattern:
    """Temporary names of atomic writes to ``name``: groups host hash and pid."""
    return re.compile(rf"\.{re.escape(name)}\.([0-9a-f]{{8}})-([0-9]+)\.[A-Za-z0-9_]+\.tmp")


#: A short hash of this machine's name: temporary names carry it with the writing process's id, so that
#: a later run can tell its own machine's leftovers (see :func:`writer_gone`).
HOST_TAG = _HOST


def writer_gone(host: str, pid: int) -> bool:
    """True when the process ``pid`` of machine ``host`` (a :data:`HOST_TAG`), which named a temporary
    file or folder, no longer runs, so that what it left may be removed.

    False for another machine (its processes cannot be seen from here), for this process, for a pid
    that is no process id (<= 0) and for a live process, someone else's too (EPERM).
    """
    if host != _HOST or pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # EPERM: it exists, run by someone else
        return False
    return False


def remove_stale_temps(path: str | os.PathLike) -> list[Path]:
    """Remove the temporary files that killed processes of this machine left beside ``path``.

    Only regular files named as :func:`atomic_path` names its temporaries for ``path`` are touched (and
    folders named as :func:`temp_dir_beside` names them, with what is in them), and only when their
    process is gone. :returns: the files and folders removed.
    """
    path = Path(path)
    pattern = _temp_pattern(path.name)
    removed = []
    try:
        names = os.listdir(path.parent)
    except OSError:
        return removed
    for name in names:
        m = pattern.fullmatch(name)
        if m is None or not writer_gone(m.group(1), int(m.group(2))):
            continue
        p = path.parent / name
        with contextlib.suppress(OSError):
            mode = os.lstat(p).st_mode
            if stat.S_ISREG(mode):
                os.unlink(p)
                removed.append(p)
            elif stat.S_ISDIR(mode) and (p / _TEMP_DIR_MARKER).is_file():
                shutil.rmtree(p)
                removed.append(p)
    return removed


_TEMP_DIR_MARKER = ".phrase-rescore-temporary"


@contextlib.contextmanager
def temp_dir_beside(path: str | os.PathLike) -> Iterator[Path]:
    """A new folder beside ``path``, named as :func:`atomic_path` names its temporary files of ``path``
    (and carrying a marker file), for a program that writes ``path`` under a name of its own choosing:
    what it wrote is renamed into place only when complete. The folder is removed, with what is in it,
    when the ``with`` block ends; those of killed runs are removed by the next write of ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.{_HOST}-{os.getpid()}.", suffix=".tmp", dir=path.parent))
    try:
        (tmp / _TEMP_DIR_MARKER).write_bytes(b"")
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def naming(path: str | os.PathLike) -> Iterator[None]:
    """An ``OSError`` raised in the ``with`` block without a file name (a write to an open file: a full
    disk, an I/O error) names ``path``, so that its message says which file failed."""
    try:
        yield
    except OSError as e:
        if e.filename is None and e.errno is not None:   # (a gzip stream's own errors carry no errno)
            e.filename = os.fspath(path)
        raise


def fsync_dir(folder: str | os.PathLike) -> None:
    """fsync a folder so a rename in it is durable; some file systems refuse, which is tolerated."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def fsync_file(path: str | os.PathLike) -> None:
    """fsync a file's data to disk; a file system without fsync (EINVAL, ENOTSUP) is tolerated."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.ENOTSUP):  # a file system without fsync
            raise
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success fsync it, rename it over ``path`` and
    fsync the folder.

    On an exception the temporary file is removed and ``path`` is left as it was; an ``OSError`` that names
    no file (a full disk: ENOSPC, EDQUOT, EFBIG; any failed write) is reported against ``path``.
    Temporary files that killed runs left for ``path`` are removed first (see the module docstring).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{_HOST}-{os.getpid()}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, 0o666 & ~process_umask())  # mkstemp makes 0600; give outputs the mode a plain open() would
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        fsync_file(tmp_path)
        os.replace(tmp_path, path)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        if isinstance(e, OSError) and e.filename is None and e.errno is not None:
            e.filename = os.fspath(path)
        raise
    fsync_dir(path.parent)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "wb", compresslevel: int = 6) -> Iterator[IO]:
    """Open ``path`` for writing through a temporary file renamed into place on success.

    gzip-compresses (deterministically, see :func:`gzip_writer`) when ``path`` ends in .gz.
    ``mode`` is "wb" or "w" (UTF-8 text, "\\n" newlines).
    """
    assert mode in ("wb", "w"), mode
    with atomic_path(path) as tmp, open(tmp, "wb", buffering=1 << 20) as f, \
            (gzip_writer(f, compresslevel) if wants_gzip(path) else contextlib.nullcontext(f)) as raw:
        if mode == "w":
            text = io.TextIOWrapper(raw, encoding="utf-8", newline="\n")
            yield text
            text.flush()
            text.detach()  # ``raw`` is closed by its own ``with``
        else:
            yield raw


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file's bytes (as stored, compressed or not)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def read_lines(path: str | os.PathLike, bom: str = "strip") -> Iterator[tuple[int, str, str]]:
    """``(line number, text, line ending)`` of every line of ``path`` (plain or gzip by content).

    Lines end at ``\n`` only (a ``\r`` elsewhere is part of the line); the ending is ``"\n"``, ``"\r\n"``
    or ``""`` (a last line without one), so that ``text + ending`` is the line's exact bytes (less a
    dropped byte-order mark). Invalid UTF-8 and truncated gzip data are errors naming the file and the
    line they are in.

    :param bom: what a :data:`BOM` starting the file does: ``"strip"`` drops it (text read for its words:
        the lines are those of the file without the mark), ``"refuse"`` raises :func:`bom_error` (a file
        whose lines are copied through), ``"keep"`` leaves it in line 1.
    """
    assert bom in BOM_CHOICES, bom
    line_no = 0
    with open_binary_read(path, "keep") as f:
        try:
            for raw in f:
                line_no += 1
                if line_no == 1 and raw.startswith(BOM) and bom != "keep":
                    if bom == "refuse":
                        raise bom_error(path)
                    raw = raw[len(BOM):]
                ending = b"\r\n" if raw.endswith(b"\r\n") else b"\n" if raw.endswith(b"\n") else b""
                body = raw[:len(raw) - len(ending)]
                try:
                    text = body.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise PhraseRescoreError(f"invalid UTF-8 at byte {e.start} ({e.reason}): expected UTF-8 text",
                                             path, line_no) from None
                yield line_no, text, ending.decode("ascii")
        except GZIP_READ_ERRORS as e:
            raise gzip_read_error(e, path, line_no) from None


def read_text_lines(path: str | os.PathLike) -> list[str]:
    """Every line of ``path`` without its ending, split as :func:`read_lines` splits (``\\n`` only)."""
    return [text for _, text, _ in read_lines(path)]


def read_sentences(path: str | os.PathLike) -> list[list[str]]:
    """The words of every line of ``path`` (plain or gzip), split as Moses splits them
    (:func:`~phrase_rescore.core.words.words`); empty lines stay."""
    return [words(text) for _, text, _ in read_lines(path)]

"""The UTF-8 byte-order mark: the one home of what a file starting with one does.

A UTF-8 byte-order mark (:data:`BOM`, bytes EF BB BF) at the start of a file is not text: left in, it
would glue itself to the first word (an unknown source word, a reference word no hypothesis matches).
There is one rule per kind of file (:data:`BOM_CHOICES`):

* text that is read for its words -- raw and tokenized corpora, sources and references, TOML files -- has
  the mark dropped (``"strip"``): the result is the one the same file without the mark gives, and nothing
  else of the file changes (sacrebleu and Moses's scripts keep the mark as part of the first word; a BLEU
  here is theirs for the file saved without it);
* files whose lines are copied to an output byte for byte -- phrase tables (rewritten by ``score``),
  moses.ini files (rewritten with new weights), n-best lists (re-ranked or given a feature) -- are
  refused with an error naming the file and line 1 (``"refuse"``, :func:`bom_error`): dropping the mark
  silently would make the output differ from its input in bytes that were not ours to change, and
  keeping it would keep the first line broken. Moses never writes the mark, so only a file edited by
  hand meets this, and saving it again without the mark is the fix;
* ``"keep"`` leaves the bytes as stored, for a caller that deals with the mark itself.
"""
from __future__ import annotations

import os
from typing import IO, Callable

from .errors import PhraseRescoreError
from .file_errors import GZIP_READ_ERRORS

#: the UTF-8 byte-order mark (U+FEFF encoded), which may start a file saved by some editors
BOM = b"\xef\xbb\xbf"
BOM_CHOICES = ("refuse", "strip", "keep")


def bom_error(path: str | os.PathLike) -> PhraseRescoreError:
    """The error for a file whose bytes are copied to an output and that starts with :data:`BOM`."""
    return PhraseRescoreError("starts with a UTF-8 byte-order mark (bytes EF BB BF); expected the file without "
                              "one: files of this kind (phrase tables, moses.ini, n-best lists) are copied to "
                              "outputs byte for byte, so the mark is refused rather than dropped silently (save "
                              "the file as UTF-8 without BOM)", path, 1)


def drop_bom(head: bytes, bom: str, path: str | os.PathLike) -> bytes:
    """``head`` (a file's first line, or all its bytes) as rule ``bom`` takes it: without a starting
    :data:`BOM` (``"strip"``), as stored (``"keep"``, or no mark), or :func:`bom_error` (``"refuse"``).

    :raises PhraseRescoreError: ``"refuse"`` and ``head`` starts with the mark.
    """
    if bom == "keep" or not head.startswith(BOM):
        return head
    if bom == "refuse":
        raise bom_error(path)
    return head[len(BOM):]


def starts_with_bom(f: IO[bytes], reopen: Callable[[], IO[bytes]]) -> bool | None:
    """Whether the open, unread ``f`` starts with :data:`BOM` (nothing is consumed); None when the (gzip)
    data is broken already there. ``reopen`` opens the same file afresh, for a first gzip block that
    decompresses to fewer bytes than the mark."""
    try:
        head = f.peek(len(BOM))[:len(BOM)]
        if 0 < len(head) < len(BOM):
            with reopen() as g:
                head = g.read(len(BOM))
    except GZIP_READ_ERRORS:
        return None
    return head == BOM

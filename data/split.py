"""Split one held-out parallel set into a dev (tuning) half and a test half, deterministically.

A corpus that comes with a single validation set (Multi30k has train and val only) needs two disjoint
sets: one for MERT, one for the BLEU it reports. ``alternate`` (the default) sends lines 1, 3, 5, ...
to dev and 2, 4, 6, ... to test, so both halves draw from the whole file whatever order it was written
in; ``halves`` sends the first ceil(n/2) lines to dev and the rest to test. ``swap`` trades the two
halves' places: tuned on what was the test half and scored on what was the dev half, a result found on
one half is checked on sentences it was not chosen on (the second fold of a two-fold check). Line i of
the source stays paired with line i of the reference; the lines are copied as they are, in their order
(the inputs may be gzip; a last line without a newline gets one).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from phrase_rescore.core.atomic_write import atomic_open
from phrase_rescore.core.config import setting
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.reading import read_lines

MODES = ("alternate", "halves")
#: the files written into the output folder
FILES = {"dev_src": "dev.src", "dev_ref": "dev.ref", "test_src": "test.src", "test_ref": "test.ref"}


@dataclass
class SplitConfig:
    """Options of ``make-split`` and ``[split]``."""

    mode: str = setting("alternate", choices=MODES,
                        help="alternate: odd lines to dev, even lines to test; halves: the first half to dev "
                             "(ceil(n/2) lines), the second to test.")
    swap: bool = setting(False, help="the halves trade places: dev gets the lines test would, test those "
                                     "dev would (a second fold, to check a result on the other half).")


def split_heldout(src: str | os.PathLike, ref: str | os.PathLike, out_dir: str | os.PathLike,
                  config: SplitConfig | None = None) -> dict:
    """Write ``out_dir/{dev,test}.{src,ref}`` from the parallel files ``src`` and ``ref``.

    :returns: ``{"dev": lines, "test": lines, "paths": {artifact: path}}``.
    :raises PhraseRescoreError: the files differ in length, or hold fewer than two lines.
    """
    config = config or SplitConfig()
    src_lines = [t + (e or "\n") for _, t, e in read_lines(src)]
    ref_lines = [t + (e or "\n") for _, t, e in read_lines(ref)]
    if len(src_lines) != len(ref_lines):
        raise PhraseRescoreError(f"has {len(ref_lines)} lines but the source {src} has {len(src_lines)}; "
                                 "expected one reference line per source line", ref)
    n = len(src_lines)
    if n < 2:
        raise PhraseRescoreError(f"has {n} line(s); expected at least 2 to split into dev and test", src)
    if config.mode == "alternate":
        dev, test = list(range(0, n, 2)), list(range(1, n, 2))
    else:
        half = (n + 1) // 2
        dev, test = list(range(half)), list(range(half, n))
    if config.swap:
        dev, test = test, dev
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for art, name in FILES.items():
        lines = src_lines if art.endswith("src") else ref_lines
        idx = dev if art.startswith("dev") else test
        paths[art] = out / name
        with atomic_open(paths[art], "w") as f:
            f.writelines(lines[i] for i in idx)
    return {"dev": len(dev), "test": len(test), "paths": paths}

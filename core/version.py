"""The tool's version as manifests record it: the package version plus a hash of the source that runs."""
from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path
from typing import Iterable

from .. import __version__

#: the installed packages whose source decides what the tool writes
SOURCE_PACKAGES = ("phrase_rescore.core", "phrase_rescore.pipeline", "phrase_rescore.moses_integration",
                   "phrase_rescore.app", "phrase_rescore.data")


def source_digest(package_dirs: Iterable[str | os.PathLike]) -> str:
    """Hex SHA-256 of every ``.py`` file under the given package folders: each file's path relative to
    its package's parent folder (``pipeline/score.py``) and its bytes, in sorted path order."""
    files: list[tuple[str, Path]] = []
    for d in package_dirs:
        d = Path(d)
        files += [(p.relative_to(d.parent).as_posix(), p) for p in d.rglob("*.py") if p.is_file()]
    h = hashlib.sha256()
    for rel, p in sorted(files):
        h.update(rel.encode("utf-8") + b"\0" + hashlib.sha256(p.read_bytes()).hexdigest().encode() + b"\n")
    return h.hexdigest()


@functools.lru_cache(maxsize=None)
def code_version() -> str:
    """The version of the code that is running: the package version plus the first 12 hex digits of
    :func:`source_digest` of :data:`SOURCE_PACKAGES` (``0.1.0+1a2b3c4d5e6f``).

    Manifests record it, so any change to the source, released or not, makes the workflow rerun what
    the changed code produced. Computed once per process.
    """
    import importlib.metadata
    import importlib.util

    try:
        version = importlib.metadata.version("phrase-rescore")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree without installing
        version = __version__
    dirs = []
    for name in SOURCE_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            dirs += list(spec.submodule_search_locations)
    return f"{version}+{source_digest(dirs)[:12]}"

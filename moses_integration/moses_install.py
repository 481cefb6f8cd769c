"""Find a real Moses installation: ``MOSES_HOME``, or ``moses`` on PATH.

An installation is usable for tuning when it has the decoder (``bin/moses``), the tuning script
(``scripts/training/mert-moses.pl``) and the MERT binaries it drives (``bin/mert``, ``bin/extractor``),
laid out as a Moses build leaves them (``bjam`` installs the binaries under ``bin/`` next to ``scripts/``).
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from phrase_rescore.core.errors import PhraseRescoreError

REQUIRED = ("bin/moses", "bin/mert", "bin/extractor", "scripts/training/mert-moses.pl")

NOT_FOUND = (
    "no Moses installation found: set MOSES_HOME to a Moses checkout or install with bin/moses, bin/mert, "
    "bin/extractor and scripts/training/mert-moses.pl (or put its bin/moses on PATH), "
    "or use --backend embedded to decode and tune with the project's own Moses-compatible decoder and MERT"
)


@dataclass(frozen=True)
class MosesInstall:
    """Paths of a Moses installation.

    :ivar root: the installation root (``MOSES_HOME``).
    :ivar moses: the decoder binary.
    :ivar mert_moses: ``scripts/training/mert-moses.pl``.
    :ivar bin_dir: the directory with ``mert`` and ``extractor`` (mert-moses.pl's ``--mertdir``).
    """

    root: Path
    moses: Path
    mert_moses: Path
    bin_dir: Path

    def tool(self, name: str) -> Path | None:
        """An executable in ``bin/`` (e.g. ``processPhraseTableMin``), or None when it is not there."""
        p = self.bin_dir / name
        return p if p.is_file() and os.access(p, os.X_OK) else None


def _missing(root: Path) -> list[str]:
    out = []
    for rel in REQUIRED:
        p = root / rel
        if not p.is_file():
            out.append(rel)
        elif rel.startswith("bin/") and not os.access(p, os.X_OK):
            out.append(f"{rel} (not executable)")
    return out


def _install(root: Path) -> MosesInstall:
    return MosesInstall(root, root / "bin" / "moses", root / "scripts" / "training" / "mert-moses.pl", root / "bin")


def configured_home(value: str | None) -> str | None:
    """A ``moses_home`` setting as :func:`find_moses` takes it: None for the empty default (then ``MOSES_HOME``
    or ``moses`` on PATH)."""
    return value or None


def find_moses(moses_home: str | os.PathLike | None = None,
               environ: Mapping[str, str] | None = None) -> MosesInstall | None:
    """The Moses installation at ``moses_home``, ``$MOSES_HOME``, or around ``moses`` on PATH; None if there is none.

    :raises PhraseRescoreError: when a root is named explicitly (argument or ``MOSES_HOME``) but lacks a required
        file; the message lists what is missing rather than silently falling back to another installation.
    """
    env = os.environ if environ is None else environ
    named = moses_home if moses_home is not None else env.get("MOSES_HOME") or None
    if named is not None:
        root = Path(named).expanduser().resolve()
        missing = _missing(root)
        if missing:
            which = "--moses-home/MOSES_HOME" if moses_home is not None else "MOSES_HOME"
            raise PhraseRescoreError(f"{which}={root} is not a usable Moses installation: missing "
                                     f"{', '.join(missing)}; or use --backend embedded")
        return _install(root)
    on_path = shutil.which("moses", path=env.get("PATH"))
    if on_path is None:
        return None
    root = Path(on_path).resolve().parent.parent
    return _install(root) if not _missing(root) else None


def require_moses(moses_home: str | os.PathLike | None = None) -> MosesInstall:
    """Like :func:`find_moses`, but a missing installation is an error naming MOSES_HOME and --backend embedded."""
    found = find_moses(moses_home)
    if found is None:
        raise PhraseRescoreError(NOT_FOUND)
    return found

"""Decoding backends: a real Moses binary, or the project's embedded Moses-compatible decoder.

Both take a moses.ini and a tokenized input file and write one translation per input line (and an
n-best list in Moses's format when asked), so evaluation and tuning do not care which one runs.
"""
from __future__ import annotations

import os
from pathlib import Path

from phrase_rescore.core import children
from phrase_rescore.core.atomic_write import atomic_path
from phrase_rescore.core.config import cap_to_cores
from phrase_rescore.core.errors import PhraseRescoreError

from .configs import BACKENDS
from .moses_install import MosesInstall, require_moses


class Backend:
    """Decode a file with a moses.ini."""

    name = "?"

    def decode(self, ini: str | os.PathLike, input_path: str | os.PathLike, output_path: str | os.PathLike,
               nbest_path: str | os.PathLike | None = None, nbest: int = 0, threads: int = 1) -> None:
        """Translate ``input_path`` line by line into ``output_path`` (same number of lines).

        :param nbest_path: where to write an n-best list of ``nbest`` distinct hypotheses per sentence.
        """
        raise NotImplementedError


class MosesBackend(Backend):
    """Runs ``MOSES_HOME/bin/moses -f INI`` with the input on stdin, as mert-moses.pl does."""

    name = "moses"

    def __init__(self, install: MosesInstall):
        self.install = install

    def argv(self, ini, nbest_path=None, nbest: int = 0, threads: int = 1) -> list[str]:
        """The decoder's argv: ``moses -f INI -threads T [-n-best-list FILE N distinct]``."""
        argv = [os.fspath(self.install.moses), "-f", os.fspath(ini), "-threads", str(cap_to_cores(int(threads), "threads"))]
        if nbest_path is not None and nbest > 0:
            argv += ["-n-best-list", os.fspath(nbest_path), str(int(nbest)), "distinct"]
        return argv

    def decode(self, ini, input_path, output_path, nbest_path=None, nbest: int = 0, threads: int = 1) -> None:
        output_path = Path(output_path)
        log = output_path.with_name(output_path.name + ".moses.log")
        with atomic_path(output_path) as tmp_out:
            tmp_nbest = None
            if nbest_path is not None and nbest > 0:
                tmp_nbest = Path(f"{nbest_path}.partial")
            argv = self.argv(ini, tmp_nbest, nbest, threads)
            with open(input_path, "rb") as fin, open(tmp_out, "wb") as fout, open(log, "wb") as flog:
                try:
                    rc = children.run(argv, stdin=fin, stdout=fout, stderr=flog).returncode
                except OSError as e:
                    raise PhraseRescoreError(f"could not run the Moses decoder: {e}", argv[0]) from None
            if rc != 0:
                raise PhraseRescoreError(f"moses exited with status {rc} decoding {input_path} with {ini}; "
                                         f"its log is {log}")
            n_in = _count_lines(input_path)
            n_out = _count_lines(tmp_out)
            if n_in != n_out:
                raise PhraseRescoreError(f"moses wrote {n_out} translations for {n_in} input lines; see {log}",
                                         output_path)
            if tmp_nbest is not None:
                os.replace(tmp_nbest, nbest_path)


class EmbeddedBackend(Backend):
    """The project's own decoder (``phrase_rescore.moses_integration.embedded.decoder.decode_file``)."""

    name = "embedded"

    def __init__(self):
        try:
            from .embedded.decoder import decode_file
        except ImportError as e:
            raise PhraseRescoreError(f"the embedded decoder is not available in this installation ({e}); "
                                     "use --backend moses with MOSES_HOME set") from None
        self._decode_file = decode_file

    def decode(self, ini, input_path, output_path, nbest_path=None, nbest: int = 0, threads: int = 1) -> None:
        self._decode_file(os.fspath(ini), os.fspath(input_path), os.fspath(output_path),
                          nbest_path=None if nbest_path is None else os.fspath(nbest_path),
                          nbest_size=nbest, threads=threads)


def get_backend(name: str, moses_home: str | None = None) -> Backend:
    """The backend called ``name`` ("moses" or "embedded"); a clear error when it cannot run here."""
    if name == "moses":
        return MosesBackend(require_moses(moses_home))
    if name == "embedded":
        return EmbeddedBackend()
    raise PhraseRescoreError(f"unknown backend {name!r}; expected one of: {', '.join(BACKENDS)}")


def _count_lines(path) -> int:
    n = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            n += block.count(b"\n")
    return n

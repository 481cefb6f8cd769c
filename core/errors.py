"""The project's one exception type for problems a user can fix.

Library code raises :class:`PhraseRescoreError` (never ``sys.exit``); the CLI turns it
into a one-line message and a non-zero exit. ``assert`` stays for internal invariants.
"""
from __future__ import annotations

import os


class PhraseRescoreError(Exception):
    """A user-facing error: bad input, a missing file, an impossible configuration.

    :param message: what was wrong and what was expected.
    :param path: the file the problem is in, when there is one.
    :param line: the 1-based line number in ``path``, when there is one.
    """

    def __init__(self, message: str, path: str | os.PathLike | None = None, line: int | None = None):
        self.message = message
        self.path = None if path is None else os.fspath(path)
        self.line = line
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path if self.line is None else f"{self.path}:{self.line}"
            where += ": "
        elif self.line is not None:
            where = f"line {self.line}: "
        return where + self.message

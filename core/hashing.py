"""File hashes: the one home of how a file's bytes are hashed (outputs are compared, and inputs recorded,
by the SHA-256 of their bytes as stored, compressed or not)."""
from __future__ import annotations

import hashlib
import os


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file's bytes (as stored, compressed or not)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            h.update(block)
    return h.hexdigest()

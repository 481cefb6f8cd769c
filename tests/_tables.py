"""Writing small phrase tables for tests, plain or gzip by the file name."""
import gzip


def write_table(path, lines, final_newline=True) -> bytes:
    """Write ``lines`` (bytes, without line endings) joined by \\n; return the uncompressed bytes."""
    data = b"\n".join(lines) + (b"\n" if final_newline else b"")
    if str(path).endswith(".gz"):
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        with open(path, "wb") as f:
            f.write(data)
    return data

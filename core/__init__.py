"""The core: the error type, file I/O (reading lines, atomic writes, hashes), progress, output folders, code version.

Imports nothing of the project (nor torch); every other package may import it.
"""

if __name__ != "phrase_rescore.core":  # one name only: no module loads twice
    raise ImportError(f"{__name__} is phrase_rescore.core: import it under that name")

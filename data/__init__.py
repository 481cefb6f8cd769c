"""The project's own demo data: a generated English-French parallel corpus (demo_corpus, lexicon).

Imports the core only.
"""

if __name__ != "phrase_rescore.data":  # one name only: no module loads twice
    raise ImportError(f"{__name__} is phrase_rescore.data: import it under that name")

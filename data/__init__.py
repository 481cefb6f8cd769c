"""The project's own demo data: a generated English-French parallel corpus (see demo_corpus)."""

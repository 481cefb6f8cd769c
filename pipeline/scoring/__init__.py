"""The `score` stage's parts, one idea per module; :mod:`phrase_rescore.pipeline.score` ties them together.

Imports the core, the Moses side's formats and the neural side's vocabulary and pairs, never the application.

* :mod:`.chunk_pairs` -- a chunk's phrase pairs: each distinct source once, all ids in flat arrays.
* :mod:`.trie` -- prefix tries (numpy): the distinct (root, prefix) GRU steps a set of sequences needs.
* :mod:`.fast` -- :class:`~.fast.FastScorer`, the prefix-sharing, c-terms-once scorer.
* :mod:`.chunked` -- the resumable chunked output file (gzip segments + manifest).

How log p and the unknown-word count become Moses feature values is the Moses side's
(:mod:`phrase_rescore.moses_integration.moses_values`).
"""

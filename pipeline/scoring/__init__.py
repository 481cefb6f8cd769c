"""The `score` stage's parts, one idea per module.

* :mod:`.moses_values` -- how log p and the unknown-word count become Moses feature values (floor, text).
* :mod:`.batching` -- a chunk's phrase pairs: each distinct source once, all ids in flat arrays.
* :mod:`.trie` -- prefix tries (numpy): the distinct (root, prefix) GRU steps a set of sequences needs.
* :mod:`.fast` -- :class:`~.fast.FastScorer`, the prefix-sharing, c-terms-once scorer.
* :mod:`.chunked` -- the resumable chunked output file (gzip segments + manifest).

:mod:`pipeline.score` ties them into the streaming, threaded stage.
"""

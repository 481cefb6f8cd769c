"""The `score` stage's parts, one idea per module.

* :mod:`.moses_values` -- how log p and the unknown-word count become Moses feature values (floor, text).
* :mod:`.batching` -- a chunk's phrase pairs as unique sources + targets, padded length-bucketed batches.
* :mod:`.fast` -- :class:`~.fast.FastScorer`, the shared-source, c-terms-once batched scorer.
* :mod:`.chunked` -- the resumable chunked output file (gzip segments + manifest).

:mod:`pipeline.score` ties them into the streaming, threaded stage.
"""

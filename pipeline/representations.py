"""What the RNN Encoder-Decoder learned, as vectors (section 4.4 of Cho et al. 2014): the word embeddings of
both sides and the summaries c = tanh(V h_N) of source phrases (section 2.2), for 2-D maps.

Words are taken in vocabulary order, which is frequency order (:func:`phrase_rescore.pipeline.vocab.build_vocab`),
skipping ``<eos>``, ``<unk>`` and tokens without a letter (punctuation, numbers). Phrases are the distinct
source phrases of the training pairs with at least ``min_words`` words, all inside the source shortlist,
ordered by how many target phrases they have among the unique pairs (the most first, ties in byte order).
"""
from __future__ import annotations

import collections
import os

import numpy as np
import torch

from phrase_rescore.core.errors import PhraseRescoreError

from .batching import pad_batch
from .model.checkpoint import ENCDEC, Checkpoint, load_checkpoint
from .pairs import pairs_paths, read_pairs_table
from .vocab import EOS_ID, SPECIALS, Vocab

BATCH = 256


def load_encdec(model_path: str | os.PathLike) -> Checkpoint:
    """The encoder-decoder checkpoint, on the CPU, with its vocabularies."""
    ck = load_checkpoint(model_path, "cpu", kind=ENCDEC)
    if ck.vocabs is None:
        raise PhraseRescoreError("the checkpoint carries no vocabulary: expected a model written by train", ck.path)
    return ck


def _wordlike(w: str) -> bool:
    return w not in SPECIALS and any(ch.isalpha() for ch in w)


def word_vectors(ck: Checkpoint, side: str, max_words: int) -> tuple[list[str], np.ndarray]:
    """The ``max_words`` most frequent words of ``side`` (``"source"`` or ``"target"``) and their embedding rows."""
    vocab: Vocab = ck.vocabs.source if side == "source" else ck.vocabs.target
    table = ck.model.encoder.E_src if side == "source" else ck.model.decoder.E_tgt
    ids = [i for i, w in enumerate(vocab.words) if _wordlike(w)][:max_words]
    with torch.inference_mode():
        vectors = table.detach()[torch.tensor(ids, dtype=torch.long)].double().numpy() if ids else np.zeros((0, 1))
    return [vocab.words[i] for i in ids], vectors


def select_phrases(sources: list[str], vocab: Vocab, min_words: int, max_phrases: int) -> list[str]:
    """Distinct source phrases of ``min_words`` words or more, every word in the shortlist, the ``max_phrases``
    with the most pairs first (ties in byte order)."""
    counts = collections.Counter(sources)
    keep = [(-n, p.encode("utf-8"), p) for p, n in counts.items()
            if len(p.split()) >= min_words and all(w in vocab for w in p.split())]
    keep.sort()
    return [p for _, _, p in keep[:max_phrases]]


def phrase_vectors(ck: Checkpoint, pairs_dir: str | os.PathLike, min_words: int = 4,
                   max_phrases: int = 1000) -> tuple[list[str], np.ndarray]:
    """The selected source phrases of ``pairs_dir``'s training pairs and their summaries c (the encoder's output)."""
    path = pairs_paths(pairs_dir)["train"]
    sources = [s for s in read_pairs_table(path, ["source"])["source"].to_pylist() if s is not None]
    phrases = select_phrases(sources, ck.vocabs.source, min_words, max_phrases)
    out = []
    with torch.inference_mode():
        for start in range(0, len(phrases), BATCH):
            seqs = [np.array(ck.vocabs.source.encode(p.split()) + [EOS_ID], dtype=np.int64)
                    for p in phrases[start:start + BATCH]]
            ids, mask = pad_batch(seqs)
            out.append(ck.model.encode(ids, mask).double().numpy())
    hidden = ck.model.cfg.hidden_dim
    return phrases, (np.concatenate(out) if out else np.zeros((0, hidden)))

"""2-D maps of learned representations (section 4.4 of Cho et al. 2014, figures 4-6): word embeddings
and phrase summaries c, placed by Barnes-Hut t-SNE and labelled sparsely so the words can be read.

The points come in priority order (the most frequent first); labels are placed greedily in that order,
each one only where it overlaps no label already placed, up to :attr:`MapConfig.labels`, and shown as the
text had it before Moses's tokenizer escaped it (``d'``, not ``d&apos;``: :func:`unescape_moses`). t-SNE is
scikit-learn's (``method="barnes_hut"``, PCA start, seeded, on one thread), so the same vectors and
settings give the same map and the same PNG bytes.
"""
from __future__ import annotations

import os
import re
from typing import Sequence

import numpy as np

from phrase_rescore.core.errors import PhraseRescoreError

from .map_config import MapConfig
from .render import new_figure, png_bytes, styled, write_png

MAP_SIZE = (1000, 1000)    # pixels
#: t-SNE needs a few more points than its perplexity; fewer are drawn as a note, not a map
MIN_POINTS = 5
LABEL_CHARS = 42


def tsne_2d(vectors: np.ndarray, config: MapConfig | None = None) -> np.ndarray:
    """(n, d) vectors -> (n, 2) Barnes-Hut t-SNE coordinates, seeded, on one thread (``config``: the
    default :class:`MapConfig` when None)."""
    config = config if config is not None else MapConfig()
    from sklearn.manifold import TSNE
    from threadpoolctl import threadpool_limits

    x = np.ascontiguousarray(vectors, dtype=np.float64)
    if x.ndim != 2 or len(x) < MIN_POINTS:
        raise PhraseRescoreError(f"t-SNE needs at least {MIN_POINTS} vectors, got {len(x)}")
    if not np.isfinite(x).all():
        raise PhraseRescoreError("t-SNE input holds NaN or infinite values: expected finite vectors")
    perplexity = min(config.perplexity, (len(x) - 1) / 3)
    tsne = TSNE(n_components=2, method="barnes_hut", perplexity=perplexity, init="pca", learning_rate="auto",
                max_iter=config.iterations, random_state=config.seed, n_jobs=1)
    with threadpool_limits(1):   # the gradient's sums in one order: the same map on every run
        return tsne.fit_transform(x)


#: Moses's escapes of special characters (``escape-special-chars.perl``) and what they stand for
MOSES_ESCAPES = {"&amp;": "&", "&#124;": "|", "&lt;": "<", "&gt;": ">", "&apos;": "'", "&quot;": '"',
                 "&#91;": "[", "&#93;": "]"}
_ESCAPE = re.compile("|".join(re.escape(e) for e in MOSES_ESCAPES))


def unescape_moses(text: str) -> str:
    """A word or phrase as the text had it before Moses's tokenizer escaped it (``d&apos;`` is ``d'``), in one
    pass, as ``deescape-special-chars.perl`` reads it (``&amp;lt;`` is ``&lt;``)."""
    return _ESCAPE.sub(lambda m: MOSES_ESCAPES[m.group(0)], text)


def _short(label: str) -> str:
    """A label as a map shows it: unescaped, cut at :data:`LABEL_CHARS`."""
    label = unescape_moses(label)
    return label if len(label) <= LABEL_CHARS else label[:LABEL_CHARS - 1] + "…"


def place_labels(ax, xy: np.ndarray, labels: Sequence[str], max_labels: int) -> list[tuple[int, np.ndarray]]:
    """Label the points of ``ax`` greedily in priority order: a label is kept when its box, in pixels, lies
    inside the axes and overlaps no label kept before; at most ``max_labels``.

    :returns: ``[(point index, box (x0, y0, x1, y1) in pixels)]`` of the labels kept, in the order placed.
    """
    renderer = ax.figure.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    placed = np.zeros((0, 4))
    chosen: list[tuple[int, np.ndarray]] = []
    fontsize = 8 if labels and max(map(len, labels)) <= 15 else 7
    for i, label in enumerate(labels):
        if len(chosen) >= max_labels:
            break
        t = ax.text(xy[i, 0], xy[i, 1], " " + _short(label), fontsize=fontsize, ha="left", va="center",
                    color="#1a1a1a")
        b = t.get_window_extent(renderer)
        box = np.array([b.x0 - 1, b.y0 - 1, b.x1 + 1, b.y1 + 1])
        inside = box[0] >= frame.x0 and box[1] >= frame.y0 and box[2] <= frame.x1 and box[3] <= frame.y1
        clash = inside and bool(np.any((placed[:, 0] < box[2]) & (box[0] < placed[:, 2])
                                       & (placed[:, 1] < box[3]) & (box[1] < placed[:, 3])))
        if not inside or clash:
            t.remove()
            continue
        placed = np.vstack([placed, box])
        chosen.append((i, box))
    return chosen


def map_picture(xy: np.ndarray | None, labels: Sequence[str], title: str, max_labels: int = 150,
                note: str = "") -> bytes:
    """PNG bytes (:data:`MAP_SIZE`): every point as a dot, and the labels of the first points (priority order)
    that fit without overlapping a label already placed. ``xy`` None draws only the title and ``note``."""
    with styled():
        fig = new_figure(*MAP_SIZE)
        ax = fig.add_axes((0.02, 0.02, 0.96, 0.92))
        ax.set_xticks([])
        ax.set_yticks([])
        ax.grid(False)
        fig.suptitle(title, y=0.975)
        if xy is None or len(xy) == 0:
            ax.text(0.5, 0.5, note or "nothing to map", ha="center", va="center", transform=ax.transAxes,
                    fontsize=12, wrap=True)
            return png_bytes(fig)
        pad = 0.04 * max(float(np.ptp(xy[:, 0])), float(np.ptp(xy[:, 1])), 1e-9)
        ax.set_xlim(xy[:, 0].min() - pad, xy[:, 0].max() + pad)
        ax.set_ylim(xy[:, 1].min() - pad, xy[:, 1].max() + pad)
        ax.scatter(xy[:, 0], xy[:, 1], s=6, color="#9ab8d6", linewidths=0)
        chosen = place_labels(ax, xy, labels, max_labels)
        lab_x, lab_y = xy[[i for i, _ in chosen], 0], xy[[i for i, _ in chosen], 1]
        ax.scatter(lab_x, lab_y, s=9, color="#1f4e79", linewidths=0)
        ax.text(0.995, 0.005, f"{len(xy)} points, {len(lab_x)} labelled; Barnes-Hut t-SNE", ha="right",
                va="bottom", transform=ax.transAxes, fontsize=8, color="#555555")
        return png_bytes(fig)


def write_map(vectors: np.ndarray, labels: Sequence[str], out_png: str | os.PathLike, title: str,
              config: MapConfig | None = None, what: str = "vectors") -> dict:
    """t-SNE of ``vectors`` (rows in priority order, one label each) drawn into ``out_png``.

    Fewer than :data:`MIN_POINTS` vectors give a picture that says so instead of a map.
    :returns: ``{"points", "bytes"}``.
    """
    config = config if config is not None else MapConfig()
    if len(vectors) != len(labels):
        raise ValueError(f"{len(vectors)} vectors but {len(labels)} labels")
    if len(vectors) < MIN_POINTS:
        data = map_picture(None, [], title, note=f"only {len(vectors)} {what}: t-SNE needs at least {MIN_POINTS}")
    else:
        data = map_picture(tsne_2d(vectors, config), list(labels), title, config.labels)
    return {"points": len(vectors), "bytes": write_png(data, out_png)}

"""A figure of a fixed size in pixels, and its PNG written atomically with the same bytes for the same drawing.

The Agg canvas is used directly (never pyplot), so drawing holds no global state and needs no display.
The PNG carries no ``Software`` text chunk and PNGs have no time stamp, so the bytes depend only on what
was drawn, the matplotlib version and its fonts (DejaVu, shipped with matplotlib).
"""
from __future__ import annotations

import contextlib
import io
import os
from typing import Iterator

from phrase_rescore.core.atomic_write import atomic_open

DPI = 100
#: colours of the pictures (matplotlib's tab10 order), one per curve or configuration
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")
#: rcParams that would otherwise come from the user's matplotlibrc and change the bytes
STYLE = {"font.family": "DejaVu Sans", "font.size": 10, "axes.grid": True, "grid.alpha": 0.3,
         "svg.hashsalt": "phrase-rescore", "path.simplify": True, "text.hinting": "auto",
         "text.antialiased": True, "lines.antialiased": True}


@contextlib.contextmanager
def styled() -> Iterator[None]:
    """Draw inside this: matplotlib's defaults plus :data:`STYLE`, whatever the user's matplotlibrc says;
    the settings before are restored after."""
    import matplotlib

    with matplotlib.rc_context():
        matplotlib.rcdefaults()
        matplotlib.rcParams.update(STYLE)
        yield


def new_figure(width_px: int, height_px: int):
    """A matplotlib Figure of exactly ``width_px`` x ``height_px`` pixels at :data:`DPI`, with its Agg canvas
    (call inside :func:`styled`)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_px / DPI, height_px / DPI), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def png_bytes(fig) -> bytes:
    """The figure as PNG bytes at :data:`DPI`, its full size (no tight crop), without metadata
    (call inside :func:`styled`)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def write_png(data: bytes, path: str | os.PathLike) -> int:
    """Write PNG bytes to ``path`` atomically; returns the number of bytes written."""
    with atomic_open(path, "wb") as f:
        f.write(data)
    return len(data)

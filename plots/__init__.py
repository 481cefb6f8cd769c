"""Pictures: training and tuning curves, 2-D maps of learned representations, the HTML report page.

Draws from CSV logs and numpy arrays with matplotlib's Agg canvas (no display, no pyplot state); never
imports torch nor reads a Moses format. Every PNG is a function of its inputs: fixed size and dpi, no
software or time stamp in the file, seeded t-SNE.
"""

if __name__ != "phrase_rescore.plots":  # one name only: no module loads twice
    raise ImportError(f"{__name__} is phrase_rescore.plots: import it under that name")

"""More neural columns than the paper's: p(e|f) from a model trained in the other direction, and an ensemble
of two models' log p(f|e) in one column (``score --reverse-model`` / ``--ensemble-model``).

Both run :func:`~phrase_rescore.pipeline.score.score_table` again on the same table and merge its column
into the forward scoring line by line (:mod:`phrase_rescore.moses_integration.table_columns`):

- reverse: the table with source and target exchanged (``swap_table``) is scored by the reverse model
  (trained by ``prepare`` + ``train`` on that swapped table), and its log p(e|f) is appended as the last
  column, after the paper's columns;
- ensemble: the table is scored by the second model (trained on the same pairs, e.g. another seed), and
  the log p(f|e) column becomes (log p_1 + log p_2) / 2.

Intermediate files go to ``OUT.extras/``, a folder of ours in the sense of :mod:`phrase_rescore.core.outdir`
(created, or found empty, and marked with :data:`WORK_COMMAND`; a rerun of an interrupted run finds its own
folder and resumes the forward scoring). A file or folder of that name that is not ours is refused before
anything is written. At the end the intermediate files and the marker are removed, and the folder too
unless it was there, empty, before the run. The final table is written atomically, so an interrupted run
leaves no partial OUT.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.outdir import MARKER, claim_output_dir, is_claimed
from phrase_rescore.moses_integration.table_columns import append_last_column, ensemble_column, swap_table

from .configs import ScoreConfig
from .score import ScoreSummary, score_table

#: the names of the intermediate files in the work folder (and of score_table's files beside them)
INTERMEDIATE = ("forward.gz", "ensemble.gz", "swapped.gz", "swapped.scored.gz", "second-model.scored.gz")
#: the command named in the marker of ``OUT.extras/``
WORK_COMMAND = "score (intermediate files of --reverse-model, --ensemble-model)"


def work_dir(out) -> Path:
    """The folder of the intermediate files of ``out``: ``OUT.extras/`` beside it."""
    out = Path(out)
    return out.with_name(out.name + ".extras")


def claim_work_dir(work: Path) -> bool:
    """Create and mark ``work`` as ours, or take it when it is ours already (an earlier run's) or empty.

    :returns: True when ``work`` is a folder that was there, empty and unmarked, before (kept at the end).
    :raises PhraseRescoreError: ``work`` is a file, or a folder holding anything without our marker
        (files of the user's whose names may be those of our intermediate files).
    """
    if is_claimed(work, WORK_COMMAND):
        return False
    if os.path.lexists(work):
        entries = sorted(e.name for e in work.iterdir()) if work.is_dir() else None
        if entries is None or entries:
            found = "a file" if entries is None else "a folder of files phrase-rescore did not write (" + \
                ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "") + ")"
            raise PhraseRescoreError(f"expected a new folder for the intermediate files of --reverse-model/"
                                     f"--ensemble-model (OUT.extras beside --out), found {found}: move it away "
                                     "or choose another --out", work)
        claim_output_dir(work, "--out + .extras", WORK_COMMAND)
        return True
    claim_output_dir(work, "--out + .extras", WORK_COMMAND)
    return False


def _logprob_only(cfg: ScoreConfig) -> ScoreConfig:
    return dataclasses.replace(cfg, columns=("logprob",), rejects=None)


def score_reverse(model_rev, table, scored, out, cfg: ScoreConfig, work) -> dict:
    """Append log p(e|f) by ``model_rev`` to ``scored`` (``table`` scored forward) into ``out``."""
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    swapped, rev = work / "swapped.gz", work / "swapped.scored.gz"
    swap_table(table, swapped, compresslevel=1)
    # the reverse model's targets are the table's sources: their rare words are counted on that side
    res = score_table(model_rev, swapped, rev, dataclasses.replace(_logprob_only(cfg), compresslevel=1,
                                                                   rare_counts=cfg.rare_counts_reverse))
    n = append_last_column(scored, rev, out, swapped=True, compresslevel=cfg.compresslevel)
    for p in (swapped, rev):
        p.unlink()
    return {"lines": n, "reverse_pairs_per_s": res.pairs_per_s}


def score_ensemble(model2, table, scored, out, cfg: ScoreConfig, work, column: int) -> dict:
    """Replace score ``column`` of ``scored`` (the log p(f|e) column) by the mean log-probability of its model
    and ``model2`` into ``out``."""
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    other = work / "second-model.scored.gz"
    res = score_table(model2, table, other, dataclasses.replace(_logprob_only(cfg), compresslevel=1))
    n = ensemble_column(scored, other, out, column, compresslevel=cfg.compresslevel)
    other.unlink()
    return {"lines": n, "ensemble_pairs_per_s": res.pairs_per_s}


def score_with_extras(model, table, out, cfg: ScoreConfig, reverse_model=None, ensemble_model=None) -> ScoreSummary:
    """``score_table`` with the columns of ``cfg``, then the ensemble (of the log p column) and the reverse
    column when their models are given. Intermediate files live in ``OUT.extras/`` while it runs.

    :returns: the forward scoring's :class:`~.score.ScoreSummary` with ``out``, and the extra columns' rates
        (``ensemble_pairs_per_s``, ``reverse_pairs_per_s``)."""
    if ensemble_model is None and reverse_model is None:
        raise PhraseRescoreError("score_with_extras needs a reverse model, an ensemble model or both")
    if reverse_model is not None and cfg.rare_words == "unigram" and cfg.rare_counts_reverse is None:
        raise PhraseRescoreError("--rare-words unigram with --reverse-model needs --rare-counts-reverse, the "
                                 "tokenized corpus of the source side")
    if ensemble_model is not None and "logprob" not in cfg.columns:
        raise PhraseRescoreError("--ensemble-model averages the logprob column: --columns must include logprob")
    out = Path(out)
    work = work_dir(out)
    keep = claim_work_dir(work)
    cur = work / "forward.gz"
    res = score_table(model, table, cur, dataclasses.replace(cfg, compresslevel=1))
    extra: dict = {}
    steps = [s for s in ("ensemble", "reverse") if (ensemble_model if s == "ensemble" else reverse_model)]
    for i, step in enumerate(steps):
        last = i == len(steps) - 1
        nxt = out if last else work / f"{step}.gz"
        if step == "ensemble":
            col = list(cfg.columns).index("logprob") - len(cfg.columns)
            extra.update(score_ensemble(ensemble_model, table, cur, nxt, cfg, work, col))
        else:
            extra.update(score_reverse(reverse_model, table, cur, nxt, cfg, work))
        cur.unlink()
        cur = nxt
    for p in work.iterdir():  # ours only: the intermediate tables and what score_table keeps beside them
        if p.name.startswith(INTERMEDIATE) or p.name == MARKER:
            p.unlink()
    if not keep:
        try:
            work.rmdir()
        except OSError:  # something put there while it ran is not ours to remove
            pass
    return dataclasses.replace(res, **extra, out=os.fspath(out))

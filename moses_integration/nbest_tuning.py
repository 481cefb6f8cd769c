"""Re-ranking weights tuned by Moses's own optimizers on a fixed n-best list: ``extractor``, then ``mert`` or
``kbmira``, run as one iteration of ``scripts/training/mert-moses.pl`` runs them, without the decoder.

Cho et al. (2014, section 5) add the CSLM's log p(e) to the n-best lists and retune all weights before
re-ranking; this is that retuning with the real Moses programs (the embedded MERT,
:mod:`.embedded.mert`, does the same in Python). The commands, with mert-moses.pl's defaults
(``--sctype BLEU``, ``case:true``, starting-point ranges 0..1)::

    extractor --sctype BLEU --scconfig case:true --scfile scores.dat --ffile features.dat -r REF -n NBEST
    mert -d DIM --sctype BLEU --scconfig case:true --scfile scores.dat --ffile features.dat --ifile init.opt
         -n RESTARTS -r SEED --threads T                          (writes weights.txt, L1-normalized)
    kbmira --dense-init init.dense --ffile features.dat --scfile scores.dat -o mert.out --random-seed SEED
                                                                  (writes ``F<i> <weight>`` lines)

``init.opt`` is mert's starting point: the current weights, the minima and the maxima of its random
restarts, one line each; ``init.dense`` is the same starting point as ``name= value`` lines, one per
weight (mert-moses.pl's ``run<i>.dense``). kbmira's weights are divided by their L1 norm, as
mert-moses.pl's ``get_weights_from_mert`` does, so that both tuners give weights on mert's scale.

The programs run with argument lists (no shell) in a folder of this module's (:func:`tune_nbest_moses`'s
``workdir``), each with its output kept in ``<program>.log`` there; the extractor reads a copy of the
references there (``ref.txt``: each line's words joined by one space, as :func:`str.split` and the BLEU of
:mod:`.embedded.bleu_stats` see them; the extractor splits at spaces only, so that a ``\\r`` of a CRLF line
end or a tab would otherwise be part of a word); a failure raises
:class:`~phrase_rescore.core.errors.PhraseRescoreError` naming the log. The tuned weights are also written
(atomically) to ``workdir/weights.ini``. A sentence of the references without any hypothesis in the list
counts as an empty translation, as in the embedded MERT: the list is then copied with an empty hypothesis
(every feature 0) in its place, so that its reference length still counts towards the brevity penalty.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, NamedTuple, Sequence

from phrase_rescore.core.atomic_write import atomic_open
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.outdir import claim_output_dir
from phrase_rescore.core.reading import read_text_lines

from .embedded.bleu_stats import Reference, corpus_bleu
from .moses_install import MosesInstall, find_moses
from .moses_values import format_weight
from .nbest import read_nbest_groups
from .tune_moses import run_logged

TUNERS = ("mert", "kbmira")
#: mert-moses.pl's scorer arguments for the extractor and mert (its defaults: BLEU, case-sensitive)
SCORER_ARGS = ("--sctype", "BLEU", "--scconfig", "case:true")
#: mert-moses.pl's range of the random restarts' starting points when no ``--range`` is given
RANGE = (0.0, 1.0)
WORK_COMMAND = "rescore-nbest (Moses re-ranking tuner)"
SCORES, FEATURES = "scores.dat", "features.dat"     # the extractor's files in the tuner's folder


def no_moses_message(tuner: str, option: str = "--tuner") -> str:
    return (f"{option} {tuner} runs Moses's extractor and {tuner}, but no Moses installation was found: set "
            f"MOSES_HOME to a Moses installation with bin/extractor and bin/{tuner} (or put its bin/moses on "
            f"PATH), or use {option} embedded")


def require_tuner(tuner: str, moses_home: str | os.PathLike | None = None, option: str = "--tuner") -> MosesInstall:
    """The Moses installation that has ``bin/extractor`` and ``bin/<tuner>``.

    :param moses_home: the installation root (default ``$MOSES_HOME``, else ``moses`` on PATH); it needs
        ``bin/extractor`` and ``bin/<tuner>`` only.
    :raises PhraseRescoreError: no installation (one line naming MOSES_HOME), or it lacks the program.
    """
    if tuner not in TUNERS:
        raise PhraseRescoreError(f"{option} {tuner}: expected one of {', '.join(TUNERS)}")
    named = moses_home or os.environ.get("MOSES_HOME") or None
    if named is not None:   # only the two programs run here: no decoder, no mert-moses.pl needed
        root = Path(named).expanduser().resolve()
        install = MosesInstall(root, root / "bin" / "moses", root / "scripts" / "training" / "mert-moses.pl",
                               root / "bin")
    else:
        install = find_moses(None)
        if install is None:
            raise PhraseRescoreError(no_moses_message(tuner, option))
    for prog in ("extractor", tuner):
        if install.tool(prog) is None:
            raise PhraseRescoreError(f"{option} {tuner}: expected an executable bin/{prog} in the Moses installation "
                                     f"{install.root} (MOSES_HOME), or use {option} embedded", install.bin_dir / prog)
    return install


@dataclass
class NBestTuneResult:
    """What :func:`tune_nbest_moses` produced.

    :ivar weights: the tuned weights by feature name, in the n-best list's feature order.
    :ivar tool_bleu: the optimizer's own dev BLEU (fraction) of its weights: mert's ``Best point: ... => B``,
        kbmira's ``Best BLEU = B`` (on the extractor's statistics, features rounded to 6 digits).
    :ivar seconds: wall time of the extractor and the optimizer together.
    """

    weights: dict[str, list[float]]
    tool_bleu: float | None
    workdir: Path
    weights_ini: Path
    logs: dict[str, Path]
    argv: dict[str, list[str]]
    seconds: float


def check_layout(layout: Sequence[tuple[str, int]], path, line_no: int) -> None:
    """Refuse a hypothesis's features (name, number of values) that no weight vector fits: a name given
    twice (one weight per name could not tell them apart) or a feature without values."""
    seen = set()
    for name, k in layout:
        if name in seen:
            raise PhraseRescoreError(f"the feature {name!r} twice on one line: expected each feature name once",
                                     path, line_no)
        if k == 0:
            raise PhraseRescoreError(f"the feature {name!r} has no values: expected 'Name= value ...'", path, line_no)
        seen.add(name)


def nbest_layout(nbest_path: str | os.PathLike, num_sentences: int, source=None) -> list[tuple[str, int]]:
    """The features of the list (name, number of values), the same on every line and each name once
    (:func:`check_layout`). A list without hypotheses for every sentence ``0 .. num_sentences-1`` is refused
    by :func:`~.nbest.read_nbest_groups` (``source`` naming the source)."""
    layout = None
    for _, group in read_nbest_groups(nbest_path, num_sentences=num_sentences, source=source):
        for e in group:
            lay = [(n, len(v)) for n, v in e.features]
            if layout is None:
                check_layout(lay, nbest_path, e.line_no)
                layout = lay
            elif lay != layout:
                raise PhraseRescoreError(f"expected the same features as the first hypothesis {layout}, found {lay}",
                                         nbest_path, e.line_no)
    if layout is None:
        raise PhraseRescoreError("the dev n-best list has no hypotheses", nbest_path)
    return layout


def start_vector(layout: Sequence[tuple[str, int]], init: Mapping[str, Sequence[float]] | None) -> list[float]:
    """The starting weights in the list's feature order; a feature missing from ``init`` starts at 0."""
    out = []
    for name, k in layout:
        vals = list((init or {}).get(name) or [0.0] * k)
        if len(vals) != k:
            raise PhraseRescoreError(f"the starting weights give {len(vals)} value(s) for feature {name!r}, "
                                     f"which has {k} in the n-best list")
        out.extend(float(v) for v in vals)
    return out


def by_name(layout: Sequence[tuple[str, int]], vector: Sequence[float]) -> dict[str, list[float]]:
    out, i = {}, 0
    for name, k in layout:
        out[name] = [float(x) for x in vector[i:i + k]]
        i += k
    return out


def reranked_bleu(nbest_path: str | os.PathLike, refs: Sequence[str], weights: Mapping[str, Sequence[float]]) -> float:
    """Corpus BLEU (fraction, :mod:`.embedded.bleu_stats`) of the n-best list's best hypotheses under
    ``weights`` (a weighted sum of every feature; ties keep the list's order; an empty output where a
    sentence has none) against tokenized references."""
    best = []
    for _, group in read_nbest_groups(nbest_path, num_sentences=len(refs)):
        top, top_score = "", None
        for e in group:
            sc = sum(a * b for name, vals in e.features for a, b in zip(weights.get(name, ()), vals))
            if top_score is None or sc > top_score:
                top, top_score = e.hypothesis, sc
        best.append(top)
    return corpus_bleu(best, [Reference(r) for r in refs])


def _header_names(features_dat: Path) -> list[str]:
    """The feature names of the extractor's first ``FEATURES_TXT_BEGIN_0 SENT N DIM NAME...`` header."""
    with open(features_dat, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("FEATURES_TXT_BEGIN"):
                return line.split()[4:]
    return []


def _parse_floats(text: str, where: Path, dim: int) -> list[float]:
    try:
        vals = [float(t) for t in text.split()]
    except ValueError:
        vals = []
    if len(vals) != dim or not all(math.isfinite(v) for v in vals):
        raise PhraseRescoreError(f"expected {dim} finite weights, found {text.strip()[:200]!r}", where)
    return vals


def _last_number_after(log: Path, line_marker: str, marker: str) -> float | None:
    """The number after ``marker`` on the last line of ``log`` with ``line_marker`` (None when there is none)."""
    found = None
    for line in read_text_lines(log):
        if line_marker in line and marker in line:
            try:
                found = float(line.rsplit(marker, 1)[1].split()[0])
            except (ValueError, IndexError):
                pass
    return found


def tune_nbest_moses(nbest: str | os.PathLike, ref: str | os.PathLike, init: Mapping[str, Sequence[float]] | None,
                     install: MosesInstall, workdir: str | os.PathLike, tuner: str = "mert", restarts: int = 20,
                     seed: int = 0, threads: int = 1, echo: Callable[[str], None] | None = None) -> NBestTuneResult:
    """Tune re-ranking weights on a dev n-best list (the new feature already in it) with Moses's ``mert`` or
    ``kbmira`` (see the module docstring for the commands).

    :param ref: the tokenized references, one line per dev sentence (tokenized as the n-best list is).
    :param init: the starting weights by feature name; a feature of the list missing here starts at 0.
    :param install: the Moses installation (:func:`require_tuner`).
    :param workdir: the folder for the programs' files (created and marked as ours; refused when it holds
        files we did not write).
    :param restarts: mert's random restarts (``-n``); kbmira has none.
    :param seed: mert's ``-r``, kbmira's ``--random-seed``.
    :param echo: receives the programs' output lines (default: nothing; they are in the logs).
    """
    if tuner not in TUNERS:
        raise PhraseRescoreError(f"unknown re-ranking tuner {tuner!r}: expected one of {', '.join(TUNERS)}")
    echo = echo if echo is not None else (lambda s: None)
    refs = read_text_lines(ref)
    layout = nbest_layout(nbest, len(refs))
    start = start_vector(layout, init)
    work = claim_output_dir(Path(workdir).resolve(), option="the tuner's folder", command=WORK_COMMAND)
    t0 = time.perf_counter()
    extractor = _extract(install, work, Path(nbest).resolve(), refs, layout, echo)
    if tuner == "mert":
        run = _run_mert(install, work, start, restarts, seed, threads, echo)
    else:
        run = _run_kbmira(install, work, layout, start, seed, echo)
    seconds = time.perf_counter() - t0
    weights = by_name(layout, run.vector)
    weights_ini = work / "weights.ini"
    with atomic_open(weights_ini, "w") as f:
        f.write("[weight]\n")
        for n, vs in weights.items():
            f.write(f"{n}= " + " ".join(format_weight(v) for v in vs) + "\n")
    logs = {"extractor": extractor.log, tuner: run.log}
    argv = {"extractor": extractor.argv, tuner: run.argv}
    return NBestTuneResult(weights, run.bleu, work, weights_ini, logs, argv, seconds)


class _ToolRun(NamedTuple):
    """One Moses program run in the tuner's folder: its command, its log, and for a tuner its weights and
    the BLEU it reports."""

    argv: list[str]
    log: Path
    vector: list[float] | None = None
    bleu: float | None = None


def _tool(install: MosesInstall, name: str) -> str:
    """The path of Moses program ``name`` of ``install``."""
    return os.fspath(install.bin_dir / name)


def _extract(install: MosesInstall, work: Path, nbest_in: Path, refs: Sequence[str],
             layout: Sequence[tuple[str, int]], echo: Callable[[str], None]) -> _ToolRun:
    """Run Moses's ``extractor`` on the n-best list into ``scores.dat`` and ``features.dat`` and check that
    it read the list's features."""
    ref_in = work / "ref.txt"   # the references as read here: the extractor splits words at spaces only
    with atomic_open(ref_in, "w") as f:
        f.writelines(" ".join(r.split()) + "\n" for r in refs)
    scores, feats = work / SCORES, work / FEATURES
    for p in (scores, feats, work / "weights.txt", work / "mert.out"):   # never read a previous run's output
        p.unlink(missing_ok=True)
    argv = [_tool(install, "extractor"), *SCORER_ARGS, "--scfile", scores.name, "--ffile", feats.name,
            "-r", ref_in.name, "-n", os.fspath(nbest_in)]
    log = work / "extractor.log"
    run_logged(argv, log, cwd=work, echo=echo, what="Moses extractor")
    got = _header_names(feats)
    want = [f"{n}_{i}" for n, k in layout for i in range(k)]
    if got != want:
        raise PhraseRescoreError(f"the extractor read the features {got}, expected {want} from the n-best list",
                                 feats)
    return _ToolRun(argv, log)


def _run_mert(install: MosesInstall, work: Path, start: Sequence[float], restarts: int, seed: int, threads: int,
              echo: Callable[[str], None]) -> _ToolRun:
    """Run Moses's ``mert`` from ``start`` (each weight in :data:`RANGE`) on the extracted files."""
    with atomic_open(work / "init.opt", "w") as f:
        f.write(" ".join(format_weight(v) for v in start) + "\n")
        f.write(" ".join(format_weight(RANGE[0]) for _ in start) + "\n")
        f.write(" ".join(format_weight(RANGE[1]) for _ in start) + "\n")
    dim = len(start)
    argv = [_tool(install, "mert"), "-d", str(dim), *SCORER_ARGS, "--scfile", SCORES, "--ffile", FEATURES,
            "--ifile", "init.opt", "-n", str(int(restarts)), "-r", str(int(seed)), "--threads", str(int(threads))]
    log = work / "mert.log"
    run_logged(argv, log, cwd=work, echo=echo, what="Moses mert")
    out = work / "weights.txt"
    if not out.is_file():
        raise PhraseRescoreError(f"Moses mert finished but wrote no weights.txt; see {log}", out)
    vector = _parse_floats(out.read_text(encoding="utf-8", errors="replace"), out, dim)
    return _ToolRun(argv, log, vector, _last_number_after(log, "Best point:", "=>"))


def _run_kbmira(install: MosesInstall, work: Path, layout: Sequence[tuple[str, int]], start: Sequence[float],
                seed: int, echo: Callable[[str], None]) -> _ToolRun:
    """Run Moses's ``kbmira`` from ``start`` on the extracted files; its weights are L1-normalized."""
    names = [n for n, k in layout for _ in range(k)]
    with atomic_open(work / "init.dense", "w") as f:
        for n, v in zip(names, start):
            f.write(f"{n}= {format_weight(v)}\n")
    argv = [_tool(install, "kbmira"), "--dense-init", "init.dense", "--ffile", FEATURES, "--scfile",
            SCORES, "-o", "mert.out", "--random-seed", str(int(seed))]
    log = work / "kbmira.log"
    run_logged(argv, log, cwd=work, echo=echo, what="Moses kbmira")
    out = work / "mert.out"
    if not out.is_file():   # kbmira writes only weights whose BLEU beats 0
        raise PhraseRescoreError(f"Moses kbmira finished but wrote no weights (no epoch reached a BLEU above "
                                 f"0); see {log}", out)
    vector = _parse_floats(_kbmira_dense(out, len(start)), out, len(start))
    l1 = sum(abs(v) for v in vector)
    if l1 < 1e-9:
        raise PhraseRescoreError(f"Moses kbmira's weights are all 0; see {log}", out)
    return _ToolRun(argv, log, [v / l1 for v in vector], _last_number_after(log, "Best BLEU", "Best BLEU ="))


def _kbmira_dense(out: Path, dim: int) -> str:
    """kbmira's ``F<i> <weight>`` lines as the ``dim`` weights in order ("" unless each is there once)."""
    dense: dict[int, str] = {}
    for line in read_text_lines(out):
        parts = line.split()
        if len(parts) == 2 and parts[0][:1] == "F" and parts[0][1:].isdigit():
            dense[int(parts[0][1:])] = parts[1]
    return " ".join(dense.get(i, "nan") for i in range(dim)) if len(dense) == dim else ""

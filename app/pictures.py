"""The pictures of a run, drawn where their data is: the encoder-decoder's training curves and its maps of
word embeddings and phrase summaries c (section 4.4 of Cho et al. 2014) after training, the MERT curves
of every configuration and ``report.html`` after evaluation.

Joins the neural side (the vectors, :mod:`phrase_rescore.pipeline.representations`) and the drawing
(:mod:`phrase_rescore.plots`), so it lives in the application.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Mapping, Sequence

from phrase_rescore.plots.map_config import MapConfig

#: the pictures of a trained encoder-decoder, in the order the report shows them
TRAINING_CURVES = "training-curves.png"
WORDS_SOURCE = "words-source.png"
WORDS_TARGET = "words-target.png"
PHRASES = "phrases.png"
TUNING_CURVES = "tuning-curves.png"
REPORT = "report.html"
CAPTIONS = {
    TRAINING_CURVES: "Training loss and validation perplexity by step",
    TUNING_CURVES: "Dev BLEU by MERT iteration, per configuration (each one's best ringed)",
    WORDS_SOURCE: "Source word embeddings, 2-D Barnes-Hut t-SNE (as the paper's Figure 4)",
    WORDS_TARGET: "Target word embeddings, 2-D Barnes-Hut t-SNE",
    PHRASES: "Phrase representations c of 4-or-more-word source phrases, 2-D Barnes-Hut t-SNE "
             "(as the paper's Figures 5 and 6)",
}
ORDER = (TRAINING_CURVES, TUNING_CURVES, WORDS_SOURCE, WORDS_TARGET, PHRASES)


def training_curves(log_path: str | os.PathLike, out_png: str | os.PathLike, title: str) -> dict:
    """Training loss and validation perplexity of any model's log (CSV or JSON lines) into ``out_png``."""
    from phrase_rescore.plots.curves import write_training_curves

    t = time.perf_counter()
    n = write_training_curves(log_path, out_png, title)
    return {"file": os.fspath(out_png), "bytes": n, "seconds": round(time.perf_counter() - t, 2)}


def embedding_maps(model_path: str | os.PathLike, pairs_dir: str | os.PathLike | None, out_dir: str | os.PathLike,
                   config: MapConfig | None = None) -> dict:
    """Maps of the source and target word embeddings, and (given the training pairs) of the phrase summaries c,
    written as :data:`WORDS_SOURCE`, :data:`WORDS_TARGET` and :data:`PHRASES` into ``out_dir``.

    :returns: ``{file name: {"points", "bytes", "seconds"}}``.
    """
    from phrase_rescore.pipeline.representations import load_encdec, phrase_vectors, word_vectors
    from phrase_rescore.plots.maps import write_map

    config = config if config is not None else MapConfig()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ck = load_encdec(model_path)
    done = {}
    for side, name in (("source", WORDS_SOURCE), ("target", WORDS_TARGET)):
        t = time.perf_counter()
        words, vectors = word_vectors(ck, side, config.max_words)
        res = write_map(vectors, words, out / name, f"{side.capitalize()} word embeddings of the RNN Encoder-Decoder "
                        f"({len(words)} most frequent words)", config, what="words")
        done[name] = dict(res, seconds=round(time.perf_counter() - t, 2))
    if pairs_dir is not None:
        t = time.perf_counter()
        phrases, c = phrase_vectors(ck, pairs_dir, config.min_phrase_words, config.max_phrases)
        n = config.min_phrase_words
        res = write_map(c, phrases, out / PHRASES, f"Phrase representations c of {len(phrases)} source phrases of "
                        f"{n}+ words", config, what=f"phrases of {n}+ words")
        done[PHRASES] = dict(res, seconds=round(time.perf_counter() - t, 2))
    return done


def encdec_pictures(model_path: str | os.PathLike, pairs_dir: str | os.PathLike | None,
                    out_dir: str | os.PathLike, config: MapConfig | None = None) -> dict:
    """Every picture of a trained encoder-decoder into ``out_dir``: its training curves (from the
    ``train_log.csv`` beside the model) and its maps (:func:`embedding_maps`)."""
    model = Path(model_path)
    log = (model if model.is_dir() else model.parent) / "train_log.csv"
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    done = {TRAINING_CURVES: training_curves(log, Path(out_dir) / TRAINING_CURVES, "RNN Encoder-Decoder")}
    done.update(embedding_maps(model, pairs_dir, out_dir, config))
    return done


def tuning_logs(tuned_inis: Mapping[str, Path | None]) -> list[tuple[str, Path]]:
    """``(configuration, tune-log.csv)`` of each tuned moses.ini whose tuning folder has the log: beside it
    (``tune --workdir W`` writes ``W/moses.tuned.ini`` and ``W/tune-log.csv``) or in ``work/`` beside it (the
    workflow's tune stages: ``tune-X/moses.ini``, ``tune-X/work/tune-log.csv``)."""
    found = []
    for name, ini in tuned_inis.items():
        if ini is None:
            continue
        log = next((p for p in (Path(ini).parent / "work" / "tune-log.csv", Path(ini).parent / "tune-log.csv")
                    if p.is_file()), None)
        if log is not None:
            found.append((name, log))
    return found


def picture_files(folders: Sequence[Path | None], known_only: bool = False) -> list[Path]:
    """The PNGs of ``folders``, the known ones in :data:`ORDER` first, then (unless ``known_only``) the
    others by name."""
    found = [p for d in folders if d is not None and Path(d).is_dir() for p in sorted(Path(d).glob("*.png"))
             if not known_only or p.name in ORDER]
    rank = {n: i for i, n in enumerate(ORDER)}
    return sorted(found, key=lambda p: (rank.get(p.name, len(rank)), p.name, os.fspath(p)))


def caption_of(path: Path, owner: str = "") -> str:
    text = CAPTIONS.get(path.name, path.stem.replace("-", " ").capitalize())
    return f"{owner}: {text}" if owner else text


def evaluation_report(report_md: Path, out_dir: Path, tuned_inis: Mapping[str, Path | None],
                      picture_dirs: Mapping[str, Path | None], known_only: bool = False) -> dict:
    """The tuning curves of ``tuned_inis`` (when their logs are there) into ``out_dir``, then ``report.html``
    beside ``report_md``: the table, its hashes and signatures, the tuning curves and every picture of
    ``picture_dirs`` (``{owner: folder}``; with ``known_only`` only those named in :data:`ORDER`), embedded."""
    from phrase_rescore.plots.curves import write_tuning_curves
    from phrase_rescore.plots.report_html import Picture, write_report

    timings = {}
    pictures: list[Picture] = []
    logs = tuning_logs(tuned_inis)
    if logs:
        t = time.perf_counter()
        write_tuning_curves(logs, out_dir / TUNING_CURVES, "MERT tuning: dev BLEU by iteration")
        timings[TUNING_CURVES] = round(time.perf_counter() - t, 2)
        pictures.append(Picture(caption_of(out_dir / TUNING_CURVES), out_dir / TUNING_CURVES))
    for owner, folder in picture_dirs.items():
        pictures += [Picture(caption_of(p, owner), p) for p in picture_files([folder], known_only)]
    t = time.perf_counter()
    html = report_md.parent / REPORT
    n = write_report(report_md, pictures, html, intro="Cho et al. (2014), Table 1 layout: BLEU on dev and test per "
                     "configuration, the difference to the baseline and its paired-bootstrap p-value.")
    timings[REPORT] = round(time.perf_counter() - t, 2)
    return {"report_html": os.fspath(html), "bytes": n, "pictures": [p.path.name for p in pictures],
            "seconds": timings}



#: who drew the pictures of a ``pictures_*`` artifact, as the report names them
PICTURE_OWNERS = {"pictures_train": "RNN Encoder-Decoder", "pictures_cslm": "CSLM"}


def command_report(report_md: Path, workdir: Path, systems: Mapping[str, Path],
                   models: Mapping[str, Path]) -> dict:
    """:func:`evaluation_report` for the ``evaluate`` command: the tuning logs beside its ``--system`` inis and
    the pictures ``train`` drew beside its ``--model`` checkpoints (only the names it writes)."""
    folders: dict[Path, list[str]] = {}
    for name, model in models.items():
        folders.setdefault(Path(model) if Path(model).is_dir() else Path(model).parent, []).append(name)
    return evaluation_report(report_md, workdir, dict(systems),
                             {"model of " + ", ".join(names): d for d, names in folders.items()}, known_only=True)


def stage_report(inputs: Mapping[str, Path | None], report_md: Path, out_dir: Path,
                 configurations: Mapping[str, str]) -> dict:
    """:func:`evaluation_report` for the evaluate stage: the tuned inis among ``inputs`` (``{artifact:
    configuration name}`` in ``configurations``) and every ``pictures_*`` artifact it was given."""
    tuned = {name: inputs.get(art) for art, name in configurations.items() if art in inputs}
    folders = {PICTURE_OWNERS.get(a, a.removeprefix("pictures_")): p for a, p in inputs.items()
               if a.startswith("pictures_")}
    return evaluation_report(report_md, out_dir, tuned, folders)

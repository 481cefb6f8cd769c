"""Rescoring a phrase-based system's n-best list with a neural model (Sutskever et al. 2014, Sec. 3.6).

For every hypothesis of a Moses n-best list the model's log p(hyp | src) is added as a named feature
(``Seq2Seq0= -12.3``), each source sentence being encoded ONCE for all its hypotheses. The list is then
re-ranked either by the paper's even average ``0.5 * log p(hyp|src) + 0.5 * SMT total score`` or by a
weighted sum of all features with weights from a moses.ini (e.g. tuned by MERT with the new feature).
Outputs: the n-best list with the feature added (every hypothesis in its original place, every other byte
of its line unchanged, the decoder's total score left alone) and the re-ranked 1-best, one line per source
sentence. Sentences are streamed a chunk at a time. An n-best list must be complete: every sentence of the source
present once, in order (:func:`~phrase_rescore.moses_integration.nbest.read_nbest_groups`; a list with a sentence
missing, or cut short as when the decoder was stopped, is refused, naming the line and the sentence it lacks), and,
when weights re-rank it, every hypothesis must carry every feature the weights name (one without ``LM0=`` would be
scored as if its LM0 were 0): else an error names the file, the line and the feature. The features a weights
moses.ini declares untuneable (``UnknownWordPenalty``, ``tuneable=false``) are not expected, as Moses does not
print them in n-best lists.

The scorer is a Seq2Seq checkpoint or the phrase-level RNN Encoder-Decoder of Cho et al. applied to whole
sentences, for comparison; several checkpoints of one kind are an ensemble (log-probabilities averaged).
Both models expose the same two methods for it (:class:`ScoringModel`). A target-language CSLM checkpoint
(``train-cslm``) instead adds ``CSLM0= log p(hyp)``, the sentence's natural-log probability under the
CSLM (:class:`CSLMScorer`); with ``--dev-nbest`` the weights of all features are retuned on the dev n-best
list and re-rank the test list, as Cho et al. (section 5) rescore with the CSLM: by the embedded MERT
(``--tuner embedded``), or by Moses's own ``extractor`` and ``mert`` or ``kbmira`` (``--tuner mert``,
``--tuner kbmira``, :mod:`~phrase_rescore.moses_integration.nbest_tuning`) from ``MOSES_HOME``.
"""
from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import Collection, NamedTuple, Protocol, Sequence

import numpy as np
import torch

from phrase_rescore.core.atomic_write import atomic_open
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.output_paths import check_outputs
from phrase_rescore.core.progress import bar
from phrase_rescore.core.reading import read_text_lines
from phrase_rescore.core.words import words
from phrase_rescore.moses_integration.nbest import NBestEntry, NBestWriter, read_nbest_groups

from .batching import pad_batch
from .configs import TUNERS, RescoreConfig
from .model.checkpoint import model_kind
from .sentences import encode_eos, read_sentences
from .translate import load_ensemble
from .vocab import Vocabularies


class SentenceScorer(Protocol):
    """Anything that gives log p(hyp | src) for tokenized sentences."""

    def score_groups(self, sources: Sequence[list[str]], hyps: Sequence[Sequence[list[str]]]) -> list[list[float]]:
        """``hyps[i]`` are the hypotheses of ``sources[i]``; returns their log-probabilities, same layout."""
        ...


class ScoringModel(Protocol):
    """What both models (and an :class:`~phrase_rescore.pipeline.translate.Ensemble` of either) expose for
    scoring many targets per source: :class:`~phrase_rescore.pipeline.model.encdec.RNNEncoderDecoder`,
    :class:`~phrase_rescore.pipeline.model.seq2seq.Seq2Seq`."""

    device: torch.device

    def encode_sources(self, src: torch.Tensor, src_mask: torch.Tensor):
        """(N, S) sources -> an opaque per-source state, one row per source."""
        ...

    def score_targets(self, enc, rows: torch.Tensor, tgt: torch.Tensor, tgt_mask: torch.Tensor) -> torch.Tensor:
        """(b, T) targets -> (b,) log p(target i | source ``rows[i]``)."""
        ...


class GroupedScorer:
    """log p(hyp | src) under a :class:`ScoringModel`: encode the chunk's sources once, then score the
    hypotheses in length-sorted batches, each hypothesis reading its own source's encoding by row index."""

    def __init__(self, model: ScoringModel, vocabs: Vocabularies, hyp_batch: int = 256):
        self.model, self.vocabs, self.hyp_batch = model, vocabs, hyp_batch
        self.device = model.device

    @torch.no_grad()
    def score_groups(self, sources, hyps):
        assert len(sources) == len(hyps), (len(sources), len(hyps))
        out = [[0.0] * len(h) for h in hyps]
        owners = [(i, j) for i, hs in enumerate(hyps) for j in range(len(hs))]
        if not owners:
            return out
        src_ids, src_mask = pad_batch([encode_eos(self.vocabs.source, s) for s in sources], device=self.device)
        enc = self.model.encode_sources(src_ids, src_mask)  # each source once
        tgt = [encode_eos(self.vocabs.target, hyps[i][j]) for i, j in owners]
        order = np.argsort([len(t) for t in tgt], kind="stable")
        for k in range(0, len(order), self.hyp_batch):
            idx = order[k:k + self.hyp_batch]
            ids, mask = pad_batch([tgt[n] for n in idx], device=self.device)  # (b, T)
            rows = torch.tensor([owners[n][0] for n in idx], device=self.device)  # (b,) source row of each
            lp = self.model.score_targets(enc, rows, ids, mask).tolist()
            for n, v in zip(idx, lp):
                i, j = owners[n]
                out[i][j] = v
        return out


class CSLMScorer:
    """log p(hyp) under the target-language CSLM (:mod:`~phrase_rescore.pipeline.model.cslm`), the source
    unused: the natural log of the product of p(w | previous n-1 words) over the hypothesis's words and
    its ``</s>``. The network runs once per distinct context of all the chunk's hypotheses (the n-best
    entries of a sentence share most of their contexts), in batches of ``batch`` contexts."""

    def __init__(self, model, vocab, batch: int = 1024):
        self.model, self.vocab, self.batch = model, vocab, batch
        self.device = model.device
        self.contexts_computed = 0      # distinct contexts run through the network (all calls)
        self.events = 0                 # words (and </s>) scored (all calls)

    @torch.no_grad()
    def score_groups(self, sources, hyps):
        from .model.cslm import sentence_events

        out = [[0.0] * len(h) for h in hyps]
        owners = [(i, j) for i, hs in enumerate(hyps) for j in range(len(hs))]
        if not owners:
            return out
        n_ctx = self.model.cfg.context
        ctxs, tgts, lengths, extras = [], [], [], []
        for i, j in owners:
            c, t, extra = sentence_events(self.vocab, hyps[i][j], n_ctx)
            ctxs.append(c)
            tgts.append(t)
            lengths.append(len(t))
            extras.append(extra)
        ctx = np.ascontiguousarray(np.concatenate(ctxs))               # (E, n-1), one row per event
        tgt = np.concatenate(tgts)                                      # (E,)
        keys = ctx.view(np.dtype((np.void, ctx.dtype.itemsize * n_ctx))).ravel()
        _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        inverse = inverse.ravel()
        uniq = ctx[first]                                               # (U, n-1): each distinct context once
        logp = np.zeros(len(tgt), dtype=np.float64)
        order = np.argsort(inverse, kind="stable")                      # events grouped by their context
        bounds = np.searchsorted(inverse[order], np.arange(0, len(uniq) + self.batch, self.batch))
        for b, start in enumerate(range(0, len(uniq), self.batch)):
            lp = self.model(torch.from_numpy(uniq[start:start + self.batch]).to(self.device))   # (b, V)
            ev = order[bounds[b]:bounds[b + 1]]
            rows = torch.from_numpy(inverse[ev] - start).to(self.device)
            cols = torch.from_numpy(tgt[ev]).to(self.device)
            logp[ev] = lp[rows, cols].double().cpu().numpy()
        self.contexts_computed += len(uniq)
        self.events += len(tgt)
        ends = np.cumsum(lengths)
        sums = np.add.reduceat(logp, ends - np.asarray(lengths)) if len(logp) else np.zeros(0)
        for (i, j), v, extra in zip(owners, sums, extras):
            out[i][j] = float(v) + extra
        return out


FEATURE_NAMES = {"seq2seq": "Seq2Seq0", "encdec": "RNNEncDec0", "cslm": "CSLM0"}  # the feature's default name by model kind


def load_scorer(checkpoints: Sequence[str], device: torch.device, hyp_batch: int = 256) -> tuple[SentenceScorer, str]:
    """A scorer for the checkpoint(s), and their kind: ``seq2seq`` or ``encdec`` (several of one kind = an
    ensemble, log-probabilities averaged), or ``cslm`` (one target-language CSLM: log p(hyp))."""
    from .model.checkpoint import CSLM_KIND, load_checkpoint, read_checkpoint

    if not checkpoints:
        raise PhraseRescoreError("give at least one model checkpoint")
    if read_checkpoint(checkpoints[0], "cpu")["format"] == CSLM_KIND.format:
        if len(checkpoints) > 1:
            raise PhraseRescoreError("give one CSLM checkpoint (a CSLM is not ensembled here)", checkpoints[1])
        ck = load_checkpoint(checkpoints[0], device, CSLM_KIND)
        if ck.vocabs is None:
            raise PhraseRescoreError("this CSLM checkpoint has no vocabulary", ck.path)
        return CSLMScorer(ck.model, ck.vocabs, max(hyp_batch, 1024)), "cslm"
    ens, vocabs = load_ensemble(list(checkpoints), device, kind=None)
    kind = model_kind(ens.models[0]).name
    return GroupedScorer(ens if len(ens.models) > 1 else ens.models[0], vocabs, hyp_batch), kind


def combined_score(entry: NBestEntry, model_logp: float, weights: dict[str, list[float]] | None,
                   path: str | os.PathLike | None = None, required: Collection[str] | None = None) -> float:
    """The re-ranking score: the paper's even average of the model's log-probability and the SMT total
    score when ``weights`` is None, else the weighted sum of every feature (the new one included).

    :param path: the n-best list ``entry`` was read from, for the errors.
    :param required: the features every hypothesis must carry [every feature ``weights`` names].
    :raises PhraseRescoreError: a feature of the hypothesis without a weight (or with another number of values),
        or a required feature the hypothesis lacks (it would count as 0), naming the file, line and feature."""
    if weights is None:
        return 0.5 * model_logp + 0.5 * entry.total
    have = {name for name, _ in entry.features}
    for name in (weights if required is None else required):
        if name not in have:
            raise PhraseRescoreError(
                f"this hypothesis has no feature {name!r}, which the weights name; expected every hypothesis to carry "
                f"every weighted feature, as Moses prints them (without it, it would be scored as if {name} were 0)",
                path, entry.line_no or None)
    total = 0.0
    for name, values in entry.features:
        w = weights.get(name)
        if w is None or len(w) != len(values):
            raise PhraseRescoreError(f"the weights give {0 if w is None else len(w)} value(s) for feature {name!r}, "
                                     f"which has {len(values)}; expected a weight for every feature of the n-best list",
                                     path, entry.line_no or None)
        total += sum(a * b for a, b in zip(w, values))
    return total


def tune_rerank_weights(nbest_path: str | os.PathLike, ref_path: str | os.PathLike,
                        init: dict[str, list[float]] | None = None, restarts: int = 20, seed: int = 0
                        ) -> tuple[dict[str, list[float]], float]:
    """Re-ranking weights tuned by the embedded MERT (Och's line search, as Moses's ``mert``) on a dev n-best
    list that already carries the new feature, against tokenized references (one per dev sentence).

    :param init: the starting weights by feature name (e.g. the SMT system's, plus one for the new
        feature); missing ones start at 0.
    :returns: ``(weights by feature name, L1-normalized as mert prints them; dev BLEU of the re-ranked n-best)``.
    """
    from phrase_rescore.moses_integration.embedded.bleu_stats import Reference, sentence_stats
    from phrase_rescore.moses_integration.embedded.mert import NBestPool, optimize
    from phrase_rescore.moses_integration.nbest_tuning import check_layout, start_vector

    refs = [" ".join(r) for r in read_sentences(ref_path)]
    layout, pool = None, None
    for sid, group in read_nbest_groups(nbest_path, num_sentences=len(refs)):
        ref = Reference(refs[sid])
        for e in group:
            lay = [(n, len(v)) for n, v in e.features]
            if layout is None:
                check_layout(lay, nbest_path, e.line_no)
                layout = lay
                pool = NBestPool(len(refs), sum(k for _, k in lay))
            elif lay != layout:
                raise PhraseRescoreError(f"expected the same features as the first hypothesis {layout}, found {lay}",
                                         nbest_path, e.line_no)
            pool.add(sid, np.asarray(e.dense_vector()), sentence_stats(e.hypothesis, ref))
    if pool is None:
        raise PhraseRescoreError("the dev n-best list has no hypotheses", nbest_path)
    start = start_vector(layout, init)     # each feature's own number of values, or an error naming it
    res = optimize(pool, start, [True] * pool.dim, restarts=restarts, seed=seed)
    out, i = {}, 0
    for n, k in layout:
        out[n] = [float(x) for x in res.weights[i:i + k]]
        i += k
    return out, float(res.score)


def tune_rerank_weights_with(tuner: str, nbest_path: str | os.PathLike, ref_path: str | os.PathLike,
                             init: dict[str, list[float]] | None, restarts: int = 20, seed: int = 0,
                             install=None, workdir: str | os.PathLike | None = None
                             ) -> tuple[dict[str, list[float]], float]:
    """:func:`tune_rerank_weights` (``tuner="embedded"``), or Moses's ``mert``/``kbmira`` from ``install``
    working in ``workdir`` (:func:`~phrase_rescore.moses_integration.nbest_tuning.tune_nbest_moses`).

    :returns: ``(weights by feature name, dev BLEU of the n-best list re-ranked by them)``, the BLEU from
        :mod:`~phrase_rescore.moses_integration.embedded.bleu_stats` for every tuner.
    """
    if tuner == "embedded":
        return tune_rerank_weights(nbest_path, ref_path, init, restarts, seed)
    from phrase_rescore.core.reading import read_text_lines
    from phrase_rescore.moses_integration.nbest_tuning import require_tuner, reranked_bleu, tune_nbest_moses

    if tuner not in TUNERS:
        raise PhraseRescoreError(f"unknown re-ranking tuner {tuner!r}: expected one of {', '.join(TUNERS)}")
    if install is None:
        install = require_tuner(tuner)
    if workdir is None:
        raise PhraseRescoreError(f"the {tuner} tuner needs a folder to work in")
    res = tune_nbest_moses(nbest_path, ref_path, init, install, workdir, tuner=tuner, restarts=restarts, seed=seed)
    return res.weights, reranked_bleu(nbest_path, read_text_lines(ref_path), res.weights)


def rerank_nbest(nbest_path: str | os.PathLike, weights: dict[str, list[float]], out_1best: str | os.PathLike,
                 num_sentences: int, required: Collection[str] | None = None) -> int:
    """Write the best hypothesis of every sentence of an n-best list under ``weights`` (every feature of the
    list weighted; every hypothesis carrying every feature of ``required``, by default every feature the weights
    name), without any model. Returns the sentences whose best is not the decoder's first.

    :raises PhraseRescoreError: a list that is not complete (:func:`read_nbest_groups`) or a hypothesis without a
        weighted feature (:func:`combined_score`); nothing is written then."""
    changed = 0
    with atomic_open(out_1best, "w") as one:
        for _, group in read_nbest_groups(nbest_path, num_sentences=num_sentences):
            best, best_score = None, None
            for e in group:
                sc = combined_score(e, 0.0, weights, nbest_path, required)
                if best_score is None or sc > best_score:  # ties keep the decoder's order
                    best, best_score = e, sc
            one.write(best.hypothesis + "\n")
            changed += best is not group[0]
    return changed


def write_weights(path: str | os.PathLike, weights: dict[str, list[float]]) -> None:
    """Write weights as a moses.ini ``[weight]`` section (readable by ``--weights``)."""
    from phrase_rescore.moses_integration.moses_values import format_weight

    with atomic_open(path, "w") as f:
        f.write("[weight]\n")
        for n, vs in weights.items():
            f.write(f"{n}= " + " ".join(format_weight(v) for v in vs) + "\n")


def check_derived_output(path: str, option: str, kind: str, ours) -> None:
    """Refuse an output named after another (``OUT_NBEST.dev``) that exists and is not one of ours.

    :param ours: ``ours(path) -> bool``: the file is what this command writes there (so a rerun may replace it).
    :raises PhraseRescoreError: naming the file, the option it is named after and what was expected.
    """
    if not os.path.lexists(path):
        return
    if os.path.islink(path) or not os.path.isfile(path) or not ours(path):
        raise PhraseRescoreError(f"{option} would replace this file, which is not {kind}, so it was not written "
                                 "by this command: move it away or choose another name", path)


def _is_rescored_nbest(path: str, names: set[str]) -> bool:
    """``path`` is an n-best list whose first hypothesis ends with one of the features ``names`` (the
    rescoring feature rescore-nbest adds last)."""
    from phrase_rescore.moses_integration.nbest import read_nbest

    try:
        for e in read_nbest(path):
            return bool(e.features) and e.features[-1][0] in names
    except PhraseRescoreError:
        return False
    return False


_WEIGHT_LINE = re.compile(r"\S+= \S.*")


def _is_weights_file(path: str) -> bool:
    """``path`` holds a ``[weight]`` section only, as :func:`write_weights` writes it."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            lines = f.read().split("\n")
    except (OSError, UnicodeDecodeError):
        return False
    if lines[-1] == "":
        lines.pop()
    return bool(lines) and lines[0] == "[weight]" and all(_WEIGHT_LINE.fullmatch(x) for x in lines[1:])


@dataclass
class RescoreSummary:
    sentences: int
    hypotheses: int
    changed_1best: int
    feature_name: str
    model_kind: str
    seconds: float
    hyps_per_s: float
    tuned_weights: str | None = None
    dev_bleu: float | None = None
    tuner: str = "embedded"
    tune_seconds: float | None = None


def rescore_nbest(cfg: RescoreConfig) -> RescoreSummary:
    """Add the model's log p(hyp|src) to every hypothesis of ``cfg.nbest``; write the n-best and the re-ranked 1-best."""
    from .translate import default_device

    t0 = time.perf_counter()
    derived = _check_files(cfg)
    tuning = derived.dev_out is not None
    install = _require_tuner(cfg, derived.tuner_dir) if cfg.tuner != "embedded" else None  # before any model is loaded
    dev_sources, dev_layout = _read_dev_set(cfg) if tuning else (None, [])
    device = default_device(cfg.device)
    scorer, kind = load_scorer(cfg.checkpoints, device, cfg.hyp_batch)
    name = cfg.feature_name or FEATURE_NAMES[kind]
    weights, required = _read_weights(cfg, name, dev_layout) if cfg.weights_ini else (None, None)
    tuned = _tune_on_dev(cfg, derived, scorer, name, dev_sources, weights, install) if tuning else None
    if tuned is not None:
        weights = tuned.weights
        required = None            # the tuned weights name the dev list's features: every hypothesis has them
    sources = read_sentences(cfg.source)
    n_hyp, changed = _rescore_file(scorer, name, cfg.nbest, sources, cfg.out_nbest, cfg.out_1best, weights,
                                   cfg.sentences_per_chunk, "rescore", cfg.source, required)
    dt = time.perf_counter() - t0
    return RescoreSummary(len(sources), n_hyp, changed, name, kind, dt, n_hyp / dt if dt else 0.0,
                          derived.tuned_path, None if tuned is None else tuned.dev_bleu, cfg.tuner,
                          None if tuned is None else tuned.seconds)


class _DerivedPaths(NamedTuple):
    """The outputs named after ``--out-nbest`` and ``--out-1best`` (each None when the run writes none)."""

    dev_out: str | None         # the rescored dev n-best list
    tuned_path: str | None      # the tuned weights
    tuner_dir: str | None       # the folder Moses's mert or kbmira works in


def _check_files(cfg: RescoreConfig) -> _DerivedPaths:
    """The derived outputs' names, once the dev set is given whole or not at all, no output is an input, and a
    derived output that exists is this command's own."""
    dev = (cfg.dev_nbest, cfg.dev_src, cfg.dev_ref)
    tuning = any(dev)
    if tuning and not all(dev):
        raise PhraseRescoreError("tuning needs all of the dev n-best list, dev source and dev reference")
    dev_out = os.fspath(cfg.out_nbest) + ".dev"
    tuned_path = os.fspath(cfg.out_1best) + ".weights.ini"
    tuner_dir = os.fspath(cfg.out_1best) + f".{cfg.tuner}"
    # the outputs whose names derive from --out-nbest and --out-1best may not be inputs either
    check_outputs({"NBEST": cfg.nbest, "SRC": cfg.source, "--model": list(cfg.checkpoints),
                   "--weights": cfg.weights_ini, "--dev-nbest": cfg.dev_nbest, "--dev-src": cfg.dev_src,
                   "--dev-ref": cfg.dev_ref},
                  {"--out-nbest": cfg.out_nbest, "--out-1best": cfg.out_1best,
                   "--out-nbest + .dev": dev_out if tuning else None,
                   "--out-1best + .weights.ini": tuned_path if tuning else None},
                  {f"--out-1best + .{cfg.tuner}": tuner_dir if tuning and cfg.tuner != "embedded" else None})
    if not tuning:
        return _DerivedPaths(None, None, None)
    # files of these names are replaced only when they are this command's own
    names = {cfg.feature_name} if cfg.feature_name else set(FEATURE_NAMES.values())
    check_derived_output(dev_out, "--out-nbest + .dev", "an n-best list rescored by rescore-nbest",
                         lambda p: _is_rescored_nbest(p, names))
    check_derived_output(tuned_path, "--out-1best + .weights.ini", "the [weight] section rescore-nbest "
                         "writes", _is_weights_file)
    return _DerivedPaths(dev_out, tuned_path, tuner_dir if cfg.tuner != "embedded" else None)


def _require_tuner(cfg: RescoreConfig, tuner_dir: str | None):
    """Moses's installation for ``--tuner mert`` or ``kbmira``, which tune on a dev n-best list, and their
    folder checked free to claim."""
    from phrase_rescore.core.outdir import check_claimable
    from phrase_rescore.moses_integration.nbest_tuning import WORK_COMMAND, require_tuner

    if not cfg.dev_nbest:
        raise PhraseRescoreError(f"--tuner {cfg.tuner} tunes the re-ranking weights on a dev n-best list: give "
                                 "--dev-nbest, --dev-src and --dev-ref")
    install = require_tuner(cfg.tuner, cfg.moses_home)
    check_claimable(tuner_dir, "the tuner's folder", WORK_COMMAND)
    return install


def _read_dev_set(cfg: RescoreConfig) -> tuple[list[list[str]], list[tuple[str, int]]]:
    """The dev sentences and the dev n-best list's features (name, number of values), its own errors naming
    its files, before any model is loaded: one reference per dev sentence, a complete list
    (:func:`read_nbest_groups`), the same features on every line."""
    from phrase_rescore.moses_integration.nbest_tuning import nbest_layout

    dev_sources = read_sentences(cfg.dev_src)
    n_ref = len(read_text_lines(cfg.dev_ref))
    if n_ref != len(dev_sources):
        raise PhraseRescoreError(f"{n_ref} lines, but the dev source {cfg.dev_src} has {len(dev_sources)}: "
                                 "expected one reference per dev sentence", cfg.dev_ref)
    return dev_sources, nbest_layout(cfg.dev_nbest, len(dev_sources), cfg.dev_src)


def _read_weights(cfg: RescoreConfig, name: str, dev_layout: list[tuple[str, int]]
                  ) -> tuple[dict[str, list[float]], list[str]]:
    """The ``--weights`` moses.ini's weights and the features every hypothesis must carry (those Moses prints
    in n-best lists); without a dev set they must weigh the feature ``name``, with one they are MERT's starting
    point and must give each feature of the dev list its number of values."""
    from phrase_rescore.moses_integration.moses_ini import read_moses_ini

    # a set of weights, not a system for Moses: a weight for the new feature need not name a [feature] line
    weights_ini = read_moses_ini(cfg.weights_ini, check_weight_names=False)
    weights = weights_ini.weights
    unprinted = {f.name for f in weights_ini.features if not f.tuneable}   # Moses prints them in no n-best list
    required = [n for n in weights if n not in unprinted]
    if name not in weights and not cfg.dev_nbest:
        raise PhraseRescoreError(f"no weight for the rescoring feature {name!r} in [weight]", cfg.weights_ini)
    for feature, k in [*dev_layout, (name, 1)]:     # MERT's starting point: a value per value of the list
        w = weights.get(feature) if cfg.dev_nbest else None
        if w is not None and len(w) != k:
            raise PhraseRescoreError(f"[weight] gives {len(w)} value(s) for {feature!r}, which has {k} in the "
                                     f"dev n-best list {cfg.dev_nbest}", cfg.weights_ini)
    return weights, required


class _Tuned(NamedTuple):
    """Re-ranking weights tuned on the dev n-best list."""

    weights: dict[str, list[float]]
    dev_bleu: float
    seconds: float              # the tuner's time (the dev list's rescoring aside)


def _tune_on_dev(cfg: RescoreConfig, derived: _DerivedPaths, scorer: SentenceScorer, name: str,
                 dev_sources: list[list[str]], init: dict[str, list[float]] | None, install) -> _Tuned:
    """Rescore the dev n-best list into ``derived.dev_out``, tune the re-ranking weights on it from ``init``
    with ``cfg.tuner`` and write them to ``derived.tuned_path``."""
    _rescore_file(scorer, name, cfg.dev_nbest, dev_sources, derived.dev_out, None, None,
                  cfg.sentences_per_chunk, "rescore dev", cfg.dev_src)
    t_tune = time.perf_counter()
    weights, dev_bleu = tune_rerank_weights_with(cfg.tuner, derived.dev_out, cfg.dev_ref, init, cfg.mert_restarts,
                                                 cfg.seed, install, derived.tuner_dir)
    seconds = time.perf_counter() - t_tune
    write_weights(derived.tuned_path, weights)
    return _Tuned(weights, dev_bleu, seconds)


def _rescore_file(scorer: SentenceScorer, name: str, nbest_path, sources: list[list[str]], out_nbest,
                  out_1best, weights, sentences_per_chunk: int, desc: str, source_path=None,
                  required: Collection[str] | None = None) -> tuple[int, int]:
    """Stream ``nbest_path``: add the feature, write the n-best and (when ``out_1best``) the re-ranked 1-best;
    a list that is not complete (:func:`read_nbest_groups`; ``source_path`` names the source in the message of
    one cut short) or a hypothesis without a weighted feature is refused and nothing is written. Returns
    (hypotheses, sentences whose 1-best changed)."""
    import contextlib

    n_hyp = changed = 0
    chunk: list[tuple[int, list[NBestEntry]]] = []
    with contextlib.ExitStack() as stack:
        nb = stack.enter_context(NBestWriter(out_nbest))
        one = stack.enter_context(atomic_open(out_1best, "w")) if out_1best else None
        pb = stack.enter_context(bar(total=len(sources), desc=desc, unit="sent"))

        def flush():
            nonlocal n_hyp, changed
            logps = scorer.score_groups([sources[i] for i, _ in chunk],
                                        [[words(e.hypothesis) for e in g] for _, g in chunk])
            for (_, group), lps in zip(chunk, logps):
                best, best_score = None, None
                for e, lp in zip(group, lps):
                    e.add_feature(name, [lp], nbest_path)
                    nb.write(e)
                    sc = combined_score(e, lp, weights, nbest_path, required)
                    if best_score is None or sc > best_score:  # ties keep the decoder's order
                        best, best_score = e, sc
                if one is not None:
                    one.write(best.hypothesis + "\n")
                changed += best is not group[0]
                n_hyp += len(group)
            pb.update(len(chunk))
            chunk.clear()

        # a list that is not complete raises before the outputs are renamed into place
        for sid, group in read_nbest_groups(nbest_path, num_sentences=len(sources), source=source_path):
            chunk.append((sid, group))
            if len(chunk) >= sentences_per_chunk:
                flush()
        flush()
    return n_hyp, changed

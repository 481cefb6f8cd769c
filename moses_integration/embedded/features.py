"""The feature functions of the embedded decoder, valued exactly as Moses values them.

A system is the moses.ini subset that ``build-smt`` and ``train-model.perl`` write: one
``PhraseDictionaryMemory`` (any ``num-features``), one ``KENLM``, ``Distortion``, ``WordPenalty``,
``PhrasePenalty``, ``UnknownWordPenalty`` and optionally one ``LexicalReordering``. Anything else is refused,
naming the feature.

Feature values (Moses sources in brackets):

* ``TranslationModel0``: ``FloorScore(TransformScore(p)) = max(ln p, -100)`` per column
  (``moses/Util.h``; ``LOWEST_SCORE = -100`` in ``TypeDef.h``), summed over the phrases used.
* ``LM0``: the KenLM log10 probability of ``<s> e </s>`` times ln 10 (``TransformLMScore`` in
  ``moses/LM/Ken.cpp``); out-of-vocabulary words get KenLM's ``<unk>`` probability (no OOV feature).
* ``Distortion0``: ``-|prev_end - start + 1|`` per phrase, ``-start`` for the first phrase
  (``InputType::ComputeDistortionDistance``); no cost for reaching the end of the sentence.
* ``WordPenalty0``: ``-(number of target words)``; ``PhrasePenalty0``: ``+1`` per phrase.
* ``UnknownWordPenalty0``: ``FloorScore(TransformScore(0)) = -100`` per source word with no
  one-word translation, copied through unchanged. The feature is not tuneable in Moses
  (``m_tuneable = false``), so it is not printed in n-best lists and MERT leaves its weight alone.
* ``LexicalReordering0`` (``moses/FF/LexicalReordering/``): phrase-based orientation models. The type
  string (``LRModel.cpp``) names the orientation classes (``msd``: monotone, swap, discontinuous;
  ``monotonicity``: monotone, non-monotone), the direction (``backward``, ``forward``, ``bidirectional``)
  and the conditioning (``fe``: the table is keyed by source and target phrase). ``wbe`` (word-based
  extraction) and ``phrase`` only say how the table was extracted: at decoding time Moses uses the
  phrase-based state for both (``m_phraseBased = true``). ``allff`` keeps one feature per orientation
  and direction, which is also the default (``collapseff``, one feature per direction, is refused), so
  ``wbe-msd-bidirectional-fe-allff`` and ``msd-bidirectional-fe`` are the same six features: backward
  M, S, D, then forward M, S, D, in the table's column order. Orientation of phrase ``cur`` after
  ``prev`` (``LRModel::GetOrientation``, no coverage involved): M when ``cur.start == prev.end + 1``,
  S when ``prev.start == cur.end + 1``, else D (monotonicity: M, else NM); the first phrase is M when it
  starts at 0, else D (NM). The backward score of each new phrase is the table value of *its* pair
  for that orientation; the forward score of the previous phrase is the value of the *previous*
  pair for the same orientation, added when the next phrase is placed (``PhraseBasedReorderingState::
  Expand``, ``LRState::CopyScores``). The first phrase has no forward score and nothing is scored at the
  end of the sentence, so the last phrase's forward score is never added. A pair that is not in the
  table (unknown words included) adds 0, or the ``default-scores=`` value when the line gives one
  (``TransformScore`` of it, no floor). Table values are ``FloorScore(TransformScore(p))`` like the
  phrase table's (``LexicalReorderingTableMemory::LoadFromFile``). Recombination state
  (``PhraseBasedReorderingState::operator==``): the previous phrase's source range, and for the forward
  direction also the previous pair's forward scores (``ComparePrevScores``: equal values, or both missing).

The n-best feature order is Moses's ``OutputAllFeatureScores``: stateful features (LexicalReordering,
Distortion, KENLM) in [feature] order, then stateless ones (WordPenalty, PhrasePenalty, the phrase table)
in [feature] order.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from phrase_rescore.core.config import parse_int
from phrase_rescore.core.errors import PhraseRescoreError

from ..moses_ini import FeatureLine, MosesIni, read_moses_ini, resolve_model_path
from ..moses_values import LOWEST_SCORE, format_moses_float

LN10 = math.log(10.0)           # TransformLMScore multiplies by 2.30258509299405
UNKNOWN_SCORE = LOWEST_SCORE    # FloorScore(TransformScore(0))

STATEFUL = ("Distortion", "KENLM", "LexicalReordering")
STATELESS = ("UnknownWordPenalty", "WordPenalty", "PhrasePenalty", "PhraseDictionaryMemory")
REQUIRED = ("KENLM", "PhraseDictionaryMemory")


@dataclass
class FeatureSpec:
    """One feature function as the decoder uses it."""

    name: str               # Moses's name, as in [weight] and the n-best list (e.g. "TranslationModel0")
    type: str               # the moses.ini type (e.g. "PhraseDictionaryMemory")
    size: int               # number of dense components
    tuneable: bool          # printed in n-best lists and tuned by MERT
    offset: int = 0         # first index in the full feature vector


#: LexicalReordering type-string parts the decoder refuses, with why (``LRModel::LRModel``).
_LR_REFUSED = {
    "hier": "hierarchical reordering (HReordering*State) is not implemented",
    "mslr": "the mslr orientation classes are not implemented",
    "leftright": "the leftright orientation classes are not implemented",
    "f": "conditioning on the source phrase alone (f) is not implemented; use fe",
    "collapseff": "collapsed scores (collapseff) are not implemented; use allff",
}
#: LexicalReordering line arguments the decoder reads (the others are refused, as Moses refuses unknown ones).
_LR_ARGS = ("name", "num-features", "type", "path", "input-factor", "output-factor", "default-scores",
            "tuneable", "verbosity")


@dataclass
class ReorderingModel:
    """A ``LexicalReordering`` feature: phrase-based orientation scores from a reordering table.

    Its ``size`` components are the backward classes then the forward classes (one block when the model
    has one direction); ``classes`` is 3 for msd (M, S, D) and 2 for monotonicity (M, NM). Table column
    ``offset + orientation`` is feature component ``offset + orientation`` (``LRState::CopyScores``).
    """

    name: str
    type: str
    path: str
    classes: int
    backward: bool
    forward: bool
    msd: bool
    default_scores: tuple[float, ...] | None = None   # TransformScore(v), used for pairs not in the table

    @property
    def size(self) -> int:
        return self.classes * (int(self.backward) + int(self.forward))

    @property
    def forward_offset(self) -> int:
        """First component of the forward block (0 for a forward-only model)."""
        return self.classes if self.backward else 0

    def first_orientation(self, start: int) -> int:
        """Orientation of the sentence's first phrase (``LRModel::GetOrientation(cur)``): M at 0, else D / NM."""
        if start == 0:
            return 0
        return 2 if self.msd else 1

    def orientation(self, prev_start: int, prev_end: int, start: int, end: int) -> int:
        """Orientation of phrase ``[start, end]`` after ``[prev_start, prev_end]``
        (``LRModel::GetOrientation(prev, cur)``): M (0), S / NM (1), D (2)."""
        if start == prev_end + 1:
            return 0
        if not self.msd:
            return 1
        if prev_start == end + 1:
            return 1
        return 2


def parse_reordering(f, ini_path: str) -> ReorderingModel:
    """A ``LexicalReordering`` feature line as :class:`ReorderingModel`; refuses what is not implemented,
    by name."""
    where = (ini_path, f.line_no or None)
    for k, _ in f.args:
        if k not in _LR_ARGS:
            raise PhraseRescoreError(f"{f.name}: argument {k}= is not supported by the embedded decoder "
                                     f"(it reads {', '.join(_LR_ARGS)})", *where)
    type_ = f.get("type")
    if not type_:
        raise PhraseRescoreError(f"{f.name}: expected type=... (e.g. wbe-msd-bidirectional-fe-allff)", *where)
    model, direction = _parse_reordering_type(f.name, type_, where)
    for key in ("input-factor", "output-factor"):
        if f.get(key, "0") != "0":
            raise PhraseRescoreError(f"{f.name}: factored models are not supported ({key}={f.get(key)})", *where)
    lr = ReorderingModel(f.name, type_, f.get("path", ""), 3 if model == "msd" else 2,
                         direction in ("backward", "bidirectional"), direction in ("forward", "bidirectional"),
                         model == "msd")
    n = f.get("num-features")
    if n is not None and n != str(lr.size):
        raise PhraseRescoreError(f"{f.name}: type={type_} has {lr.size} features, but num-features={n}", *where)
    ds = f.get("default-scores")
    if ds is not None:
        lr.default_scores = _parse_default_scores(f.name, ds, lr.size, where)
    return lr


def _parse_reordering_type(name: str, type_: str, where: tuple) -> tuple[str, str]:
    """``(orientation model, direction)`` of a LexicalReordering type string (``LRModel::LRModel``)."""
    model = None
    direction = "backward"
    condition = None
    for part in type_.split("-"):
        if part in _LR_REFUSED:
            raise PhraseRescoreError(f"{name}: type={type_}: {_LR_REFUSED[part]} in the embedded decoder; "
                                     f"use --backend moses for this system", *where)
        if part in ("phrase", "wbe", "allff"):
            continue
        if part in ("msd", "monotonicity"):
            model = part
        elif part in ("unidirectional", "backward"):
            direction = "backward"
        elif part in ("forward", "bidirectional"):
            direction = part
        elif part == "fe":
            condition = part
        else:
            raise PhraseRescoreError(f"{name}: type={type_}: unknown part {part!r} (expected e.g. "
                                     f"wbe-msd-bidirectional-fe-allff)", *where)
    if model is None:
        raise PhraseRescoreError(f"{name}: type={type_} names no orientation model (msd or monotonicity)",
                                 *where)
    if condition is None:
        raise PhraseRescoreError(f"{name}: type={type_} names no conditioning (expected fe)", *where)
    return model, direction


def _parse_default_scores(name: str, ds: str, size: int, where: tuple) -> tuple[float, ...]:
    """``default-scores=`` as ``TransformScore`` values: ``size`` comma-separated probabilities > 0."""
    try:
        vals = [float(x) for x in ds.split(",")]
    except ValueError:
        raise PhraseRescoreError(f"{name}: default-scores={ds}: expected {size} comma-separated "
                                 f"probabilities", *where) from None
    if len(vals) != size or any(not v > 0 for v in vals):
        raise PhraseRescoreError(f"{name}: default-scores={ds}: expected {size} comma-separated "
                                 f"probabilities > 0", *where)
    return tuple(math.log(v) for v in vals)


@dataclass
class DecoderSpec:
    """What a moses.ini says about a system the embedded decoder can run.

    ``features`` are in n-best order (tuneable stateful, tuneable stateless, then untuneable ones); the
    full feature vector concatenates their components in that order.
    """

    ini_path: str
    features: list[FeatureSpec]
    weights: np.ndarray                 # (F,) one weight per component, in ``features`` order
    phrase_table: str
    num_tm_features: int
    table_limit: int
    lm_path: str
    distortion_limit: int
    ini_options: dict[str, str] = field(default_factory=dict)  # other one-value sections, e.g. "stack"
    reordering: ReorderingModel | None = None                    # the LexicalReordering feature, if any

    @property
    def dim(self) -> int:
        """The length of the full feature vector."""
        return int(sum(f.size for f in self.features))

    def index(self, type_: str) -> int:
        """Offset of the (single) feature of moses.ini type ``type_``."""
        for f in self.features:
            if f.type == type_:
                return f.offset
        raise KeyError(type_)

    def has(self, type_: str) -> bool:
        """True when the system has a feature of moses.ini type ``type_``."""
        return any(f.type == type_ for f in self.features)

    def tuneable_mask(self) -> np.ndarray:
        """(F,) bool: which components are tuneable (in n-best lists, optimized by MERT)."""
        return np.concatenate([np.full(f.size, f.tuneable) for f in self.features]).astype(bool)

    def format_features(self, values: np.ndarray) -> str:
        """The n-best features field as Moses prints it: ``Distortion0= 0 LM0= -9.2 ...`` (tuneable only)."""
        parts = []
        for f in self.features:
            if not f.tuneable:
                continue
            parts.append(f"{f.name}=")
            parts.extend(format_moses_float(v) for v in values[f.offset:f.offset + f.size])
        return " ".join(parts)


class _IniFeatures(NamedTuple):
    """The features of a moses.ini in n-best order, with the three whose files the decoder reads."""

    features: list[FeatureSpec]
    phrase_table: FeatureLine
    lm: FeatureLine
    reordering: ReorderingModel | None


def load_decoder_spec(ini_path: str | os.PathLike, ini: MosesIni | None = None) -> DecoderSpec:
    """Read a moses.ini and check that the embedded decoder implements every feature in it.

    :raises PhraseRescoreError: naming the feature (and line) that is not supported, a missing weight
        line, a weight count that differs from the feature's size, or a missing model file.
    """
    ini_path = os.fspath(ini_path)
    ini = read_moses_ini(ini_path) if ini is None else ini
    ini.check_weights_match()
    found = _ini_features(ini, ini_path)
    pt = found.phrase_table
    weights = _weight_vector(found.features, ini.weights, ini_path)
    pt_path, lm_path = _model_paths(ini, found, ini_path)
    dl = ini.get_value("distortion-limit")
    distortion_limit = 6 if dl is None else parse_int(dl)
    if distortion_limit is None:
        raise PhraseRescoreError(f"[distortion-limit] expected an integer, got {dl!r}", ini_path)
    table_limit = parse_int(pt.get("table-limit", "20"))
    if table_limit is None or table_limit < 0:
        raise PhraseRescoreError(f"{pt.name}: table-limit expected a whole number of at least 0 in ASCII digits, got "
                                 f"{pt.get('table-limit')!r}", ini_path, pt.line_no or None)
    opts = {}
    for sec in ("stack", "beam-threshold", "max-phrase-length"):
        v = ini.get_value(sec)
        if v is not None:
            opts[sec] = v
    return DecoderSpec(ini_path, found.features, weights, pt_path, pt.num_features,
                       table_limit, lm_path, distortion_limit, opts, found.reordering)


def _ini_features(ini: MosesIni, ini_path: str) -> _IniFeatures:
    """The ini's features checked one by one, ordered as Moses prints them (``OutputAllFeatureScores``)."""
    stateful, stateless, untuneable = [], [], []
    pt = lm = lr = None
    seen: dict[str, int] = {}
    for f in ini.features:
        if f.type not in STATEFUL + STATELESS:
            raise PhraseRescoreError(
                f"feature {f.type} ({f.name}) is not implemented by the embedded decoder; it supports "
                f"{', '.join(STATEFUL + STATELESS)}. Use --backend moses for this system",
                ini_path, f.line_no or None)
        seen[f.type] = seen.get(f.type, 0) + 1
        if seen[f.type] > 1:
            raise PhraseRescoreError(f"the embedded decoder supports one {f.type} feature, found a second "
                                     f"({f.name})", ini_path, f.line_no or None)
        size = 1
        if f.type == "PhraseDictionaryMemory":
            size = _phrase_table_size(f, ini_path)
            pt = f
        elif f.type == "KENLM":
            if f.get("factor", "0") != "0":
                raise PhraseRescoreError(f"{f.name}: factored LMs are not supported (factor={f.get('factor')})",
                                         ini_path, f.line_no or None)
            lm = f
        elif f.type == "LexicalReordering":
            lr = parse_reordering(f, ini_path)
            size = lr.size
        tuneable = f.tuneable          # tuneable= as Moses reads a boolean; UnknownWordPenalty: false unless set
        spec = FeatureSpec(f.name, f.type, size, tuneable)
        if not tuneable:
            untuneable.append(spec)
        elif f.type in STATEFUL:
            stateful.append(spec)
        else:
            stateless.append(spec)
    for t in REQUIRED:
        if t not in seen:
            raise PhraseRescoreError(f"expected a {t} feature in [feature]; the embedded decoder needs one",
                                     ini_path)
    return _IniFeatures(stateful + stateless + untuneable, pt, lm, lr)


def _phrase_table_size(f: FeatureLine, ini_path: str) -> int:
    """The ``num-features=`` of a PhraseDictionaryMemory line, refusing a factored table."""
    size = f.num_features
    if size is None:
        raise PhraseRescoreError(f"{f.name}: expected num-features=N on the feature line",
                                 ini_path, f.line_no or None)
    for key, ok in (("input-factor", "0"), ("output-factor", "0")):
        if f.get(key, "0") != ok:
            raise PhraseRescoreError(f"{f.name}: factored models are not supported ({key}={f.get(key)})",
                                     ini_path, f.line_no or None)
    return size


def _weight_vector(features: list[FeatureSpec], weights: dict[str, list[float]], ini_path: str) -> np.ndarray:
    """Set each feature's offset and return the [weight] values, one per component, in ``features`` order."""
    w = []
    off = 0
    for spec in features:
        spec.offset = off
        off += spec.size
        if spec.name not in weights:
            if spec.type == "UnknownWordPenalty":
                w.append(1.0)    # Moses's default weight for the untuneable unknown-word penalty
                continue
            raise PhraseRescoreError(f"no weights for feature {spec.name} in [weight]", ini_path)
        vals = weights[spec.name]
        if len(vals) != spec.size:
            raise PhraseRescoreError(f"feature {spec.name} has {spec.size} components but [weight] gives "
                                     f"{len(vals)} weights", ini_path)
        w.extend(vals)
    return np.asarray(w, dtype=np.float64)


def _model_paths(ini: MosesIni, found: _IniFeatures, ini_path: str) -> tuple[str, str]:
    """``(phrase table, language model)`` files as the decoder opens them (and the reordering table's,
    set on the model); refuses one that does not exist."""
    pt, lm, lr = found.phrase_table, found.lm, found.reordering
    pt_path = resolve_model_path(pt.get("path", ""), ini_path)
    lm_path = resolve_model_path(lm.get("path", ""), ini_path)
    checks = [("phrase table", pt_path, pt), ("language model", lm_path, lm)]
    if lr is not None:
        lr.path = resolve_model_path(lr.path, ini_path)
        if not os.path.exists(lr.path) and os.path.exists(lr.path + ".gz"):
            lr.path += ".gz"   # LexicalReorderingTableMemory::LoadFromFile tries PATH, then PATH.gz
        checks.append(("reordering table", lr.path, ini.feature(lr.name)))
    for what, p, feat in checks:
        if not p or not os.path.exists(p):
            raise PhraseRescoreError(f"{feat.name}: {what} file {p!r} not found", ini_path, feat.line_no or None)
    return pt_path, lm_path

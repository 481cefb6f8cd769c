"""The feature functions of the embedded decoder, valued exactly as Moses values them.

A system is the moses.ini subset that ``build-smt`` writes: one ``PhraseDictionaryMemory`` (any
``num-features``), one ``KENLM``, ``Distortion``, ``WordPenalty``, ``PhrasePenalty`` and
``UnknownWordPenalty``. Anything else is refused, naming the feature.

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

The n-best feature order is Moses's ``OutputAllFeatureScores``: stateful features (Distortion, KENLM) in
[feature] order, then stateless ones (WordPenalty, PhrasePenalty, the phrase table) in [feature] order.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np

from phrase_rescore.core.errors import PhraseRescoreError

from ..moses_ini import MosesIni, read_moses_ini
from ..moses_values import LOWEST_SCORE, format_moses_float

LN10 = math.log(10.0)           # TransformLMScore multiplies by 2.30258509299405
UNKNOWN_SCORE = LOWEST_SCORE    # FloorScore(TransformScore(0))

STATEFUL = ("Distortion", "KENLM")
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


def _resolve(path: str, ini_path: str) -> str:
    """Paths in moses.ini are used as given by Moses; a relative one is taken relative to the ini's folder
    only when it does not exist relative to the working directory."""
    if os.path.isabs(path) or os.path.exists(path):
        return path
    alt = os.path.join(os.path.dirname(os.path.abspath(ini_path)), path)
    return alt if os.path.exists(alt) else path


def load_decoder_spec(ini_path: str | os.PathLike, ini: MosesIni | None = None) -> DecoderSpec:
    """Read a moses.ini and check that the embedded decoder implements every feature in it.

    :raises PhraseRescoreError: naming the feature (and line) that is not supported, a missing weight
        line, a weight count that differs from the feature's size, or a missing model file.
    """
    ini_path = os.fspath(ini_path)
    ini = read_moses_ini(ini_path) if ini is None else ini
    ini.check_weights_match()
    weights = ini.weights
    stateful, stateless, untuneable = [], [], []
    pt = lm = None
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
        if f.type == "PhraseDictionaryMemory":
            size = f.num_features
            if size is None:
                raise PhraseRescoreError(f"{f.name}: expected num-features=N on the feature line",
                                         ini_path, f.line_no or None)
            for key, ok in (("input-factor", "0"), ("output-factor", "0")):
                if f.get(key, "0") != ok:
                    raise PhraseRescoreError(f"{f.name}: factored models are not supported ({key}={f.get(key)})",
                                             ini_path, f.line_no or None)
            pt = f
        elif f.type == "KENLM":
            if f.get("factor", "0") != "0":
                raise PhraseRescoreError(f"{f.name}: factored LMs are not supported (factor={f.get('factor')})",
                                         ini_path, f.line_no or None)
            size = 1
            lm = f
        else:
            size = 1
        tuneable = f.type != "UnknownWordPenalty" and f.get("tuneable", "true").lower() != "false"
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
    features = stateful + stateless + untuneable
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
    pt_path = _resolve(pt.get("path", ""), ini_path)
    lm_path = _resolve(lm.get("path", ""), ini_path)
    for what, p, feat in (("phrase table", pt_path, pt), ("language model", lm_path, lm)):
        if not p or not os.path.exists(p):
            raise PhraseRescoreError(f"{feat.name}: {what} file {p!r} not found", ini_path, feat.line_no or None)
    dl = ini.get_value("distortion-limit")
    try:
        distortion_limit = 6 if dl is None else int(dl)
    except ValueError:
        raise PhraseRescoreError(f"[distortion-limit] expected an integer, got {dl!r}", ini_path) from None
    try:
        table_limit = int(pt.get("table-limit", "20"))
    except ValueError:
        raise PhraseRescoreError(f"{pt.name}: table-limit expected an integer, got {pt.get('table-limit')!r}",
                                 ini_path, pt.line_no or None) from None
    opts = {}
    for sec in ("stack", "beam-threshold", "max-phrase-length"):
        v = ini.get_value(sec)
        if v is not None:
            opts[sec] = v
    return DecoderSpec(ini_path, features, np.asarray(w, dtype=np.float64), pt_path, pt.num_features,
                      table_limit, lm_path, distortion_limit, opts)

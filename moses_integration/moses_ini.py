"""Read, edit and write a Moses configuration file (moses.ini) in the current format.

The current format (what ``train-model.perl`` step 9 and ``mert-moses.pl`` write) has a
``[feature]`` section with one feature function per line and a ``[weight]`` section with one
``Name= w1 w2 ...`` line per feature::

    [feature]
    UnknownWordPenalty
    PhraseDictionaryMemory name=TranslationModel0 num-features=4 path=/m/phrase-table.gz input-factor=0 output-factor=0
    KENLM lazyken=0 name=LM0 factor=0 path=/m/lm.arpa order=5

    [weight]
    UnknownWordPenalty0= 1
    TranslationModel0= 0.2 0.2 0.2 0.2
    LM0= 0.5

Parsing follows ``Moses::Parameter::ReadConfigFile``: lines end at ``\n`` only (``getline``; a form
feed, U+0085 or U+2028 is part of the line, in a comment as anywhere), ``#`` starts a comment anywhere
on a line, lines are trimmed of spaces, tabs and ``\r``, ``[name]`` opens a section, other non-blank
lines are values of the current section. A value is split into words at spaces and tabs only
(``Tokenize`` in moses/Util.h; :func:`~phrase_rescore.core.words.words`), never at other whitespace.
A feature line is ``Type key=value ...`` (``FeatureFunction::ParseLine``); a feature without ``name=``
is called ``Type`` + the number of earlier unnamed features of that type (``Distortion0``). A weight
line's first token is the feature name followed by ``=`` (``Parameter::CreateWeightsMap``).

Numbers are read only where Moses reads the same number: a weight must be a decimal number of
:data:`~.moses_values.SCORE_TOKEN` (ASCII digits with an optional sign, point and exponent) and
``num-features`` ASCII digits (:data:`~.moses_values.COUNT_TOKEN_RE`). Python's ``float`` and ``int``
also take ``0_2``, full-width or Arabic-Indic digits and a leading no-break space, which Moses's
``Scan<float>``/``Scan<size_t>`` read as another number or not at all; such a file is refused, naming
the line, rather than rewritten with numbers Moses never saw.

A path written into a [feature] line can hold no space, tab or ``#`` (:func:`check_ini_path`): Moses
would split the line there or cut it as a comment. Every writer of a moses.ini checks its paths with it
before writing anything. :meth:`MosesIni.model_files` lists the files an ini's features read, which the
commands treat as inputs that no output may overwrite.

Every line is kept as read: writing an unmodified file gives back the same bytes; an edited
feature or weight line is regenerated in Moses's own spacing with its trailing comment kept.
The old format (``[ttable-file]``, ``[weight-t]``, ...) is refused with advice on converting it.

**The file as Moses reads it.** ``[weight-overwrite]`` and ``[feature-overwrite]`` are applied as Moses applies
them (moses/Parameter.cpp ``WeightOverwrite``, moses/StaticData.cpp ``OverrideFeatures``; checked against the
``moses`` binary of commit 34452895f) and folded into the lines they change, and the two sections are dropped,
so every reader (``moses-ini``, ``decode``, ``tune``, ``evaluate``, ``rescore-nbest --weights``) sees the weights
and feature arguments Moses would use, and a file written from it means the same to Moses without them:

* ``[weight-overwrite]``: one line (Moses: "weight-overwrite should only be on 1 line") of ``Name= v v ...``
  groups; each named feature's weights are replaced by the group, ``x`` keeping the ``[weight]`` value of that
  component ("Keeping previous weight failed" where there is none). A name that is no feature ("The following
  weights have no feature function"), a group whose size is not the feature's ("Mismatch in number of features
  and number of weights"), a name given twice, a group without values and a token Moses reads otherwise
  (``LM0=0.5``, which Moses takes for a weight of 0, not a name) are refused, naming the line. Moses's
  ``-weight-overwrite`` replaces this line (``Parameter::OverwriteParam``): :func:`read_moses_ini`'s
  ``weight_overwrite``.
* ``[feature-overwrite]``: lines of ``Name key=value ...``; each sets that argument of the feature (``SetParameter``
  after the feature is built). ``name=`` and ``num-features=`` are refused, as Moses refuses them ("Unknown
  argument"), and so is any key the feature's ``SetParameter`` does not take (:data:`OVERWRITABLE`); a feature
  that does not exist and a malformed pair are refused.

A section named by a command-line abbreviation (``[v]``, ``[s]``; :data:`MOSES_ABBREVIATIONS`) is kept and has no
effect, as in Moses. Every other section is checked against :data:`READ_SECTIONS`, the sections this tool reads: a
section Moses
applies that the tool does not implement (``[cube-pruning-pop-limit]``, ``[drop-unknown]``, ...) and one Moses
does not know at all ("Unknown parameter") are refused by name, so no command runs a system Moses would run
otherwise. A ``[weight]`` line for a feature the file does not have is refused as Moses refuses it.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Sequence

from phrase_rescore.core.atomic_write import atomic_open
from phrase_rescore.core.config import parse_int, parse_number, spells_non_finite
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.reading import open_binary_read
from phrase_rescore.core.words import words

from .moses_values import COUNT_TOKEN_RE, FLOAT32_OVERFLOW, SCORE_TOKEN_RE, format_weight

# Sections of the pre-2013 format. Moses still converts some of them on the fly, but two formats in one
# pipeline is how features and weights fall out of step, so we refuse them and say how to convert.
OLD_FORMAT_SECTIONS = {
    "ttable-file": "a PhraseDictionaryMemory/PhraseDictionaryCompact line in [feature]",
    "lmodel-file": "a KENLM line in [feature]",
    "distortion-file": "a LexicalReordering line in [feature]",
    "generation-file": "a Generation line in [feature]",
    "weight-t": "a 'TranslationModel0= ...' line in [weight]",
    "weight-l": "an 'LM0= ...' line in [weight]",
    "weight-d": "'Distortion0= ...' and 'LexicalReordering0= ...' lines in [weight]",
    "weight-w": "a 'WordPenalty0= ...' line in [weight]",
    "weight-u": "an 'UnknownWordPenalty0= ...' line in [weight]",
    "weight-p": "a 'PhrasePenalty0= ...' line in [weight]",
    "weight-i": "an 'InputFeature0= ...' line in [weight]",
    "weight-generation": "a 'GenerationModel0= ...' line in [weight]",
    "weight-lr": "a 'LexicalReordering0= ...' line in [weight]",
}

#: Characters a path in a [feature] line cannot hold: Moses splits the line at spaces and tabs, cuts it at
#: ``#`` (a comment) and ends it at a newline (with ``\r`` trimmed from its end).
_UNREADABLE_IN_INI = {" ": "a space", "\t": "a tab", "#": "'#'", "\n": "a newline", "\r": "a carriage return"}

#: Every parameter of the Moses decoder (commit 34452895f, as ``moses`` with no arguments lists them): the sections
#: a moses.ini may have for Moses. Anything else is refused by Moses ("Unknown parameter").
MOSES_PARAMETERS = frozenset("""
alignment-output-file alternate-weight-setting always-create-direct-transopt beam-threshold clean-lm-cache config
consensus-decoding context-string context-weights context-window cube-pruning-deterministic-search
cube-pruning-diversity cube-pruning-lazy-scoring cube-pruning-pop-limit daemon decoding-graph-backoff
default-non-term-for-empty-range-only description disable-discarding distortion distortion-file distortion-limit
dlm-model drop-unknown early-discarding-threshold early-distortion-cost factor-delimiter feature feature-add
feature-name-overwrite feature-overwrite generation-file glm-feature global-lexical-file include-lhs-in-search-graph
include-segmentation-in-n-best input-factors input-file input-scores inputtype labeled-n-best-list lattice-hypo-set
lattice-samples link-param-count lmbr-map-weight lmbr-p lmbr-pruning-factor lmbr-r lmbr-thetas lminimum-bayes-risk
lmodel-dub lmodel-file lmodel-oov-feature mapping mark-unknown max-chart-span max-partial-trans-opt
max-phrase-length max-trans-opt-per-coverage mbr-scale mbr-size minimum-bayes-risk minlexr-memory minphr-memory
mira monotone-at-punctuation n-best-factor n-best-list n-best-trees no-cache non-terminals output-factors
output-hypo-score output-search-graph output-search-graph-extended output-search-graph-hypergraph
output-search-graph-slf output-unknowns output-word-graph phrase-boundary-source-feature
phrase-boundary-target-feature phrase-drop-allowed phrase-length-feature phrase-pair-feature placeholder-factor
print-alignment-info print-alignment-info-in-n-best print-all-derivations print-id print-passthrough
print-passthrough-in-n-best recover-input-path references report-all-factors report-all-factors-in-n-best
report-segmentation report-segmentation-enriched rule-limit s2t-parsing-algorithm search-algorithm segment-time-out
serial server server-keepalive-maxconn server-keepalive-timeout server-log server-maxconn server-maxconn-backlog
server-port server-timeout session-cache-size session-timeout show-weights sort-word-alignment source-label-overlap
source-word-deletion-feature spe-aln spe-src spe-trg stack stack-diversity start-translation-id
target-word-insertion-feature text-type threads time-out translation-all-details translation-details
translation-option-threshold tree-translation-details ttable-file unknown-lhs unknown-word-prefix
unknown-word-suffix unpruned-search-graph verbose version weight weight-add weight-bl weight-d weight-dlm weight-e
weight-file weight-generation weight-glm weight-i weight-l weight-lex weight-lr weight-overwrite weight-p weight-pb
weight-pp weight-slm weight-t weight-u weight-w weight-wt word-translation-feature xml-brackets xml-input
""".split())
#: The one-letter abbreviations of some parameters (``-v``, ``-s``, ...). They are spellings of the command line
#: only: in a moses.ini Moses keeps ``[v]`` under that name, which nothing reads (mert-moses.pl writes one for
#: ``--decoder-flags "-v 0"``), so such a section has no effect, for Moses as here.
MOSES_ABBREVIATIONS = {"f": "config", "i": "input-file", "v": "verbose", "b": "beam-threshold", "s": "stack",
                       "T": "translation-details", "t": "report-segmentation", "r": "recover-input-path",
                       "d": "weight-d", "g": "weight-generation", "I": "weight-i", "w": "weight-w", "u": "weight-u",
                       "e": "weight-e"}

#: The sections this tool reads, with what it takes from each (every other one is refused by name).
READ_SECTIONS = {
    "feature": "the feature functions, one a line",
    "weight": "their weights, 'Name= w1 w2 ...' a line",
    "weight-overwrite": "one line of 'Name= v ...' replacing those features' weights (x keeps one)",
    "feature-overwrite": "'Name key=value ...' lines replacing arguments of those features",
    "distortion-limit": "one whole number (-1: unlimited)",
    "stack": "one whole number",
    "beam-threshold": "one number",
    "max-phrase-length": "one whole number",
    "input-factors": "0 (unfactored input) only",
    "mapping": "0 T 0 (one translation step) only",
    "search-algorithm": "0 (stack search) only",
    "threads": "a whole number of decoding threads, or all (no effect on the translations)",
    "verbose": "a whole number (Moses's log level; no effect on the translations)",
}

#: The arguments Moses's ``FeatureFunction::SetParameter`` takes from every feature in ``[feature-overwrite]``
#: (others: "Unknown argument"), and those a phrase dictionary takes besides (``PhraseDictionary``,
#: ``DecodeFeature``). Measured with the ``moses`` binary of commit 34452895f: ``KENLM``, ``LexicalReordering``,
#: ``Distortion``, ``WordPenalty``, ``PhrasePenalty`` and ``UnknownWordPenalty`` take only the first set.
OVERWRITABLE_ALL = ("tuneable", "verbosity", "filterable", "require-sorting-after-source-context")
OVERWRITABLE_PHRASE_DICTIONARY = ("path", "table-limit", "input-factor", "output-factor", "cache-size")
#: Taken by Moses but not implemented here: refused, naming the feature.
OVERWRITE_NOT_IMPLEMENTED = {"tuneable-components": "tuning some components of a feature and not others"}
#: The number of weights of features whose line need not say ``num-features`` (Moses's defaults).
DEFAULT_NUM_FEATURES = {"KENLM": 1, "Distortion": 1, "WordPenalty": 1, "PhrasePenalty": 1, "UnknownWordPenalty": 1}
#: How Moses reads a boolean argument (``Scan<bool>``, moses/Util.cpp): these, after lowercasing; others are an error.
MOSES_TRUE = ("yes", "y", "true", "1")
MOSES_FALSE = ("no", "n", "false", "0")


def moses_bool(text: str | None, default: bool, what: str = "a boolean", path=None, line_no=None) -> bool:
    """A boolean argument as Moses reads it (``tuneable=false``, ``tuneable=0``, ``tuneable=No``).

    :raises PhraseRescoreError: a text Moses refuses ("Could not interpret ... as a boolean").
    """
    if text is None:
        return default
    if text.lower() in MOSES_TRUE:
        return True
    if text.lower() in MOSES_FALSE:
        return False
    raise PhraseRescoreError(f"{what}: expected one of {', '.join(MOSES_TRUE + MOSES_FALSE)} (any case) as Moses "
                             f"reads a boolean, got {text!r}", path, line_no)


CONVERSION_ADVICE = (
    "regenerate it in the current format with a current Moses "
    "(train-model.perl ... --first-step 9 --last-step 9 rewrites moses.ini with [feature]/[weight] sections), "
    "or convert by hand: each '[ttable-file]' line 'IMPL IN OUT N PATH' becomes "
    "'PhraseDictionaryMemory name=TranslationModel0 num-features=N path=PATH input-factor=IN output-factor=OUT' "
    "under [feature], and each old weight section becomes one 'Name= w1 w2 ...' line under [weight]"
)


@dataclass
class FeatureLine:
    """One feature function from ``[feature]``: ``type key=value ...``.

    :ivar type: the feature function class, e.g. ``PhraseDictionaryMemory``, ``KENLM``, ``Distortion``.
    :ivar args: ``(key, value)`` pairs in file order (values never contain whitespace in Moses).
    :ivar name: ``name=`` when given, else Moses's default: ``type`` + the number of earlier features of that type
        without ``name=`` (``FeatureFunction::ParseLine``).
    :ivar line_no: 1-based line number in the file (0 for a feature added in memory).
    """

    type: str
    args: list[tuple[str, str]] = field(default_factory=list)
    name: str = ""
    line_no: int = 0

    def get(self, key: str, default: str | None = None) -> str | None:
        """The value of ``key``, or ``default`` when the line has no such argument."""
        for k, v in self.args:
            if k == key:
                return v
        return default

    def set(self, key: str, value: str) -> None:
        """Set ``key`` in place (its position kept), or append it when the line has no such argument."""
        for i, (k, _) in enumerate(self.args):
            if k == key:
                self.args[i] = (key, value)
                break
        else:
            self.args.append((key, value))
        if key == "name":
            self.name = value

    @property
    def num_features(self) -> int | None:
        """``num-features`` as an int, or None when the line does not say (the class's default applies)."""
        v = self.get("num-features")
        return None if v is None else int(v)

    @property
    def tuneable(self) -> bool:
        """Whether Moses tunes the feature and prints it in n-best lists: ``tuneable=`` read as Moses reads a
        boolean; without it, every feature but ``UnknownWordPenalty`` (whose ``m_tuneable`` is false)."""
        return moses_bool(self.get("tuneable"), self.type != "UnknownWordPenalty", f"tuneable= of {self.name}",
                          None, self.line_no or None)

    @property
    def is_phrase_dictionary(self) -> bool:
        """True for phrase tables (``PhraseDictionaryMemory``, ``PhraseDictionaryCompact``, ...)."""
        return self.type.startswith("PhraseDictionary")

    def to_text(self) -> str:
        """The line as Moses writes it: the type, then ``key=value`` separated by single spaces."""
        return " ".join([self.type] + [f"{k}={v}" for k, v in self.args])


@dataclass
class _Line:
    """A physical line of the file: its raw text and what it means."""

    raw: str                  # the line exactly as read, with its line ending
    section: str | None       # the section it belongs to (None before the first header)
    content: str              # the part before '#', trimmed
    kind: str                 # "blank" (blank or comment only), "header", "value"
    feature: FeatureLine | None = None
    weight_name: str | None = None
    weights: list[float] | None = None
    dirty: bool = False       # regenerate instead of writing ``raw``
    line_no: int | None = None  # 1-based line in the file read (None for lines added in memory)

    def comment(self) -> str:
        i = self.raw.find("#")
        return "" if i < 0 else self.raw[i:].rstrip("\r\n")

    def ending(self) -> str:
        body = self.raw.rstrip("\r\n")
        return self.raw[len(body):]


def _physical_lines(text: str) -> list[str]:
    """``text`` cut into lines as Moses's ``getline`` cuts it: at ``\n`` only, each line with its ``\n``."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def check_ini_path(path: str | os.PathLike, what: str) -> str:
    """Refuse a path that Moses could not read back from a moses.ini [feature] line; return it as a str.

    Moses splits a feature line at spaces and tabs and cuts it at ``#`` (a comment), so a path holding
    one of them names another file, or none, once written there.

    :param what: what the path is, for the message (e.g. ``"the phrase table --table"``).
    :raises PhraseRescoreError: naming the path, the character and why.
    """
    text = os.fspath(path)
    if not text:
        raise PhraseRescoreError(f"{what} is an empty path: expected a file name to write into a moses.ini")
    bad = [name for ch, name in _UNREADABLE_IN_INI.items() if ch in text]
    if bad:
        raise PhraseRescoreError(
            f"{what} {text!r} cannot be written into a moses.ini: it holds {' and '.join(bad)}, and Moses splits "
            "a [feature] line at spaces and tabs and cuts it at '#' (a comment), so it would not read this path "
            "back; expected a path without spaces, tabs or '#' (move or rename it, or use a symbolic link "
            "from such a path)")
    return text


def resolve_model_path(path: str, ini_path: str) -> str:
    """A model path of a moses.ini as the embedded decoder opens it: as given (Moses uses it so) when it is
    absolute or exists from the working directory, else from the ini's folder when it exists there."""
    if os.path.isabs(path) or os.path.exists(path):
        return path
    alt = os.path.join(os.path.dirname(os.path.abspath(ini_path)), path)
    return alt if os.path.exists(alt) else path


def _strip_comment(raw: str) -> str:
    i = raw.find("#")
    body = raw if i < 0 else raw[:i]
    return body.strip(" \t\r\n")


class MosesIni:
    """A parsed moses.ini: every line kept, feature and weight lines typed.

    Build one with :func:`read_moses_ini` / :func:`parse_moses_ini`, or :meth:`MosesIni.new` for a
    fresh file; write it with :meth:`write` or :meth:`text`.
    """

    def __init__(self, lines: list[_Line], path: str | None = None):
        self._lines = lines
        self.path = path
        #: what reading applied and dropped: ``[weight-overwrite]``/``[feature-overwrite]`` (see the module doc)
        self.folded: list[str] = []

    # -- construction -------------------------------------------------------------------------------
    @classmethod
    def new(cls, header: str = "#########################\n### MOSES CONFIG FILE ###\n#########################\n") -> "MosesIni":
        """An empty configuration with train-model.perl's banner comment."""
        ini = cls([], None)
        for raw in _physical_lines(header):
            ini._lines.append(_Line(raw, None, "", "blank"))
        return ini

    # -- reading ------------------------------------------------------------------------------------
    @property
    def sections(self) -> list[str]:
        """Section names in file order."""
        return [ln.content[1:ln.content.index("]")] for ln in self._lines if ln.kind == "header"]

    def section_values(self, section: str) -> list[str]:
        """The value lines of ``section`` (comments stripped, trimmed), in file order; [] when absent."""
        return [ln.content for ln in self._lines if ln.kind == "value" and ln.section == section]

    def get_value(self, section: str, default: str | None = None) -> str | None:
        """The first value of a one-value section such as ``[distortion-limit]``."""
        vals = self.section_values(section)
        return vals[0] if vals else default

    @property
    def features(self) -> list[FeatureLine]:
        """The ``[feature]`` lines in file order."""
        return [ln.feature for ln in self._lines if ln.feature is not None]

    def feature(self, name: str) -> FeatureLine:
        """The feature called ``name`` (``name=`` or Moses's default name); error when there is none."""
        for f in self.features:
            if f.name == name:
                return f
        raise PhraseRescoreError(
            f"no feature named {name!r} in [feature] (have: {', '.join(f.name for f in self.features) or 'none'})",
            self.path)

    @property
    def weights(self) -> dict[str, list[float]]:
        """``[weight]`` lines as ``{feature name: weights}`` in file order."""
        return {ln.weight_name: list(ln.weights) for ln in self._lines if ln.weight_name is not None}

    def weights_for(self, name: str) -> list[float]:
        """The weights of feature ``name``; error naming the file when [weight] has no line for it."""
        ln = self._weight_line(name)
        if ln is None:
            raise PhraseRescoreError(f"no weights for feature {name!r} in [weight]", self.path)
        return list(ln.weights)

    def phrase_dictionaries(self) -> list[FeatureLine]:
        """The phrase-table features (``PhraseDictionary*``) in file order."""
        return [f for f in self.features if f.is_phrase_dictionary]

    def model_files(self) -> dict[str, list[str]]:
        """The files the features read, ``{what: paths}``, e.g. ``{"the phrase table of TranslationModel0 in
        moses.ini": ["/m/phrase-table.gz"]}``: each feature's ``path=`` as written (Moses resolves a relative
        one against its working directory), and the file Moses opens in its place where it adds a suffix
        (``PhraseDictionaryCompact``: ``.minphr``; ``LexicalReordering``: a compact ``.minlexr`` beside it).

        These are inputs of every command that reads the ini: no output may overwrite one
        (:func:`~phrase_rescore.core.output_paths.check_outputs`).
        """
        where = self.path if self.path is not None else "the moses.ini"
        out: dict[str, list[str]] = {}
        for f in self.features:
            p = f.get("path")
            if p is None:
                continue
            paths = [p]
            if f.type == "PhraseDictionaryCompact" and not p.endswith(".minphr"):
                paths.append(p + ".minphr")        # PhraseDictionaryCompact::Load adds it
            elif f.type == "LexicalReordering":
                paths.append(p + ".minlexr")       # LexicalReorderingTable::LoadAvailable tries it first
            out[f"the {_model_kind(f.type)} of {f.name} in {where}"] = paths
        return out

    # -- editing ------------------------------------------------------------------------------------
    def set_weights(self, name: str, values: Sequence[float]) -> None:
        """Replace the weights of ``name`` (the line keeps its place and comment) or add a [weight] line."""
        ln = self._weight_line(name)
        if ln is None:
            self._append_value("weight", _Line("", "weight", "", "value", weight_name=name,
                                               weights=[float(v) for v in values], dirty=True))
        else:
            ln.weights = [float(v) for v in values]
            ln.dirty = True

    def mark_feature_changed(self, feature: FeatureLine) -> None:
        """Regenerate ``feature``'s line when writing (call after :meth:`FeatureLine.set`)."""
        for ln in self._lines:
            if ln.feature is feature:
                ln.dirty = True
                return
        raise KeyError(feature.name)

    def add_feature(self, type_: str, args: Sequence[tuple[str, str]] = (),
                    weights: Sequence[float] | None = None) -> FeatureLine:
        """Append a feature line to [feature] (creating the section) and, given ``weights``, its [weight] line.

        :return: the new feature, named by ``name=`` or Moses's default ``type`` + index.
        """
        feat = FeatureLine(type_, list(args))
        explicit = feat.get("name")
        unnamed = sum(f.type == type_ and f.get("name") is None for f in self.features)
        feat.name = explicit if explicit is not None else f"{type_}{unnamed}"
        if any(f.name == feat.name for f in self.features):
            raise PhraseRescoreError(f"a feature named {feat.name!r} already exists", self.path)
        self._append_value("feature", _Line("", "feature", "", "value", feature=feat, dirty=True))
        if weights is not None:
            self.set_weights(feat.name, weights)
        return feat

    def set_section(self, section: str, values: Sequence[str]) -> None:
        """Replace the values of a plain section (e.g. ``[distortion-limit]``), creating it at the end."""
        assert section not in ("feature", "weight"), "use add_feature / set_weights"
        self._lines = [ln for ln in self._lines if not (ln.kind == "value" and ln.section == section)]
        for v in values:
            self._append_value(section, _Line("", section, v, "value", dirty=True))

    # -- checking -----------------------------------------------------------------------------------
    def check_weights_match(self) -> None:
        """Every feature with an explicit ``num-features`` has a [weight] line of exactly that length.

        Moses refuses such a file at load time ("Mismatch in number of features and number of weights");
        this finds it first and names the lines.
        """
        for ln in self._lines:
            f = ln.feature
            if f is None or f.num_features is None or not f.tuneable:
                continue
            w = self._weight_line(f.name)
            if w is None:
                raise PhraseRescoreError(f"feature {f.name} has num-features={f.num_features} but [weight] has no "
                                         f"'{f.name}= ...' line", self.path, f.line_no or None)
            if len(w.weights) != f.num_features:
                raise PhraseRescoreError(
                    f"feature {f.name} has num-features={f.num_features} but {len(w.weights)} weights "
                    f"(Moses would stop with 'Mismatch in number of features and number of weights')",
                    self.path, w.line_no)

    # -- writing ------------------------------------------------------------------------------------
    def text(self) -> str:
        """The file's text: unchanged lines byte for byte, changed ones regenerated (comments kept)."""
        out = []
        for ln in self._lines:
            if not ln.dirty:
                out.append(ln.raw)
                continue
            if ln.feature is not None:
                body = ln.feature.to_text()
            elif ln.weight_name is not None:
                body = f"{ln.weight_name}= " + " ".join(format_weight(w) for w in ln.weights)
            else:
                body = ln.content
            comment = ln.comment()
            out.append(body + (" " + comment if comment else "") + (ln.ending() or "\n"))
        return "".join(out)

    def write(self, path: str | os.PathLike) -> None:
        """Write atomically to ``path`` (temp file renamed into place).

        :raises PhraseRescoreError: when a feature line set in memory holds a value Moses could not read
            back (:func:`check_ini_path`); nothing is written then.
        """
        for ln in self._lines:
            if ln.dirty and ln.feature is not None:
                for key, value in ln.feature.args:
                    check_ini_path(value, f"{key}= of {ln.feature.name}")
        with atomic_open(path, "wb") as f:
            f.write(self.text().encode("utf-8"))

    # -- Moses's reading: the sections it applies ----------------------------------------------------------
    def _check_sections(self) -> None:
        """Refuse a section this tool does not read (:data:`READ_SECTIONS`), naming it and its line, and a
        value of a section it reads that is not one it implements."""
        for ln in self._lines:
            if ln.kind == "header":
                name = ln.content[1:ln.content.index("]")]
                if name in READ_SECTIONS or name in MOSES_ABBREVIATIONS:
                    continue
                read = ", ".join(f"[{k}]" for k in READ_SECTIONS)
                if name in MOSES_PARAMETERS:
                    raise PhraseRescoreError(
                        f"[{name}] is a Moses setting this tool does not implement, so no command here would run "
                        f"the system as Moses runs it; the sections it reads are {read}. Remove [{name}] (or run "
                        "the system with Moses alone)", self.path, ln.line_no)
                raise PhraseRescoreError(f"[{name}] is no Moses setting (Moses stops with 'Unknown parameter "
                                         f"{name}'); the sections this tool reads are {read}", self.path, ln.line_no)
        for section, check in (("distortion-limit", int), ("stack", int), ("max-phrase-length", int),
                               ("beam-threshold", float), ("verbose", int), ("threads", "threads"),
                               ("input-factors", ("0",)), ("mapping", ("0 T 0", "T 0")),
                               ("search-algorithm", ("0",))):
            lines = [ln for ln in self._lines if ln.kind == "value" and ln.section == section]
            if not lines:
                continue
            if len(lines) > 1:
                raise PhraseRescoreError(f"[{section}] has {len(lines)} values; expected one: "
                                         f"{READ_SECTIONS[section]}", self.path, lines[1].line_no)
            text = " ".join(words(lines[0].content))
            if isinstance(check, tuple):
                ok = text in check
            elif check == "threads":
                ok = text == "all" or (parse_int(text) is not None and parse_int(text) >= 1)
            else:
                ok = parse_number(text, check) is not None
            if not ok:
                raise PhraseRescoreError(f"[{section}] {text!r}: expected {READ_SECTIONS[section]}"
                                         + (", in ASCII digits as Moses reads a number" if not isinstance(check, tuple)
                                            else " (this tool does not implement the others)"),
                                         self.path, lines[0].line_no)

    def _apply_overwrites(self, weight_overwrite: str | None) -> None:
        """Apply ``[feature-overwrite]`` and ``[weight-overwrite]`` (or ``weight_overwrite``, the command line's
        ``-weight-overwrite``, in place of the section's line) as Moses does, then drop both sections."""
        for ln in [ln for ln in self._lines if ln.kind == "value" and ln.section == "feature-overwrite"]:
            self._overwrite_feature(ln.content, ln.line_no)
        lines = [(ln.content, ln.line_no) for ln in self._lines
                 if ln.kind == "value" and ln.section == "weight-overwrite"]
        if weight_overwrite is not None:       # Parameter::OverwriteParam: the switch's value replaces line 1
            lines[:1] = [(weight_overwrite, None)]
        if len(lines) > 1:
            raise PhraseRescoreError("[weight-overwrite] has more than one line; expected all its 'Name= v ...' "
                                     "groups on one line (Moses stops with 'weight-overwrite should only be on 1 "
                                     "line')", self.path, lines[1][1])
        if lines:
            self._overwrite_weights(*lines[0])
        self._drop_overwrite_sections(weight_overwrite is not None)

    def _drop_overwrite_sections(self, switch_given: bool) -> None:
        """Drop ``[weight-overwrite]`` and ``[feature-overwrite]`` (once applied), noting each in ``folded``."""
        dropped = {ln.section for ln in self._lines if ln.kind == "header"} & {"weight-overwrite", "feature-overwrite"}
        if dropped or switch_given:
            self._lines = [ln for ln in self._lines if ln.section not in ("weight-overwrite", "feature-overwrite")]
            # a line left without its line ending by the dropped section: the file's last line
            if self._lines and not self._lines[-1].raw.endswith("\n") and self._lines[-1].raw:
                self._lines[-1].raw += "\n"
        for section in sorted(dropped):
            what = "weights" if section == "weight-overwrite" else "feature arguments"
            self.folded.append(f"[{section}] applied as Moses applies it: its {what} are written into the lines "
                               f"they replace, and the section is dropped")

    def _overwrite_weights(self, text: str, line_no: int | None) -> None:
        """Set the [weight] lines a ``[weight-overwrite]`` line (``line_no``; None: the ``-weight-overwrite``
        switch) names, checked as Moses checks them."""
        where = "-weight-overwrite" if line_no is None else "[weight-overwrite]"
        names = {f.name: f for f in self.features}
        seen: set[str] = set()
        for name, values in self._weight_groups(text, where, line_no):
            f = names.get(name)
            if f is None:
                raise PhraseRescoreError(
                    f"{where}: no feature named {name!r} (have: {', '.join(names) or 'none'}); Moses stops with 'The "
                    f"following weights have no feature function. Maybe incorrectly spelt weights: {name},'",
                    self.path, line_no)
            if name in seen:
                raise PhraseRescoreError(f"{where}: {name} is given twice", self.path, line_no)
            seen.add(name)
            if not values:
                raise PhraseRescoreError(f"{where}: {name}= has no weights; expected 'Name= v ...' (Moses would give "
                                         "it its default weights)", self.path, line_no)
            new = self._overwritten_weights(name, values, where, line_no)
            size = f.num_features if f.num_features is not None else DEFAULT_NUM_FEATURES.get(f.type)
            if size is not None and len(new) != size:
                raise PhraseRescoreError(
                    f"{where}: {name} has {size} weight(s) (num-features) but {len(new)} are given (Moses stops with "
                    f"'Mismatch in number of features and number of weights for Feature Function {name} (features: "
                    f"{size} vs. weights: {len(new)})')", self.path, line_no)
            self.set_weights(name, new)
            if line_no is not None:
                self._weight_line(name).line_no = line_no    # a later error about these weights names this line

    def _weight_groups(self, text: str, where: str, line_no: int | None) -> list[tuple[str, list[str]]]:
        """A weight-overwrite line's ``Name= v ...`` groups, as ``(name, value words)``."""
        groups: list[tuple[str, list[str]]] = []
        for tok in words(text):
            if tok.endswith("=") and len(tok) > 1:
                groups.append((tok[:-1], []))
            elif "=" in tok:
                name, _, value = tok.partition("=")
                raise PhraseRescoreError(
                    f"{where}: {tok!r}: Moses takes a word ending in '=' for a feature name and any other word for a "
                    f"weight, so it reads {tok!r} as the weight 0, not as {name!r}'s weight; expected "
                    f"'{name}= {value}' (with a space)", self.path, line_no)
            elif not groups:
                raise PhraseRescoreError(f"{where}: the weight {tok!r} comes before any 'Name='; expected 'Name= v ...' "
                                         "groups (Moses would add it to the first feature's weights)", self.path, line_no)
            else:
                groups[-1][1].append(tok)
        return groups

    def _overwritten_weights(self, name: str, values: list[str], where: str, line_no: int | None) -> list[float]:
        """The weights of one group: each value parsed, ``x`` keeping the [weight] line's weight at its place."""
        old = self._weight_line(name)
        new = []
        for i, v in enumerate(values):
            if v == "x":
                if old is None or i >= len(old.weights):
                    raise PhraseRescoreError(
                        f"{where}: {name}'s weight {i + 1} is x (keep the [weight] value) but [weight] gives "
                        f"{name} {0 if old is None else len(old.weights)} weight(s) (Moses stops with 'Keeping "
                        "previous weight failed in weight-overwrite')", self.path, line_no)
                new.append(old.weights[i])
            else:
                new.append(_parse_weight_token(v, name, self.path, line_no))
        return new

    def _overwrite_feature(self, text: str, line_no: int | None) -> None:
        toks = words(text)
        if len(toks) < 2:
            raise PhraseRescoreError(f"[feature-overwrite]: expected 'FeatureName key=value ...', got {text!r} (Moses "
                                     f"stops with 'Incorrect format for feature override: {text}')", self.path, line_no)
        names = {f.name: f for f in self.features}
        f = names.get(toks[0])
        if f is None:
            raise PhraseRescoreError(f"[feature-overwrite]: no feature named {toks[0]!r} (have: "
                                     f"{', '.join(names) or 'none'}); Moses stops on it", self.path, line_no)
        allowed = OVERWRITABLE_ALL + (OVERWRITABLE_PHRASE_DICTIONARY if f.is_phrase_dictionary else ())
        for tok in toks[1:]:
            key, eq, value = tok.partition("=")
            if not key or not value or "=" in value:
                raise PhraseRescoreError(f"[feature-overwrite]: {f.name}: expected key=value, got {tok!r} (Moses stops "
                                         f"with 'Incorrect format for parameter override: {tok}')", self.path, line_no)
            if key in OVERWRITE_NOT_IMPLEMENTED:
                raise PhraseRescoreError(f"[feature-overwrite]: {f.name} {tok}: {OVERWRITE_NOT_IMPLEMENTED[key]} is not "
                                         "implemented by this tool", self.path, line_no)
            if key not in allowed:
                raise PhraseRescoreError(
                    f"[feature-overwrite]: {f.name} {tok}: Moses does not take {key}= here (it stops with "
                    f"'{f.name}: Unknown argument {tok}'); a {f.type} takes {', '.join(allowed)}",
                    self.path, line_no)
            if key == "tuneable":
                moses_bool(value, True, f"[feature-overwrite] {f.name} tuneable=", self.path, line_no)
            f.set(key, value)
            self.mark_feature_changed(f)

    def _check_weight_names(self) -> None:
        """Refuse a [weight] line naming no feature, as Moses does (only when the file has [feature] lines: a
        [weight] section on its own is a set of weights, e.g. ``rescore-nbest --weights``)."""
        names = {f.name for f in self.features}
        if not names:
            return
        for ln in self._lines:
            if ln.weight_name is not None and ln.weight_name not in names:
                raise PhraseRescoreError(
                    f"[weight] gives weights for {ln.weight_name!r}, which is no feature of [feature] (have: "
                    f"{', '.join(sorted(names))}); Moses stops with 'The following weights have no feature function. "
                    f"Maybe incorrectly spelt weights: {ln.weight_name},'", self.path, ln.line_no)

    def without_section(self, section: str) -> "MosesIni":
        """This file without ``[section]`` (its header, values and the comments under it), e.g. mert-moses.pl's
        tuned moses.ini without the ``[weight-overwrite]`` it copied, which would replace the tuned weights."""
        out = MosesIni([ln for ln in self._lines if ln.section != section], self.path)
        out.folded = list(self.folded)
        return out

    # -- internals ----------------------------------------------------------------------------------
    def _weight_line(self, name: str) -> _Line | None:
        for ln in self._lines:
            if ln.weight_name == name:
                return ln
        return None

    def _append_value(self, section: str, line: _Line) -> None:
        """Insert after the last value of ``section``; create ``[section]`` at the end when absent."""
        last = None
        header = None
        for i, ln in enumerate(self._lines):
            if ln.section == section and ln.kind in ("value", "header"):
                last = i
                if ln.kind == "header":
                    header = i
        if header is None:
            if self._lines and not self._lines[-1].raw.endswith("\n"):
                self._lines[-1].raw += "\n"
            if self._lines and self._lines[-1].kind != "blank":
                self._lines.append(_Line("\n", self._lines[-1].section, "", "blank"))
            self._lines.append(_Line(f"[{section}]\n", section, f"[{section}]", "header"))
            self._lines.append(line)
            return
        prev = self._lines[last]
        if not prev.raw.endswith("\n") and not prev.dirty:
            prev.raw += "\n"
        self._lines.insert(last + 1, line)


def _model_kind(type_: str) -> str:
    """What the file a feature of ``type_`` reads is called in messages."""
    if type_.startswith("PhraseDictionary"):
        return "phrase table"
    if type_ in ("KENLM", "SRILM", "IRSTLM", "RANDLM") or type_.startswith("LanguageModel"):
        return "language model"
    if type_ == "LexicalReordering":
        return "reordering table"
    if type_.startswith("Generation"):
        return "generation table"
    return "file (path=)"


def _parse_feature(content: str, path: str | None, line_no: int) -> FeatureLine:
    toks = words(content)
    feat = FeatureLine(toks[0], [], "", line_no)
    if "=" in toks[0]:
        raise PhraseRescoreError(f"expected a feature function type first (e.g. 'KENLM name=LM0 ...'), got {toks[0]!r}",
                                 path, line_no)
    seen: set[str] = set()
    for tok in toks[1:]:
        key, eq, value = tok.partition("=")
        if not eq or not key or not value:
            raise PhraseRescoreError(f"expected key=value after the feature type {toks[0]}, got {tok!r} "
                                     "(Moses: 'Incorrect format for feature function arg')", path, line_no)
        if key in seen:
            raise PhraseRescoreError(f"{key}= is given twice (Moses: 'Duplicate key in line')", path, line_no)
        seen.add(key)
        feat.args.append((key, value))
    n = feat.get("num-features")
    if n is not None and COUNT_TOKEN_RE.fullmatch(n) is None:
        raise PhraseRescoreError(f"expected a non-negative integer for num-features, in ASCII digits as Moses "
                                 f"reads it (e.g. num-features=4), got {n!r}", path, line_no)
    return feat


def _parse_weight_token(t: str, name: str, path: str | None, line_no: int | None) -> float:
    """One weight of feature ``name`` as Moses reads it: a decimal number that is a finite float."""
    if SCORE_TOKEN_RE.fullmatch(t) is None:
        if spells_non_finite(t):
            raise PhraseRescoreError(f"weight of {name} is not finite: {t!r}", path, line_no)
        raise PhraseRescoreError(
            f"expected a number as weight of {name}, in the form Moses reads (ASCII digits with an "
            f"optional sign, point and exponent, e.g. 0.2, -1 or 3e-05), got {t!r}", path, line_no)
    v = float(t)
    if not (math.isfinite(v) and abs(v) < FLOAT32_OVERFLOW):
        raise PhraseRescoreError(f"weight of {name} is out of range: {t!r} (Moses reads weights as "
                                 "float, up to 3.4028235e+38)", path, line_no)
    return v


def _parse_weight(content: str, path: str | None, line_no: int) -> tuple[str, list[float]]:
    toks = words(content)
    if len(toks) < 2 or not toks[0].endswith("=") or len(toks[0]) < 2:
        raise PhraseRescoreError(f"expected 'FeatureName= w1 w2 ...' in [weight], got {content!r}", path, line_no)
    return toks[0][:-1], [_parse_weight_token(t, toks[0][:-1], path, line_no) for t in toks[1:]]


def parse_moses_ini(text: str, path: str | os.PathLike | None = None, weight_overwrite: str | None = None,
                    as_moses_reads: bool = True, check_weight_names: bool = True) -> MosesIni:
    """Parse moses.ini text (current format) into a :class:`MosesIni`, as Moses reads it (see the module doc).

    :param weight_overwrite: the ``-weight-overwrite`` of a Moses command line, which replaces the file's
        ``[weight-overwrite]`` line.
    :param as_moses_reads: False: the lines as they are, overwrite sections kept and not applied, other sections
        not checked (to edit a file another program wrote, as mert-moses.pl's tuned moses.ini).
    :param check_weight_names: False: a ``[weight]`` line may name a feature the file does not have (a set of
        weights for re-ranking an n-best list, with one for a feature added after decoding).
    :raises PhraseRescoreError: for the old format (with conversion advice), a malformed feature or weight
        line, a feature/weight name given twice, a section this tool does not read, an overwrite Moses refuses;
        the message names the line.
    """
    path = None if path is None else os.fspath(path)
    lines: list[_Line] = []
    section: str | None = None
    type_counts: dict[str, int] = {}
    feature_lines: dict[str, int] = {}
    weight_lines: dict[str, int] = {}
    for line_no, raw in enumerate(_physical_lines(text), start=1):
        content = _strip_comment(raw)
        if not content:
            lines.append(_Line(raw, section, "", "blank", line_no=line_no))
            continue
        if content.startswith("["):
            end = content.find("]")
            if end < 0:
                raise PhraseRescoreError(f"expected a section header '[name]', got {content!r}", path, line_no)
            section = content[1:end]
            if section in OLD_FORMAT_SECTIONS:
                raise PhraseRescoreError(
                    f"[{section}] is the old moses.ini format, which this tool does not read; "
                    f"in the current format it is {OLD_FORMAT_SECTIONS[section]}. To convert: {CONVERSION_ADVICE}",
                    path, line_no)
            lines.append(_Line(raw, section, content, "header", line_no=line_no))
            continue
        if section is None:
            raise PhraseRescoreError(f"expected a section header '[name]' before the value {content!r}", path, line_no)
        ln = _Line(raw, section, content, "value", line_no=line_no)
        if section == "feature":
            feat = _parse_feature(content, path, line_no)
            explicit = feat.get("name")
            if explicit is None:
                # FeatureFunction::ParseLine: index = how many unnamed features of this type came before
                feat.name = f"{feat.type}{type_counts.get(feat.type, 0)}"
                type_counts[feat.type] = type_counts.get(feat.type, 0) + 1
            else:
                feat.name = explicit
            if feat.name in feature_lines:
                raise PhraseRescoreError(f"feature name {feat.name!r} is already used on line {feature_lines[feat.name]}",
                                         path, line_no)
            feature_lines[feat.name] = line_no
            ln.feature = feat
        elif section == "weight":
            name, values = _parse_weight(content, path, line_no)
            if name in weight_lines:
                raise PhraseRescoreError(f"weights for {name!r} are already given on line {weight_lines[name]}",
                                         path, line_no)
            weight_lines[name] = line_no
            ln.weight_name, ln.weights = name, values
        lines.append(ln)
    ini = MosesIni(lines, path)
    if as_moses_reads:
        ini._check_sections()
        ini._apply_overwrites(weight_overwrite)
        if check_weight_names:
            ini._check_weight_names()
    return ini


def read_moses_ini(path: str | os.PathLike, weight_overwrite: str | None = None,
                   as_moses_reads: bool = True, check_weight_names: bool = True) -> MosesIni:
    """Read and parse a moses.ini file (plain or gzip by content); see :func:`parse_moses_ini`."""
    with open_binary_read(path) as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        column = e.start - data.rfind(b"\n", 0, e.start) - 1
        raise PhraseRescoreError(f"invalid UTF-8 at byte {column} of the line ({e.reason}): expected UTF-8 text",
                                 path, data.count(b"\n", 0, e.start) + 1) from None
    return parse_moses_ini(text, path, weight_overwrite, as_moses_reads, check_weight_names)

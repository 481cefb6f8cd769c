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
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Sequence

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.fileio import atomic_open, open_binary_read
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
        (:func:`~phrase_rescore.core.fileio.check_outputs`).
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
            if f is None or f.num_features is None or f.get("tuneable") == "false":
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


def _parse_weight(content: str, path: str | None, line_no: int) -> tuple[str, list[float]]:
    toks = words(content)
    if len(toks) < 2 or not toks[0].endswith("=") or len(toks[0]) < 2:
        raise PhraseRescoreError(f"expected 'FeatureName= w1 w2 ...' in [weight], got {content!r}", path, line_no)
    values = []
    for t in toks[1:]:
        if SCORE_TOKEN_RE.fullmatch(t) is None:
            if t.lstrip("+-").lower() in ("inf", "infinity", "nan"):
                raise PhraseRescoreError(f"weight of {toks[0][:-1]} is not finite: {t!r}", path, line_no)
            raise PhraseRescoreError(
                f"expected a number as weight of {toks[0][:-1]}, in the form Moses reads (ASCII digits with an "
                f"optional sign, point and exponent, e.g. 0.2, -1 or 3e-05), got {t!r}", path, line_no)
        v = float(t)
        if not (math.isfinite(v) and abs(v) < FLOAT32_OVERFLOW):
            raise PhraseRescoreError(f"weight of {toks[0][:-1]} is out of range: {t!r} (Moses reads weights as "
                                     "float, up to 3.4028235e+38)", path, line_no)
        values.append(v)
    return toks[0][:-1], values


def parse_moses_ini(text: str, path: str | os.PathLike | None = None) -> MosesIni:
    """Parse moses.ini text (current format) into a :class:`MosesIni`.

    :raises PhraseRescoreError: for the old format (with conversion advice), a malformed feature or weight
        line, or a feature/weight name given twice; the message names the line.
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
            lines.append(_Line(raw, section, "", "blank"))
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
            lines.append(_Line(raw, section, content, "header"))
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
    return MosesIni(lines, path)


def read_moses_ini(path: str | os.PathLike) -> MosesIni:
    """Read and parse a moses.ini file (plain or gzip by content); see :func:`parse_moses_ini`."""
    with open_binary_read(path) as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        column = e.start - data.rfind(b"\n", 0, e.start) - 1
        raise PhraseRescoreError(f"invalid UTF-8 at byte {column} of the line ({e.reason}): expected UTF-8 text",
                                 path, data.count(b"\n", 0, e.start) + 1) from None
    return parse_moses_ini(text, path)

"""Read a trained Moses system from its moses.ini and the folder its training left, for ``phrase-rescore init``.

What a system is made of, and where each part is found:

- **moses.ini**: named by the user, or found in a folder: ``FOLDER/model/moses.ini`` (``train-model.perl
  --root-dir FOLDER``), ``FOLDER/train/model/moses.ini`` (the tutorial's working folder),
  ``FOLDER/moses.ini``, the latest ``FOLDER/model/moses.ini.N`` of an EMS working folder (one with
  ``steps/``), or ``FOLDER/moses.ini`` of a ``build-smt`` output (its ``manifest.json`` then gives the
  languages, casing and escaping, its ``model/`` the truecasing models and ``corpus/clean.*`` the corpus).
- **phrase table, reordering table, language model and its order**: the ini's ``path=`` and ``order=``
  (:mod:`.moses_ini`). A ``PhraseDictionaryCompact`` reads a binarized table, so its text table must be
  named (``phrase_table``) or lie where ``train-model.perl`` leaves it (``ROOT/model/phrase-table.gz``,
  EMS: ``model/phrase-table.N.gz``); a text table named for a ``PhraseDictionaryMemory`` must be the very
  file the ini reads, or it is refused.
- **the training root** (train-model.perl's ``--root-dir``): the folder whose ``corpus/`` holds the
  ``LANG.vcb`` vocabularies (``id word count``, the whole corpus's word counts) and whose ``model/``
  holds the table; found above the ini and above the phrase table, or in the ``train/`` beside the ini's
  folder (the tutorial's ``mert-work/moses.ini`` and ``binarised-model/moses.ini``).
- **languages**: given, else the two ``corpus/LANG.vcb`` of the root (the source is the one holding the
  phrase table's source words), else EMS's ``input-extension``/``output-extension`` (``steps/N/config.N``),
  else the dev and test files' suffixes (``dev.en``).
- **truecasing models**: given, else ``truecase-model.LANG`` (the tutorial, beside its corpus) or
  ``truecaser/truecase-model.N.LANG`` (EMS) in the folders where those recipes put them: the root and
  its ``corpus/``, ``truecaser/``; the root's parent and grandparent and their ``corpus/``; the LM's folder
  and its parent's ``corpus/`` (the tutorial: ``~/corpus/`` beside ``~/working/train`` and ``~/lm``).
- **the training corpus** (tokenized, cased and cleaned as train-model.perl read it): given, else
  ``training/corpus.N.LANG`` (EMS), else a pair ``NAME.clean.SRC``/``NAME.clean.TGT`` in those folders
  (the tutorial's ``clean-corpus-n.perl`` output). Where the root has train-model.perl's
  ``corpus/SRC-TGT-int-train.snt``, a candidate must have exactly its number of sentences.
- **casing** (:func:`detect_case`): a truecasing model means ``truecase``; otherwise the training text
  decides (no capital letter: ``lower``; sentences starting with a capital: ``none``; mostly not:
  ``truecase``), read from the corpus or, without it, from train-model.perl's numberized copy
  (:func:`snt_sentences`), else the target side of the phrase table (no capital: ``lower``).
- **escaping** (:func:`detect_escape`): ``tokenizer.perl`` writes ``& | < > ' " [ ]`` as ``&amp;`` ...;
  the vocabulary (or the table) shows which.

Nothing is guessed silently: every part found comes with where it was found (:class:`Found`), every
part not found is a :class:`Missing` with where it was looked for and how to give it, all of them
together, and a contradiction between what the user says and the system (a phrase table that is not
the ini's, a casing the files deny) is an error.
"""
from __future__ import annotations

import collections
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.reading import open_binary_read, read_lines
from phrase_rescore.core.words import words

from .configs import CASES
from .embedded.detruecase import DELAYED_SENTENCE_START
from .moses_ini import FeatureLine, MosesIni, read_moses_ini
from .phrase_table import num_scores, read_phrase_table

#: lines read from a text to judge its casing or escaping
SAMPLE_LINES = 20000
#: fewest sentence starts with a cased letter on which :func:`detect_case` decides between truecase and none
MIN_STARTS = 20
#: share of sentences starting with a capital at or above which text is naturally cased, at or below which
#: it is truecased (natural text: nearly all; truecased: names and the like)
NATURAL_SHARE, TRUECASED_SHARE = 0.7, 0.3

#: tokenizer.perl's escapes (``escape_special_chars``) and the characters they stand for
ESCAPES = {"&amp;": "&", "&#124;": "|", "&lt;": "<", "&gt;": ">", "&apos;": "'", "&quot;": '"', "&#91;": "[",
           "&#93;": "]"}
_ENTITY = re.compile("|".join(re.escape(e) for e in ESCAPES))
_RAW = re.compile(r"[&|<>'\"\[\]]")
_LANG_SUFFIX = re.compile(r"^[a-z]{2,3}$")
_EMS_VERSIONED = re.compile(r"^moses\.ini\.(\d+)$")
LM_TYPES = ("KENLM", "SRILM", "IRSTLM", "RANDLM")


@dataclass(frozen=True)
class Found:
    """A part of the system and how it was found (for the workflow's comment)."""

    path: Path
    where: str


@dataclass(frozen=True)
class Missing:
    """A part the tool could not find: the workflow key it fills, what it is, and where it looked / how to give it."""

    key: str
    what: str
    how: str

    def line(self) -> str:
        return f"{self.key}: {self.what}; {self.how}"


@dataclass(frozen=True)
class Decided:
    """A setting read from the system (a language, the casing, the escaping) and its evidence."""

    value: object
    why: str


@dataclass
class MosesSystem:
    """A Moses system as :func:`read_moses_system` found it.

    :ivar ini: the moses.ini (None when there is none to read: then nearly everything is missing).
    :ivar layout: ``"train-model.perl"``, ``"EMS"``, ``"build-smt"`` or ``"moses.ini"`` (no training folder
        found).
    :ivar root: the training folder, when found.
    :ivar phrase_feature: the phrase dictionary's name (``TranslationModel0``) and ``phrase_type`` its class.
    :ivar table_scores: its ``num-features``.
    :ivar lm_order: the LM's ``order=``, when the ini gives it.
    :ivar smt_model: for a system ``build-smt`` made, its ``model/`` folder (its truecasing models, which the
        workflow's tokenize applies as build-smt did); ``build`` the configuration it recorded.
    :ivar vocab: side (``"source"``, ``"target"``) -> word counts of the training corpus, when read
        (``vocab_where`` says from what).
    :ivar search_dirs: the folders searched for truecasing models and the training corpus.
    :ivar missing: everything not found, at once.
    :ivar notes: what the user should know (an assumption made, a second candidate ignored).
    """

    ini: Found | None
    layout: str = "moses.ini"
    root: Path | None = None
    phrase_table: Found | None = None
    phrase_feature: str = ""
    phrase_type: str = ""
    table_scores: int | None = None
    reordering_table: Found | None = None
    lm: Found | None = None
    lm_order: int | None = None
    source_lang: Decided | None = None
    target_lang: Decided | None = None
    truecase_src: Found | None = None
    truecase_tgt: Found | None = None
    smt_model: Found | None = None
    train_src: Found | None = None
    train_tgt: Found | None = None
    case: Decided | None = None
    escape: Decided | None = None
    vocab: dict[str, collections.Counter] = field(default_factory=dict)
    vocab_where: str = ""
    search_dirs: list[Path] = field(default_factory=list)
    build: dict | None = None
    missing: list[Missing] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------- evidence from text

def detect_case(lines: Iterable[str]) -> Decided | None:
    """How tokenized text was cased: ``lower``, ``truecase`` or ``none`` (natural casing), or None when the
    text does not tell.

    Over at least :data:`MIN_STARTS` lines with a cased letter (fewer tell nothing): no capital letter
    anywhere is ``lower``; otherwise the share of lines whose first cased word starts with a capital (the
    delayed-sentence-start tokens ``( [ " '`` skipped) decides: at least :data:`NATURAL_SHARE` is natural text, at
    most :data:`TRUECASED_SHARE` truecased text (truecase.perl writes a sentence's first word in its most
    frequent form, which for most words is lowercase).
    """
    upper = lower = starts = capital_starts = 0
    for line in lines:
        first = True
        for w in words(line):
            cased = [c for c in w if c.lower() != c.upper()]
            upper += sum(c.isupper() for c in cased)
            lower += sum(not c.isupper() for c in cased)
            if first and cased and w not in DELAYED_SENTENCE_START and w not in ESCAPES:
                starts += 1
                capital_starts += cased[0].isupper()
                first = False
    if starts < MIN_STARTS:         # too few lines with letters to tell
        return None
    if upper == 0:
        return Decided("lower", f"no capital letter in {starts} lines")
    share = capital_starts / starts
    if share >= NATURAL_SHARE:
        return Decided("none", f"{capital_starts} of {starts} sentences start with a capital letter (natural casing)")
    if share <= TRUECASED_SHARE:
        return Decided("truecase", f"only {capital_starts} of {starts} sentences start with a capital letter, "
                                   "as truecased text does")
    return None


def detect_escape(tokens: Iterable[str]) -> Decided | None:
    """Whether tokens were escaped as ``tokenizer.perl`` escapes them (``&apos;`` ...), or None when nothing
    tells (no special character either way, or both kinds)."""
    escaped = raw = 0
    seen_e, seen_r = "", ""
    for t in tokens:
        if _ENTITY.search(t):
            escaped += 1
            seen_e = seen_e or t
        elif _RAW.search(t):
            raw += 1
            seen_r = seen_r or t
    if escaped and not raw:
        return Decided(True, f"{escaped} words hold tokenizer.perl's escapes (e.g. {seen_e!r})")
    if raw and not escaped:
        return Decided(False, f"{raw} words hold & | < > ' \" [ ] unescaped (e.g. {seen_r!r})")
    return None


def _head(path: Path, n: int = SAMPLE_LINES) -> list[str]:
    out = []
    for _, text, _ in read_lines(path):
        out.append(text)
        if len(out) >= n:
            break
    return out


def _table_sample(path: Path, n: int = SAMPLE_LINES) -> tuple[list[str], list[str]]:
    """The source and target phrases of the first ``n`` lines of a text phrase table."""
    src, tgt = [], []
    for e in read_phrase_table(path, on_error="keep"):
        if e.error is None:
            src.append(e.source)
            tgt.append(e.target)
        if len(src) >= n:
            break
    return src, tgt


def case_of_text(path: Path) -> Decided | None:
    """:func:`detect_case` of the first :data:`SAMPLE_LINES` lines of a tokenized text."""
    return detect_case(_head(path))


def case_of_table(path: Path) -> Decided | None:
    """``lower`` when the first :data:`SAMPLE_LINES` target phrases of a phrase table hold no capital letter,
    else None: phrases have no sentence starts, so they cannot tell truecased from natural text."""
    d = detect_case(_table_sample(path)[1])
    return Decided("lower", f"its first target phrases hold {d.why.removeprefix('no capital letter in ')} "
                            "and no capital letter") if d is not None and d.value == "lower" else None


def escape_of_table(path: Path) -> Decided | None:
    """:func:`detect_escape` of the words of the first :data:`SAMPLE_LINES` lines of a phrase table (a table
    sorted as Moses sorts it starts with the phrases of punctuation)."""
    src, tgt = _table_sample(path)
    d = detect_escape(w for phrase in src + tgt for w in words(phrase))
    return None if d is None else Decided(d.value, f"the phrase table {path}: {d.why}")


def read_vcb(path: Path) -> collections.Counter:
    """A ``train-model.perl`` vocabulary (``id<TAB>word<TAB>count`` lines, ``UNK`` with count 0 first)."""
    counts: collections.Counter = collections.Counter()
    for line_no, text, _ in read_lines(path):
        parts = text.split("\t")
        if len(parts) != 3 or not parts[2].isdigit():
            raise PhraseRescoreError("expected 'id<TAB>word<TAB>count' (a train-model.perl .vcb file)", path, line_no)
        if int(parts[2]) > 0:
            counts[parts[1]] = int(parts[2])
    return counts


def snt_sentences(root: Path, source: str, target: str, limit: int = SAMPLE_LINES) -> list[str] | None:
    """The first ``limit`` target sentences train-model.perl numberized (``corpus/SRC-TGT-int-train.snt``:
    ``1``, the target sentence's word ids, the source's; ``corpus/TGT.vcb`` maps the ids), or None when the
    files are not there."""
    snt, vcb = root / "corpus" / f"{source}-{target}-int-train.snt", root / "corpus" / f"{target}.vcb"
    if not (snt.is_file() and vcb.is_file()):
        return None
    word = {}
    for _, text, _ in read_lines(vcb):
        parts = text.split("\t")
        if len(parts) == 3:
            word[parts[0]] = parts[1]
    out = []
    for line_no, text, _ in read_lines(snt):
        if line_no % 3 == 2:
            out.append(" ".join(word.get(i, "UNK") for i in text.split()))
            if len(out) >= limit:
                break
    return out


def count_words(path: Path) -> collections.Counter:
    """Word counts of a tokenized text (words as Moses splits them)."""
    counts: collections.Counter = collections.Counter()
    for _, text, _ in read_lines(path):
        counts.update(words(text))
    return counts


def count_lines(path: Path) -> int:
    n = 0
    with open_binary_read(path, "keep") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            n += block.count(b"\n")
    return n


# ----------------------------------------------------------------------------- finding the parts

BUILD_SMT_FORMAT = "phrase-rescore/build-smt"


def read_build_manifest(folder: Path) -> dict | None:
    """The configuration ``phrase-rescore build-smt`` recorded in ``folder/manifest.json``, or None when the
    folder is not one build-smt wrote."""
    import json

    try:
        m = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(m, dict) or m.get("format") != BUILD_SMT_FORMAT or not isinstance(m.get("config"), dict):
        return None
    return m["config"]


def find_ini(folder: Path) -> tuple[Path, str, str] | None:
    """The moses.ini of a training folder: (path, layout, how it was found), or None."""
    if read_build_manifest(folder) is not None and (folder / "moses.ini").is_file():
        return folder / "moses.ini", "build-smt", "build-smt's moses.ini"
    if (folder / "steps").is_dir():
        versions = sorted(((int(m.group(1)), p) for p in (folder / "model").glob("moses.ini.*")
                           if (m := _EMS_VERSIONED.match(p.name))), reverse=True)
        if versions:
            n, p = versions[0]
            others = ", ".join(str(v) for v, _ in versions[1:])
            return p, "EMS", (f"the EMS working folder's latest model/moses.ini.N (N = {n}"
                              + (f"; also: {others}" if others else "") + ")")
    for rel, how in (("model/moses.ini", "train-model.perl's ROOT/model/moses.ini"),
                     ("train/model/moses.ini", "the tutorial's working folder: train/model/moses.ini"),
                     ("moses.ini", "the folder's moses.ini")):
        if (folder / rel).is_file():
            return folder / rel, "train-model.perl", how
    return None


def _ems_version(ini: Path) -> str | None:
    m = _EMS_VERSIONED.match(ini.name)
    return m.group(1) if m else None


def _is_root(d: Path) -> bool:
    """A train-model.perl root: ``corpus/*.vcb`` and ``model/``."""
    return (d / "model").is_dir() and any((d / "corpus").glob("*.vcb"))


def _ini_path(feat: FeatureLine) -> Path | None:
    p = feat.get("path")
    return None if p is None else Path(p).expanduser()


def _where(ini: MosesIni, feat: FeatureLine, key: str = "path") -> str:
    return f"{ini.path} line {feat.line_no}: {feat.name} {key}="


def _exists_for_moses(p: Path, kind: str) -> bool:
    """Whether Moses finds the file of a feature at ``p`` (a compact table or reordering table adds a suffix)."""
    if p.is_file():
        return True
    if kind == "PhraseDictionaryCompact":
        return Path(f"{p}.minphr").is_file()
    if kind == "LexicalReordering":
        return Path(f"{p}.minlexr").is_file() or Path(f"{p}.gz").is_file()
    return False


def pick_phrase_dictionary(ini: MosesIni, wanted: str | None = None) -> FeatureLine:
    """The phrase dictionary to rescore: ``wanted``, else the only one, else ``TranslationModel0``."""
    pds = ini.phrase_dictionaries()
    if wanted is not None:
        f = ini.feature(wanted)
        if not f.is_phrase_dictionary:
            raise PhraseRescoreError(f"feature {wanted} is a {f.type}, not a phrase dictionary", ini.path, f.line_no)
        return f
    if not pds:
        raise PhraseRescoreError("no phrase dictionary (PhraseDictionary* line) in [feature]", ini.path)
    if len(pds) == 1:
        return pds[0]
    for f in pds:
        if f.name == "TranslationModel0":
            return f
    raise PhraseRescoreError(f"several phrase dictionaries ({', '.join(f.name for f in pds)}): "
                             "say which one with --feature", ini.path)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def _search_dirs(root: Path | None, ini: Path | None, lm: Path | None) -> list[Path]:
    """The folders the tutorial and EMS put truecasing models and the cleaned corpus in (see the module doc)."""
    out: list[Path] = []
    bases = [root] if root is not None else ([ini.parent.parent] if ini is not None else [])
    for b in bases:
        out += [b, b / "corpus", b / "truecaser", b / "training", b.parent, b.parent / "corpus",
                b.parent.parent / "corpus"]
    if lm is not None:
        out += [lm.parent, lm.parent.parent / "corpus"]
    seen, uniq = set(), []
    for d in out:
        key = os.path.abspath(d)
        if key not in seen and d.is_dir():
            seen.add(key)
            uniq.append(d)
    return uniq


def _shown(dirs: Sequence[Path]) -> str:
    return ", ".join(str(d) for d in dirs) or "no folder (none of them exists)"


def _ems_config_langs(root: Path) -> tuple[str, str] | None:
    """``input-extension`` and ``output-extension`` of the latest EMS config (``steps/N/config.N``)."""
    configs = sorted(root.glob("steps/*/config.*"), key=lambda p: p.name)
    for cfg in reversed(configs):
        vals = {}
        for _, text, _ in read_lines(cfg):
            m = re.match(r"^\s*(input|output)-extension\s*=\s*(\S+)", text)
            if m:
                vals[m.group(1)] = m.group(2)
        if "input" in vals and "output" in vals:
            return vals["input"], vals["output"]
    return None


def _lang_of(path: Path | None) -> str | None:
    if path is None:
        return None
    suffix = path.name.rsplit(".", 1)[-1].lower() if "." in path.name else ""
    return suffix if _LANG_SUFFIX.match(suffix) else None


# ----------------------------------------------------------------------------- reading a system

def read_moses_system(moses_ini: str | os.PathLike | None = None, folder: str | os.PathLike | None = None,
                      phrase_table: str | os.PathLike | None = None, source_lang: str | None = None,
                      target_lang: str | None = None, truecase_models: tuple | None = None,
                      train_corpus: tuple | None = None, feature: str | None = None,
                      lang_hints: tuple[Path | None, Path | None] = (None, None)) -> MosesSystem:
    """Find a Moses system's parts (see the module docstring).

    :param moses_ini: the system's moses.ini; or ``folder``: its training folder (both: the ini, and the
        folder to search); one of them is needed.
    :param phrase_table: the text phrase table, for a ``PhraseDictionaryCompact`` (for a
        ``PhraseDictionaryMemory`` it must be the ini's own).
    :param truecase_models: (source model, target model) to use instead of searching; either may be None.
    :param train_corpus: (source, target) tokenized training text to use instead of searching.
    :param lang_hints: (a source-language file, a target-language file), e.g. the raw dev files, whose
        suffixes name the languages when nothing else does.
    :raises PhraseRescoreError: a contradiction: a phrase table that is not the ini's, a folder or ini that
        is not one, an ini Moses could not read.
    """
    if moses_ini is None and folder is None:
        raise PhraseRescoreError("name the system: --moses-ini PATH (its moses.ini) or --folder PATH (the folder "
                                 "train-model.perl or EMS trained it in)")
    folder_p = None if folder is None else Path(folder).expanduser()
    if folder_p is not None and not folder_p.is_dir():
        raise PhraseRescoreError("--folder: expected the folder train-model.perl or EMS trained the system in", folder_p)
    sys_ = MosesSystem(ini=None)
    if moses_ini is not None:
        ini_path = Path(moses_ini).expanduser()
        if not ini_path.is_file():
            sys_.missing.append(Missing("moses_ini", "the system's moses.ini", f"{ini_path} does not exist"))
            _check_user_files(sys_, truecase_models, train_corpus)
            return sys_
        sys_.ini = Found(ini_path, "given with --moses-ini")
        if folder_p is not None:
            sys_.root = folder_p
    else:
        assert folder_p is not None
        found = find_ini(folder_p)
        if found is None:
            sys_.missing.append(Missing(
                "moses_ini", "the system's moses.ini",
                f"looked for {folder_p}/model/moses.ini (train-model.perl), {folder_p}/train/model/moses.ini, "
                f"{folder_p}/moses.ini and {folder_p}/model/moses.ini.N (EMS); give it with --moses-ini"))
            _check_user_files(sys_, truecase_models, train_corpus)
            return sys_
        ini_path, sys_.layout, how = found
        sys_.ini = Found(ini_path, f"{how} in --folder {folder_p}")
        sys_.root = folder_p
    ini = read_moses_ini(sys_.ini.path)
    _read_features(sys_, ini, phrase_table, feature)
    _find_root(sys_)
    _find_compact_text_table(sys_, ini)
    _find_languages(sys_, source_lang, target_lang, lang_hints)
    _find_truecasers(sys_, truecase_models)
    _find_corpus(sys_, train_corpus)
    _read_vocabulary(sys_)
    _decide_case(sys_)
    _decide_escape(sys_)
    return sys_


def _check_user_files(sys_: MosesSystem, truecase_models, train_corpus) -> None:
    for pair, keys in ((truecase_models, ("truecase_model_src", "truecase_model_tgt")),
                       (train_corpus, ("train_src_tok", "train_tgt_tok"))):
        for p, key in zip(pair or (None, None), keys):
            if p is not None and not Path(p).is_file():
                sys_.missing.append(Missing(key, "a file named on the command line", f"{p} does not exist"))


def _read_features(sys_: MosesSystem, ini: MosesIni, phrase_table, feature: str | None) -> None:
    """The phrase table, reordering table and LM the ini reads."""
    pd = pick_phrase_dictionary(ini, feature)
    sys_.phrase_feature, sys_.phrase_type, sys_.table_scores = pd.name, pd.type, pd.num_features
    user = None if phrase_table is None else Path(phrase_table).expanduser()
    if pd.type == "PhraseDictionaryMemory":
        _read_text_table(sys_, ini, pd, user)
    elif pd.type == "PhraseDictionaryCompact":
        if user is not None:
            if not user.is_file():
                sys_.missing.append(Missing("phrase_table", "the text phrase table", f"{user} does not exist"))
            else:
                sys_.phrase_table = Found(user, f"given with --phrase-table (the ini reads the binarized "
                                                f"{_ini_path(pd)}.minphr made from it)")
    else:
        raise PhraseRescoreError(f"{pd.name} is a {pd.type}: the workflow rescores a text phrase table "
                                 "(PhraseDictionaryMemory, or PhraseDictionaryCompact with its text table)",
                                 sys_.ini.path if sys_.ini else None, pd.line_no)
    if sys_.phrase_table is not None:
        _check_scores(sys_, ini, pd)
    for f in ini.features:
        p = _ini_path(f)
        if p is None:
            continue
        if f.type == "LexicalReordering":
            if _exists_for_moses(p, f.type):
                sys_.reordering_table = Found(p, _where(ini, f))
            else:
                sys_.missing.append(Missing("reordering table", f"{f.name}'s table, which Moses loads",
                                            f"{p} (named by {_where(ini, f)}) does not exist"))
        elif f.type in LM_TYPES:
            _read_lm(sys_, ini, f, p)


def _read_text_table(sys_: MosesSystem, ini: MosesIni, pd: FeatureLine, user: Path | None) -> None:
    """The text table a PhraseDictionaryMemory reads; ``user``, the ``--phrase-table``, must be that file."""
    pd_path = _ini_path(pd)
    if user is not None and pd_path is not None and not _same_file(user, pd_path):
        raise PhraseRescoreError(
            f"--phrase-table {user} is not the table the moses.ini reads ({pd.name} path={pd_path}, line "
            f"{pd.line_no}): the workflow rescores the ini's own table, so that tuning and decoding use "
            "the table the model was trained on; leave --phrase-table out, or point the ini at the table",
            sys_.ini.path if sys_.ini else None)
    if pd_path is None:
        sys_.missing.append(Missing("phrase_table", f"{pd.name}'s text table", "the ini gives no path="))
    elif not pd_path.is_file():
        sys_.missing.append(Missing("phrase_table", f"{pd.name}'s text table",
                                    f"{pd_path} (named by {_where(ini, pd)}) does not exist"))
    else:
        sys_.phrase_table = Found(pd_path, _where(ini, pd))


def _read_lm(sys_: MosesSystem, ini: MosesIni, f: FeatureLine, p: Path) -> None:
    """The first language model feature ``f`` (reading ``p``) and its order; a second one is noted."""
    if sys_.lm is not None:
        sys_.notes.append(f"a second language model {f.name} ({p}) is read through the moses.ini only")
        return
    if p.is_file():
        sys_.lm = Found(p, _where(ini, f))
    else:
        sys_.missing.append(Missing("lm", f"{f.name}'s language model, which Moses loads",
                                    f"{p} (named by {_where(ini, f)}) does not exist"))
    order = f.get("order")
    sys_.lm_order = int(order) if order is not None and order.isdigit() else None


def _check_scores(sys_: MosesSystem, ini: MosesIni, pd: FeatureLine) -> None:
    """Refuse a text table whose score count is not the phrase dictionary's ``num-features``."""
    n = num_scores(sys_.phrase_table.path)
    if pd.num_features is not None and n != pd.num_features:
        raise PhraseRescoreError(
            f"the phrase table has {n} scores per line but {pd.name} declares num-features={pd.num_features} "
            f"({_where(ini, pd)}): not the table this system was built with", sys_.phrase_table.path, 1)


def _find_compact_text_table(sys_: MosesSystem, ini: MosesIni) -> None:
    """A PhraseDictionaryCompact's text table where train-model.perl (or EMS) wrote it, unless it was given."""
    if sys_.phrase_type != "PhraseDictionaryCompact" or sys_.phrase_table is not None:
        return
    if any(m.key == "phrase_table" for m in sys_.missing):
        return
    pd = ini.feature(sys_.phrase_feature)
    version = _ems_version(sys_.ini.path)
    names = [f"phrase-table.{version}.gz"] if version else []
    names += ["phrase-table.gz", "phrase-table"]
    looked = [] if sys_.root is None else [sys_.root / "model" / n for n in names]
    for p in looked:
        if p.is_file():
            sys_.phrase_table = Found(p, f"{pd.name} is a PhraseDictionaryCompact (it reads {_ini_path(pd)}.minphr); "
                                         f"its text table where {sys_.layout} wrote it")
            _check_scores(sys_, ini, pd)
            return
    sys_.missing.append(Missing(
        "phrase_table", f"the text phrase table of {pd.name}, a PhraseDictionaryCompact (the binarized table "
                        f"{_ini_path(pd)}.minphr cannot be read back into text)",
        ("looked for " + ", ".join(str(p) for p in looked) + "; " if looked else "")
        + "give it with --phrase-table"))


def _find_root(sys_: MosesSystem) -> None:
    """The training folder: given, or above the ini or the phrase table (``ROOT/model/...``)."""
    for d in ([sys_.root] if sys_.root is not None else []) + [sys_.ini.path.parent]:
        build = read_build_manifest(d)
        if build is not None:
            sys_.root, sys_.layout, sys_.build = d, "build-smt", build
            return
    if sys_.root is not None:
        if (sys_.root / "steps").is_dir():
            sys_.layout = "EMS"
        elif _is_root(sys_.root):
            sys_.layout = "train-model.perl"
        elif (sys_.root / "train").is_dir() and _is_root(sys_.root / "train"):
            sys_.root, sys_.layout = sys_.root / "train", "train-model.perl"
        return
    above = [sys_.ini.path.parent.parent]
    if sys_.phrase_table is not None:
        above.append(sys_.phrase_table.path.parent.parent)
    # the tutorial's working folder holds train/ beside mert-work/ and binarised-model/
    candidates = [c for d in above for c in (d, d / "train")]
    for d in candidates:
        if (d / "steps").is_dir() and (d / "model").is_dir():
            sys_.root, sys_.layout = d, "EMS"
            return
        if _is_root(d):
            sys_.root, sys_.layout = d, "train-model.perl"
            return


def _vcbs(sys_: MosesSystem) -> dict[str, Path]:
    if sys_.root is None or sys_.layout != "train-model.perl":
        return {}
    return {p.name[:-4]: p for p in sorted((sys_.root / "corpus").glob("*.vcb"))}


def _find_languages(sys_: MosesSystem, source_lang, target_lang, hints) -> None:
    """The source and target languages: given, else found in the training folder or the dev files' names."""
    if source_lang:
        sys_.source_lang = Decided(source_lang, "given with --source-lang")
    if target_lang:
        sys_.target_lang = Decided(target_lang, "given with --target-lang")
    if sys_.source_lang and sys_.target_lang:
        return
    langs, why = _detected_languages(sys_, hints)
    for side, attr, opt, i in (("source", "source_lang", "--source-lang", 0), ("target", "target_lang",
                                                                                "--target-lang", 1)):
        if getattr(sys_, attr) is not None:
            given = getattr(sys_, attr).value
            if langs is not None and langs[i] != given:
                sys_.notes.append(f"{opt} {given} differs from {langs[i]} ({why}); {given} is used")
            continue
        if langs is not None:
            setattr(sys_, attr, Decided(langs[i], why))
        else:
            sys_.missing.append(Missing(attr, f"the {side} language (the tokenizer's rules and truecasing model "
                                              "depend on it)", f"not found in the training folder nor the dev "
                                                               f"files' names; give it with {opt}"))


def _detected_languages(sys_: MosesSystem, hints) -> tuple[tuple[str, str] | None, str]:
    """``((source, target) or None, where they were found)``: build-smt's manifest, train-model.perl's
    vocabularies, the EMS config, else the suffixes of the dev files (``hints``)."""
    langs: tuple[str, str] | None = None
    why = ""
    vcbs = _vcbs(sys_)
    if sys_.build is not None:
        langs, why = (sys_.build["source_lang"], sys_.build["target_lang"]), "build-smt's manifest.json"
    elif len(vcbs) == 2:
        langs, why = _languages_of_vcbs(sys_, vcbs)
    elif sys_.layout == "EMS" and sys_.root is not None:
        ems = _ems_config_langs(sys_.root)
        if ems:
            langs, why = ems, "input-extension and output-extension of the EMS config (steps/N/config.N)"
    if langs is None and _lang_of(hints[0]) and _lang_of(hints[1]) and _lang_of(hints[0]) != _lang_of(hints[1]):
        langs, why = (_lang_of(hints[0]), _lang_of(hints[1])), "the suffixes of the dev source and reference files"
    return langs, why


def _languages_of_vcbs(sys_: MosesSystem, vcbs: dict[str, Path]) -> tuple[tuple[str, str] | None, str]:
    """The two ``corpus/LANG.vcb`` of train-model.perl ordered by which holds the phrase table's source
    words (``(None, "")`` when both or neither do)."""
    a, b = list(vcbs)
    if sys_.phrase_table is None:
        return None, ""
    src_words = {w for phrase in _table_sample(sys_.phrase_table.path, 2000)[0] for w in words(phrase)}
    in_a = src_words <= set(read_vcb(vcbs[a]))
    in_b = src_words <= set(read_vcb(vcbs[b]))
    if in_a == in_b:
        return None, ""
    langs = (a, b) if in_a else (b, a)
    return langs, (f"{sys_.root}/corpus/{langs[0]}.vcb holds the phrase table's source words, "
                   f"{langs[1]}.vcb is the other side")


def _model_candidates(d: Path, lang: str, version: str | None) -> list[Path]:
    names = [f"truecase-model.{lang}"]
    names += [f"truecase-model.{version}.{lang}"] if version else []
    out = [d / n for n in names if (d / n).is_file()]
    if not out:   # EMS without a known version: the latest truecase-model.N.LANG
        versioned = sorted(d.glob(f"truecase-model.*.{lang}"), key=lambda p: p.name)
        out = versioned[-1:]
    return out


def _find_truecasers(sys_: MosesSystem, given) -> None:
    lm = sys_.lm.path if sys_.lm else None
    dirs = _search_dirs(sys_.root, sys_.ini.path, lm)
    if sys_.build is not None and given in (None, (None, None)):
        sys_.search_dirs = [sys_.root]
        if sys_.build.get("case") == "truecase":
            model = sys_.root / "model"
            if (model / "truecase-model.src").is_file() and (model / "truecase-model.tgt").is_file():
                sys_.smt_model = Found(model, "build-smt's model folder (its truecase-model.src/.tgt, applied as "
                                              "build-smt applied them)")
            else:
                sys_.missing.append(Missing("smt_model", "build-smt's truecasing models",
                                            f"{model}/truecase-model.src/.tgt do not exist"))
        return
    version = _ems_version(sys_.ini.path)
    for i, (attr, key, lang, opt) in enumerate((("truecase_src", "truecase_model_src", sys_.source_lang, "--truecase-model-src"),
                                                ("truecase_tgt", "truecase_model_tgt", sys_.target_lang,
                                                 "--truecase-model-tgt"))):
        path = (given or (None, None))[i]
        if path is not None:
            _take_given(sys_, attr, key, "the truecasing model", path, opt)
            continue
        if lang is None:
            continue
        for d in dirs:
            hits = _model_candidates(d, lang.value, version)
            if hits:
                setattr(sys_, attr, Found(hits[0], f"train-truecaser.perl's model for {lang.value}, in {d}"))
                break
    if (sys_.truecase_src is None) != (sys_.truecase_tgt is None):
        have, lack = (("source", "target") if sys_.truecase_src else ("target", "source"))
        key = "truecase_model_tgt" if lack == "target" else "truecase_model_src"
        sys_.missing.append(Missing(key, f"the {lack} side's truecasing model (the {have} side's was found)",
                                    f"looked in {_shown(dirs)}; give it with --{key.replace('_', '-')}"))
    sys_.search_dirs = dirs


def _take_given(sys_: MosesSystem, attr: str, key: str, what: str, path, option: str) -> None:
    """A file the user named with ``option``: found, or missing (it does not exist), said either way."""
    p = Path(path).expanduser()
    if p.is_file():
        setattr(sys_, attr, Found(p, f"given with {option}"))
    else:
        sys_.missing.append(Missing(key, what, f"{p} (given with {option}) does not exist"))


def _snt_sentences(sys_: MosesSystem) -> int | None:
    """Sentence pairs train-model.perl numberized (``corpus/SRC-TGT-int-train.snt``: three lines a pair)."""
    if sys_.root is None or sys_.source_lang is None or sys_.target_lang is None:
        return None
    snt = sys_.root / "corpus" / f"{sys_.source_lang.value}-{sys_.target_lang.value}-int-train.snt"
    return count_lines(snt) // 3 if snt.is_file() else None


def _find_corpus(sys_: MosesSystem, given) -> None:
    src_l, tgt_l = sys_.source_lang, sys_.target_lang
    for p, attr, key, opt in zip(given or (None, None), ("train_src", "train_tgt"),
                                 ("train_src_tok", "train_tgt_tok"), ("--train-src", "--train-tgt")):
        if p is not None:
            _take_given(sys_, attr, key, "the training corpus", p, opt)
    what = ("the target side of the training corpus (tokenized, cased and cleaned as train-model.perl read it): "
            "the CSLM's text")
    if src_l is None or tgt_l is None:
        if sys_.train_tgt is None:
            sys_.missing.append(Missing("train_tgt_tok", what, "the languages are unknown; give it with --train-tgt"))
        return
    if sys_.train_src is None or sys_.train_tgt is None:
        checked = _verified_corpora(sys_, _corpus_candidates(sys_, src_l.value, tgt_l.value))
        if checked:
            s, t, how = checked[0]
            if len(checked) > 1:
                sys_.notes.append("several training corpora fit; the first is used, the others: "
                                  + ", ".join(str(c[0]) for c in checked[1:]))
            sys_.train_src = sys_.train_src or Found(s, how)
            sys_.train_tgt = sys_.train_tgt or Found(t, how)
    if sys_.train_tgt is None:
        sys_.missing.append(Missing(
            "train_tgt_tok", what, f"looked for NAME.clean.{tgt_l.value} beside NAME.clean.{src_l.value} (the "
            f"tutorial) and training/corpus.N.{tgt_l.value} (EMS) in {_shown(sys_.search_dirs)}; give it with "
            "--train-tgt"))


def _corpus_candidates(sys_: MosesSystem, src: str, tgt: str) -> list[tuple[Path, Path, str]]:
    """Training corpora where build-smt, EMS and the tutorial leave them: (source, target, how found)."""
    if sys_.build is not None:
        return [(sys_.root / "corpus" / "clean.src", sys_.root / "corpus" / "clean.tgt",
                 "build-smt's tokenized, cleaned, cased training text")]
    pairs: list[tuple[Path, Path, str]] = []
    if sys_.layout == "EMS" and sys_.root is not None:
        version = _ems_version(sys_.ini.path)
        seen = sorted({p.name.split(".")[1] for p in (sys_.root / "training").glob("corpus.*.*")}, reverse=True)
        for v in ([version] if version else []) + seen:
            s, t = (sys_.root / "training" / f"corpus.{v}.{lang}" for lang in (src, tgt))
            if s.is_file() and t.is_file():
                pairs.append((s, t, f"the EMS training corpus training/corpus.{v}.*"))
                break
    for d in sys_.search_dirs:
        for s in sorted(d.glob(f"*.clean.{src}")):
            t = s.with_name(s.name[: -len(src)] + tgt)
            if t.is_file():
                pairs.append((s, t, f"clean-corpus-n.perl's output in {d}"))
    return [(s, t, how) for s, t, how in pairs if s.is_file() and t.is_file()]


def _verified_corpora(sys_: MosesSystem, pairs) -> list[tuple[Path, Path, str]]:
    """The candidates with as many lines as train-model.perl read sentence pairs (all, where that is unknown)."""
    expected = _snt_sentences(sys_)
    if expected is None:
        return list(pairs)
    out = []
    for s, t, how in pairs:
        n = count_lines(s)
        if n != expected:
            sys_.notes.append(f"{s} has {n} lines, not the {expected} sentence pairs train-model.perl read "
                              f"({sys_.root}/corpus/*-int-train.snt): not its training corpus")
        else:
            out.append((s, t, f"{how}; its {n} lines are the sentence pairs train-model.perl read"))
    return out


def _read_vocabulary(sys_: MosesSystem) -> None:
    vcbs = _vcbs(sys_)
    if sys_.source_lang and sys_.target_lang and {sys_.source_lang.value, sys_.target_lang.value} <= set(vcbs):
        sys_.vocab = {"source": read_vcb(vcbs[sys_.source_lang.value]),
                      "target": read_vcb(vcbs[sys_.target_lang.value])}
        sys_.vocab_where = f"train-model.perl's vocabularies {sys_.root}/corpus/*.vcb"
    elif sys_.train_src is not None and sys_.train_tgt is not None:
        sys_.vocab = {"source": count_words(sys_.train_src.path), "target": count_words(sys_.train_tgt.path)}
        sys_.vocab_where = "the training corpus"


def _decide_case(sys_: MosesSystem) -> None:
    if sys_.build is not None and sys_.build.get("case") in CASES:
        sys_.case = Decided(sys_.build["case"], "build-smt's manifest.json")
        return
    if sys_.truecase_src is not None or sys_.truecase_tgt is not None:
        model = sys_.truecase_tgt or sys_.truecase_src
        sys_.case = Decided("truecase", f"a truecasing model: {model.path}")
        if sys_.train_tgt is not None:
            text = detect_case(_head(sys_.train_tgt.path))
            if text is not None and text.value != "truecase":
                sys_.notes.append(f"the truecasing model says truecase, but the training text {sys_.train_tgt.path} "
                                  f"looks {text.value}-cased ({text.why})")
        return
    found = []
    if sys_.train_tgt is not None:
        found.append((f"the training text {sys_.train_tgt.path}", case_of_text(sys_.train_tgt.path)))
    elif sys_.layout == "train-model.perl" and sys_.source_lang and sys_.target_lang:
        numbered = snt_sentences(sys_.root, sys_.source_lang.value, sys_.target_lang.value)
        if numbered:
            found.append((f"the training text train-model.perl numberized ({sys_.root}/corpus/"
                          f"{sys_.source_lang.value}-{sys_.target_lang.value}-int-train.snt)", detect_case(numbered)))
    if sys_.phrase_table is not None:
        found.append((f"the phrase table {sys_.phrase_table.path}", case_of_table(sys_.phrase_table.path)))
    for what, d in found:
        if d is None:
            continue
        if d.value == "truecase":
            dirs = sys_.search_dirs
            sys_.missing.append(Missing(
                "truecase_model_src", f"the truecasing models: {what} is truecased ({d.why})",
                f"looked for truecase-model.LANG in {_shown(dirs)}; give them with --truecase-model-src and "
                "--truecase-model-tgt"))
        sys_.case = Decided(d.value, f"{what}: {d.why}")
        return
    sys_.missing.append(Missing("case", "how the system's text was cased (lower, truecase or none)",
                                "no truecasing model was found and the text does not tell; give the truecasing "
                                "models, the training corpus (--train-src/--train-tgt), or --case"))


def _decide_escape(sys_: MosesSystem) -> None:
    if sys_.build is not None and isinstance(sys_.build.get("escape"), bool):
        sys_.escape = Decided(sys_.build["escape"], "build-smt's manifest.json")
        return
    d = None
    if sys_.vocab:
        d = detect_escape(list(sys_.vocab["source"]) + list(sys_.vocab["target"]))
        d = None if d is None else Decided(d.value, f"{sys_.vocab_where}: {d.why}")
    if d is None and sys_.phrase_table is not None:
        d = escape_of_table(sys_.phrase_table.path)
    if d is not None:
        sys_.escape = d
    else:
        sys_.escape = Decided(True, "nothing in the system shows either; tokenizer.perl's default (escaping)")


def check_case(stated: str, system: Decided, what: str) -> None:
    """Refuse a casing ``stated`` for the system that its files contradict.

    :raises PhraseRescoreError: naming both and what each means for BLEU.
    """
    assert stated in CASES, stated
    if stated != system.value:
        raise PhraseRescoreError(case_contradiction(stated, system, what))


def case_contradiction(stated: str, system: Decided, what: str) -> str:
    """The message for a casing that contradicts the system's (see :func:`check_case`)."""
    effect = {
        "none": "the output would be scored as it is, so every sentence-initial word the system writes in its "
                "truecased form counts as a miss against the capitalised reference" if system.value == "truecase"
                else "the lowercased output would be scored against cased references",
        "lower": "the references would be lowercased and BLEU made case-insensitive for a cased system",
        "truecase": "the output would be detruecased and dev/test truecased, which this system never was",
    }[stated]
    return (f"{what} = {stated!r} contradicts the system, which is {system.value}-cased ({system.why}): {effect}, "
            f"and every BLEU would be wrong; set {system.value!r}, or leave it out and the system's casing is used")

"""``phrase-rescore init``: a ready workflow for rescoring a trained Moses system, written from the system itself.

The user names the system (its moses.ini, or the folder train-model.perl or EMS trained it in) and raw
dev and test text; :func:`~phrase_rescore.moses_integration.moses_system.read_moses_system` finds the
rest, and :func:`init_workflow` writes a workflow in the shape of ``workflows/rescore-existing.toml``
with the ``tokenize`` stage in front (dev and test are tokenized, truecased and escaped as the system's
training text was) and every value taken from the system said where it came from:

- ``[inputs]``: every path found, each with a comment saying where it was found; every input not found
  as a commented line saying what it is, where it was looked for and how to give it;
- ``[tokenize]`` and ``[evaluate]``: the languages, the casing (``truecase`` with a truecasing model, so
  the Table detruecases the output and scores cased BLEU) and the escaping;
- ``[prepare] vocab_size``: below the vocabulary of both sides, so that the unknown-word column varies
  (the paper's 15,000 on a system with fewer words would put every word in the shortlists, and the
  column would be exp(0) = 1 on every line);
- ``[common] backend``: ``moses`` when a Moses installation is found, else ``embedded`` (when the embedded
  decoder implements the system's features).

Everything missing is listed at once, in the file and in :attr:`InitResult.missing`. The file is written
even then, so that the user fills in what is missing; it is refused only when it would overwrite a file
init did not write, or one written by init and edited since (the first line carries the hash of the
rest), or one of the system's files.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from phrase_rescore.core.atomic_write import atomic_open
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.output_paths import check_outputs
from phrase_rescore.moses_integration.configs import CASES
from phrase_rescore.moses_integration.moses_system import (
    Decided,
    Missing,
    MosesSystem,
    case_contradiction,
    count_lines,
    read_moses_system,
)

#: the paper's shortlist (section 4.1), used when both vocabularies are larger
PAPER_SHORTLIST = 15000
HEADER = "# written by phrase-rescore init; sha256 of the lines below: "
_HEADER_RE = re.compile(r"^# written by phrase-rescore init; sha256 of the lines below: ([0-9a-f]{64})\n")
STAGES = ["tokenize", "prepare", "train", "score", "train-cslm", "moses-ini", "tune", "evaluate"]
BACKENDS = ("auto", "moses", "embedded")


@dataclass
class InitConfig:
    """What ``init`` is told (paths as given; see :func:`init_workflow`).

    :ivar out: the workflow file to write.
    :ivar moses_ini: the system's moses.ini; or ``folder``: the folder it was trained in (one of them).
    :ivar dev_src, dev_ref, test_src, test_ref: raw (untokenized) dev and test text.
    :ivar phrase_table: the text phrase table, for an ini with a binarized (compact) table.
    :ivar case: the system's casing, when the user states it (checked against the system's files).
    :ivar backend: ``auto`` (``moses`` when a Moses installation is found, else ``embedded``), ``moses``
        or ``embedded``.
    """

    out: Path
    dev_src: Path
    dev_ref: Path
    test_src: Path
    test_ref: Path
    moses_ini: Path | None = None
    folder: Path | None = None
    phrase_table: Path | None = None
    source_lang: str | None = None
    target_lang: str | None = None
    truecase_model_src: Path | None = None
    truecase_model_tgt: Path | None = None
    train_src: Path | None = None
    train_tgt: Path | None = None
    case: str | None = None
    backend: str = "auto"
    moses_home: str | None = None
    feature: str | None = None
    threads: int = 4


@dataclass
class InitResult:
    """What ``init`` wrote and found.

    :ivar out: the workflow file; ``name`` its ``[workflow] name``.
    :ivar system: the system as read.
    :ivar missing: every input or setting not found (the workflow lists them too); empty when it is ready.
    :ivar settings: key -> (value, why) of each value taken from the system (``tokenize.case`` ...).
    """

    out: Path
    name: str
    system: MosesSystem
    missing: list[Missing] = field(default_factory=list)
    settings: dict[str, Decided] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        ini = os.path.abspath(self.system.ini.path) if self.system.ini else "(no moses.ini found)"
        lines = [f"wrote {self.out}: the {self.system.layout} system of {ini}"]
        lines += [f"  {k} = {_toml(v.value)}  ({v.why})" for k, v in self.settings.items()]
        lines += [f"note: {n}" for n in self.notes]
        if self.missing:
            lines.append(f"{len(self.missing)} missing (listed in {self.out}; fill them in, then run it):")
            lines += [f"  - {m.line()}" for m in self.missing]
        else:
            lines.append(f"next: phrase-rescore run {self.out} --workdir runs/{self.name}")
        return "\n".join(lines)


def _toml(value) -> str:
    """A TOML value: strings as basic strings (JSON's escapes are TOML's), booleans lowercase, numbers as is."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _path(p: Path) -> str:
    return os.path.abspath(p)


def choose_vocab_size(sys_: MosesSystem) -> Decided:
    """``[prepare] vocab_size`` below both vocabularies (see the module docstring)."""
    if not sys_.vocab:
        return Decided(PAPER_SHORTLIST, "the paper's shortlist; the vocabulary was not read here (prepare refuses "
                                        "a shortlist that holds every word of the table)")
    n_src, n_tgt = len(sys_.vocab["source"]), len(sys_.vocab["target"])
    if min(n_src, n_tgt) > PAPER_SHORTLIST:
        return Decided(PAPER_SHORTLIST, f"the paper's shortlist, below the {n_src:,} source and {n_tgt:,} target "
                                        f"words of {sys_.vocab_where}")
    twice = min(sum(c >= 2 for c in sys_.vocab[side].values()) for side in ("source", "target"))
    k = max(1, min(twice, n_src - 1, n_tgt - 1))
    return Decided(k, f"the paper's {PAPER_SHORTLIST:,} would hold all {n_src:,} source and {n_tgt:,} target words "
                      f"({sys_.vocab_where}) and the unknown-word column would be 1 on every line; {k:,}: the words "
                      "seen at least twice, on the side with fewer of them")


def _backend(cfg: InitConfig, sys_: MosesSystem, missing: list[Missing]) -> Decided:
    from phrase_rescore.moses_integration.moses_install import NOT_FOUND, find_moses

    try:
        install = find_moses(cfg.moses_home)
        problem = None if install is not None else "MOSES_HOME is unset and no `moses` is on PATH"
    except PhraseRescoreError as e:
        install, problem = None, e.message
    if cfg.backend == "moses" or (cfg.backend == "auto" and install is not None):
        if install is None:
            missing.append(Missing("MOSES_HOME", "a Moses installation for backend = \"moses\"",
                                   f"{problem}: {NOT_FOUND}" if "MOSES_HOME=" not in problem else problem))
            return Decided("moses", "given with --backend")
        return Decided("moses", f"the Moses installation at {install.root}"
                                + (" (given with --backend)" if cfg.backend == "moses" else ""))
    why = "given with --backend" if cfg.backend == "embedded" else f"no Moses installation was found ({problem})"
    if sys_.ini is not None:
        from phrase_rescore.moses_integration.embedded.features import load_decoder_spec

        try:
            load_decoder_spec(sys_.ini.path)
        except PhraseRescoreError as e:
            if not any(m.key in ("phrase_table", "lm", "reordering table") for m in sys_.missing):
                missing.append(Missing("MOSES_HOME", "a Moses installation: the embedded decoder cannot run this "
                                                     f"system ({e.message})", "set MOSES_HOME, or --moses-home"))
    return Decided("embedded", why + "; the project's own Moses-compatible decoder and MERT")


def _check_raw(cfg: InitConfig, missing: list[Missing]) -> None:
    for key, p, what in (("dev_src", cfg.dev_src, "--dev-src"), ("dev_ref", cfg.dev_ref, "--dev-ref"),
                         ("test_src", cfg.test_src, "--test-src"), ("test_ref", cfg.test_ref, "--test-ref")):
        if not Path(p).is_file():
            missing.append(Missing(key, f"raw text given with {what}", f"{p} does not exist"))
    for a, b, what in ((cfg.dev_src, cfg.dev_ref, "dev"), (cfg.test_src, cfg.test_ref, "test")):
        if Path(a).is_file() and Path(b).is_file():
            na, nb = count_lines(Path(a)), count_lines(Path(b))
            if na != nb:
                missing.append(Missing(f"{what}_ref", f"a {what} reference line for every {what} source line",
                                       f"{a} has {na} lines but {b} has {nb}"))


def init_workflow(cfg: InitConfig) -> InitResult:
    """Read the system (:func:`read_moses_system`) and write the workflow ``cfg.out`` (see the module docstring).

    :raises PhraseRescoreError: ``--out`` would overwrite a file init did not write (or one edited since),
        or a file of the system; the system contradicts what the user says (a phrase table that is not the
        ini's, a casing its files deny); the name of ``cfg.out`` is not a plain workflow name.
    """
    out = Path(cfg.out)
    if cfg.backend not in BACKENDS:
        raise PhraseRescoreError(f"--backend {cfg.backend}: expected one of {', '.join(BACKENDS)}")
    if cfg.case is not None and cfg.case not in CASES:
        raise PhraseRescoreError(f"--case {cfg.case}: expected one of {', '.join(CASES)}")
    name = out.name[:-5] if out.name.endswith(".toml") else out.name
    if not name or "/" in name or name in (".", ".."):
        raise PhraseRescoreError("--out: expected a file name such as mine.toml (its stem names the workflow)", out)
    sys_ = read_moses_system(cfg.moses_ini, cfg.folder, cfg.phrase_table, cfg.source_lang, cfg.target_lang,
                             (cfg.truecase_model_src, cfg.truecase_model_tgt), (cfg.train_src, cfg.train_tgt),
                             cfg.feature, lang_hints=(Path(cfg.dev_src), Path(cfg.dev_ref)))
    _check_writable(out, sys_, cfg)
    res = InitResult(out, name, sys_, missing=list(sys_.missing), notes=list(sys_.notes))
    if cfg.case is not None:
        if sys_.case is not None and sys_.case.value != cfg.case:
            raise PhraseRescoreError(case_contradiction(cfg.case, sys_.case, "--case"))
        sys_.case = Decided(cfg.case, "given with --case")
        res.missing = [m for m in res.missing if m.key != "case"]
    _check_raw(cfg, res.missing)
    backend = _backend(cfg, sys_, res.missing)
    vocab = choose_vocab_size(sys_)
    for key, d in (("common.backend", backend), ("tokenize.source_lang", sys_.source_lang),
                   ("tokenize.target_lang", sys_.target_lang), ("tokenize.case", sys_.case),
                   ("tokenize.escape", sys_.escape), ("prepare.vocab_size", vocab)):
        if d is not None:
            res.settings[key] = d
    text = render(cfg, res)
    _validate(text, out)
    body = text.encode("utf-8")
    with atomic_open(out, "wb") as f:
        f.write((HEADER + hashlib.sha256(body).hexdigest() + "\n").encode("utf-8") + body)
    return res


def _check_writable(out: Path, sys_: MosesSystem, cfg: InitConfig) -> None:
    """Refuse to overwrite a file init did not write (or one edited since), or any file of the system."""
    inputs = {"--dev-src": cfg.dev_src, "--dev-ref": cfg.dev_ref, "--test-src": cfg.test_src,
              "--test-ref": cfg.test_ref}
    for label, f in (("the moses.ini", sys_.ini), ("the phrase table", sys_.phrase_table), ("the LM", sys_.lm),
                     ("the reordering table", sys_.reordering_table), ("a truecasing model", sys_.truecase_src),
                     ("a truecasing model ", sys_.truecase_tgt), ("the training corpus", sys_.train_src),
                     ("the training corpus ", sys_.train_tgt)):
        if f is not None:
            inputs[label] = f.path
    check_outputs({k: os.fspath(v) for k, v in inputs.items()}, {"--out": os.fspath(out)})
    if out.is_symlink() or (out.exists() and not out.is_file()):
        raise PhraseRescoreError("--out names a link or a folder; expected a new workflow file", out)
    if out.exists():
        data = out.read_bytes()
        head, _, body = data.partition(b"\n")
        m = _HEADER_RE.match(head.decode("utf-8", "replace") + "\n")
        if m is None or hashlib.sha256(body).hexdigest() != m.group(1):
            raise PhraseRescoreError(
                "exists and is not a workflow init wrote" + (" (it was edited since)" if m else "")
                + ": init never overwrites a file it did not write; choose another --out, or move this file", out)


def _validate(text: str, out: Path) -> None:
    """The workflow must load (its sections, keys and values), so that ``run`` reads what init wrote."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    from .stages import default_registry
    from .workflow import load_workflow

    load_workflow(out, default_registry(), data=tomllib.loads(text))


# ----------------------------------------------------------------------------- rendering

def _comment(text: str, width: int = 110) -> list[str]:
    """``text`` as comment lines of at most about ``width`` characters."""
    out, line = [], "#"
    for w in text.split():
        if len(line) + 1 + len(w) > width and line != "#":
            out.append(line)
            line = "#  "
        line += " " + w
    out.append(line)
    return out


def _line(key: str, value, why: str, width: int = 42) -> str:
    left = f"{key} = {_toml(value)}"
    return f"{left:<{width}} # {why}"


def render(cfg: InitConfig, res: InitResult) -> str:
    """The workflow text (without init's first line)."""
    out = _render_header(cfg, res)
    out += ["", "[workflow]", f"name = {_toml(res.name)}", "stages = [" + ", ".join(_toml(s) for s in STAGES) + "]"]
    out += ["", "[inputs]"] + _render_inputs(cfg, res)
    out += [""] + _render_settings(cfg, res)
    return "\n".join(out) + "\n"


def _render_header(cfg: InitConfig, res: InitResult) -> list[str]:
    """The comment on top: the system, the command, the stages, what is missing, the files the ini names."""
    sys_ = res.system
    ini = _path(sys_.ini.path) if sys_.ini else "(no moses.ini found)"
    out = _comment(f"Rescore the Moses system of {ini} ({sys_.layout}"
                   f"{', trained in ' + _path(sys_.root) if sys_.root else ''}): phrase-rescore init "
                   f"read it on {time.strftime('%Y-%m-%d')}. Every path below says where it was found.")
    out += ["#", f"#   phrase-rescore run {cfg.out} --workdir runs/{res.name}", "#"]
    out += _comment("Stages: tokenize (dev and test, as the training text was), prepare, train (the RNN "
                    "Encoder-Decoder), score (its log p(f|e) column and the unknown-word column), train-cslm, "
                    "moses-ini, tune (baseline, +RNN, +RNN+WP), evaluate (the Table). `run` checks every input, "
                    "program and setting before the first stage.")
    if res.missing:
        out.append("#")
        out += _comment(f"MISSING ({len(res.missing)}): fill these in (the lines marked MISSING below), or run "
                        "init again with the options named:")
        for m in res.missing:
            out += _comment(f"  - {m.line()}")
    out += ["#", "# The decoder reads these through moses.ini:"]
    for label, f in (("phrase table", sys_.phrase_table), ("reordering table", sys_.reordering_table),
                     ("language model", sys_.lm)):
        if f is not None:
            order = f", order {sys_.lm_order}" if label == "language model" and sys_.lm_order else ""
            out.append(f"#   {label:<17} {f.path}{order}  ({f.where})")
    return out


def _render_inputs(cfg: InitConfig, res: InitResult) -> list[str]:
    """``[inputs]``: each path found with where, each one missing as a commented MISSING line."""
    sys_ = res.system
    missing = {m.key: m for m in res.missing}
    truecasing_missing = bool({"truecase_model_src", "truecase_model_tgt"} & set(missing))
    out = []
    for key, f, role in (
            ("moses_ini", sys_.ini, "the system's moses.ini"),
            ("phrase_table", sys_.phrase_table, f"the text table of {sys_.phrase_feature or 'the phrase dictionary'}"),
            ("lm", sys_.lm, "hashed (a changed LM retunes); its perplexity is reported beside the CSLM's"),
            ("truecase_model_src", sys_.truecase_src, "truecases the dev and test sources"),
            ("truecase_model_tgt", sys_.truecase_tgt, "truecases the dev references (for MERT)"),
            ("smt_model", sys_.smt_model, "tokenize truecases dev and test with it"),
            ("train_src_tok", sys_.train_src, "with train_tgt_tok: the shortlists are counted from the corpus"),
            ("train_tgt_tok", sys_.train_tgt, "the CSLM's training text")):
        if f is not None:
            out.append(_line(key, _path(f.path), f"{f.where}; {role}"))
        elif key in missing or (key.startswith("truecase_model") and truecasing_missing):
            m = missing.get(key)
            out.append(f"# {key} = \"\"   # MISSING: {role}" + (f"; {m.how}" if m else ""))
    for key, p, role in (("dev_src", cfg.dev_src, "raw dev source (tokenize writes dev.tok.src)"),
                         ("dev_ref", cfg.dev_ref, "raw dev reference: tokenized for MERT, raw for the dev BLEU"),
                         ("test_src", cfg.test_src, "raw test source (tokenize writes test.tok.src)"),
                         ("test_ref", cfg.test_ref, "raw test reference (BLEU on detokenized output)")):
        given = f"given with --{key.replace('_', '-')}"
        if Path(p).is_file():
            out.append(_line(key, _path(Path(p)), f"{given}; {role}"))
        else:
            out.append(f"# {key} = {_toml(_path(Path(p)))}   # MISSING: {given}, but it does not exist")
    return out


def _render_settings(cfg: InitConfig, res: InitResult) -> list[str]:
    """The sections of settings: those read from the system with why, the rest as rescore-existing.toml's."""
    backend, vocab = res.settings["common.backend"], res.settings["prepare.vocab_size"]
    out = ["[common]", _line("backend", backend.value, backend.why),
           _line("moses_home", cfg.moses_home or "", "default: $MOSES_HOME, else `moses` on PATH"),
           _line("threads", cfg.threads, "decoder and tuning threads"), "",
           "[tokenize]              # dev and test are prepared as the system's training text was"]
    for key in ("source_lang", "target_lang", "case", "escape"):
        d = res.settings.get(f"tokenize.{key}")
        m = next((m for m in res.missing if m.key == key), None)
        out.append(_line(key, d.value, d.why) if d is not None
                   else f"# {key} = ?   # MISSING: " + (m.line() if m else "not found"))
    out += ["", "[prepare]", _line("vocab_size", vocab.value, vocab.why), ""]
    out += ["[train]", _line("preset", "small", "\"paper\" on a GPU: see workflows/paper.toml"),
            _line("time_budget_s", 3600.0, "stop training after an hour"), ""]
    out += ["[train-cslm]            # the target-language CSLM of the +CSLM rows (Cho et al. section 5)",
            _line("preset", "small", "\"paper\" on a GPU"), _line("time_budget_s", 1800.0, "half an hour"), ""]
    out += ["[moses-ini]", _line("rnn_weight", 0.2, "initial weights; tuning replaces them"),
            _line("wp_weight", -0.2, "(the unknown-word column)"),
            _line("feature", res.system.phrase_feature, "the phrase dictionary to rescore"), ""]
    out += ["[tune]", _line("max_iterations", 25, "MERT iterations"), _line("nbest", 100, "n-best list size"), ""]
    out.append("[evaluate]")
    case = res.settings.get("tokenize.case")
    if case is not None:
        effect = {"truecase": "the output is detruecased (detruecase.perl) and BLEU is cased",
                  "lower": "the references are lowercased too: BLEU is case-insensitive",
                  "none": "the output is scored as it is: cased BLEU"}[case.value]
        out.append(_line("case", case.value, f"the system's, as [tokenize]: {effect}"))
    else:
        out.append("# case = ?   # MISSING: the system's casing (as [tokenize])")
    lang = res.settings.get("tokenize.target_lang")
    if lang is not None:
        out.append(_line("target_lang", lang.value, "detokenizer language of the output (as [tokenize])"))
    out.append(_line("nbest_size", 100, "the +CSLM rows re-rank 100-best lists"))
    return out

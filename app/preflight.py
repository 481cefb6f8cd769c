"""The workflow checks that run before any stage (:attr:`~.workflow.Registry.checks`).

A stage that fails after hours of training for a reason that was visible before the first stage ran (no
Moses for ``backend = "moses"``, a model file the moses.ini names that is gone, a casing that contradicts
the system's) is a failure of the tool, not of the user. Each check here returns every problem it sees;
the runner reports them all together and runs nothing (:func:`~.workflow.run_workflow`).

- :func:`check_programs`: every backend and program a selected stage will run: a Moses installation for
  ``backend = "moses"`` (``tune``, ``evaluate``), Moses's ``mert``/``kbmira`` for ``rerank_tuner``,
  ``processPhraseTableMin`` for a ``PhraseDictionaryCompact``; with ``backend = "embedded"``, that the
  embedded decoder implements every feature of the moses.ini.
- :func:`check_system_files`: every file a user-given moses.ini names (phrase table, reordering table,
  LM) exists, since the decoder reads them only at ``tune``.
- :func:`check_stage_inputs`: inputs a stage needs only in some settings (the +CSLM rows, ``rare_words``,
  a truecasing tokenize).
- :func:`resolve_preprocessing`: how the system's text was prepared, from its files (truecasing models,
  the tokenized training or dev text, the phrase table; :mod:`~phrase_rescore.moses_integration.moses_system`):
  ``[tokenize]`` and ``[evaluate]`` take the system's casing (and ``[tokenize]`` its escaping) where they
  leave it unset, and a value set that contradicts it is refused. A workflow with ``build-smt`` is not
  checked here: its stages follow the build (``StageDef.follows``).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Mapping

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.moses_integration.moses_install import configured_home

from .workflow import Plan, Workflow

Say = Callable[[str], None]


def _available(p: Plan, stage: str, artifact: str, absent: Mapping[str, Path]) -> bool:
    """Whether ``stage`` gets ``artifact`` (from a stage, or from [inputs] where the file exists)."""
    src = p.inputs_of.get(stage, {}).get(artifact)
    return src is not None and not (src == "inputs" and artifact in absent)


def _user_file(wf: Workflow, artifact: str, absent: Mapping[str, Path]) -> Path | None:
    """The [inputs] path of ``artifact`` when the user gives it and it exists."""
    path = wf.inputs.get(artifact)
    return None if path is None or artifact in absent or not path.is_file() else path


# ----------------------------------------------------------------------------- programs

def check_programs(wf: Workflow, p: Plan, absent: Mapping[str, Path], say: Say) -> list[str]:
    """A Moses wherever ``backend = "moses"``; the tuner of the +CSLM rows; the binarizer of a compact table;
    the embedded decoder's support of the system's features wherever ``backend = "embedded"``."""
    wants: dict[str | None, list[str]] = {}       # moses_home -> sections that run Moses
    embedded: list[str] = []
    for s in wf.stages:
        params = wf.params[s]
        if "backend" not in params:
            continue
        section = f"[{'tune' if s.startswith('tune-') else s}]"
        bucket = wants.setdefault(configured_home(params.get("moses_home")), []) if params["backend"] == "moses" else embedded
        if section not in bucket:
            bucket.append(section)
    problems = _check_moses(wants) + _check_rerank_tuner(wf, p, absent)
    ini = _user_file(wf, "moses_ini", absent)
    if ini is not None:
        problems += _check_ini_programs(wf, ini, embedded)
    return problems


def _check_moses(wants: Mapping[str | None, list[str]]) -> list[str]:
    from phrase_rescore.moses_integration.moses_install import require_moses

    problems = []
    for home, sections in wants.items():
        try:
            require_moses(home)
        except PhraseRescoreError as e:
            problems.append(f"{', '.join(sections)} backend = \"moses\": {e.message}")
    return problems


def _check_rerank_tuner(wf: Workflow, p: Plan, absent: Mapping[str, Path]) -> list[str]:
    if "evaluate" not in wf.stages or not _available(p, "evaluate", "cslm", absent):
        return []
    tuner = wf.params["evaluate"]["rerank_tuner"]
    if tuner == "embedded":
        return []
    from phrase_rescore.moses_integration.nbest_tuning import require_tuner

    try:
        require_tuner(tuner, configured_home(wf.params["evaluate"]["moses_home"]), option="[evaluate] rerank_tuner =")
    except PhraseRescoreError as e:
        return [e.message]
    return []


def _check_ini_programs(wf: Workflow, ini: Path, embedded: list[str]) -> list[str]:
    """What the user's moses.ini needs: processPhraseTableMin for a compact table, the embedded decoder's
    support of its features."""
    from phrase_rescore.moses_integration.moses_ini import read_moses_ini
    from phrase_rescore.moses_integration.moses_install import find_moses
    from phrase_rescore.moses_integration.moses_system import pick_phrase_dictionary

    rewritten = [s for s in wf.stages if s.startswith("moses-ini-")]
    try:
        parsed = read_moses_ini(ini)
        pd = pick_phrase_dictionary(parsed, wf.params[rewritten[0]]["feature"] or None if rewritten else None)
    except PhraseRescoreError as e:
        return [str(e)]
    problems = []
    decodes = any(s.startswith(("tune-", "evaluate")) for s in wf.stages)
    if rewritten and pd.type == "PhraseDictionaryCompact" and decodes:
        params = wf.params[rewritten[0]]
        try:
            install, why = find_moses(configured_home(params["moses_home"])), "no Moses installation found (set MOSES_HOME)"
        except PhraseRescoreError as e:
            install, why = None, e.message
        if not params["binarize"]:
            problems.append(f"[moses-ini] binarize = false: {pd.name} in {ini} is a PhraseDictionaryCompact, which "
                            "reads a binarized table; the rescored tables must be binarized before tune can decode "
                            "with them")
        elif install is None or install.tool("processPhraseTableMin") is None:
            problems.append(f"{pd.name} in {ini} is a PhraseDictionaryCompact: the rescored tables must be binarized "
                            f"with Moses's processPhraseTableMin before tuning, and it was not found ({why})")
    if embedded:
        from phrase_rescore.moses_integration.embedded.features import load_decoder_spec

        try:
            load_decoder_spec(ini, parsed)
        except PhraseRescoreError as e:
            problems.append(f"{', '.join(embedded)} backend = \"embedded\": {e}")
    return problems


# ----------------------------------------------------------------------------- the system's files

def _moses_finds(path: str, alternatives: list[str]) -> bool:
    # LexicalReorderingTableMemory tries PATH.gz after PATH; a compact table or reordering table adds a suffix
    return any(os.path.exists(q) for q in [path, path + ".gz", *alternatives])


def check_system_files(wf: Workflow, p: Plan, absent: Mapping[str, Path], say: Say) -> list[str]:
    """Every model file a user-given moses.ini names exists, when a stage will decode with it."""
    ini = _user_file(wf, "moses_ini", absent)
    if ini is None or not any(s.startswith(("tune-", "evaluate")) for s in wf.stages):
        return []
    from phrase_rescore.moses_integration.moses_ini import read_moses_ini

    try:
        files = read_moses_ini(ini).model_files()
    except PhraseRescoreError:
        return []           # check_programs reports it
    problems = []
    for what, paths in files.items():
        if not _moses_finds(paths[0], paths[1:]):
            problems.append(f"{what} is {paths[0]}, which does not exist: the decoder loads it when tune starts")
    return problems


# ----------------------------------------------------------------------------- inputs of some settings

def check_stage_inputs(wf: Workflow, p: Plan, absent: Mapping[str, Path], say: Say) -> list[str]:
    """Inputs that only some settings need, which the artifacts' plan cannot see."""
    problems = []
    if "evaluate" in wf.stages and _available(p, "evaluate", "cslm", absent):
        if not (_available(p, "evaluate", "tuned_rnn", absent) or _available(p, "evaluate", "tuned_rnn_wp", absent)):
            problems.append("the +CSLM rows re-rank the n-best lists of the tuned +RNN or +RNN+WP system; add "
                            "tune-rnn or tune-rnn-wp to the workflow")
        lacking = [a for a in ("dev_src_tok", "dev_ref_tok")     # those the plan reported missing aside
                   if not _available(p, "evaluate", a, absent) and a not in p.missing and a not in absent]
        if lacking:
            problems.append("the +CSLM rows retune their weights on the dev n-best list: evaluate needs "
                            + " and ".join(lacking) + " (the tokenize stage, or [inputs])")
    if "score" in wf.stages and wf.params["score"].get("rare_words") == "unigram":
        lacking = [a for a in ("train_tgt_tok", "train_src_tok")
                   if not _available(p, "score", a, absent) and a not in p.missing and a not in absent]
        if lacking:
            problems.append("[score] rare_words = \"unigram\" needs the tokenized training corpora: "
                            + " and ".join(lacking) + " (build-smt, or [inputs])")
    return problems


# ----------------------------------------------------------------------------- the system's preprocessing

def _system_case(wf: Workflow, p: Plan, absent: Mapping[str, Path]):
    """The system's casing as its files show it (a :class:`Decided`), or None when they do not tell."""
    from phrase_rescore.moses_integration.moses_system import (
        Decided,
        case_of_table,
        case_of_text,
        read_build_manifest,
    )

    smt_model = wf.inputs.get("smt_model")
    if smt_model is not None and "smt_model" not in absent:
        build = read_build_manifest(smt_model.parent)
        if build is not None and build.get("case") is not None:
            return Decided(build["case"], f"[inputs] smt_model: build-smt's manifest {smt_model.parent}/manifest.json")
    models = [a for a in ("truecase_model_src", "truecase_model_tgt") if a in wf.inputs and a not in absent]
    if models:
        return Decided("truecase", f"truecasing models are given in [inputs] ({', '.join(models)})")
    for artifact, what in (("train_tgt_tok", "the tokenized training target text"),
                           ("dev_ref_tok", "the tokenized dev references")):
        path = _user_file(wf, artifact, absent)
        if path is not None:
            d = case_of_text(path)
            if d is not None:
                return Decided(d.value, f"[inputs] {artifact}, {what}: {d.why}")
    table = _user_file(wf, "phrase_table", absent)
    if table is not None:
        d = case_of_table(table)
        if d is not None:
            return Decided(d.value, f"[inputs] phrase_table: {d.why}")
    return None


def resolve_preprocessing(wf: Workflow, p: Plan, absent: Mapping[str, Path], say: Say) -> list[str]:
    """``[tokenize]`` and ``[evaluate]`` take the system's casing, ``[tokenize]`` its escaping and languages;
    a value set that contradicts the system's files is a problem (see the module docstring)."""
    if "build-smt" in wf.stages:
        return []           # they follow the build (StageDef.follows)
    tokenize = "tokenize" in wf.stages
    # tokenize with build-smt's model folder checks the build's manifest itself when it runs
    built = tokenize and _available(p, "tokenize", "smt_model", absent)
    problems = _resolve_case(wf, _system_case(wf, p, absent), built, say)
    if built and "smt_model" in wf.inputs:
        problems += _check_build_preprocessing(wf)
    if tokenize and "evaluate" in wf.stages:       # evaluate scores what tokenize prepared
        problems += _evaluate_follows_tokenize(wf, problems)
    if tokenize and not built:
        problems += _resolve_tokenize(wf, p, absent, say)
    return problems


def _resolve_case(wf: Workflow, system, built: bool, say: Say) -> list[str]:
    """``[tokenize]`` (unless build-smt's model folder decides) and ``[evaluate]`` take the system's casing
    ``system`` (None: not known); an explicit value that contradicts it is a problem."""
    from phrase_rescore.moses_integration.moses_system import case_contradiction

    problems: list[str] = []
    for stage in ("tokenize", "evaluate"):
        if stage not in wf.stages or (stage == "tokenize" and built):
            continue
        explicit = "case" in wf.explicit.get(stage, set())
        value = wf.params[stage]["case"]
        if system is None:
            if stage == "tokenize" and not explicit:
                problems.append("[tokenize] case: how was the system's text cased? Nothing in the workflow tells "
                                "(no truecasing model, tokenized training or dev text in [inputs]); set [tokenize] "
                                "case = \"truecase\", \"lower\" or \"none\"")
            continue
        if explicit and value != system.value:
            problems.append(f"[{stage}] " + case_contradiction(value, system, "case"))
        elif value != system.value:
            wf.params[stage]["case"] = system.value
            say(f"[{stage}] case = {system.value!r}, the system's: {system.why}")
    return problems


def _check_build_preprocessing(wf: Workflow) -> list[str]:
    """``[tokenize]`` asks for the preprocessing the given SMT system was built with (its build manifest)."""
    from phrase_rescore.moses_integration.moses_system import read_build_manifest

    build = read_build_manifest(wf.inputs["smt_model"].parent) or {}
    params = wf.params["tokenize"]
    differ = [f"{k} = {params[k]!r} (the build's: {build[k]!r})" for k in params if k in build and build[k] != params[k]]
    if not differ:
        return []
    return [f"{wf.inputs['smt_model'].parent / 'manifest.json'}: the SMT system was built with other "
            "preprocessing than [tokenize] asks for: " + ", ".join(differ) + "; set [tokenize] as the build was"]


def _evaluate_follows_tokenize(wf: Workflow, problems: list[str]) -> list[str]:
    """``[evaluate]``'s case and target language are ``[tokenize]``'s; an explicit other value is a problem
    (unless ``problems`` already names that key)."""
    found: list[str] = []
    for k in ("case", "target_lang"):
        mine, theirs = wf.params["evaluate"][k], wf.params["tokenize"][k]
        if mine == theirs:
            continue
        if k in wf.explicit.get("evaluate", set()):
            if not any(q.startswith(f"[evaluate] {k} ") for q in problems):
                found.append(f"[evaluate] {k} = {mine!r} contradicts [tokenize] {k} = {theirs!r}: evaluate "
                             "scores the output of the system as tokenize prepared its input; set the same "
                             f"value, or leave {k} out of [evaluate]")
        else:
            wf.params["evaluate"][k] = theirs
    return found


def _resolve_tokenize(wf: Workflow, p: Plan, absent: Mapping[str, Path], say: Say) -> list[str]:
    """tokenize without build-smt: the languages must be set, the escaping is the system's, and truecasing
    needs the system's models."""
    from phrase_rescore.moses_integration.moses_system import escape_of_table

    problems = []
    params, explicit = wf.params["tokenize"], wf.explicit.get("tokenize", set())
    unset = [k for k in ("source_lang", "target_lang") if k not in explicit]
    if unset:
        problems.append(f"[tokenize] {' and '.join(unset)}: the system's languages are not set (the tokenizer's "
                        "rules depend on them); set them in [tokenize] (phrase-rescore init writes them)")
    table = _user_file(wf, "phrase_table", absent)
    escape = escape_of_table(table) if table is not None else None
    if escape is not None and params["escape"] != escape.value:
        if "escape" in explicit:
            problems.append(f"[tokenize] escape = {str(params['escape']).lower()} contradicts the system, whose text "
                            f"is {'escaped' if escape.value else 'not escaped'} ({escape.why}); dev and test words "
                            "would not match the phrase table's")
        else:
            params["escape"] = escape.value
            say(f"[tokenize] escape = {str(escape.value).lower()}, the system's: {escape.why}")
    if params["case"] == "truecase":
        has = {a for a in ("smt_model", "truecase_model_src", "truecase_model_tgt")
               if _available(p, "tokenize", a, absent)}
        if "smt_model" in has and has - {"smt_model"}:
            problems.append("tokenize: give the truecasing models either as smt_model (build-smt's folder) or as "
                            "truecase_model_src and truecase_model_tgt, not both")
        elif "smt_model" not in has and has != {"truecase_model_src", "truecase_model_tgt"}:
            lacking = sorted({"truecase_model_src", "truecase_model_tgt"} - has)
            problems.append("tokenize with case = \"truecase\" needs the system's truecasing models: give "
                            + " and ".join(lacking) + " in [inputs] (train-truecaser.perl's truecase-model.LANG; "
                            "phrase-rescore init finds them)")
    return problems


#: the checks :func:`~.stages.default_registry` registers, in the order they run
CHECKS = (check_programs, check_system_files, check_stage_inputs, resolve_preprocessing)

"""The workflow runner: declarative TOML workflows of stages, each skipped when its outputs are current.

A *stage definition* (:class:`StageDef`) names the artifacts it consumes and the artifacts it produces
(files or directories inside its own directory ``WORKDIR/<stage>/``), its parameters with defaults, and
the function that runs it. A workflow file picks stages and sets parameters::

    [workflow]
    name = "demo"
    stages = ["demo-data", "build-smt", "tokenize", "prepare", "train", "score", "moses-ini", "tune", "evaluate"]

    [inputs]              # artifacts the user brings: name = path (relative to the current directory)
    # phrase_table = "model/phrase-table.gz"

    [common]              # a value for every selected stage that has this parameter
    backend = "embedded"

    [train]               # parameters of the stages of one section
    preset = "small"

The artifacts wire the stages into a graph: every artifact a stage consumes is produced by exactly one
selected stage or given in ``[inputs]``. Stages run in dependency order. After a stage runs, the runner
writes ``WORKDIR/<stage>/stage-manifest.json`` (atomically, last) with its parameters, the SHA-256 of
every input and output and the tool version. A stage is *current*, and skipped, when that manifest
matches the parameters, the tool version and the inputs' hashes now, and every output still exists with
its recorded hash. So a rerun after a crash or a change redoes only the stages affected: a changed
parameter or a damaged output reruns that stage, and its dependants rerun only if its outputs changed.
``--from STAGE`` forces STAGE and everything downstream of it to run.

Before a stage runs its old manifest is removed and ``.attempt.json`` (its parameters, input
hashes and the code version) is written, so an interrupted stage is never taken for current. When the
next run finds that attempt record unchanged and no manifest, and the stage declares itself
``resumable``, the stage directory is kept and the stage is told to resume (``ctx.resume``: training
and scoring continue from what they left); otherwise what the stage wrote there is removed first, so
no file of an older configuration or of an interrupted attempt survives into a new run.

The tool version in manifests and attempt records is :func:`phrase_rescore.core.version.code_version`: the package
version plus a hash of the source code, so a change to the code reruns every stage it may affect.

Before any stage runs, every selected stage's parameters are checked (``StageDef.choices`` and
``StageDef.check``), every artifact a stage needs must come from a stage or ``[inputs]`` and every
``[inputs]`` path must exist, and the registry's workflow checks (``Registry.checks``: the backends,
programs and files later stages need, the system's casing) run; all the problems these find are reported
together, in one error, and nothing runs. A stage that must prepare its data as an earlier one did takes
that stage's values (``StageDef.follows``: ``tokenize`` takes ``build-smt``'s languages, casing and escaping);
a value set for it that contradicts the earlier stage's is an error. A stage may instead inherit an
earlier stage's values where its own section is silent (``StageDef.inherits``: ``train-reverse`` takes
``[train]``'s), and take a seed one above an earlier stage's (``StageDef.reseeds``: ``train-ensemble``'s
second model, which with ``[train]``'s seed would be the first model again; an equal seed set for it is
an error).

What the runner may delete: only what it wrote itself. It writes into ``WORKDIR/<stage>/`` for each
selected stage and ``WORKDIR/run-log.json``, and nowhere else.

- It creates each stage folder with the marker file ``.phrase-rescore-stage`` (naming the stage) and
  only ever removes files from a folder that carries that marker. An empty folder of a stage's name is
  taken over.
- Within a stage folder it removes only the files the stage wrote: the manifest lists them
  (``files``), and the attempt record lists the files that were there before the attempt started
  (``foreign``). Any other file, such as one a user put there after the stage ran, stays where it is,
  and so do the folders holding one. (A marked folder with neither record was created empty by the runner,
  which stopped before the stage began: all in it is the runner's.)
- Before anything runs, a file or non-empty folder named like a selected stage without that proof, a
  ``run-log.json`` that is not a run log, or an ``[inputs]`` path that lies inside a selected stage's
  folder, contains one, or is the run log, is an error naming the path; nothing is written.
- A folder of a stage that is not selected is never touched. The temporary file of a run log an
  interrupted run was writing (``.run-log.json.*.tmp``) is removed.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from phrase_rescore.core import locks
from phrase_rescore.core.atomic_write import atomic_open
from phrase_rescore.core.config import holds_date_time, parse_value, read_toml, shown_value
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.file_errors import naming
from phrase_rescore.core.hashing import sha256_file
from phrase_rescore.core.outdir import lock_output
from phrase_rescore.core.version import code_version

MANIFEST = "stage-manifest.json"
ATTEMPT = ".attempt.json"
STAGE_MARKER = ".phrase-rescore-stage"
RUN_LOG = "run-log.json"
MANIFEST_VERSION = 1
RESERVED_SECTIONS = ("workflow", "inputs", "common")
WORKFLOW_KEYS = ("name", "description", "stages")
#: what each [workflow] key takes, in words
WORKFLOW_KEY_KINDS = {"name": "a plain folder name as a string (the default --workdir is runs/NAME): not empty, "
                              "'.' or '..', and without '/'",
                      "description": "a string", "stages": "a non-empty list of stage or section names"}


#: a workflow check: ``check(workflow, plan, absent_inputs, say) -> problems`` (see :attr:`Registry.checks`)
WorkflowCheck = Callable[["Workflow", "Plan", Mapping[str, Path], Callable[[str], None]], list[str]]


@dataclass(frozen=True)
class StageDef:
    """A stage the runner can run.

    :ivar name: unique stage name ("train", "tune-rnn").
    :ivar section: the workflow-file section holding its parameters (several stages may share one:
        the three tune stages all read ``[tune]``); selecting the section selects all of them.
    :ivar run: ``run(ctx: StageContext) -> dict | None``; writes every produced artifact at
        ``ctx.output(name)``; the returned dict (JSON-able) is kept in the manifest as the stage's summary.
    :ivar params: every parameter the stage accepts, with its default.
    :ivar consumes: artifact names it reads (through ``ctx.input(name)``).
    :ivar produces: artifact name -> path relative to the stage's directory (a file or a directory).
    :ivar optional: consumed artifacts it can do without (``ctx.input`` then returns None).
    :ivar doc: one line for listings.
    :ivar choices: parameter -> its valid values, checked before any stage runs.
    :ivar check: ``check(params)`` raises :class:`PhraseRescoreError` for parameter values the stage
        cannot run with (a range, a combination); called before any stage runs. The runner puts the
        section's name in front of the message, so the message names the key.
    :ivar follows: stage name -> parameters this stage takes from that stage when it is selected
        (the same names in both); setting one of them in this stage's own section to another value is
        an error, a value from ``[common]`` or the default gives way.
    :ivar inherits: stage name -> parameters this stage takes from that stage when it is selected, unless
        its own section sets them (then its value stands).
    :ivar reseeds: stage name -> integer parameters (seeds) this stage takes as that stage's value + 1 when
        it is selected, unless its own section sets them; set to that stage's value, they are an error.
    :ivar resumable: the stage can continue an interrupted attempt from the files it left
        (``ctx.resume``); a stage that is not is rerun from an empty folder after an interruption.
    """

    name: str
    section: str
    run: Callable[["StageContext"], dict | None]
    params: Mapping[str, Any] = field(default_factory=dict)
    consumes: tuple[str, ...] = ()
    produces: Mapping[str, str] = field(default_factory=dict)
    optional: frozenset[str] = frozenset()
    doc: str = ""
    choices: Mapping[str, tuple] = field(default_factory=dict)
    check: Callable[[dict], None] | None = None
    follows: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    inherits: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    reseeds: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    resumable: bool = False


class Registry:
    """The stage definitions a workflow may use, in pipeline order."""

    def __init__(self, stages: Iterable[StageDef] = (), checks: Iterable[WorkflowCheck] = ()):
        self.stages: dict[str, StageDef] = {}
        #: run before any stage, with the workflow, its plan and a function for notes: each returns the
        #: problems it finds (reported together with every other), and may set a parameter the workflow
        #: leaves unset from what its inputs show (a stage's casing); see :func:`run_workflow`
        self.checks: list[WorkflowCheck] = list(checks)
        for s in stages:
            self.add(s)

    def add(self, stage: StageDef) -> None:
        assert stage.name not in self.stages, stage.name
        assert stage.name not in RESERVED_SECTIONS and stage.section not in RESERVED_SECTIONS, stage.name
        self.stages[stage.name] = stage

    def sections(self) -> dict[str, list[StageDef]]:
        out: dict[str, list[StageDef]] = {}
        for s in self.stages.values():
            out.setdefault(s.section, []).append(s)
        return out

    def section_params(self, section: str) -> dict[str, Any]:
        """The union of the parameters (with defaults) of a section's stages."""
        out: dict[str, Any] = {}
        for s in self.sections()[section]:
            out.update(s.params)
        return out


@dataclass
class Workflow:
    """A parsed workflow file (with ``--set`` overrides applied)."""

    name: str
    stages: list[str]  # selected stage names, in registry (pipeline) order
    params: dict[str, dict[str, Any]]  # stage name -> its full parameter dict (defaults + file + --set)
    inputs: dict[str, Path]  # artifact -> user-given path
    path: Path | None = None
    explicit: dict[str, set[str]] = field(default_factory=dict)  # stage -> keys set in its own section


@dataclass
class StageContext:
    """What a running stage sees: its parameters, its inputs, where to write, and the workflow."""

    stage: StageDef
    params: dict[str, Any]
    dir: Path
    inputs: dict[str, Path | None]
    workdir: Path
    resume: bool = False  # an interrupted run with these same parameters and inputs left its files in dir
    stages: tuple[str, ...] = ()  # the workflow's selected stages (empty: not known, as outside a workflow)

    def input(self, artifact: str) -> Path | None:
        """The path of a consumed artifact (None for an absent optional one)."""
        return self.inputs[artifact]

    def output(self, artifact: str) -> Path:
        """Where to write a produced artifact (its parent directory exists)."""
        p = self.dir / self.stage.produces[artifact]
        p.parent.mkdir(parents=True, exist_ok=True)
        return p


@dataclass
class StageResult:
    name: str
    status: str  # "ran" or "skipped"
    reason: str  # why it ran ("no manifest", "parameters changed", "forced by --from", ...)
    wall_s: float
    summary: dict | None = None


# ----------------------------------------------------------------------------- parsing

def _valid(items: Iterable[str]) -> str:
    return ", ".join(sorted(set(items)))


def apply_set(data: dict, assignment: str) -> None:
    """Apply one ``section.key=value`` override to the raw workflow dict."""
    key, eq, value = assignment.partition("=")
    section, dot, name = key.strip().partition(".")
    if not eq or not dot or not section or not name:
        raise PhraseRescoreError(f"--set {assignment!r}: expected SECTION.KEY=VALUE (e.g. train.max_steps=200)")
    data.setdefault(section, {})
    if not isinstance(data[section], dict):
        raise PhraseRescoreError(f"--set {assignment!r}: [{section}] is not a table")
    data[section][name] = parse_value(value.strip(), f"--set {assignment}")


def load_workflow(path: str | os.PathLike | None, registry: Registry, overrides: Iterable[str] = (),
                  data: dict | None = None) -> Workflow:
    """Read and check a workflow file (or an already-parsed ``data`` dict) against ``registry``.

    :param overrides: ``section.key=value`` strings applied over the file (``--set``).
    :raises PhraseRescoreError: unknown section, stage or key (listing the valid ones), a bad value type
        (a TOML date or time is no value of any key), no stages, a ``name`` that is not a plain folder name.
    """
    where = None if path is None else Path(path)
    data = _read_data(where, data, overrides)
    _check_sections(data, registry, where)
    wf = data.get("workflow", {})
    _check_workflow_keys(wf, where)
    names, stages = _select_stages(wf, registry, where)
    _check_section_use(data, registry, names, stages, where)
    params, explicit = _stage_params(data, registry, stages, where)
    inputs = _read_inputs(data, where)
    _apply_follows(stages, params, explicit, registry, where)
    workflow = Workflow(name=_workflow_name(wf, where), stages=stages,
                        params=params, inputs=inputs, path=where, explicit=explicit)
    check_params(workflow, registry)
    return workflow


def _read_data(where: Path | None, data: dict | None, overrides: Iterable[str]) -> dict:
    """The workflow's TOML (``data``, else the file's) as plain JSON types, with the ``--set`` overrides."""
    if data is None:
        assert where is not None
        data = read_toml(where, "workflow file")
    data = _json_copy(data)  # a deep copy with plain JSON types (dates and times stay, to be refused below)
    for o in overrides:
        apply_set(data, o)
    return data


def _check_sections(data: dict, registry: Registry, where: Path | None) -> None:
    """Every section is a known one and a table."""
    sections = registry.sections()
    for sec, body in data.items():
        if sec not in sections and sec not in RESERVED_SECTIONS:
            raise PhraseRescoreError(f"unknown section [{sec}]; valid sections: "
                                     f"{_valid(list(sections) + list(RESERVED_SECTIONS))}", where)
        if not isinstance(body, dict):
            raise PhraseRescoreError(f"[{sec}] must be a table of key = value", where)


def _check_workflow_keys(wf: dict, where: Path | None) -> None:
    """``[workflow]`` holds known keys, none a TOML date or time."""
    for k in wf:
        if k not in WORKFLOW_KEYS:
            raise PhraseRescoreError(f"unknown key {k!r} in [workflow]; valid keys: {_valid(WORKFLOW_KEYS)}", where)
        if holds_date_time(wf[k]):
            raise PhraseRescoreError(f"[workflow] {k} = {shown_value(wf[k])}: expected {WORKFLOW_KEY_KINDS[k]}", where)


def _select_stages(wf: dict, registry: Registry, where: Path | None) -> tuple[list[str], list[str]]:
    """(the names ``[workflow] stages`` gives, the stages they select in the registry's order)."""
    sections = registry.sections()
    names = wf.get("stages")
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise PhraseRescoreError("[workflow] stages must be a non-empty list of stage or section names; "
                                 f"valid names: {_valid(list(registry.stages) + list(sections))}", where)
    selected: set[str] = set()
    for n in names:
        if n in registry.stages:
            selected.add(n)
        elif n in sections:
            selected.update(s.name for s in sections[n])
        else:
            raise PhraseRescoreError(f"unknown stage {n!r} in [workflow] stages; valid stages: "
                                     f"{_valid(list(registry.stages) + list(sections))}", where)
    return names, [s for s in registry.stages if s in selected]


def _check_section_use(data: dict, registry: Registry, names: list[str], stages: list[str],
                       where: Path | None) -> None:
    """Each stage section given belongs to a selected stage, each ``[common]`` key to one of them."""
    sections = registry.sections()
    used_sections = {registry.stages[s].section for s in stages}
    for sec in data:
        if sec in sections and sec not in used_sections:
            raise PhraseRescoreError(f"[{sec}] sets parameters of a stage that is not in [workflow] stages "
                                     f"({_valid(names)})", where)
    for k in data.get("common", {}):
        if not any(k in registry.stages[s].params for s in stages):
            raise PhraseRescoreError(f"unknown key {k!r} in [common]: no selected stage has it; valid keys: "
                                     f"{_valid({p for s in stages for p in registry.stages[s].params})}", where)


def _stage_params(data: dict, registry: Registry, stages: list[str],
                  where: Path | None) -> tuple[dict[str, dict[str, Any]], dict[str, set[str]]]:
    """(each stage's parameters: its defaults, then ``[common]``, then its section; the keys its section
    gives explicitly)."""
    params: dict[str, dict[str, Any]] = {}
    explicit: dict[str, set[str]] = {}
    for s in stages:
        params[s], explicit[s] = _one_stage_params(registry, registry.stages[s], data.get("common", {}), data, where)
    return params, explicit


def _one_stage_params(registry: Registry, d: StageDef, common: dict, data: dict,
                      where: Path | None) -> tuple[dict[str, Any], set[str]]:
    """One stage's parameters and explicit keys; each value of its default's type (an int for a float
    default becomes a float)."""
    p = dict(d.params)
    p.update({k: v for k, v in common.items() if k in d.params})
    valid = registry.section_params(d.section)
    explicit: set[str] = set()
    for k, v in data.get(d.section, {}).items():
        if k not in valid:
            raise PhraseRescoreError(f"unknown key {k!r} in [{d.section}]; valid keys: {_valid(valid)}", where)
        if k in d.params:
            p[k] = v
            explicit.add(k)
    for k, v in p.items():
        default = d.params[k]
        if default is not None and v is not None and not _same_type(default, v):
            raise PhraseRescoreError(f"[{d.section}] {k} = {shown_value(v)}: expected a "
                                     f"{type(default).__name__} like the default {default!r}", where)
        if isinstance(default, float) and isinstance(v, int) and not isinstance(v, bool):
            p[k] = float(v)
    return p, explicit


def _read_inputs(data: dict, where: Path | None) -> dict[str, Path]:
    """``[inputs]``: each a path string (``~`` expanded)."""
    inputs: dict[str, Path] = {}
    for k, v in data.get("inputs", {}).items():
        if holds_date_time(v):
            raise PhraseRescoreError(f"[inputs] {k} = {shown_value(v)}: expected a path (a string)", where)
        if not isinstance(v, str) or not v:
            raise PhraseRescoreError(f"[inputs] {k} must be a path (a string)", where)
        inputs[k] = Path(v).expanduser()
    return inputs


def _workflow_name(wf: dict, where: Path | None) -> str:
    """``[workflow] name``, or the file's name without its suffix: a plain folder name, as the default
    workdir is ``runs/NAME``.

    :raises PhraseRescoreError: a name that is not a string, or that is empty, ``.``, ``..`` or holds a
        path separator (it would make the workdir another folder: ``runs`` itself, the current folder, an
        absolute path).
    """
    if "name" not in wf:
        stem = where.stem if where else ""
        return stem if _plain_name(stem) else "workflow"
    name = wf["name"]
    if not isinstance(name, str) or not _plain_name(name):
        raise PhraseRescoreError(f"[workflow] name = {shown_value(name)}: expected {WORKFLOW_KEY_KINDS['name']}",
                                 where)
    return name


def _plain_name(name: str) -> bool:
    """A name that, joined to a folder, names a folder directly inside it."""
    return (name not in ("", ".", "..") and "/" not in name and "\0" not in name
            and not (os.altsep and os.altsep in name) and os.sep not in name)


def _json_copy(value: Any) -> Any:
    """A deep copy as a JSON round trip makes it (tables with string keys, lists for tuples), other values
    kept as they are: a TOML date or time stays one, for the checks to refuse by name."""
    if isinstance(value, dict):
        return {str(k): _json_copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_copy(v) for v in value]
    return value


def _apply_follows(stages: list[str], params: dict[str, dict[str, Any]], explicit: dict[str, set[str]],
                   registry: Registry, where: Path | None) -> None:
    """Give each stage the values of the parameters it follows, inherits or reseeds from a selected earlier
    stage."""
    for s in stages:
        d = registry.stages[s]
        for leader, keys in d.inherits.items():
            if leader in params:
                params[s].update({k: params[leader][k] for k in keys if k not in explicit[s]})
        for leader, keys in d.reseeds.items():
            if leader not in params:
                continue
            lsec = registry.stages[leader].section
            for k in keys:
                if k not in explicit[s]:
                    params[s][k] = params[leader][k] + 1
                elif params[s][k] == params[leader][k]:
                    raise PhraseRescoreError(
                        f"[{d.section}] {k} = {params[s][k]!r} is [{lsec}]'s {k}: stage {s} would train "
                        f"{leader}'s model again; set another value, or leave {k} out of [{d.section}] "
                        f"(it is then [{lsec}]'s + 1)", where)
        for leader, keys in d.follows.items():
            if leader not in params:
                continue  # not selected: the stage keeps its own values
            lsec = registry.stages[leader].section
            for k in keys:
                mine, theirs = params[s][k], params[leader][k]
                if k in explicit[s] and mine != theirs:
                    raise PhraseRescoreError(
                        f"[{d.section}] {k} = {mine!r} contradicts [{lsec}] {k} = {theirs!r}: stage {s} must "
                        f"prepare its data as {leader} did; set the same value, or leave {k} out of "
                        f"[{d.section}] (it then follows [{lsec}])", where)
                params[s][k] = theirs


def check_params(workflow: Workflow, registry: Registry) -> None:
    """Check every selected stage's parameters (its ``choices`` and ``check``) before anything runs.

    :raises PhraseRescoreError: naming the section, the key and what is valid.
    """
    for s in workflow.stages:
        d = registry.stages[s]
        p = workflow.params[s]
        for k, valid in d.choices.items():
            if p.get(k) not in valid:
                raise PhraseRescoreError(f"[{d.section}] {k} = {shown_value(p.get(k))}: expected one of "
                                         f"{', '.join(repr(v) for v in valid)}", workflow.path)
        dated = [k for k, v in p.items() if holds_date_time(v)]   # only where the default is unset
        if d.check is not None:
            try:
                d.check(_json_copy(p))
            except PhraseRescoreError as e:
                raise PhraseRescoreError(f"[{d.section}] {e.message}", workflow.path) from None
            except (TypeError, ValueError):   # a check that met a date or time where it expects a number
                if not dated:
                    raise
        for k in dated:          # a date or time no check refused
            raise PhraseRescoreError(f"[{d.section}] {k} = {shown_value(p[k])}: expected a number, string, "
                                     "boolean or list (a TOML date or time is no value of any parameter)",
                                     workflow.path)


def _same_type(default: Any, value: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    return isinstance(value, type(default))


# ----------------------------------------------------------------------------- planning

@dataclass
class Plan:
    """Stages in run order, where each consumed artifact comes from, and each stage's dependants."""

    order: list[str]
    source: dict[str, str]  # artifact -> producing stage name, or "inputs"
    inputs_of: dict[str, dict[str, str | None]]  # stage -> consumed artifact -> producer (None: absent optional)
    missing: set[str] = field(default_factory=set)  # needed artifacts nothing gives (reported; planned as absent)


def missing_input_message(stages: list[str], artifact: str, registry: Registry) -> str:
    makers = [x.name for x in registry.stages.values() if artifact in x.produces]
    who = f"stage {stages[0]} needs" if len(stages) == 1 else f"stages {', '.join(stages)} need"
    return (f"missing input: {who} {artifact!r}; give it in [inputs] ({artifact} = \"PATH\")"
            + (f" or add the stage that makes it ({', '.join(makers)})" if makers else ""))


def plan(workflow: Workflow, registry: Registry, missing: list[str] | None = None) -> Plan:
    """Wire the selected stages by their artifacts and order them; errors for gaps, clashes and cycles.

    :param missing: where to list every artifact a stage needs that neither a stage nor ``[inputs]``
        gives (it is then planned as absent); without it the first one is an error.
    """
    producer = _producers(workflow, registry)
    _check_inputs_known(workflow, registry, producer)
    source = {**{a: "inputs" for a in workflow.inputs}, **producer}
    inputs_of, lacking = _wire_inputs(workflow, registry, source, missing is not None)
    if missing is not None:
        missing += [missing_input_message(stages, a, registry) for a, stages in lacking.items()]
    return Plan(_stage_order(workflow.stages, inputs_of), source, inputs_of, set(lacking))


def _producers(workflow: Workflow, registry: Registry) -> dict[str, str]:
    """``{artifact: the selected stage that produces it}``; an artifact produced twice, or also given, is an error."""
    producer: dict[str, str] = {}
    for s in workflow.stages:
        for a in registry.stages[s].produces:
            if a in producer:
                raise PhraseRescoreError(f"artifact {a!r} is produced by both {producer[a]} and {s}; "
                                         "select only one of them")
            if a in workflow.inputs:
                raise PhraseRescoreError(f"artifact {a!r} is given in [inputs] and also produced by stage {s}; "
                                         f"remove one (drop {s} from [workflow] stages, or the [inputs] line)",
                                         workflow.path)
            producer[a] = s
    return producer


def _check_inputs_known(workflow: Workflow, registry: Registry, producer: dict[str, str]) -> None:
    """Every artifact of ``[inputs]`` is one a stage consumes or produces."""
    known = set(producer) | {a for d in registry.stages.values() for a in (*d.consumes, *d.produces)}
    for a in workflow.inputs:
        if a not in known:
            raise PhraseRescoreError(f"unknown artifact {a!r} in [inputs]; valid names: {_valid(known)}",
                                     workflow.path)


def _wire_inputs(workflow: Workflow, registry: Registry, source: dict[str, str], tolerate_missing: bool
                 ) -> tuple[dict[str, dict[str, str | None]], dict[str, list[str]]]:
    """Each stage's ``{artifact: where it comes from}`` (None: absent), and ``{lacking artifact: the stages that
    need it}``; with ``tolerate_missing`` false a lacking artifact is an error."""
    inputs_of: dict[str, dict[str, str | None]] = {}
    lacking: dict[str, list[str]] = {}   # artifact -> the stages that need it
    for s in workflow.stages:
        d = registry.stages[s]
        inputs_of[s] = {}
        for a in d.consumes:
            if a in source:
                inputs_of[s][a] = source[a]
            elif a in d.optional:
                inputs_of[s][a] = None
            elif tolerate_missing:
                inputs_of[s][a] = None
                lacking.setdefault(a, []).append(s)
            else:
                raise PhraseRescoreError(missing_input_message([s], a, registry))
    return inputs_of, lacking


def _stage_order(stages: list[str], inputs_of: dict[str, dict[str, str | None]]) -> list[str]:
    """Topological order, taking the first ready stage in registry (pipeline) order each time; when none is
    ready, the ones left over lie on a cycle (an error naming it)."""
    deps = {s: {p for p in inputs_of[s].values() if p not in (None, "inputs")} for s in stages}
    order: list[str] = []
    pending = list(stages)
    while pending:
        ready = next((s for s in pending if deps[s] <= set(order)), None)
        if ready is None:
            raise PhraseRescoreError(f"the stages form a cycle: {' -> '.join(_find_cycle(deps, pending))}")
        order.append(ready)
        pending.remove(ready)
    return order


def _find_cycle(deps: dict[str, set[str]], nodes: list[str]) -> list[str]:
    start = nodes[0]
    path, seen = [start], {start: 0}
    cur = start
    while True:
        cur = sorted(d for d in deps[cur] if d in nodes)[0]
        if cur in seen:
            return path[seen[cur]:] + [cur]
        seen[cur] = len(path)
        path.append(cur)


def downstream(p: Plan, start: str) -> set[str]:
    """``start`` and every stage that depends on it, directly or not."""
    out = {start}
    for s in p.order:
        if any(prod in out for prod in p.inputs_of[s].values()):
            out.add(s)
    return out


# ----------------------------------------------------------------------------- hashing and manifests

def hash_path(path: Path) -> str:
    """SHA-256 of a file, or of a directory's files (relative names and contents, in sorted order)."""
    if path.is_file():
        return sha256_file(path)
    if path.is_dir():
        h = hashlib.sha256()
        for f in sorted(p for p in path.rglob("*") if p.is_file()):
            h.update(f.relative_to(path).as_posix().encode("utf-8") + b"\0" + sha256_file(f).encode() + b"\n")
        return "dir:" + h.hexdigest()
    raise FileNotFoundError(path)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError, ValueError, UnicodeDecodeError):
        return None


def read_manifest(stage_dir: Path) -> dict | None:
    """The stage's manifest, or None when absent or unreadable."""
    m = _read_json(stage_dir / MANIFEST)
    return m if isinstance(m, dict) else None


def _stale_reason(m: dict | None, params: dict, input_hashes: dict, stage: StageDef, stage_dir: Path) -> str:
    """Why the stage must run ("" when it is current)."""
    if m is None:
        return "no manifest"
    if m.get("manifest_version") != MANIFEST_VERSION or m.get("tool_version") != code_version():
        return "tool version changed"
    if m.get("params") != params:
        changed = sorted(k for k in set(params) | set(m.get("params", {}))
                         if params.get(k) != m.get("params", {}).get(k))
        return "parameters changed: " + ", ".join(changed)
    if m.get("inputs") != input_hashes:
        changed = sorted(k for k in set(input_hashes) | set(m.get("inputs", {}))
                         if input_hashes.get(k) != m.get("inputs", {}).get(k))
        return "inputs changed: " + ", ".join(changed)
    outs = m.get("outputs", {})
    for a, rel in stage.produces.items():
        p = stage_dir / rel
        if a not in outs or not p.exists():
            return f"output {a} missing"
        if hash_path(p) != outs[a]:
            return f"output {a} changed since it was written"
    return ""


# ----------------------------------------------------------------------------- what the runner owns

MARKER_NOTE = ("created by phrase-rescore's workflow runner, which removes the files the stage wrote here "
               "when the stage reruns (other files stay)")


def _marker_text(stage: str) -> str:
    return json.dumps({"stage": stage, "note": MARKER_NOTE}, indent=2) + "\n"


def _is_marker_temp(name: str) -> bool:
    """The temporary file of a marker being written (:func:`atomic_open`'s name for it)."""
    return name.startswith(f".{STAGE_MARKER}.") and name.endswith(".tmp")


def _owned(stage_dir: Path, stage: str) -> bool:
    """True when ``stage_dir`` is the runner's folder for ``stage``: it carries the marker of that stage, or
    it holds nothing (at most a marker the runner was interrupted writing)."""
    if all(_is_marker_temp(e.name) for e in stage_dir.iterdir()):
        return True
    marker = _read_json(stage_dir / STAGE_MARKER)
    return isinstance(marker, dict) and marker.get("stage") == stage


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def check_workdir(work: Path, stages: Iterable[str], inputs: Mapping[str, Path]) -> None:
    """Refuse, before anything runs, a workdir where running would delete or overwrite what the runner
    did not write: a folder (or file) named like a selected stage without the runner's marker, a
    ``run-log.json`` that is not a run log, an ``[inputs]`` path inside or around a stage folder.

    :raises PhraseRescoreError: naming the path.
    """
    if work.exists() and not work.is_dir():
        raise PhraseRescoreError("the workdir is a file; expected a folder (new, or one of earlier runs)", work)
    stages = list(stages)
    for name in stages:
        _check_stage_folder(work / name, name)
    log = work / RUN_LOG
    if log.is_symlink() or (log.exists() and not _is_run_log(log)):
        raise PhraseRescoreError("the workflow runner writes its run log here, but this file is not one; "
                                 "move it, or choose another --workdir", log)
    _check_inputs_apart(work, stages, inputs, log)


def _check_stage_folder(d: Path, name: str) -> None:
    """Stage ``name``'s folder ``d`` is absent or a folder the runner created (its marker)."""
    if d.is_symlink() or (d.exists() and not d.is_dir()):
        raise PhraseRescoreError(f"stage {name} writes into this folder, but a file or link of that name is "
                                 "in the way; move it, or choose another --workdir", d)
    if d.is_dir() and not _owned(d, name):
        shown = sorted(e.name for e in d.iterdir() if not _is_marker_temp(e.name))
        raise PhraseRescoreError(
            f"stage {name} writes into this folder, but it was not created by the workflow runner (no "
            f"{STAGE_MARKER}) and holds {', '.join(shown[:5])}{' ...' if len(shown) > 5 else ''}; "
            "move it, or choose another --workdir", d)


def _check_inputs_apart(work: Path, stages: list[str], inputs: Mapping[str, Path], log: Path) -> None:
    """No ``[inputs]`` path is the run log, or lies inside or around a stage's folder."""
    owned = [(work / name).resolve() for name in stages]
    for a, path in inputs.items():
        rp = path.resolve()
        if rp == log.resolve():
            raise PhraseRescoreError(f"[inputs] {a} is the run log the workflow runner rewrites; "
                                     "copy it elsewhere or choose another --workdir", path)
        for name, d in zip(stages, owned):
            if _inside(rp, d) or _inside(d, rp):
                where = "lies inside" if _inside(rp, d) else "contains"
                raise PhraseRescoreError(
                    f"[inputs] {a} {where} the folder of stage {name} ({d}), where the stage writes and the "
                    "runner clears what it wrote when it reruns; move the input out of it, or choose another "
                    "--workdir", path)


def _is_run_log(path: Path) -> bool:
    log = _read_json(path)
    return isinstance(log, dict) and set(log) == {"workflow", "file", "stages"}


def _make_stage_dir(stage_dir: Path, stage: str) -> None:
    """Create the stage's folder (or take over an empty one) and mark it as the runner's."""
    stage_dir.mkdir(parents=True, exist_ok=True)
    if _read_json(stage_dir / STAGE_MARKER) is None:
        with atomic_open(stage_dir / STAGE_MARKER, "w") as f:
            f.write(_marker_text(stage))


def _is_runner_file(rel: str) -> bool:
    """A file the runner itself keeps in a stage folder (or the temporary file of one being written)."""
    if "/" in rel:
        return False
    return rel in (MANIFEST, ATTEMPT, STAGE_MARKER) or (
        rel.endswith(".tmp") and any(rel.startswith(f".{n}.") for n in (MANIFEST, ATTEMPT, STAGE_MARKER)))


def _files(stage_dir: Path) -> set[str]:
    """Every file and link under ``stage_dir`` (relative posix paths), the runner's own excluded;
    links to folders are not followed."""
    out = set()
    for root, dirs, files in os.walk(stage_dir):
        rel = Path(root).relative_to(stage_dir)
        out |= {(rel / n).as_posix() for n in files}
        out |= {(rel / n).as_posix() for n in dirs if os.path.islink(os.path.join(root, n))}
    return {f for f in out if not _is_runner_file(f)}


def _foreign_files(stage_dir: Path) -> set[str]:
    """Files in an owned stage folder that the stage did not write: those its manifest does not list
    (put there after it finished) and those its attempt record says were there before it started."""
    now = _files(stage_dir)
    m = read_manifest(stage_dir)
    if m is not None and isinstance(m.get("files"), list):
        return now - set(m["files"])
    a = _read_json(stage_dir / ATTEMPT)
    if isinstance(a, dict) and isinstance(a.get("foreign"), list):
        return now & set(a["foreign"])
    return set()  # marked, but stopped before the attempt record: the runner made it empty, all in it is its own


def _remove_runner_temps(stage_dir: Path) -> None:
    """Remove the temporary files of a manifest, attempt record or marker an interrupted run was writing."""
    for e in list(stage_dir.iterdir()):
        if _is_runner_file(e.name) and e.name not in (MANIFEST, ATTEMPT, STAGE_MARKER):
            e.unlink()


def _clear_stage_dir(stage_dir: Path, keep: set[str]) -> None:
    """Remove what the stage wrote from its owned folder, keeping the marker and the files in ``keep``:
    the manifest first (so an interruption here leaves a stage that is never taken for current), then
    the attempt record, then the stage's files, then the folders left empty."""
    for name in (MANIFEST, ATTEMPT):
        (stage_dir / name).unlink(missing_ok=True)
    for rel in sorted(_files(stage_dir) - keep):
        (stage_dir / rel).unlink()
    _remove_runner_temps(stage_dir)
    for root, dirs, _ in os.walk(stage_dir, topdown=False):
        for d in dirs:
            path = os.path.join(root, d)
            if not os.path.islink(path) and not os.listdir(path):
                os.rmdir(path)


# ----------------------------------------------------------------------------- running

def run_workflow(workflow: Workflow, registry: Registry, workdir: str | os.PathLike,
                 from_stage: str | None = None, echo: Callable[[str], None] | None = print) -> list[StageResult]:
    """Run the workflow's stages in ``workdir``, skipping those whose outputs are current.

    :param from_stage: a stage or section name: it and everything downstream run even when current.
    :param echo: where one-line progress messages go (None: nowhere).
    :returns: one :class:`StageResult` per stage, in run order. ``workdir/run-log.json`` keeps them too.
    :raises PhraseRescoreError: before any stage runs, for bad parameters, missing inputs, a workdir
        holding what the runner did not write (:func:`check_workdir`), or one that another run is using:
        the workdir's lock (:mod:`phrase_rescore.core.locks`) is held for the whole run.
    """
    work = Path(workdir).resolve()
    lock_output(work, "--workdir", "run")
    try:
        with naming(work):      # a failed write that names no file (a library's own) names the workdir
            return _run_workflow(workflow, registry, work, from_stage, echo)
    finally:
        locks.release(work)


def _run_workflow(workflow: Workflow, registry: Registry, workdir: Path, from_stage: str | None,
                  echo: Callable[[str], None] | None) -> list[StageResult]:
    """:func:`run_workflow` with the workdir's lock held: check everything, then run or skip each stage
    in order, then write the run log."""
    say = echo or (lambda _msg: None)
    check_params(workflow, registry)
    problems: list[str] = []
    p = plan(workflow, registry, missing=problems)
    work = Path(workdir).resolve()
    forced = _forced_stages(p, registry, from_stage)
    _preflight(workflow, registry, p, problems, say)
    check_workdir(work, p.order, workflow.inputs)
    version = code_version()
    work.mkdir(parents=True, exist_ok=True)
    for tmp in work.glob(f".{RUN_LOG}.*.tmp"):  # a run log an interrupted run was writing
        tmp.unlink()
    user_hashes = {a: hash_path(path) for a, path in workflow.inputs.items()}
    output_hashes: dict[str, str] = {}
    results: list[StageResult] = []
    for name in p.order:
        in_paths, in_hashes = _stage_inputs(name, p, workflow, registry, work, user_hashes, output_hashes)
        results.append(_run_stage(registry.stages[name], json.loads(json.dumps(workflow.params[name])), work,
                                  in_paths, in_hashes, name in forced, version, tuple(p.order), output_hashes, say))
    _write_run_log(work, workflow, results)
    return results


def _forced_stages(p: Plan, registry: Registry, from_stage: str | None) -> set[str]:
    """The stages ``--from`` runs even when current: the named stage (or section's) and all downstream."""
    forced: set[str] = set()
    if from_stage is None:
        return forced
    starts = [s for s in p.order if s == from_stage or registry.stages[s].section == from_stage]
    if not starts:
        raise PhraseRescoreError(f"--from {from_stage!r}: not a stage of this workflow; valid: "
                                 f"{_valid(set(p.order) | {registry.stages[s].section for s in p.order})}")
    for s in starts:
        forced |= downstream(p, s)
    return forced


def _preflight(workflow: Workflow, registry: Registry, p: Plan, problems: list[str],
               say: Callable[[str], None]) -> None:
    """Refuse to start, listing every problem: ``problems`` (of the plan), the ``[inputs]`` not found and
    those of the registry's checks; a single missing file is named as every file error names it."""
    absent = {a: path for a, path in workflow.inputs.items() if not path.exists()}
    for a, path in absent.items():
        users = [s for s in p.order if a in p.inputs_of[s]]
        problems.append(f"{path}: input {a} not found (given in [inputs]; needed by {', '.join(users) or 'no stage'})")
    for check in registry.checks:
        problems += check(workflow, p, absent, say)
    if len(problems) == 1 and absent:      # only a missing file: the error names it, as every file error does
        a, path = next(iter(absent.items()))
        raise PhraseRescoreError(problems[0].removeprefix(f"{path}: "), path)
    if len(problems) == 1:
        raise PhraseRescoreError(problems[0], workflow.path)
    if problems:
        raise PhraseRescoreError(f"the workflow cannot run; nothing was run. {len(problems)} problems:\n  - "
                                 + "\n  - ".join(problems), workflow.path)


def _stage_inputs(name: str, p: Plan, workflow: Workflow, registry: Registry, work: Path,
                  user_hashes: dict[str, str], output_hashes: dict[str, str]) -> tuple[dict, dict]:
    """(path, hash) of each artifact the stage consumes: from ``[inputs]``, an earlier stage's output, or
    None for an absent optional one."""
    in_paths: dict[str, Path | None] = {}
    in_hashes: dict[str, str | None] = {}
    for a, src in p.inputs_of[name].items():
        if src is None:
            in_paths[a], in_hashes[a] = None, None
        elif src == "inputs":
            in_paths[a], in_hashes[a] = workflow.inputs[a].resolve(), user_hashes[a]
        else:
            in_paths[a] = work / src / registry.stages[src].produces[a]
            in_hashes[a] = output_hashes[a]
    return in_paths, in_hashes


def _run_stage(d: StageDef, params: dict, work: Path, in_paths: dict, in_hashes: dict, forced: bool,
               version: str, order: tuple[str, ...], output_hashes: dict[str, str],
               say: Callable[[str], None]) -> StageResult:
    """Skip the stage when current, else claim its folder, run it and record its manifest; its outputs'
    hashes are added to ``output_hashes``."""
    name, stage_dir = d.name, work / d.name
    m = read_manifest(stage_dir)
    reason = "forced by --from" if forced else _stale_reason(m, params, in_hashes, d, stage_dir)
    if not reason:
        output_hashes.update(m["outputs"])
        say(f"[{name}] current, skipped")
        return StageResult(name, "skipped", "current", 0.0, m.get("summary"))
    attempt = {"tool_version": version, "params": params, "inputs": in_hashes}
    resume, foreign = _claim_stage_dir(d, stage_dir, attempt, resumable=m is None and not forced)
    say(f"[{name}] running ({'resuming an interrupted run' if resume else reason})")
    if foreign:
        say(f"[{name}] keeping what the stage did not write: {', '.join(sorted(foreign))}")
    _make_stage_dir(stage_dir, name)
    with atomic_open(stage_dir / ATTEMPT, "w") as f:
        json.dump({**attempt, "foreign": sorted(foreign)}, f)
    t0 = time.time()
    summary = d.run(StageContext(d, params, stage_dir, in_paths, work, resume=resume, stages=order))
    wall = time.time() - t0
    outs = _output_hashes(d, stage_dir)
    _write_manifest(stage_dir, {"manifest_version": MANIFEST_VERSION, "stage": name, "tool_version": version,
                                "params": params, "inputs": in_hashes,
                                "input_paths": {a: None if q is None else os.fspath(q) for a, q in in_paths.items()},
                                "outputs": outs, "files": sorted(_files(stage_dir) - foreign),
                                "summary": summary, "wall_s": round(wall, 3), "resumed": resume,
                                "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    output_hashes.update(outs)
    say(f"[{name}] done in {wall:.1f}s")
    return StageResult(name, "ran", reason, wall, summary)


def _claim_stage_dir(d: StageDef, stage_dir: Path, attempt: dict, resumable: bool) -> tuple[bool, set[str]]:
    """(whether the stage resumes an interrupted attempt of the same version, parameters and inputs, the
    files in its folder it did not write); what it wrote is cleared unless it resumes."""
    before = _read_json(stage_dir / ATTEMPT)
    resume = (d.resumable and resumable and isinstance(before, dict)
              and {k: before.get(k) for k in attempt} == attempt)
    foreign = _foreign_files(stage_dir) if stage_dir.is_dir() else set()
    if not resume and stage_dir.is_dir():
        _clear_stage_dir(stage_dir, keep=foreign)
    elif resume:
        _remove_runner_temps(stage_dir)
    return resume, foreign


def _output_hashes(d: StageDef, stage_dir: Path) -> dict[str, str]:
    """The hash of each artifact the stage produces; a missing one is an error."""
    outs: dict[str, str] = {}
    for a, rel in d.produces.items():
        path = stage_dir / rel
        if not path.exists():
            raise PhraseRescoreError(f"stage {d.name} finished without writing its output {a}", path)
        outs[a] = hash_path(path)
    return outs


def _write_manifest(stage_dir: Path, manifest: dict) -> None:
    with atomic_open(stage_dir / MANIFEST, "w") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write("\n")


def _write_run_log(work: Path, workflow: Workflow, results: list[StageResult]) -> None:
    with atomic_open(work / RUN_LOG, "w") as f:
        json.dump({"workflow": workflow.name, "file": None if workflow.path is None else os.fspath(workflow.path),
                   "stages": [r.__dict__ for r in results]}, f, indent=2)
        f.write("\n")

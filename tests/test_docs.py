"""The documents cannot rot: every command in README.md and docs/*.md is checked against the code.

Every shell command in a ``bash``/``sh`` code block is classified by its program:

- ``phrase-rescore ...`` (also inside ``torchrun``/``srun``) is parsed by the command's own click parser
  without running it: the command must exist, every option must be one of its options, the arguments must
  fit, every required option must be there, and a value of a setting must pass the setting's check
  (``--preset pape`` fails here). The cheap ones in :data:`RUN` really run, in a sandbox holding a tiny
  phrase table and moses.ini at the paths the documents name.
- ``python benchmarks/X.py ...`` must name a script that exists and options it declares.
- every other program is in :data:`NOT_RUN`, with the reason it is not run (it needs MOSES_HOME, a GPU,
  Slurm, the network...). A program in no list fails the test: add it to one.

Inline code in the text (`` `phrase-rescore train PAIRS --out MODEL` ``, `` `score --columns logprob` ``)
is checked more leniently: the command must exist and every ``--option`` named must be one of its options.
Python code blocks must compile.
"""
from __future__ import annotations

import ast
import doctest
import gzip
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from phrase_rescore.app.cli import main
from phrase_rescore.app.schema import _from_text
from phrase_rescore.core.config import check_value, flag_name, settings
from phrase_rescore.core.errors import PhraseRescoreError

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
FIX = Path(__file__).parent / "fixtures" / "moses"

#: programs the documents name that these tests do not run, and why
NOT_RUN = {
    "pip": "installs packages (the set-up of README.md)",
    "python3 -m venv": "creates a virtual environment (the set-up of README.md)",
    "python -m venv": "creates a virtual environment",
    ".": "activates a virtual environment",
    "source": "activates a virtual environment",
    "python -m pytest": "the test suite itself",
    "python -m phrase_rescore.app.cli_reference": "regenerates docs/cli.md; tests/test_cli_reference.py checks it",
    "moses": "a real Moses decoder (MOSES_HOME); tests/test_real_moses_*.py check it where there is one",
    "mert-moses.pl": "a real Moses's tuning script (MOSES_HOME)",
    "bash benchmarks/gpu_check.sh": "needs a CUDA GPU",
    "srun": "Slurm; the phrase-rescore command it runs is checked",
    "torchrun": "several processes; the phrase-rescore command it runs is checked",
    "printf": "writes a wrapper script for mert-moses.pl",
    "chmod": "makes that wrapper executable",
    "head": "a shell variable for Slurm",
    "cd": "changes the folder",
}
#: phrase-rescore commands and documents other branches add; skipped only while absent here
PENDING_COMMANDS = {"init": "phrase-rescore init, added beside this branch"}
PENDING_FILES = {"docs/api.md": "the Python API's document, written beside this branch"}

#: the commands that really run, in the sandbox, in the order the document gives them: (document, the
#: command's start, options added so that it is quick). Each must still be in its document.
RUN = [
    ("guide.md", "phrase-rescore make-demo-data --out corpus", "--train 200 --dev 10 --test 10"),
    # the sandbox's table has 4 + 5 words, all inside the default shortlist: the unknown-word column would be
    # constant, and moses-ini refuses such a column
    ("README.md", "phrase-rescore prepare model/phrase-table.gz --out pairs/", "--vocab-size 3"),
    ("README.md", "phrase-rescore train pairs/ --out rnn/", "--max-steps 2 --valid-every 1"),
    ("README.md", "phrase-rescore score rnn/ model/phrase-table.gz --out phrase-table.rnn.gz", ""),
    ("README.md", "phrase-rescore moses-ini model/moses.ini --table phrase-table.rnn.gz", ""),
]


# ----------------------------------------------------------------------------- extraction

@dataclass(frozen=True)
class Command:
    doc: str
    line: int
    argv: tuple[str, ...]
    block: int            # the index of its code block in the document (-1: inline code)

    def __str__(self):
        return f"{self.doc}:{self.line}: {shlex.join(self.argv)}"


FENCE = re.compile(r"^```(\w*)\s*$")
SUBST = re.compile(r"\$\([^()]*\)")
OPERATORS = {"&&", "||", ";", "|", "&"}
REDIRECTS = {"<", ">", ">>", "2>", "2>&1", "&>"}


def _blocks(path: Path):
    """(language, first line number, text) of each fenced code block."""
    lang, start, body = None, 0, []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        m = FENCE.match(line.strip())
        if m and lang is None:
            lang, start, body = m.group(1), i + 1, []
        elif line.strip() == "```" and lang is not None:
            yield lang, start, "\n".join(body)
            lang = None
        elif lang is not None:
            body.append(line)


def _simple_commands(text: str):
    """(line offset, argv) of each simple command of a shell text: continuation lines joined, comments,
    redirections and environment assignments dropped, split at ``&&``, ``;`` and pipes."""
    logical, first = "", None
    for i, line in enumerate(text.splitlines()):
        first = i if first is None else first
        if line.rstrip().endswith("\\"):
            logical += line.rstrip()[:-1] + " "
            continue
        logical += line
        lex = shlex.shlex(SUBST.sub("SUBST", logical), posix=True, punctuation_chars=True)
        lex.whitespace_split = True
        lex.commenters = "#"
        words, argv = list(lex), []
        for w in words + [";"]:
            if w in OPERATORS:
                if argv:
                    yield first, argv
                argv = []
            else:
                argv.append(w)
        logical, first = "", None


def _strip(argv: list[str]) -> list[str]:
    """Without leading ``VAR=value`` assignments and ``nice -n N``, and without redirections."""
    out, skip = [], False
    for w in argv:
        if skip:
            skip = False
        elif w in REDIRECTS:
            skip = True
        else:
            out.append(w)
    while out and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", out[0]):
        out.pop(0)
    if out[:1] == ["nice"]:
        out = out[3:] if len(out) > 2 and out[1] == "-n" else out[1:]
    return out


def block_commands() -> list[Command]:
    out = []
    for path in DOCUMENTS:
        for b, (lang, start, text) in enumerate(_blocks(path)):
            if lang in ("bash", "sh", "shell"):
                for offset, argv in _simple_commands(text):
                    argv = _strip(argv)
                    if argv:
                        out.append(Command(path.name, start + offset, tuple(argv), b))
    return out


def python_blocks():
    for path in DOCUMENTS:
        for lang, start, text in _blocks(path):
            if lang == "python":
                yield path.name, start, text


INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")


def inline_commands() -> list[Command]:
    """Inline code that names a command: ``phrase-rescore NAME ...``, or ``NAME --option ...`` with NAME a
    command."""
    out = []
    names = set(main.commands) | set(PENDING_COMMANDS)
    for path in DOCUMENTS:
        if path.name == "cli.md":       # generated from the commands themselves (tests/test_cli_reference.py)
            continue
        in_block = False
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip().startswith("```"):
                in_block = not in_block
                continue
            if in_block:
                continue
            for m in INLINE.finditer(line):
                words = m.group(1).split()
                if words[:1] == ["phrase-rescore"] and len(words) > 1 and words[1] in names:
                    out.append(Command(path.name, i, tuple(words), -1))
                elif len(words) > 1 and words[0] in names and words[1].startswith("-"):
                    out.append(Command(path.name, i, ("phrase-rescore", *words), -1))
    return out


# ----------------------------------------------------------------------------- checking a command line

def _inner(argv: tuple[str, ...]) -> tuple[str, ...] | None:
    """The phrase-rescore command a command line runs (itself, or under torchrun/srun), or None."""
    if argv[0] == "phrase-rescore":
        return argv
    if argv[0] in ("torchrun", "srun") and "phrase-rescore" in argv:
        return argv[argv.index("phrase-rescore"):]
    return None


def _resolve(args: list[str], strict: bool):
    """``(path, command)`` of a command line's words (consumed from ``args``), or None for a placeholder."""
    group: click.Group = main
    while args and args[0].startswith("-"):              # the group's own options
        opt = args.pop(0)
        assert opt in ("--quiet", "--version", "-h", "--help"), f"phrase-rescore has no option {opt}"
    path = ["phrase-rescore"]
    while True:
        assert args, f"{' '.join(path)}: no command given"
        name = args.pop(0)
        if not strict and name not in group.commands and (name.isupper() or name.startswith("[")):
            return None                                 # a placeholder: `phrase-rescore plot KIND`
        if name not in group.commands and group is main and name in PENDING_COMMANDS:
            pytest.skip(f"{name}: {PENDING_COMMANDS[name]}")
        assert name in group.commands, f"{' '.join(path)} has no command {name!r}"
        cmd = group.commands[name]
        path.append(name)
        if not isinstance(cmd, click.Group):
            return path, cmd
        group = cmd


def _check_decode(args: list[str], strict: bool) -> None:
    """``decode`` reads Moses's options itself: its own parser, or (inline) its options' spellings."""
    from phrase_rescore.app.decode_cli import SPELLINGS, parse_decode_args

    if not strict:
        for a in args:
            assert not a.startswith("-") or a.lstrip("-") in SPELLINGS, f"phrase-rescore decode has no option {a}"
        return
    try:
        parse_decode_args(args)
    except PhraseRescoreError as e:
        raise AssertionError(f"phrase-rescore decode: {e}") from None


def check_command(argv: tuple[str, ...], strict: bool = True) -> None:
    """Parse a ``phrase-rescore`` command line with the command's own parser, without running it.

    :param strict: arguments, required options and settings' values checked too (a code block); else
        only the command and its options' names (inline code in the text, with placeholders).
    :raises AssertionError: naming what is wrong.
    """
    args = list(argv[1:])
    found = _resolve(args, strict)
    if found is None:
        return
    path, cmd = found
    if path == ["phrase-rescore", "decode"]:
        return _check_decode(args, strict)
    ctx = click.Context(cmd, info_name=path[-1], parent=click.Context(main, info_name="phrase-rescore"))
    params = {p.name: p for p in cmd.get_params(ctx)}
    if not strict:
        known = {o for p in params.values() for o in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ()))}
        for a in (a.split("=", 1)[0] for a in args):
            assert not a.startswith("--") or a in known, f"{' '.join(path)} has no option {a}"
        return
    try:
        opts, extra, _ = cmd.make_parser(ctx).parse_args(args=list(args))
    except click.UsageError as e:
        raise AssertionError(f"{' '.join(path)}: {e.format_message()}") from None
    assert not extra, f"{' '.join(path)}: unexpected argument(s) {extra}"
    given = {k: v for k, v in opts.items() if not repr(v).startswith("Sentinel")}
    if "help" not in given:
        for p in params.values():
            assert not p.required or p.name in given, \
                f"{' '.join(path)}: missing {p.opts[0] if isinstance(p, click.Option) else p.name}"
        _check_values(path, cmd, ctx, params, given)


def _check_values(path: list[str], cmd: click.Command, ctx: click.Context, params: dict, given: dict) -> None:
    """Every value given to a setting's option passes the setting's own check."""
    spec = getattr(cmd.callback, "__settings__", None)
    own = {s.name: s for s in settings(spec[0])} if spec else {}
    for key, raw in given.items():
        s, p = own.get(key), params[key]
        if s is None or isinstance(p.type, click.Path) or isinstance(raw, bool):
            continue
        try:
            check_value(s, _from_text(s, p.type.convert(raw, p, ctx)), flag_name)
        except (click.BadParameter, PhraseRescoreError) as e:
            raise AssertionError(f"{' '.join(path)}: {e}") from None


def check_benchmark(argv: tuple[str, ...]) -> None:
    """``python benchmarks/X.py --opt ...``: the script exists and declares every option named."""
    script = ROOT / argv[1]
    assert script.is_file(), f"no script {argv[1]}"
    source = script.read_text(encoding="utf-8")
    for a in argv[2:]:
        if a.startswith("--"):
            opt = a.split("=", 1)[0]
            assert f'"{opt}"' in source or f"'{opt}'" in source, f"{argv[1]} declares no option {opt}"


def not_run_reason(argv: tuple[str, ...]) -> str | None:
    for n in (3, 2, 1):
        key = " ".join(argv[:n])
        if key in NOT_RUN:
            return NOT_RUN[key]
    if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", argv[0]):
        return "a shell variable"
    return None


# ----------------------------------------------------------------------------- the tests

BLOCKS = block_commands()


def test_the_documents_have_commands_to_check():
    assert len(BLOCKS) > 30 and any(c.doc == "README.md" for c in BLOCKS)
    assert len(inline_commands()) > 10


@pytest.mark.parametrize("command", BLOCKS, ids=str)
def test_every_command_in_a_code_block_is_real(command):
    argv = command.argv
    inner = _inner(argv)
    if inner is not None:
        check_command(inner)
    elif argv[0] in ("python", "python3") and len(argv) > 1 and argv[1].startswith("benchmarks/"):
        check_benchmark(argv)
    else:
        assert not_run_reason(argv), (f"{command}: a program these tests neither run nor list; add it to NOT_RUN in "
                                      "tests/test_docs.py with the reason, or make it a phrase-rescore command")


@pytest.mark.parametrize("command", inline_commands(), ids=str)
def test_every_command_named_in_the_text_is_real(command):
    check_command(command.argv, strict=False)


@pytest.mark.parametrize("doc, line, text", list(python_blocks()), ids=lambda x: str(x)[:30])
def test_python_code_blocks_compile(doc, line, text):
    """A plain block must parse; a doctest block's examples must (tests/test_api.py runs docs/api.md's)."""
    if text.lstrip().startswith(">>>"):
        for example in doctest.DocTestParser().get_examples(text):
            ast.parse(example.source, filename=f"{doc}:{line + example.lineno}")
    else:
        ast.parse(text, filename=f"{doc}:{line}")


# the sandbox: a tiny phrase table and the moses.ini train-model.perl would write for it, at the paths the
# documents name

TABLE = ("das ||| the ||| 0.7 0.6 0.8 0.5 ||| 0-0 ||| 10 12 8 ||| |||\n"
         "das Haus ||| the home ||| 0.1 0.2 0.1 0.2 ||| 0-0 1-1 ||| 2 12 2 ||| |||\n"
         "das Haus ||| the house ||| 0.8 0.6 0.7 0.5 ||| 0-0 1-1 ||| 10 12 8 ||| |||\n"
         "Haus ||| home ||| 0.3 0.2 0.3 0.4 ||| 0-0 ||| 3 10 3 ||| |||\n"
         "Haus ||| house ||| 0.6 0.7 0.6 0.5 ||| 0-0 ||| 8 10 8 ||| |||\n"
         "ist klein ||| is small ||| 0.9 0.8 0.9 0.7 ||| 0-0 1-1 ||| 5 5 5 ||| |||\n")


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    model = tmp_path / "model"
    model.mkdir()
    with gzip.open(model / "phrase-table.gz", "wt", encoding="utf-8") as f:
        f.write(TABLE)
    ini = (FIX / "train-model.moses.ini").read_text(encoding="utf-8")
    ini = re.sub(r"path=\S*phrase-table\S*", f"path={model / 'phrase-table.gz'}", ini)
    (model / "moses.ini").write_text(ini, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PHRASE_RESCORE_QUIET", "1")
    return tmp_path


def test_the_cheap_commands_run(sandbox):
    """The demo corpus (smaller) and README.md's feature-file commands, run as written (training capped at
    two updates). The commands between them in the guide's demo block are parsed only: build-smt aligns for
    seconds (tests/test_build_smt.py runs it)."""
    for doc, start, more in RUN:
        found = [c for c in BLOCKS if c.doc == doc and shlex.join(c.argv).startswith(start)]
        assert found, f"{doc} no longer has `{start} ...`: update RUN in tests/test_docs.py"
        argv = list(found[0].argv[1:]) + shlex.split(more)
        r = CliRunner().invoke(main, argv)
        assert r.exit_code == 0, f"{found[0]}: {r.output}"
    assert (sandbox / "moses.rnn.ini").is_file() and (sandbox / "corpus" / "train.fr").is_file()


# ----------------------------------------------------------------------------- links and paths

LINK = re.compile(r"\]\(([^)\s]+)\)")
PATH = re.compile(r"^(?:README\.md|CHANGELOG\.md|(?:docs|benchmarks|workflows|tests|app|core|data|pipeline|plots|"
                  r"moses_integration|phrase_rescore)/[\w./-]+)$")


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    out, in_block = set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip().startswith("```"):
            in_block = not in_block
        elif not in_block and line.startswith("#"):
            out.add(_slug(line.lstrip("#")))
    return out


def _links():
    for path in DOCUMENTS:
        text = path.read_text(encoding="utf-8")
        for m in LINK.finditer(text):
            target = m.group(1)
            if not re.match(r"^[a-z]+:", target):
                yield path, text[:m.start()].count("\n") + 1, target


@pytest.mark.parametrize("path, line, target", list(_links()), ids=lambda x: str(x) if isinstance(x, (int, str)) else x.name)
def test_every_link_between_the_documents_resolves(path, line, target):
    file, _, anchor = target.partition("#")
    dest = (path.parent / file).resolve() if file else path
    assert dest.exists(), f"{path.name}:{line}: no file {file}"
    if anchor:
        assert anchor in _anchors(dest), f"{path.name}:{line}: {dest.name} has no heading #{anchor}"


def test_every_file_the_documents_name_exists():
    missing = []
    for path in DOCUMENTS:
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for m in INLINE.finditer(line):
                word = m.group(1).strip()
                if PATH.match(word) and "*" not in word and not (ROOT / word).exists() and word not in PENDING_FILES:
                    missing.append(f"{path.name}:{i}: {word}")
    assert not missing, "the documents name files that do not exist:\n" + "\n".join(missing)


def test_the_layout_table_names_every_module_in_its_folders_row():
    """docs/architecture.md's layout table stays true to the tree: each folder of the package has a row, and
    the row names every module under it (``embedded/``'s in the Moses side's row, ``model/``'s in the
    neural side's)."""
    rows = {}
    for line in (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8").splitlines():
        m = re.match(r"^\| `([\w/]+)/` \|", line)
        if m:
            rows[m.group(1)] = line
    from phrase_rescore.core.config import tomllib

    folders = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"].values()
    missing = []
    for folder in sorted(set(folders)):
        assert folder in rows, f"docs/architecture.md's layout table has no row for {folder}/"
        for module in sorted((ROOT / folder).rglob("*.py")):
            if module.name != "__init__.py" and not re.search(rf"[`/]{re.escape(module.name)}`", rows[folder]):
                missing.append(f"{module.relative_to(ROOT)}")
    assert not missing, "docs/architecture.md's layout table does not name: " + ", ".join(missing)

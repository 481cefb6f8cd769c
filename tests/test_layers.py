"""The installed package is a layered house: every import (read with ``ast``) goes down the layers, no module
imports itself through others, torch stays on the neural side, and nothing imports the application.

Layers, bottom up: ``core`` (imports nothing of the project); ``moses_integration`` (the Moses side) and
``data`` (the demo corpus), each on the core only; ``pipeline`` (the neural side) on the core and the Moses
side; ``plots`` (pictures and the report page, from logs and arrays) on the core only; ``app`` (CLI, workflow
runner, stages) on everything, and imported by nothing else.

One narrow exception: the root package's PEP 562 ``__getattr__`` imports the Python API (``app/api.py``,
which joins the Moses and the neural sides, so it lives in the application) when one of its names is first
asked for (``phrase_rescore.score_pairs``). That import runs inside a function, after every package is
initialised, so it is allowed there (:data:`ROOT_LAZY`) and left out of the import-cycle check; the same
import at the root's top level, or any other import of the application by the root, is still refused.
"""
from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = "phrase_rescore"
#: each layer and the layers it may import (besides itself and the root package, which imports nothing)
MAY_IMPORT = {
    "core": set(),
    "moses_integration": {"core"},
    "data": {"core"},
    "pipeline": {"core", "moses_integration"},
    "plots": {"core"},
    "app": {"core", "moses_integration", "data", "pipeline", "plots"},
}
NO_TORCH = ("core", "moses_integration", "data", "plots")     # not even through another module of the project
TORCH = "torch"
#: what the root package may import, and only inside a function (its lazy ``__getattr__``): the API module
ROOT_LAZY = {f"{ROOT}.app", f"{ROOT}.app.api"}


def installed_sources() -> dict[str, str]:
    """``{module name: source}`` of every module of the installed package, found as the import system finds it."""
    spec = importlib.util.find_spec(ROOT)
    sources = {ROOT: Path(spec.origin).read_text(encoding="utf-8")}
    for layer in MAY_IMPORT:
        sub = importlib.util.find_spec(f"{ROOT}.{layer}")
        for folder in sub.submodule_search_locations:
            for path in sorted(Path(folder).rglob("*.py")):
                parts = path.relative_to(folder).with_suffix("").parts
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                sources[".".join((ROOT, layer) + parts)] = path.read_text(encoding="utf-8")
    return sources


def is_package(name: str, sources: dict[str, str]) -> bool:
    return any(other.startswith(name + ".") for other in sources)


def _outside_functions(tree: ast.AST):
    """The nodes of ``tree`` that run at import time: every node but those inside a function's body."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        todo += [c for c in ast.iter_child_nodes(node)
                 if not isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]


def imports_of(name: str, source: str, sources: dict[str, str], eager_only: bool = False) -> set[str]:
    """The absolute names of the modules ``name`` imports anywhere in its body (lazy imports too; with
    ``eager_only``, only those outside functions, which run when the module is imported)."""
    package = name if is_package(name, sources) else name.rpartition(".")[0]
    found: set[str] = set()
    tree = ast.parse(source)
    for node in (_outside_functions(tree) if eager_only else ast.walk(tree)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names if f"{target}.{alias.name}" in sources)
    return found


def layer_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if parts[0] == ROOT and len(parts) > 1 else None


def import_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """``{module: imported names}``: modules of the project by their name, others by their top-level name."""
    graph = {}
    for name, source in sources.items():
        graph[name] = {t if t.split(".")[0] == ROOT else t.split(".")[0] for t in imports_of(name, source, sources)}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module, and modules that import themselves (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph[v]:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def violations(sources: dict[str, str]) -> list[str]:
    """Every import that breaks the layering, as ``'module: what is wrong'``."""
    graph = import_graph(sources)
    # the root's lazy import of the API (ROOT_LAZY, inside a function) is allowed and cannot form a cycle
    eager = imports_of(ROOT, sources[ROOT], sources, eager_only=True)
    lazy_api = {t for t in graph[ROOT] & ROOT_LAZY if t not in eager}
    graph = {**graph, ROOT: graph[ROOT] - lazy_api}
    problems = [f"import cycle: {' <-> '.join(c)}" for c in cycles(graph)]
    for name, targets in sorted(graph.items()):
        layer = layer_of(name)
        for t in sorted(targets):
            to = layer_of(t)
            if to is None or to == layer or layer is None and t == ROOT:
                continue
            if layer is None:
                when = " at import time (only its __getattr__ may import the API, lazily)" if t in ROOT_LAZY else ""
                problems.append(f"{name}: the root package imports {t}{when}")
            elif to == "app":
                problems.append(f"{name}: imports the application ({t}); nothing may")
            elif to not in MAY_IMPORT[layer]:
                problems.append(f"{name}: the {layer} layer may not import {t}")
    torch_users = {n for n, targets in graph.items() if TORCH in targets}
    for name in sorted(graph):
        if layer_of(name) in NO_TORCH:
            reached = reachable(graph, name)
            via = sorted(reached & torch_users)
            if via:
                problems.append(f"{name}: imports torch (through {', '.join(via)})")
    return problems


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """``start`` and every module of the project it imports, directly or not."""
    seen, todo = set(), [start]
    while todo:
        v = todo.pop()
        if v in seen or v not in graph:
            continue
        seen.add(v)
        todo += graph[v]
    return seen


def test_the_installed_package_is_layered_without_cycles():
    sources = installed_sources()
    assert {layer_of(n) for n in sources} == set(MAY_IMPORT) | {None}
    assert len(sources) > 60      # every module was found, not only the packages
    assert violations(sources) == []


def test_the_graph_sees_every_kind_of_import():
    sources = installed_sources()
    graph = import_graph(sources)
    assert "phrase_rescore.core.errors" in graph["phrase_rescore.core.reading"]              # from .x import
    assert "phrase_rescore.core.progress" in graph["phrase_rescore.moses_integration.embedded.lm"]  # from pkg import mod
    assert "phrase_rescore.pipeline.train" in graph["phrase_rescore.app.cli"]                # inside a function
    assert TORCH in graph["phrase_rescore.pipeline.model.gru"]
    assert "phrase_rescore.app.api" in graph["phrase_rescore"]                                # the root's __getattr__
    assert "phrase_rescore.app.api" not in imports_of("phrase_rescore", sources["phrase_rescore"], sources,
                                                      eager_only=True)


BAD_IMPORTS = [
    # (module, line added to it, fragment of the expected complaint)
    ("phrase_rescore.core.errors", "import torch", "core.errors: imports torch"),
    ("phrase_rescore.core.reading", "from phrase_rescore.pipeline.vocab import EOS_ID",
     "the core layer may not import phrase_rescore.pipeline.vocab"),
    ("phrase_rescore.moses_integration.nbest", "from phrase_rescore.pipeline import device",
     "the moses_integration layer may not import phrase_rescore.pipeline.device"),
    ("phrase_rescore.moses_integration.embedded.mert", "from ..moses_values import FLOOR_TEXT\nimport torch.nn",
     "embedded.mert: imports torch"),
    ("phrase_rescore.moses_integration.moses_ini", "from phrase_rescore.core import reading",
     None),                                                                     # allowed: downwards
    ("phrase_rescore.core.progress", "def f():\n    from .outdir import MARKER\n    from . import progress",
     "import cycle: phrase_rescore.core.progress"),                          # a module importing itself
    ("phrase_rescore.core.errors", "def f():\n    from .output_paths import check_outputs",
     "import cycle: phrase_rescore.core.errors <-> phrase_rescore.core.output_paths"),
    ("phrase_rescore.pipeline.vocab", "from phrase_rescore.app.stages import default_registry",
     "imports the application (phrase_rescore.app.stages)"),
    ("phrase_rescore.data.demo_corpus", "import phrase_rescore.pipeline.pairs",
     "the data layer may not import phrase_rescore.pipeline.pairs"),
    ("phrase_rescore.pipeline.sentences", "from phrase_rescore.data import lexicon",
     "the pipeline layer may not import phrase_rescore.data.lexicon"),
    ("phrase_rescore", "from .core import errors", "the root package imports phrase_rescore.core"),
    ("phrase_rescore", "from .app import api", "the root package imports phrase_rescore.app.api at import time"),
    ("phrase_rescore", "def f():\n    from .app import cli", "the root package imports phrase_rescore.app.cli"),
    ("phrase_rescore", "def f():\n    from .pipeline import score", "the root package imports phrase_rescore.pipeline"),
    ("phrase_rescore", "def f():\n    from .app import api", None),                   # its __getattr__'s own
    ("phrase_rescore.plots.curves", "from phrase_rescore.moses_integration import nbest",
     "the plots layer may not import phrase_rescore.moses_integration.nbest"),
    ("phrase_rescore.plots.render", "import torch", "plots.render: imports torch"),
]


@pytest.mark.parametrize("module, line, fragment", BAD_IMPORTS)
def test_an_added_import_that_breaks_the_layers_is_found(module, line, fragment):
    sources = installed_sources()
    sources[module] += "\n" + line + "\n"
    found = violations(sources)
    if fragment is None:
        assert found == []
    else:
        assert any(fragment in p for p in found), found


def test_a_folder_is_not_importable_under_its_own_name():
    """The folders hold one package each: importing ``pipeline`` from beside them is an error, not a copy."""
    parents = {str(Path(importlib.util.find_spec(f"{ROOT}.{layer}").submodule_search_locations[0]).parent)
               for layer in MAY_IMPORT}
    code = ("import importlib, sys\n"
            f"sys.path[:0] = {sorted(parents)!r}\n"
            f"for name in {sorted(MAY_IMPORT)!r}:\n"
            "    try:\n"
            "        importlib.import_module(name)\n"
            "    except ImportError as e:\n"
            "        assert f'is phrase_rescore.{name}' in str(e), e\n"
            "    else:\n"
            "        raise SystemExit(f'{name} was importable under its folder name')\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert res.returncode == 0, res.stderr + res.stdout

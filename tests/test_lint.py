"""The tree passes ``ruff check`` with the rules pyproject.toml selects (pyflakes, bugbear, isort)."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _ruff() -> list[str] | None:
    """The ruff beside this interpreter (the ``test`` extra installs it), else the one on PATH."""
    here = Path(sys.executable).with_name("ruff")
    if here.is_file():
        return [str(here)]
    found = shutil.which("ruff")
    return [found] if found else None


def test_ruff_check_finds_nothing():
    ruff = _ruff()
    if ruff is None:
        pytest.skip("ruff is not installed (pip install -e '.[test]' installs it): the lint is not checked")
    r = subprocess.run(ruff + ["check", "--no-cache", "--output-format", "concise", str(ROOT)], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


#: The project's own code (tests and benchmarks are not held to these limits).
PRODUCTION = ("core", "moses_integration", "data", "pipeline", "plots", "app")
MAX_LINES = 80        # a function read at once
MAX_COMPLEXITY = 20   # radon's cyclomatic complexity: grade D begins above it
KEPT_WHOLE = "Kept whole:"


def _over_the_limits() -> list[tuple[str, str, int, int, bool]]:
    """(where, name, lines, complexity, says why) of each production function over a limit."""
    import ast

    from radon.complexity import cc_visit

    found = []
    for folder in PRODUCTION:
        for path in sorted((ROOT / folder).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            docs = {(n.lineno, n.name): ast.get_docstring(n) or "" for n in ast.walk(ast.parse(text))
                    if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
            for b in {(b.lineno, b.name): b for b in _functions(cc_visit(text))}.values():  # methods come twice
                lines = b.endline - b.lineno + 1
                if lines > MAX_LINES or b.complexity > MAX_COMPLEXITY:
                    why = KEPT_WHOLE in docs.get((b.lineno, b.name), "")
                    found.append((f"{path.relative_to(ROOT)}:{b.lineno}", b.name, lines, b.complexity, why))
    return found


def _functions(blocks):
    """Every function and method radon found, closures and methods of nested classes included."""
    for b in blocks:
        if hasattr(b, "methods"):      # a class: its methods and inner classes
            yield from _functions(list(b.methods) + list(b.inner_classes))
        else:
            yield b
            yield from _functions(list(b.closures))


def test_every_function_is_short_and_simple_or_says_why_not():
    """No production function has more than 80 lines or a cyclomatic complexity above 20, unless its
    docstring has a paragraph starting "Kept whole:" that says why it is one function."""
    pytest.importorskip("radon", reason="radon is not installed (pip install -e '.[test]' installs it)")
    unexplained = [f"{where} {name}: {lines} lines, complexity {cc}"
                   for where, name, lines, cc, why in _over_the_limits() if not why]
    assert not unexplained, "\n".join(unexplained)

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

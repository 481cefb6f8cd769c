"""The tool version in manifests is the package version plus a hash of the source, so a code change reruns stages."""
from __future__ import annotations

import json
import re

from _workflow_toy import BASE, CALLS, registry

import phrase_rescore
import phrase_rescore.app
import phrase_rescore.app.workflow as workflow
import phrase_rescore.core
import phrase_rescore.data
import phrase_rescore.moses_integration
import phrase_rescore.pipeline
from phrase_rescore.app.workflow import ATTEMPT, MANIFEST, load_workflow, run_workflow
from phrase_rescore.core.version import code_version, source_digest


def _tree(root, files: dict[str, str]):
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_source_digest_follows_every_byte_and_name_of_the_source(tmp_path):
    base = {"pkg/__init__.py": "", "pkg/a.py": "x = 1\n", "pkg/sub/b.py": "y = 2\n"}
    digests = set()
    for i, change in enumerate([{}, {"pkg/a.py": "x = 2\n"}, {"pkg/sub/b.py": "y = 2 \n"}, {"pkg/c.py": ""}]):
        root = _tree(tmp_path / str(i), {**base, **change})
        digests.add(source_digest([root / "pkg"]))
    assert len(digests) == 4
    renamed = _tree(tmp_path / "renamed", {"pkg/__init__.py": "", "pkg/a2.py": "x = 1\n", "pkg/sub/b.py": "y = 2\n"})
    assert source_digest([renamed / "pkg"]) not in digests
    same = _tree(tmp_path / "same", {**base, "pkg/notes.txt": "not code", "pkg/__pycache__/a.cpython.pyc": "x"})
    assert source_digest([same / "pkg"]) == source_digest([tmp_path / "0" / "pkg"])


def test_code_version_is_the_package_version_plus_the_source_hash():
    dirs = [d for pkg in (phrase_rescore.core, phrase_rescore.pipeline, phrase_rescore.moses_integration,
                          phrase_rescore.app, phrase_rescore.data) for d in pkg.__path__]
    for _ in range(5):  # (the source may be edited while the test runs)
        before = source_digest(dirs)
        code_version.cache_clear()  # computed afresh, as a new process does
        v = code_version()
        if source_digest(dirs) == before:
            break
    assert re.fullmatch(r"\d+\.\d+\.\d+\+[0-9a-f]{12}", v), v
    assert v == phrase_rescore.__version__ + "+" + before[:12]


def test_manifests_record_the_code_version_and_a_new_one_reruns_every_stage(tmp_path, monkeypatch):
    work = tmp_path / "work"
    wf = load_workflow(None, registry(), data=BASE)
    run_workflow(wf, registry(), work, echo=None)
    for stage in BASE["workflow"]["stages"]:
        assert json.loads((work / stage / MANIFEST).read_text())["tool_version"] == code_version()
    CALLS.clear()
    run_workflow(wf, registry(), work, echo=None)
    assert CALLS == []
    monkeypatch.setattr(workflow, "code_version", lambda: phrase_rescore.__version__ + "+000000000000")
    res = run_workflow(wf, registry(), work, echo=None)
    assert CALLS == ["make", "double", "squares", "sum"]
    assert {r.reason for r in res} == {"tool version changed"}
    assert json.loads((work / "sum" / ATTEMPT).read_text())["tool_version"] == phrase_rescore.__version__ + "+000000000000"


def test_cli_version_is_the_code_version():
    from click.testing import CliRunner

    from phrase_rescore.app.cli import main
    from phrase_rescore.core.version import code_version

    r = CliRunner().invoke(main, ["--version"])
    assert r.exit_code == 0 and r.output == f"phrase-rescore, version {code_version()}\n"

"""docs/cli.md is what ``python -m phrase_rescore.app.cli_reference`` generates from the commands now."""
from __future__ import annotations

from pathlib import Path

import pytest

from phrase_rescore.app import cli_reference

DOC = Path(__file__).resolve().parent.parent / "docs" / "cli.md"


@pytest.fixture(scope="module")
def generated():
    return cli_reference.generate()


def test_docs_cli_md_is_current(generated):
    if DOC.read_text(encoding="utf-8") != generated:
        old, new = DOC.read_text(encoding="utf-8").splitlines(), generated.splitlines()
        first = next((i for i, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
        pytest.fail(f"docs/cli.md is out of date (first difference at line {first + 1}); regenerate it with "
                    f"`{cli_reference.REGENERATE}`")


def test_every_command_option_and_section_is_in_it(generated):
    import click

    from phrase_rescore.app.cli import main
    from phrase_rescore.app.stages import default_registry

    def walk(group, prefix):
        for name, cmd in group.commands.items():
            if not cmd.hidden:
                yield f"{prefix} {name}", cmd
                if isinstance(cmd, click.Group):
                    yield from walk(cmd, f"{prefix} {name}")

    for name, cmd in walk(main, "phrase-rescore"):
        assert f"\n## {name}\n" in generated, name
        ctx = click.Context(cmd, info_name=name)
        for p in cmd.get_params(ctx):
            if isinstance(p, click.Option) and not p.hidden and "--help" not in p.opts:
                assert f"`{p.opts[0]}" in generated, (name, p.opts)
    registry = default_registry()
    for section in registry.sections():
        assert f"\n### [{section}]\n" in generated, section
        for key in registry.section_params(section):
            assert f"| `{key}` |" in generated, (section, key)


def test_a_section_without_its_source_is_an_error(monkeypatch):
    """A new stage's section must be added to SECTION_SOURCES, so that its keys are documented."""
    monkeypatch.delitem(cli_reference.SECTION_SOURCES, "tune")
    with pytest.raises(KeyError, match=r"tune.*SECTION_SOURCES"):
        cli_reference.generate()


def test_check_mode_says_how_to_regenerate(tmp_path, capsys):
    stale = tmp_path / "cli.md"
    stale.write_text("old\n", encoding="utf-8")
    assert cli_reference.main(["--check", "--out", str(stale)]) == 1
    assert cli_reference.REGENERATE in capsys.readouterr().err
    assert cli_reference.main(["--out", str(stale)]) == 0 and cli_reference.main(["--check", "--out", str(stale)]) == 0

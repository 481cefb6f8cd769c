"""Output folders: new, empty or marked folders are ours; a folder with the user's files is refused."""
import pytest

from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.outdir import MARKER, claim_output_dir, is_claimed


def test_new_folder_is_created_and_marked(tmp_path):
    out = claim_output_dir(tmp_path / "a" / "b")
    assert out.is_dir() and is_claimed(out)


def test_empty_folder_is_claimed(tmp_path):
    (tmp_path / "empty").mkdir()
    assert is_claimed(claim_output_dir(tmp_path / "empty"))


def test_marked_folder_is_reused_and_keeps_its_files(tmp_path):
    out = claim_output_dir(tmp_path / "o")
    (out / "model.pt").write_bytes(b"ours")
    claim_output_dir(out)
    assert (out / "model.pt").read_bytes() == b"ours"


@pytest.mark.parametrize("setup, fragment", [
    (lambda d: (d / "vocab.json").write_text("{}"), "vocab.json"),
    (lambda d: (d / "sub").mkdir(), "sub"),
    (lambda d: [(d / f"f{i}").write_text("x") for i in range(7)], "and 2 more"),
])
def test_folder_with_user_files_is_refused_untouched(tmp_path, setup, fragment):
    d = tmp_path / "user"
    d.mkdir()
    setup(d)
    before = sorted(p.name for p in d.iterdir())
    with pytest.raises(PhraseRescoreError, match=fragment) as e:
        claim_output_dir(d, "--workdir")
    assert "--workdir" in str(e.value) and str(d) in str(e.value)
    assert sorted(p.name for p in d.iterdir()) == before and not (d / MARKER).exists()


def test_a_file_is_not_a_folder(tmp_path):
    f = tmp_path / "table.txt"
    f.write_text("a ||| b ||| 1\n")
    with pytest.raises(PhraseRescoreError, match="found a file"):
        claim_output_dir(f)
    assert f.read_text() == "a ||| b ||| 1\n"


def test_a_failed_command_leaves_no_folder_it_created(tmp_path):
    from click.testing import CliRunner

    from phrase_rescore.app.cli import main

    table = tmp_path / "empty.txt"
    table.write_bytes(b"")
    r = CliRunner().invoke(main, ["--quiet", "prepare", str(table), "--out", str(tmp_path / "new" / "pairs")])
    assert r.exit_code == 1 and "error:" in r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.txt"]


@pytest.mark.parametrize("command", [
    ["prepare", "{table}", "--out", "{dir}"],
    ["build-smt", "{table}", "{table2}", "--out", "{dir}"],
    ["train", "{dir2}", "--out", "{dir}"],
])
def test_commands_refuse_a_folder_of_the_users(tmp_path, command):
    from click.testing import CliRunner

    from phrase_rescore.app.cli import main

    (tmp_path / "t.txt").write_text("a ||| b ||| 0.5\n")
    (tmp_path / "t2.txt").write_text("b\n")
    (tmp_path / "pairs").mkdir()
    user = tmp_path / "mine"
    user.mkdir()
    (user / "vocab.json").write_text("my notes")
    args = [a.format(table=tmp_path / "t.txt", table2=tmp_path / "t2.txt", dir=user, dir2=tmp_path / "pairs")
            for a in command]
    r = CliRunner().invoke(main, ["--quiet", *args])
    assert r.exit_code == 1 and "did not write (vocab.json)" in r.output, r.output
    assert sorted(p.name for p in user.iterdir()) == ["vocab.json"]
    assert (user / "vocab.json").read_text() == "my notes"


def test_a_folder_belongs_to_the_command_that_claimed_it(tmp_path):
    out = claim_output_dir(tmp_path / "tuned", "--workdir", "tune")
    (out / "moses.ini").write_text("[weight]\n")
    assert is_claimed(out, "tune") and not is_claimed(out, "build-smt")
    claim_output_dir(out, "--workdir", "tune")  # the same command again: its own folder
    with pytest.raises(PhraseRescoreError, match="holds the output of `phrase-rescore tune`"):
        claim_output_dir(out, "--out", "build-smt")
    assert (out / "moses.ini").read_text() == "[weight]\n"


def test_build_smt_refuses_the_folder_of_prepare(tmp_path):
    from click.testing import CliRunner

    from phrase_rescore.app.cli import main

    table = tmp_path / "t.txt"
    table.write_text("".join(f"a{i} ||| b{i} ||| 0.5\n" for i in range(50)))
    r = CliRunner().invoke(main, ["--quiet", "prepare", str(table), "--out", str(tmp_path / "pairs")])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["--quiet", "build-smt", str(table), str(table), "--out", str(tmp_path / "pairs")])
    assert r.exit_code == 1 and "output of `phrase-rescore prepare`" in r.output, r.output

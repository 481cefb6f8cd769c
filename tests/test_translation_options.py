"""Reading the phrase and reordering tables the decoder needs: in blocks, filtered to the input's phrases."""
import pytest
from _generated_smt import make_system


def test_table_read_in_blocks_equals_whole_table(tmp_path, monkeypatch):
    """Lines split across read blocks, a last line without a newline, a source with a no-break space."""
    from phrase_rescore.core.errors import PhraseRescoreError
    from phrase_rescore.moses_integration.embedded import translation_options as to
    from phrase_rescore.moses_integration.embedded.features import load_decoder_spec

    ini, sents = make_system(str(tmp_path / "sys"))
    spec = load_decoder_spec(ini)
    keep = to.source_phrases(sents, 20)
    whole = to.PhraseTable(spec, keep, progress=False).entries
    rt_whole = to.ReorderingTable(spec.reordering, keep, progress=False).entries
    monkeypatch.setattr(to, "_CHUNK", 7)
    assert to.PhraseTable(spec, keep, progress=False).entries == whole
    assert to.ReorderingTable(spec.reordering, keep, progress=False).entries == rt_whole
    assert len(whole) > 50
    src = next(iter(whole))
    path = tmp_path / "pt.txt"
    path.write_bytes(f"{src}\u00a0 ||| X ||| 0.5 0.5 0.5 0.5\nzz ||| Y ||| 0.5 x 0.5 0.5\n"
                     f"{src} ||| Z ||| 0.5 0.5 0.5 0.25".encode("utf-8"))
    spec.phrase_table = str(path)
    t = to.PhraseTable(spec, keep, progress=False)        # "zz" is not in the input: its line is not read
    # a no-break space is part of a word to Moses, not a separator it trims: "SRC\u00a0" is another phrase
    assert [w for w, _ in t.entries[src]] == [("Z",)]
    t = to.PhraseTable(spec, keep | {src + "\u00a0"}, progress=False)
    assert [w for w, _ in t.entries[src + "\u00a0"]] == [("X",)] and [w for w, _ in t.entries[src]] == [("Z",)]
    with pytest.raises(PhraseRescoreError, match=r"pt.txt:2: score 'x' is not a number"):
        to.PhraseTable(spec, keep | {"zz"}, progress=False)

"""A UTF-8 byte-order mark (EF BB BF) starting a user's file: text read for its words gives the result
the same file without the mark gives; a file whose lines are copied through is refused, naming line 1."""
from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from phrase_rescore.core.config import read_toml
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.reading import read_lines, read_sentences, read_text_lines

BOM = b"\xef\xbb\xbf"

BOM_TEXT = "das haus ist klein\ndas haus\r\nhaus ist klein\n"
TABLE = b"das ||| the ||| 0.6 0.5 0.7 0.4 ||| 0-0\nhaus ||| house ||| 0.8 0.7 0.6 0.5 ||| 0-0\n"
NBEST = b"0 ||| the house  ||| LM0= -1.5 WordPenalty0= -2 ||| -3.5\n1 ||| small  ||| LM0= -1 WordPenalty0= -1 ||| -2\n"


def _pair(tmp_path: Path, name: str, data: bytes, gz: bool = False) -> tuple[Path, Path]:
    """``name`` without and with a leading BOM (gzip-compressed when ``gz``)."""
    out = []
    for tag, body in (("plain", data), ("bom", BOM + data)):
        p = tmp_path / f"{tag}.{name}{'.gz' if gz else ''}"
        p.write_bytes(gzip.compress(body, mtime=0) if gz else body)
        out.append(p)
    return out[0], out[1]


# ----------------------------------------------------------------------------- text read for its words: stripped

def _split(tmp_path, plain, bom):
    from phrase_rescore.data.split import split_heldout

    outs = []
    for p in (plain, bom):
        d = tmp_path / f"split-{p.name}"
        split_heldout(p, p, d)
        outs.append(sorted((f.name, f.read_bytes()) for f in d.iterdir()))
    return outs


def _vocab(tmp_path, plain, bom):
    from phrase_rescore.pipeline.vocab import count_corpus

    return [count_corpus(p) for p in (plain, bom)]


def _tokenize(tmp_path, plain, bom):
    from phrase_rescore.moses_integration.embedded.tokenizer import TokenizeConfig
    from phrase_rescore.moses_integration.heldout_text import tokenize_file

    outs = []
    for p in (plain, bom):
        o = tmp_path / f"tok-{p.name}"
        tokenize_file(p, o, TokenizeConfig(lang="de", case="lower", escape=True), None)
        outs.append(o.read_bytes())
    return outs


def _decode(tmp_path, plain, bom):
    """The embedded decoder on a source with and without the mark (a marked first word was unknown)."""
    from _tiny_smt import make_tiny_system

    from phrase_rescore.moses_integration.embedded.decoder import decode_file

    s = make_tiny_system(tmp_path / "sys")
    outs = []
    for p in (plain, bom):
        o = tmp_path / f"out-{p.name}"
        decode_file(s["ini"], p, o)
        outs.append(o.read_bytes())
    return outs


STRIPPED = {
    "read_lines": lambda t, a, b: [list(read_lines(p)) for p in (a, b)],
    "read_text_lines": lambda t, a, b: [read_text_lines(p) for p in (a, b)],
    "read_sentences": lambda t, a, b: [read_sentences(p) for p in (a, b)],
    "split": _split,
    "vocab": _vocab,
    "tokenize": _tokenize,
    "decode": _decode,
}


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("kind", sorted(STRIPPED))
def test_text_with_bom_reads_as_without(tmp_path, kind, gz):
    plain, bom = _pair(tmp_path, "txt", BOM_TEXT.encode("utf-8"), gz)
    without, with_ = STRIPPED[kind](tmp_path, plain, bom)
    assert with_ == without


def test_evaluate_references_with_bom_score_as_without(tmp_path):
    """Identical hypotheses score BLEU 100 against a reference file that starts with the mark."""
    from phrase_rescore.moses_integration.configs import EvaluateConfig, SystemSpec
    from phrase_rescore.moses_integration.report import evaluate

    refs = "the house is small\nthe house\nhouse is small\n"
    hyp = tmp_path / "hyp"
    hyp.write_text(refs, encoding="utf-8")
    ini = tmp_path / "moses.ini"
    ini.write_text("[feature]\n", encoding="utf-8")
    bleu = []
    for name, body in (("ref", refs.encode()), ("ref.bom", BOM + refs.encode())):
        (tmp_path / name).write_bytes(body)
        df = evaluate(EvaluateConfig(systems=[SystemSpec("Baseline", ini, outputs={"test": hyp})], test_src=hyp,
                                     test_ref=tmp_path / name, workdir=tmp_path / f"ev-{name}", backend="embedded",
                                     target_lang=None, bootstrap_samples=10))
        bleu.append(df["test_bleu"].iloc[0])
    assert bleu == [100.0, 100.0]


def test_toml_config_with_bom_reads_as_without(tmp_path):
    plain, bom = _pair(tmp_path, "toml", b'[build-smt]\nsource_lang = "de"\n')
    assert read_toml(bom) == read_toml(plain) == {"build-smt": {"source_lang": "de"}}


def test_strip_changes_nothing_else(tmp_path):
    """Only a mark at the very start is dropped: one later in the file, or ``bom="keep"``, stays."""
    p = tmp_path / "t"
    p.write_bytes(BOM + b"a\n" + BOM + b"b\n")
    assert read_text_lines(p) == ["a", "\ufeffb"]
    assert [t for _, t, _ in read_lines(p, bom="keep")] == ["\ufeffa", "\ufeffb"]


# ----------------------------------------------------------------------------- copied through: refused at line 1

def _phrase_table(p):
    from phrase_rescore.moses_integration.phrase_table import read_phrase_table

    return [(e.source, e.target, e.scores) for e in read_phrase_table(p)]


def _not_empty(p):
    from phrase_rescore.moses_integration.phrase_table import check_not_empty

    check_not_empty(p)


def _swap(p):
    from phrase_rescore.moses_integration.table_columns import swap_table

    out = p.with_name(p.name + ".swapped")
    swap_table(p, out)
    return out.read_bytes()


def _sorted(p):
    from phrase_rescore.moses_integration.rewrite import check_c_sorted

    check_c_sorted(p)


def _shards(p):
    from phrase_rescore.pipeline.scoring.sharded import chunk_offsets

    return chunk_offsets(p, 1)


def _decoder_table(p):
    """The embedded decoder's table reader, through a moses.ini that names ``p``."""
    from _tiny_smt import make_tiny_system

    from phrase_rescore.moses_integration.embedded.decoder import decode_file

    s = make_tiny_system(p.parent / f"sys-{p.name}")
    ini = s["ini"].read_text().replace(str(s["ini"].parent / "phrase-table"), str(p))
    s["ini"].write_text(ini)
    out = p.parent / f"out-{p.name}"
    decode_file(s["ini"], s["src"], out)
    return out.read_bytes()


def _moses_ini(p):
    from phrase_rescore.moses_integration.moses_ini import read_moses_ini

    return read_moses_ini(p).text()


def _nbest(p):
    from phrase_rescore.moses_integration.nbest import read_nbest

    return [(e.sent_id, e.hypothesis, e.total) for e in read_nbest(p)]


INI = b"[feature]\nWordPenalty\n\n[weight]\nWordPenalty0= -1\n"
TABLE_FULL = (b"das ||| the ||| 0.6 0.5 0.7 0.4 ||| 0-0\nhaus ||| house ||| 0.8 0.7 0.6 0.5 ||| 0-0\n"
              b"ist ||| is ||| 0.9 0.8 0.9 0.8 ||| 0-0\nklein ||| small ||| 0.7 0.6 0.7 0.6 ||| 0-0\n")

REFUSED = {
    "phrase_table": (_phrase_table, TABLE),
    "check_not_empty": (_not_empty, TABLE),
    "swap_table": (_swap, TABLE),
    "check_c_sorted": (_sorted, TABLE),
    "score_shards": (_shards, TABLE),
    "decoder_table": (_decoder_table, TABLE_FULL),
    "moses_ini": (_moses_ini, INI),
    "nbest": (_nbest, NBEST),
}


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("kind", sorted(REFUSED))
def test_copied_file_with_bom_is_refused_at_line_1(tmp_path, kind, gz):
    read, data = REFUSED[kind]
    plain, bom = _pair(tmp_path, kind, data, gz)
    read(plain)                                   # the same file without the mark is fine
    with pytest.raises(PhraseRescoreError) as e:
        read(bom)
    assert e.value.path == str(bom) and e.value.line == 1
    assert "byte-order mark" in e.value.message and "expected the file without one" in e.value.message


"""Tables filtered to the input once per tuning run: the entries an input can use, the same tuning, one read
of the full table."""
import builtins
import gzip
import os

import numpy as np
import pytest
from _tunable_system import write_tunable_system

from phrase_rescore.moses_integration.embedded.decoder import decode_file
from phrase_rescore.moses_integration.embedded.tune import EmbeddedTuneConfig, tune_embedded
from phrase_rescore.moses_integration.moses_ini import read_moses_ini
from phrase_rescore.moses_integration.table_filter import filter_table, filtered_ini, input_phrases

TABLE = b"""a b c ||| x ||| 1 ||| |||
a b ||| y ||| 1
a c ||| z ||| 1
b ||| w ||| 1
 b  ||| v ||| 1
c d ||| u ||| 1
d ||| t ||| 1
"""


def test_filter_keeps_the_entries_whose_source_is_a_phrase_of_the_input(tmp_path):
    (tmp_path / "t").write_bytes(TABLE)
    keep = input_phrases([["a", "b", "c"], ["d"]], max_len=2)
    assert keep == {b"a", b"b", b"c", b"a b", b"b c", b"d"}
    info = filter_table(str(tmp_path / "t"), keep, tmp_path / "f")
    # "a b c" is longer than max_len; "a c" and "c d" are not runs of an input sentence; " b " is trimmed as Moses does
    assert (tmp_path / "f").read_bytes() == b"a b ||| y ||| 1\nb ||| w ||| 1\n b  ||| v ||| 1\nd ||| t ||| 1\n"
    assert info["lines"] == 7 and info["kept"] == 4
    with gzip.open(tmp_path / "t.gz", "wb") as f:
        f.write(TABLE)
    gz = filter_table(str(tmp_path / "t.gz"), keep, tmp_path / "f.gz")
    assert gzip.decompress((tmp_path / "f.gz").read_bytes()) == (tmp_path / "f").read_bytes()
    import hashlib
    assert gz["sha256"] == hashlib.sha256((tmp_path / "t.gz").read_bytes()).hexdigest()


def _gz_system(tmp_path):
    """The tuning test's system with its phrase table gzipped, and 3000 entries no dev sentence can use."""
    ref = write_tunable_system(tmp_path, np.random.default_rng(0))
    lines = (tmp_path / "phrase-table").read_text().splitlines()
    lines += [f"zz{i} ||| q{i} ||| 0.5 0.5 0.5 0.5 ||| 0-0 ||| 1 1 1" for i in range(3000)]
    with gzip.open(tmp_path / "phrase-table.gz", "wt") as f:
        f.write("\n".join(sorted(lines)) + "\n")
    ini = (tmp_path / "moses.ini").read_text().replace(str(tmp_path / "phrase-table"), str(tmp_path / "phrase-table.gz"))
    (tmp_path / "moses.ini").write_text(ini)
    os.unlink(tmp_path / "phrase-table")
    return ref


class _Counting:
    """A file object that adds the bytes read through it to ``counter``."""

    def __init__(self, f, counter):
        self._f, self._counter = f, counter

    def read(self, *a):
        b = self._f.read(*a)
        self._counter[0] += len(b)
        return b

    def readinto(self, b):
        n = self._f.readinto(b)
        self._counter[0] += n or 0
        return n

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()


def _count_reads(monkeypatch, path):
    """Bytes of ``path`` read in this process (gzip readers, hashing, filtering: all open it with open)."""
    counter = [0]
    real = builtins.open

    def counting(file, *a, **kw):
        f = real(file, *a, **kw)
        if isinstance(file, (str, os.PathLike)) and os.path.abspath(file) == os.path.abspath(path):
            return _Counting(f, counter)
        return f
    monkeypatch.setattr(builtins, "open", counting)
    return counter


def test_a_multi_iteration_tune_reads_the_full_table_once(tmp_path, monkeypatch):
    _gz_system(tmp_path)
    table = tmp_path / "phrase-table.gz"
    cfg = EmbeddedTuneConfig(str(tmp_path / "moses.ini"), str(tmp_path / "dev.src"), str(tmp_path / "dev.ref"),
                             str(tmp_path / "work"), nbest=20, max_iterations=4, seed=1, restarts=3, threads=1)
    size = table.stat().st_size
    read = _count_reads(monkeypatch, table)
    tuned = tune_embedded(cfg)
    iterations = len((tmp_path / "work" / "tune-log.csv").read_text().splitlines()) - 1
    assert iterations >= 2 and size <= read[0] < 1.1 * size, (iterations, read[0], size)
    # the iterations decoded with the filtered table: the dev set's entries, none of the unusable ones
    filtered = read_moses_ini(tmp_path / "work" / "filtered" / "moses.ini").feature("TranslationModel0").get("path")
    kept = gzip.decompress(open(filtered, "rb").read()).decode().splitlines()
    assert len(kept) == 24 and not any(line.startswith("zz") for line in kept)
    # the tuned ini names the full table
    assert read_moses_ini(tuned).feature("TranslationModel0").get("path") == str(table)

    # a rerun (here: of a finished run, which rewrites the tuned ini) reuses the filtered table: one read, to hash it
    read[0] = 0
    mtime = os.stat(filtered).st_mtime_ns
    tune_embedded(cfg)
    assert size <= read[0] < 1.1 * size and os.stat(filtered).st_mtime_ns == mtime


def test_tuning_on_the_filtered_table_gives_the_weights_of_the_full_one(tmp_path, monkeypatch):
    """Filtering keeps every entry the decoder could look up, so the tuned weights are those a decoder
    loading the whole table gives."""
    _gz_system(tmp_path)
    cfg = EmbeddedTuneConfig(str(tmp_path / "moses.ini"), str(tmp_path / "dev.src"), str(tmp_path / "dev.ref"),
                             str(tmp_path / "work"), nbest=20, max_iterations=3, seed=1, restarts=3, threads=1)
    filtered_run = read_moses_ini(tune_embedded(cfg)).weights
    import phrase_rescore.moses_integration.embedded.tune as tune_module

    def no_filter(ini, inputs, folder, max_len=None, echo=None):
        from phrase_rescore.moses_integration.table_filter import FilteredModels
        return FilteredModels(ini, {}, False)
    monkeypatch.setattr(tune_module, "filtered_ini", no_filter)
    cfg.workdir = str(tmp_path / "work2")
    assert read_moses_ini(tune_embedded(cfg)).weights == filtered_run


def test_a_changed_input_or_table_is_filtered_anew(tmp_path):
    _gz_system(tmp_path)
    ini, dev = tmp_path / "moses.ini", tmp_path / "dev.src"
    first = filtered_ini(ini, [dev], tmp_path / "f")
    assert not first.reused and filtered_ini(ini, [dev], tmp_path / "f").reused
    dev.write_text("zz1 zz2\n")
    again = filtered_ini(ini, [dev], tmp_path / "f")
    assert not again.reused and again.tables["TranslationModel0"]["kept"] == 2
    decode_file(again.ini, dev, tmp_path / "out")
    assert (tmp_path / "out").read_text() == "q1 q2\n"
    with gzip.open(tmp_path / "phrase-table.gz", "at") as f:
        f.write("zz1 ||| r1 ||| 0.9 0.9 0.9 0.9 ||| 0-0 ||| 1 1 1\n")
    assert not filtered_ini(ini, [dev], tmp_path / "f").reused


@pytest.mark.parametrize("max_len, kept", [(1, 2), (2, 3)])
def test_the_ini_s_max_phrase_length_bounds_the_phrases_kept(tmp_path, max_len, kept):
    (tmp_path / "pt").write_text("a ||| x ||| 1 1 1 1\nb ||| y ||| 1 1 1 1\na b ||| z ||| 1 1 1 1\n")
    (tmp_path / "lm.arpa").write_text("\\data\\\nngram 1=3\n\n\\1-grams:\n-1\t<unk>\n-99\t<s>\n-1\t</s>\n\n\\end\\\n")
    (tmp_path / "moses.ini").write_text(
        f"[max-phrase-length]\n{max_len}\n\n[feature]\nPhraseDictionaryMemory name=TranslationModel0 num-features=4 "
        f"path=pt input-factor=0 output-factor=0\nKENLM name=LM0 factor=0 path=lm.arpa order=1\n\n[weight]\n"
        "TranslationModel0= 1 1 1 1\nLM0= 1\n")
    (tmp_path / "in").write_text("a b\n")
    f = filtered_ini(tmp_path / "moses.ini", [tmp_path / "in"], tmp_path / "f")
    assert f.tables["TranslationModel0"]["kept"] == kept
    # the relative paths of the ini are made absolute in the filtered ini, which lives in another folder
    assert read_moses_ini(f.ini).feature("LM0").get("path") == str(tmp_path / "lm.arpa")


def test_an_input_that_uses_no_entry_decodes_with_the_full_table(tmp_path):
    """A decoder refuses an empty table: when the input can use no entry, the ini keeps the full table."""
    _gz_system(tmp_path)
    (tmp_path / "none.src").write_text("nothing here\n")
    f = filtered_ini(tmp_path / "moses.ini", [tmp_path / "none.src"], tmp_path / "f")
    assert f.tables["TranslationModel0"]["kept"] == 0 and f.tables["TranslationModel0"]["file"] is None
    assert read_moses_ini(f.ini).feature("TranslationModel0").get("path") == str(tmp_path / "phrase-table.gz")
    decode_file(f.ini, tmp_path / "none.src", tmp_path / "out")
    assert (tmp_path / "out").read_text() == "nothing here\n"
    assert filtered_ini(tmp_path / "moses.ini", [tmp_path / "none.src"], tmp_path / "f").reused

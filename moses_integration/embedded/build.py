"""``build_smt``: a Moses-compatible phrase-based system from a parallel corpus, without Moses.

Phases (each timed, with progress bars): read -> tokenize -> clean -> case -> align (eflomal, both
directions) -> symmetrize (grow-diag-final-and) -> lexical tables -> extract -> score -> reordering ->
LM -> moses.ini.

Output directory layout (Moses's ``train-model.perl`` names where there is one)::

    OUT/phrase-table.gz                  the phrase table (4 scores, alignment, counts), sorted, gzip
    OUT/reordering-table.wbe-msd-bidirectional-fe.gz
                                         the lexicalized reordering table (6 scores), reordering
                                         "msd-bidirectional-fe" only (train-model.perl's name for it)
    OUT/lm.arpa                          the target-side interpolated modified Kneser-Ney LM
    OUT/lm.binary                        KenLM binary form, only when ``build_binary`` is found (PATH, $MOSES_HOME/bin)
    OUT/moses.ini                        train-model.perl step 9's layout, ABSOLUTE paths (as it writes them)
    OUT/manifest.json                    format version, config, input hashes, statistics, timings, outputs
    OUT/corpus/clean.src, clean.tgt      tokenized, cleaned, cased training text (one sentence per line)
    OUT/corpus/lines-retained            1-based input line number of each kept pair
    OUT/model/aligned.fwd, aligned.rev   eflomal's directional alignments (Pharaoh)
    OUT/model/aligned.grow-diag-final-and  the symmetrized alignment (Pharaoh)
    OUT/model/lex.f2e, lex.e2f           word translation tables (Moses's format)
    OUT/model/truecase-model.src/.tgt    only with case="truecase"

Paths in moses.ini are absolute, so the ini works from any working directory (Moses resolves
relative paths against the CWD, not the ini's directory); moving OUT means regenerating the ini.
"""
from __future__ import annotations

import json
import os
import platform
import resource
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

from phrase_rescore.core import progress
from phrase_rescore.core.atomic_write import atomic_open
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.hashing import sha256_file
from phrase_rescore.core.reading import read_text_lines

from ..configs import BuildConfig
from ..moses_ini import check_ini_path
from .align import EflomalConfig, align_eflomal, format_pharaoh, grow_diag_final_and
from .clean import CleanConfig, clean_pairs
from .extract import count_phrase_pairs
from .lm import LMConfig, build_binary, train_lm
from .phrase_scoring import lexical_tables, score_phrase_table, score_reordering_table
from .tokenizer import TokenizeConfig, Tokenizer

FORMAT_VERSION = 1

#: the reordering table of "msd-bidirectional-fe": word-based, msd, both directions, conditioned on f and e
LR_CONFIG = "wbe-msd-bidirectional-fe"
LR_TABLE = f"reordering-table.{LR_CONFIG}.gz"
#: train-model.perl's -reordering-smooth default (constant smoothing, lexical-reordering-score)
LR_SMOOTHING = 0.5


@dataclass
class BuildResult:
    """What was built: output paths, statistics per phase and timings (seconds)."""

    out_dir: str
    phrase_table: str
    lm: str
    moses_ini: str
    manifest: str
    reordering_table: str | None = None
    stats: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """A few lines for the CLI."""
        pt = self.stats.get("phrase_table", {})
        lm = self.stats.get("lm", {})
        lines = [self.stats.get("clean_summary", ""),
                 f"phrase table: {pt.get('lines', 0)} pairs, {pt.get('distinct_sources', 0)} sources, "
                 f"{pt.get('mean_targets_per_source', 0):.2f} targets/source -> {self.phrase_table}",
                 f"reordering table: {self.stats.get('reordering_table', {}).get('lines', 0)} pairs -> "
                 f"{self.reordering_table}" if self.reordering_table else "",
                 f"LM: order {lm.get('order')}, n-grams {lm.get('ngrams')} -> {self.lm}",
                 f"moses.ini -> {self.moses_ini}",
                 "time: " + ", ".join(f"{k} {v:.1f}s" for k, v in self.timings.items())]
        return "\n".join([ln for ln in lines if ln] + [f"note: {n}" for n in self.notes])


def moses_ini_text(phrase_table: str, lm_path: str, lm_order: int, distortion_limit: int = 6,
                   num_features: int = 4, reordering_table: str | None = None) -> str:
    """moses.ini exactly as train-model.perl's create_ini writes it for a phrase-based model with
    distance reordering and one KenLM LM, with Moses's default initial weights; with
    ``reordering_table``, as it writes it for ``-reordering msd-bidirectional-fe`` (the
    LexicalReordering feature after the phrase table, six weights of 0.3 before Distortion0's)."""
    lr_feature = lr_weight = ""
    if reordering_table is not None:
        lr_feature = (f"LexicalReordering name=LexicalReordering0 num-features=6 type={LR_CONFIG}-allff "
                      f"input-factor=0 output-factor=0 path={reordering_table}\n")
        lr_weight = "LexicalReordering0=" + " 0.3" * 6 + "\n"
    return (
        "#########################\n"
        "### MOSES CONFIG FILE ###\n"
        "#########################\n"
        "\n"
        "# input factors\n"
        "[input-factors]\n"
        "0\n"
        "\n"
        "# mapping steps\n"
        "[mapping]\n"
        "0 T 0\n"
        "\n"
        "[distortion-limit]\n"
        f"{distortion_limit}\n"
        "\n"
        "# feature functions\n"
        "[feature]\n"
        "UnknownWordPenalty\n"
        "WordPenalty\n"
        "PhrasePenalty\n"
        f"PhraseDictionaryMemory name=TranslationModel0 num-features={num_features} path={phrase_table} "
        "input-factor=0 output-factor=0\n"
        + lr_feature +
        "Distortion\n"
        f"KENLM name=LM0 factor=0 path={lm_path} order={lm_order}\n"
        "\n"
        "# dense weights for feature functions\n"
        "[weight]\n"
        "# The default weights are NOT optimized for translation quality. You MUST tune the weights.\n"
        "# Documentation for tuning is here: http://www.statmt.org/moses/?n=FactoredTraining.Tuning \n"
        "UnknownWordPenalty0= 1\n"
        "WordPenalty0= -1\n"
        "PhrasePenalty0= 0.2\n"
        "TranslationModel0=" + " 0.2" * num_features + "\n"
        + lr_weight +
        "Distortion0= 0.3\n"
        "LM0= 0.5\n"
    )


def _write_sentences(path: Path, sents: Sequence[Sequence[str]]) -> None:
    with atomic_open(path, "w") as f:
        f.writelines(" ".join(s) + "\n" for s in sents)


def _write_alignments(path: Path, alignments) -> None:
    with atomic_open(path, "w") as f:
        f.writelines(format_pharaoh(a) + "\n" for a in alignments)


def _own_peak_rss_mb() -> float:
    """This process's peak RSS in MB: VmHWM (reset by exec) where /proc has it, else ru_maxrss
    (which Linux carries over from a parent across exec)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _peak_rss_mb() -> dict:
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"self_mb": _own_peak_rss_mb(), "children_mb": round(children, 1)}


def _drop_stale_reordering_table(out: Path, keep: bool) -> None:
    """A distance-only rebuild removes the reordering table an earlier build of this folder wrote (the
    manifest lists it), so the folder holds one system; a file build-smt did not write is left alone."""
    stale = out / LR_TABLE
    if keep or not stale.is_file():
        return
    try:
        written = json.loads((out / "manifest.json").read_text(encoding="utf-8")).get("outputs_sha256", {})
    except (OSError, ValueError, AttributeError):
        return
    if isinstance(written, dict) and LR_TABLE in written:
        stale.unlink()


class _Run:
    """One build's folder, settings, and what it reports: statistics, notes, and each phase's time and the
    process's peak RSS at its end."""

    def __init__(self, out: Path, config: BuildConfig):
        self.out, self.config = out, config
        self.timings: dict[str, float] = {}
        self.rss_after: dict[str, float] = {}   # this process's peak RSS so far (MB) at the end of each phase
        self.stats: dict = {"peak_rss_after_phase_mb": self.rss_after}
        self.notes: list[str] = []
        self.clock = time.perf_counter()

    def lap(self, name: str) -> None:
        """The phase ``name`` ends now."""
        now = time.perf_counter()
        self.timings[name] = round(now - self.clock, 3)
        self.rss_after[name] = _own_peak_rss_mb()
        self.clock = now


def _read_corpus(run: _Run, src_path, tgt_path) -> tuple[list[str], list[str]]:
    """The raw training text (train-model.perl's corpus), line i of one translating line i of the other."""
    src_raw = read_text_lines(src_path)
    tgt_raw = read_text_lines(tgt_path)
    if len(src_raw) != len(tgt_raw):
        raise PhraseRescoreError(f"has {len(src_raw)} lines but the target file {os.fspath(tgt_path)} has "
                                 f"{len(tgt_raw)}; expected line i of one to translate line i of the other",
                                 src_path)
    if not src_raw:
        raise PhraseRescoreError("the training corpus is empty", src_path)
    run.lap("read")
    return src_raw, tgt_raw


def _tokenize(run: _Run, tokenizers: tuple[Tokenizer, Tokenizer], src_raw, tgt_raw) -> tuple[list, list]:
    """tokenizer.perl on both sides (casing comes after cleaning, so the truecaser learns from the kept text)."""
    tok_s, tok_t = tokenizers
    with progress.bar(total=len(src_raw), desc="tokenize", unit="pair") as bar:
        src_tok, tgt_tok = [], []
        for s, t in zip(src_raw, tgt_raw):
            src_tok.append(tok_s.split(s))
            tgt_tok.append(tok_t.split(t))
            bar.update()
    run.lap("tokenize")
    return src_tok, tgt_tok


def _clean(run: _Run, src_tok, tgt_tok, src_path) -> tuple[list, list, list[int]]:
    """clean-corpus-n.perl: the kept pairs and the input line number of each."""
    config = run.config
    src_c, tgt_c, cstats = clean_pairs(src_tok, tgt_tok, CleanConfig(max_len=config.max_sentence_length,
                                                                      ratio=config.max_length_ratio))
    if not src_c:
        raise PhraseRescoreError("no sentence pair is left after cleaning (" + cstats.summary() + ")", src_path)
    run.stats["clean"] = cstats.to_dict()
    run.stats["clean_summary"] = cstats.summary()
    run.lap("clean")
    return src_c, tgt_c, cstats.kept_line_numbers


def _case(run: _Run, tokenizers: tuple[Tokenizer, Tokenizer], src_c, tgt_c, kept_lines) -> tuple[list, list]:
    """Lowercase or truecase (the truecaser trained on the kept text); writes OUT/corpus/."""
    out, (tok_s, tok_t) = run.out, tokenizers
    if run.config.case == "truecase":
        tok_s.train_truecaser(src_c)
        tok_t.train_truecaser(tgt_c)
        tok_s.save_truecaser(out / "model" / "truecase-model.src")
        tok_t.save_truecaser(out / "model" / "truecase-model.tgt")
    src_c = [tok_s.case(s) for s in src_c]
    tgt_c = [tok_t.case(t) for t in tgt_c]
    _write_sentences(out / "corpus" / "clean.src", src_c)
    _write_sentences(out / "corpus" / "clean.tgt", tgt_c)
    with atomic_open(out / "corpus" / "lines-retained", "w") as f:
        f.writelines(f"{n}\n" for n in kept_lines)
    run.lap("case")
    return src_c, tgt_c


def _corpus(run: _Run, src_path, tgt_path) -> tuple[list, list]:
    """The training corpus tokenized, cleaned and cased (train-model.perl's input)."""
    config = run.config
    tokenizers = (Tokenizer(TokenizeConfig(lang=config.source_lang, case=config.case, escape=config.escape)),
                  Tokenizer(TokenizeConfig(lang=config.target_lang, case=config.case, escape=config.escape)))
    src_raw, tgt_raw = _read_corpus(run, src_path, tgt_path)
    src_tok, tgt_tok = _tokenize(run, tokenizers, src_raw, tgt_raw)
    del src_raw, tgt_raw
    src_c, tgt_c, kept_lines = _clean(run, src_tok, tgt_tok, src_path)
    del src_tok, tgt_tok
    return _case(run, tokenizers, src_c, tgt_c, kept_lines)


def _align(run: _Run, src_c, tgt_c) -> tuple[list, list]:
    """train-model.perl step 2 (GIZA++ there, eflomal here): word alignments in both directions."""
    fwd, rev = align_eflomal(src_c, tgt_c, EflomalConfig(model=run.config.eflomal_model,
                                                         n_samplers=run.config.eflomal_samplers),
                             quiet=True, work_dir=run.out / "model")
    _write_alignments(run.out / "model" / "aligned.fwd", fwd)
    _write_alignments(run.out / "model" / "aligned.rev", rev)
    run.lap("align")
    return fwd, rev


def _symmetrize(run: _Run, fwd, rev) -> list:
    """train-model.perl step 3: the grow-diag-final-and symmetrization of the two directions."""
    with progress.bar(total=len(fwd), desc="symmetrize", unit="pair") as bar:
        sym = []
        for f_pts, r_pts in zip(fwd, rev):
            sym.append(grow_diag_final_and(f_pts, r_pts))
            bar.update()
    _write_alignments(run.out / "model" / "aligned.grow-diag-final-and", sym)
    run.stats["alignment_points"] = sum(len(a) for a in sym)
    run.lap("symmetrize")
    return sym


def _lexical(run: _Run, src_c, tgt_c, sym):
    """train-model.perl step 4: the word translation tables lex.f2e and lex.e2f."""
    lex = lexical_tables(src_c, tgt_c, sym)
    lex.write(run.out / "model" / "lex.f2e", run.out / "model" / "lex.e2f")
    run.lap("lexical")
    return lex


def _extract(run: _Run, src_c, tgt_c, sym):
    """train-model.perl step 5: the phrase pairs' counts (with orientations for a lexicalized model)."""
    counts = count_phrase_pairs(src_c, tgt_c, sym, max_len=run.config.max_phrase_length,
                                orientation=run.config.reordering != "distance")
    run.stats["extracted_instances"] = int(counts["count"].sum())
    run.stats["distinct_triples"] = len(counts)
    run.lap("extract")
    return counts


def _score(run: _Run, counts, lex) -> Path:
    """train-model.perl step 6: OUT/phrase-table.gz."""
    pt_path = run.out / "phrase-table.gz"
    pt_stats = score_phrase_table(counts, lex, pt_path, compresslevel=run.config.compresslevel)
    run.stats["phrase_table"] = pt_stats.to_dict()
    run.lap("score")
    return pt_path


def _reordering(run: _Run, counts) -> Path | None:
    """train-model.perl step 7 (lexical-reordering-score on extract.o): the reordering table of a lexicalized
    model, else None (and an earlier build's table in OUT removed)."""
    lexicalized = run.config.reordering != "distance"
    _drop_stale_reordering_table(run.out, keep=lexicalized)
    if not lexicalized:
        return None
    lr_path = run.out / LR_TABLE
    run.stats["reordering_table"] = {"lines": score_reordering_table(counts, lr_path, smoothing=LR_SMOOTHING,
                                                                     compresslevel=run.config.compresslevel),
                                     "type": f"{LR_CONFIG}-allff", "smoothing": LR_SMOOTHING}
    run.lap("reordering")
    return lr_path


def _language_model(run: _Run, tgt_c) -> tuple[Path, int]:
    """The target side's KN LM (lmplz's): OUT/lm.arpa (and lm.binary where KenLM's build_binary is found);
    returns its path and order."""
    lm_path = run.out / "lm.arpa"
    lm_stats = train_lm(tgt_c, lm_path, LMConfig(order=run.config.lm_order))
    run.stats["lm"] = lm_stats.to_dict()
    if lm_stats.order < run.config.lm_order:
        run.notes.append(f"LM order reduced to {lm_stats.order}: no sentence is long enough for higher orders")
    if lm_stats.fallback_orders:
        run.notes.append(f"LM discounts fell back to {list(LMConfig().discount_fallback)} for orders "
                         f"{lm_stats.fallback_orders} (too little data to estimate them)")
    skipped = build_binary(lm_path, run.out / "lm.binary")
    if skipped:
        run.notes.append(skipped)
    run.lap("lm")
    return lm_path, lm_stats.order


def _moses_ini(run: _Run, pt_path: Path, lm_path: Path, lm_order: int, lr_path: Path | None) -> Path:
    """train-model.perl step 9: OUT/moses.ini."""
    ini_path = run.out / "moses.ini"
    with atomic_open(ini_path, "w") as f:
        f.write(moses_ini_text(str(pt_path), str(lm_path), lm_order, run.config.distortion_limit,
                               reordering_table=None if lr_path is None else str(lr_path)))
    run.notes.append("eflomal has no seed option: re-running the alignment can give slightly different tables")
    run.stats["peak_rss"] = _peak_rss_mb()
    run.lap("ini")
    return ini_path


def _write_manifest(run: _Run, src_path, tgt_path) -> Path:
    """OUT/manifest.json: format version, settings, inputs' and outputs' sha256, statistics, timings, notes."""
    out = run.out
    outputs = {p.relative_to(out).as_posix(): sha256_file(p)
               for p in sorted(out.rglob("*")) if p.is_file() and p.name != "manifest.json"}
    manifest = {
        "format": "phrase-rescore/build-smt", "version": FORMAT_VERSION,
        "config": asdict(run.config),
        "inputs": {"source": {"path": os.path.abspath(src_path), "sha256": sha256_file(src_path)},
                   "target": {"path": os.path.abspath(tgt_path), "sha256": sha256_file(tgt_path)}},
        "stats": run.stats, "timings_s": run.timings, "notes": run.notes, "outputs_sha256": outputs,
        "paths_in_moses_ini": "absolute",
        "python": platform.python_version(),
    }
    with atomic_open(out / "manifest.json", "w") as f:
        json.dump(manifest, f, indent=2, default=str)
        f.write("\n")
    return out / "manifest.json"


def build_smt(src_path: str | os.PathLike, tgt_path: str | os.PathLike, out_dir: str | os.PathLike,
              config: BuildConfig | None = None) -> BuildResult:
    """Build phrase-table.gz, lm.arpa and moses.ini (and the files listed in the module docstring), one
    function per step of Moses's ``train-model.perl`` after the corpus is prepared.

    :param src_path: training source text, one raw (untokenized) sentence per line, plain or gzip.
    :param tgt_path: training target text, line i translating line i of ``src_path``.
    :param out_dir: output directory (created; existing outputs are replaced atomically).
    :param config: tokenization, cleaning, alignment, extraction and LM settings.
    """
    config = config or BuildConfig()
    out = Path(out_dir).resolve()
    # moses.ini names the phrase table, LM and reordering table by their absolute paths under OUT
    check_ini_path(out, "the build folder (moses.ini names the tables in it by absolute path)")
    (out / "corpus").mkdir(parents=True, exist_ok=True)
    (out / "model").mkdir(parents=True, exist_ok=True)
    run = _Run(out, config)
    src_c, tgt_c = _corpus(run, src_path, tgt_path)
    fwd, rev = _align(run, src_c, tgt_c)
    sym = _symmetrize(run, fwd, rev)
    del fwd, rev
    lex = _lexical(run, src_c, tgt_c, sym)
    counts = _extract(run, src_c, tgt_c, sym)
    pt_path = _score(run, counts, lex)
    del lex
    lr_path = _reordering(run, counts)
    del counts
    lm_path, lm_order = _language_model(run, tgt_c)
    ini_path = _moses_ini(run, pt_path, lm_path, lm_order, lr_path)
    manifest = _write_manifest(run, src_path, tgt_path)
    return BuildResult(out_dir=str(out), phrase_table=str(pt_path), lm=str(lm_path), moses_ini=str(ini_path),
                       manifest=str(manifest), reordering_table=None if lr_path is None else str(lr_path),
                       stats=run.stats, timings=run.timings, notes=run.notes)

"""The settings of the Moses side's commands and stages, without numpy, pandas, sacremoses or the tuning loop.

One dataclass per command (``build-smt``, ``moses-ini``, ``tune``, ``evaluate``), each field a
:func:`~phrase_rescore.core.config.setting` that gives the command its option and the workflow its key; the
choices the settings offer live here too, and the modules that do the work import them from here. The command
line imports these classes to build its options without loading the machinery behind them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from phrase_rescore.core.config import FLOAT32_MAX, SEED_MAX, check, setting, setting_values
from phrase_rescore.core.cores import DEFAULT_WORDS as CORES
from phrase_rescore.core.cores import threads_or_cores
from phrase_rescore.core.errors import PhraseRescoreError

from .mert_seeds import ITERATIONS_PER_SEED

#: what a reader does with a line it cannot read: stop there, or skip it and list it (``--on-error``)
ON_ERROR_CHOICES = ("raise", "keep")
#: a system's casing (:mod:`.embedded.tokenizer`): lowercased, truecased, or kept as the text has it
CASES = ("lower", "truecase", "none")
#: who decodes and tunes: a real Moses, or the embedded decoder and MERT (:mod:`.backend`)
BACKENDS = ("moses", "embedded")
#: build-smt's reordering models: train-model.perl's ``-reordering`` values
REORDERINGS = ("distance", "msd-bidirectional-fe")
DEFAULT_BOOTSTRAP = 1000       # sacrebleu --paired-bs-n default
DEFAULT_SEED = 12345           # sacrebleu's default SACREBLEU_SEED


@dataclass
class BuildConfig:
    """Everything ``build_smt`` needs besides the corpus; saved in the manifest."""

    source_lang: str = setting("en", help="Source language code for the tokenizer (sacremoses; the command: "
                                          "TRAIN_SRC's suffix when it names a language).")
    target_lang: str = setting("fr", help="Target language code for the tokenizer (the command: TRAIN_TGT's "
                                          "suffix when it names a language).")
    case: str = setting("lower", choices=CASES, help="Casing of the system (see tokenizer.py).")
    escape: bool = setting(False, help="tokenizer.perl's XML escaping of & | < > ' \" [ ] (off keeps the text as "
                                       "given).")
    max_sentence_length: int = setting(80, at_least=1, help="clean-corpus-n.perl's most tokens per sentence.")
    max_length_ratio: float = setting(9.0, above=0, help="clean-corpus-n.perl's largest length ratio.")
    max_phrase_length: int = setting(7, at_least=1, help="extract -max-phrase-length.")
    lm_order: int = setting(5, at_least=1, help="Order of the KN language model.")
    distortion_limit: int = setting(6, at_least=0, help="The moses.ini's distortion-limit (train-model.perl's 6).")
    reordering: str = setting("msd-bidirectional-fe", choices=REORDERINGS,
                              help="train-model.perl's -reordering: 'msd-bidirectional-fe' (the "
                                   "lexicalized reordering table and LexicalReordering feature, 6 weights, "
                                   "besides Distortion: the standard Moses system) or 'distance' "
                                   "(Distortion alone).")
    eflomal_model: int = setting(3, choices=(1, 2, 3), help="1 IBM1, 2 HMM, 3 HMM+fertility.")
    eflomal_samplers: int = setting(3, at_least=1, help="eflomal's independent samplers.")
    compresslevel: int = setting(6, at_least=0, at_most=9, help="gzip level of phrase-table.gz.")

    def __post_init__(self):
        check(BuildConfig, setting_values(self))


@dataclass
class RewriteConfig:
    """Options of ``moses-ini``.

    :ivar old_ini: the moses.ini to start from (train-model.perl's or a tuned one).
    :ivar table: the rescored phrase table (text, plain or gz).
    :ivar out: where to write the new moses.ini.
    :ivar feature: which phrase dictionary to repoint (its name); default: the only one, else TranslationModel0.
    :ivar weights: initial weights for the added columns; default :data:`~.rewrite.DEFAULT_NEW_WEIGHT` for each.
    :ivar binarized_prefix: for PhraseDictionaryCompact, the ``-out`` prefix (default: the table's name
        without .gz); the ini points at ``PREFIX.minphr``.
    :ivar binarize: for PhraseDictionaryCompact, run processPhraseTableMin when Moses has it (False: only report).
    :ivar threads: ``-threads`` for processPhraseTableMin (None: every core this process may use).
    :ivar moses_home: a Moses root; default ``$MOSES_HOME`` or ``moses`` on PATH.
    :ivar column_names: what the added columns are, for messages (e.g. ``("RNN log p(f|e)", "WP")``).
    """

    old_ini: Path
    table: Path
    out: Path
    feature: str | None = setting(None, type=str, help="Phrase dictionary to repoint (default: the only one, else "
                                                       "TranslationModel0).")
    weights: tuple[float, ...] | None = setting(None, type=tuple, item=float, at_least=-FLOAT32_MAX,
                                                at_most=FLOAT32_MAX,
                                                help="Initial weights of the added columns, comma-separated (default: "
                                                     "0.2 each, train-model.perl's value for phrase-table scores).")
    binarized_prefix: Path | None = None
    binarize: bool = setting(True, help="PhraseDictionaryCompact: run processPhraseTableMin (off: only print its "
                                        "command).")
    threads: int | None = setting(None, type=int, at_least=1, cores=True,
                                  help=f"processPhraseTableMin -threads [default: {CORES}].")
    moses_home: str | None = setting(None, type=str, envvar="MOSES_HOME",
                                     help="Moses installation root (default: $MOSES_HOME, or moses on PATH).")
    column_names: tuple[str, ...] | None = None

    def __post_init__(self):
        self.threads = threads_or_cores(self.threads)   # unset: every core this process may use


@dataclass
class MosesTuneConfig:
    """Options of ``tune --backend moses`` (names follow mert-moses.pl's options).

    :ivar ini: the moses.ini to tune (e.g. the one ``moses-ini`` wrote).
    :ivar dev_src: tokenized dev source, one sentence a line.
    :ivar dev_ref: tokenized dev reference (mert-moses.pl's reference basename).
    :ivar workdir: working directory; mert-moses.pl works in ``workdir/mert-work``.
    :ivar out: where to put the tuned moses.ini (default ``workdir/moses.tuned.ini``).
    """

    ini: Path
    dev_src: Path
    dev_ref: Path
    workdir: Path
    out: Path | None = None
    nbest: int = setting(100, at_least=1, at_most=10_000, help="n-best list size per iteration.")
    max_iterations: int = setting(25, at_least=1, below=ITERATIONS_PER_SEED,
                                  help="Most MERT iterations.")
    threads: int | None = setting(None, type=int, at_least=1, cores=True,
                                  help="moses: mert-moses.pl --threads (the optimizer) and the decoder's -threads "
                                       "(unless --decoder-flags sets it); embedded: decoder processes [default: "
                                       f"{CORES}].")
    decoder_flags: str = setting("", help="moses: passed as mert-moses.pl --decoder-flags, e.g. '-threads 8'.")
    batch_mira: bool = setting(False, help="moses: tune with batch MIRA instead of MERT.")
    return_best_dev: bool = setting(False, help="Keep the weights of the best dev iteration, not the last.")
    seed: int = setting(1, at_least=0, at_most=SEED_MAX, help="MERT's random seed (its random restarts, drawn anew in each "
                                            "iteration; moses: mert's -r, or kbmira's with --batch-mira).")
    predictable_seeds: bool = setting(False, help="moses: mert-moses.pl's own seeds (1000 times the iteration's "
                                                  "number) in place of --seed.")
    historic_bests: bool = setting(False, help="MERT also starts from every earlier iteration's weights "
                                              "(mert-moses.pl --historic-bests; Foster & Kuhn 2009).")
    moses_home: str | None = setting(None, type=str, envvar="MOSES_HOME",
                                     help="Moses installation root (default: $MOSES_HOME, or moses on PATH).")

    def __post_init__(self):
        self.threads = threads_or_cores(self.threads)   # unset: every core this process may use

    @property
    def launcher_seed(self) -> int | None:
        """The run's seed, which the launchers in ``WORK/mert-bin`` turn into each iteration's; None with
        ``predictable_seeds`` (mert-moses.pl's own seeds, the real ``--mertdir``, no launchers)."""
        return None if self.predictable_seeds else int(self.seed)


@dataclass
class TuneConfig(MosesTuneConfig):
    """Options of ``tune``: mert-moses.pl's (:class:`MosesTuneConfig`, ``seed`` included, which seeds either
    backend's MERT) plus ``backend``, which picks who runs it. Moses-only options (``decoder_flags``,
    ``batch_mira``) are refused with ``embedded``."""

    backend: str = setting("moses", choices=BACKENDS,
                           help="moses: a real Moses's mert-moses.pl (MOSES_HOME); embedded: the project's decoder "
                                "and MERT.")

    @staticmethod
    def check_settings(values: dict, name) -> None:
        """Moses-only options are refused with the embedded backend."""
        if values.get("backend") != "embedded":
            return
        moses_only = [k for k, on in (("decoder_flags", bool(values.get("decoder_flags", "").strip())),
                                      ("batch_mira", values.get("batch_mira"))) if on]
        if moses_only:
            raise PhraseRescoreError(f"{' and '.join(name(k, False) for k in moses_only)} only apply to "
                                     f"{name('backend', False)} moses (the embedded backend always runs MERT, "
                                     f"seeded by {name('seed', False)})")


@dataclass
class SystemSpec:
    """One configuration: a display name, its moses.ini, and optionally the model that scored its table.

    :ivar outputs: split ("dev", "test") -> its tokenized translation, made elsewhere (e.g. re-ranked from an
        n-best list); a split without one is decoded with ``ini``.
    :ivar nbest: split -> the n-best list its translation was chosen from; the report gives its oracle BLEU.
    :ivar hashes: more ``<what>_sha256`` columns for the report (e.g. the CSLM and the re-ranking weights).
    """

    name: str
    ini: Path
    model: Path | None = None
    outputs: dict[str, Path] = field(default_factory=dict)
    nbest: dict[str, Path] = field(default_factory=dict)
    hashes: dict[str, str] = field(default_factory=dict)


@dataclass
class EvaluateConfig:
    """Options of ``evaluate``.

    :ivar systems: configurations; the first is the baseline the others are compared with.
    :ivar test_src: tokenized test source; ``test_ref``: raw (untokenized) test reference.
    :ivar dev_src, dev_ref: the same for the dev set (optional; Table 1 has a dev column).
    :ivar target_lang: target language for sacremoses detokenization; None (or "none") to score the output as it is.
    :ivar case: ``"lower"`` lowercases the references as the system's output is (case-insensitive scores).
        ``"truecase"`` detruecases the output first (Moses's ``detruecase.perl``), so cased BLEU sees the
        sentence-initial capitals the references have.
    """

    systems: list[SystemSpec]
    test_src: Path
    test_ref: Path
    workdir: Path
    dev_src: Path | None = None
    dev_ref: Path | None = None
    backend: str = setting("moses", choices=BACKENDS,
                           help="moses: a real Moses decodes (MOSES_HOME); embedded: the project's decoder.")
    moses_home: str | None = setting(None, type=str, envvar="MOSES_HOME",
                                     help="Moses installation root (default: $MOSES_HOME, or moses on PATH).")
    target_lang: str | None = setting("en", type=str,
                                      help="Target language of the output, for detokenization ('none': score the "
                                           "output as it is).")
    case: str = setting("none", choices=CASES,
                        help="lower: the system is lowercased, so the references are lowercased too and BLEU and chrF "
                             "are case-insensitive (as sacrebleu -lc); the report says so. truecase: the output is "
                             "detruecased (as detruecase.perl) before it is detokenized.")
    bootstrap_samples: int = setting(DEFAULT_BOOTSTRAP, at_least=1, at_most=100_000,
                                     help="Paired bootstrap resamples (sacrebleu --paired-bs-n).")
    seed: int = setting(DEFAULT_SEED, at_least=1, at_most=SEED_MAX, help="Bootstrap seed (sacrebleu's default).")
    threads: int | None = setting(None, type=int, at_least=1, cores=True, help=f"Decoder threads [default: {CORES}].")
    out_md: Path | None = None
    out_csv: Path | None = None

    def __post_init__(self):
        self.threads = threads_or_cores(self.threads)   # unset: every core this process may use

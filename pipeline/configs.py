"""The settings of the neural side's commands and stages, without torch, pandas or pyarrow.

One dataclass per command (``prepare``, ``train``, ``score``, ``sample``, ``train-cslm``, ``rescore-nbest``,
``train-seq2seq``, ``translate``), each field a :func:`~phrase_rescore.core.config.setting` that gives the
command its option and the workflow its key; the choices the settings offer live here too. The command line
imports these classes to build its options without loading the models; the checks that need a device or a
model's presets import those when a value is checked.
"""
from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from phrase_rescore.core.config import MODEL_DIM_MAX, SEED_MAX, cap_to_cores, check, setting, setting_values
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.moses_integration.configs import ON_ERROR_CHOICES

from .model.presets import CSLM_PRESETS, ENCDEC_PRESETS, RESET_FORMS

if TYPE_CHECKING:
    from .model.cslm import CSLMConfig


def _check_device(values: dict, name) -> None:
    """:func:`~phrase_rescore.pipeline.device.check_device`, imported when a value is checked: it loads torch."""
    from .device import check_device

    check_device(values, name)


@dataclass
class PrepareConfig:
    """Options of the prepare stage."""

    vocab_size: int = setting(15000, at_least=1, help="Shortlist size per side (the paper, section 4.1: 15000).")
    valid_fraction: float = setting(0.01, at_least=0, below=1, help="Share of distinct source phrases held out.")
    seed: int = setting(1234, at_least=0, at_most=SEED_MAX, help="Seed choosing the held-out sources.")
    src_corpus: str | None = None    # tokenized source corpus to count the vocabulary from
    tgt_corpus: str | None = None    # tokenized target corpus
    on_error: str = setting("raise", choices=ON_ERROR_CHOICES, help="keep: skip bad lines, listed in OUT/rejects.txt.")
    partition_bytes: int = setting(256 << 20, at_least=1, help="About this much table text per on-disk partition.")
    buffer_pairs: int = setting(200_000, at_least=1, at_most=10_000_000, help="Pairs buffered in memory before a partition write.")
    vocab_from_corpus: bool = setting(True, help="Count the vocabulary from the tokenized corpus when there is one "
                                                 "(--src-corpus/--tgt-corpus; in a workflow, build-smt's), else "
                                                 "from the table.")


#: The keys of ``--model-overrides`` and their ranges: the preset's sizes (:class:`EncDecConfig`) a run may change.
MODEL_OVERRIDES = {**{k: dict(type=int, at_least=1, at_most=MODEL_DIM_MAX)
                      for k in ("emb_dim", "hidden_dim", "maxout_units", "rank")},
                   "maxout_pieces": dict(type=int, at_least=1, at_most=16),
                   "orthogonal_recurrent": dict(type=bool)}


@dataclass
class TrainConfig:
    """Everything that decides a training run. Sources in the comments."""

    preset: str = setting("small", choices=tuple(ENCDEC_PRESETS),
                          help="Model sizes. paper: embeddings 100, hidden 1000, maxout 500, rank 100 (Cho et al., "
                               "appendix A); small: 64/256/128/64.")
    gru: str = setting("paper", choices=RESET_FORMS,
                       help="Reset gate before U (paper, eq. 8) or after U (cudnn: torch.nn.GRU).")
    bias: bool = setting(False, help="Biases (the paper's listing has none).")
    model_overrides: dict = setting(default_factory=dict, metavar="TABLE", table=MODEL_OVERRIDES,
                                    help="Override the preset's sizes, a TOML table, e.g. "
                                         "'{hidden_dim = 500, rank = 50}'.")
    batch_size: int = setting(64, at_least=1, at_most=4096, help="Phrase pairs per update (Cho et al. 3.1: 64).")
    lr: float = setting(1.0, above=0, help="Adadelta's update scale (1.0: Zeiler's Adadelta unscaled).")
    rho: float = setting(0.95, at_least=0, at_most=1, help="Adadelta rho (Cho et al. 3.1: 0.95).")
    eps: float = setting(1e-6, above=0, help="Adadelta epsilon (Cho et al. 3.1: 1e-6).")
    clip_norm: float = setting(1.0, above=0, help="Global gradient-norm limit (GroundHog's default: 1.0).")
    init_std: float | None = setting(None, above=0, type=float,
                                     help="Weights ~ N(0, std^2) [default: the preset's, 0.01 (the paper's) for "
                                          "paper, 0.05 for small].")
    seed: int = setting(1, at_least=0, at_most=SEED_MAX, help="Initial weights and pair sampling.")
    max_steps: int = setting(100_000, at_least=1, help="Stop after this many updates.")
    time_budget_s: float | None = setting(None, above=0, type=float,
                                          help="Stop after this many seconds of training (this and earlier runs).")
    patience: int | None = setting(10, at_least=0, optional=True,
                                   help="Stop after this many validations without improvement (0: never).")
    valid_every: int = setting(500, at_least=1, help="Updates between validations and checkpoints.")
    valid_max_pairs: int | None = setting(20_000, at_least=1, optional=True,
                                          help="Validate on at most this many held-out pairs.")
    valid_batch_tokens: int = setting(4096, at_least=1, at_most=262_144,
                                      help="Padded tokens per validation batch (its output layer holds about "
                                           "half as many rows of target-vocabulary scores: 4096 with 15,000 "
                                           "words peaks near 300 MB).")
    device: str = setting("auto", help="auto (CUDA when present), cpu, cuda or cuda:N.")
    torch_threads: int = setting(1, at_least=1, cores=True,
                                 help="torch threads on a CPU (1: the small matrices of a batch of phrases gain little "
                                      "from more, and lose much when the cores are busy; see benchmarks/train_bench.py).")
    resume: bool = setting(False, workflow=False, help="Continue exactly from MODEL_DIR/last.pt.")

    # Fields that must not change when resuming: they decide the trajectory.
    TRAJECTORY = ("preset", "gru", "bias", "model_overrides", "batch_size", "lr", "rho", "eps",
                  "clip_norm", "init_std", "seed", "valid_every",  # valid_every: when patience counts
                  "valid_max_pairs")  # best_valid_ppl's yardstick

    def __post_init__(self):
        if self.patience == 0:  # the command line's "never"
            self.patience = None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @staticmethod
    def check_settings(values: dict, name) -> None:
        """The model overrides name fields of the preset's config and give a model it can build; the device exists."""
        from .model.encdec import EncDecConfig  # torch: when a value is checked

        valid = sorted({f.name for f in dataclasses.fields(EncDecConfig)}
                       - {"src_vocab_size", "tgt_vocab_size", "gru", "bias", "init_std"})
        overrides = values.get("model_overrides", {})
        unknown = sorted(set(overrides) - set(valid))
        if unknown:
            raise PhraseRescoreError(f"model_overrides: unknown key(s) {', '.join(unknown)}; "
                                     f"valid keys: {', '.join(valid)}")
        try:
            EncDecConfig.preset(values.get("preset", "small"), 2, 2, **overrides)
        except (TypeError, ValueError) as e:
            raise PhraseRescoreError(f"{name('model_overrides')}: {e}") from None
        _check_device(values, name)


PRECISIONS = ("fp32", "bf16", "fp16")

MATMULS = ("torch", "numpy")

#: how ``score`` scores a word outside the shortlist: the paper's <unk> class, or its unigram share of it
RARE_WORDS = ("class", "unigram")
#: the columns ``score`` appends (:mod:`phrase_rescore.moses_integration.moses_values` writes them)
COLUMN_CHOICES = ("logprob", "unk")


def parse_columns(spec: str | tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """``"logprob,unk"`` -> ``("logprob", "unk")``; order as given, no repeats, at least one."""
    names = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    bad = [n for n in names if n not in COLUMN_CHOICES]
    if bad or not names or len(set(names)) != len(names):
        raise PhraseRescoreError(
            f"--columns must be a comma-separated, non-repeating subset of {','.join(COLUMN_CHOICES)}; "
            f"got {','.join(names) if isinstance(spec, (list, tuple)) else spec!r}")
    return tuple(names)


@dataclass
class ScoreConfig:
    """Options of the score stage (defaults in brackets).

    :param columns: which columns to append, in order: ``"logprob"`` (p(f|e)) and/or ``"unk"``
        (the unknown-word penalty) [both].
    :param raw_logprob: write log-domain values (log p and the unknown-word count) instead of Moses's
        exp() form [False].
    :param on_error: ``"raise"`` stops at the first bad line; ``"keep"`` keeps it in place with neutral
        values and lists it in ``rejects`` [raise].
    :param rejects: where ``--on-error keep`` lists rejected lines [OUT.rejects; an existing file of that name
        that is not a reject list is refused (:func:`rejects_path`)].
    :param vocab: a vocabulary JSON, for a checkpoint that carries none [the checkpoint's]; for one that carries
        its own, it must hold the same words (a model's vocabulary is part of the model).
    :param device: ``"auto"`` (CUDA when present), ``"cpu"``, ``"cuda"``, ``"cuda:1"``... [auto].
    :param precision: ``"fp32"``, or ``"bf16"``/``"fp16"`` autocast (for CUDA) [fp32].
    :param precompute_vocab: look up word-input products in per-vocabulary tables [None: auto, when
        they take at most 1 GiB].
    :param max_tokens: target tokens per group of sources [None: auto, 4,096,000 / hidden size].
    :param matmul: the BLAS of the CPU matrix products: ``"torch"``, ``"numpy"``, or ``"auto"``, chosen
        from the BLAS libraries, the CPU, the device and the precision
        (:func:`~phrase_rescore.pipeline.scoring.fast.choose_matmul`), kept in the manifest so that a resumed run
        repeats it [auto].
    :param chunk_lines: lines per resumable chunk [10000].
    :param threads: CPU scoring workers, each with one torch thread; a CUDA device has one worker
        [None: torch's default thread count, normally the cores].
    :param compresslevel: gzip level of a .gz output [6].
    :param rare_words: how log p scores a target word outside the shortlist: ``"class"``, as the
        probability of ``<unk>``, the whole out-of-shortlist class (the paper's), or ``"unigram"``, that
        probability times the word's share of the class in ``rare_counts``
        (:mod:`phrase_rescore.pipeline.rare_words`) [class].
    :param rare_counts: the tokenized corpus of the target side whose counts give the shares (``"unigram"``).
    :param rare_counts_reverse: the same for a reverse model's column (the source side's corpus).
    :param restart: ignore an earlier partial run of the same output [False].
    """

    columns: tuple[str, ...] = setting(("logprob", "unk"), item=str, workflow=False,
                                       help="Columns to append, in order: logprob = p(f|e) as exp(log p); "
                                            "unk = exp(#unknown words).")
    raw_logprob: bool = setting(False, workflow=False,
                                help="Write log p and the unknown-word count themselves (for consumers other "
                                     "than Moses).")
    on_error: str = setting("raise", choices=ON_ERROR_CHOICES,
                            help="keep: a bad line keeps its place with neutral values and is listed in OUT.rejects.")
    rejects: str | None = None
    vocab: str | None = None
    device: str = setting("auto", help="auto (CUDA when present), cpu, cuda, cuda:N.")
    precision: str = setting("fp32", choices=PRECISIONS, help="bf16/fp16 autocast (for CUDA).")
    precompute_vocab: bool | None = setting(None, type=bool,
                                            help="Precompute each word's input products per vocabulary entry "
                                                 "[auto: when they fit in 1 GiB].")
    max_tokens: int | None = setting(None, type=int, at_least=1,
                                     help="Target tokens per group of sources [auto: 4,096,000 / hidden size].")
    matmul: str = setting("auto", choices=("auto",) + tuple(MATMULS),
                          help="BLAS of the CPU matrix products; auto: chosen from the BLAS libraries and the CPU, "
                               "never timed.")
    chunk_lines: int = setting(10_000, at_least=1, help="Lines per resumable chunk.")
    threads: int | None = setting(None, type=int, at_least=1, cores=True,
                                  help="CPU scoring workers, one torch thread each [default: torch's thread count].")
    compresslevel: int = setting(6, at_least=0, at_most=9, help="gzip level of a .gz output.")
    rare_words: str = setting("class", choices=RARE_WORDS,
                              help="A target word outside the shortlist: class = log p(<unk>) (the paper's); "
                                   "unigram = plus the log of its share of <unk> in --rare-counts.")
    rare_counts: str | None = setting(None, type=str, workflow=False,
                                      help="Tokenized corpus of the target side, for --rare-words unigram.")
    rare_counts_reverse: str | None = setting(None, type=str, workflow=False,
                                              help="Tokenized corpus of the source side, for --rare-words unigram "
                                                   "with --reverse-model.")
    restart: bool = setting(False, workflow=False, help="Ignore an earlier interrupted run instead of resuming it.")

    @staticmethod
    def check_settings(values: dict, name) -> None:
        """The columns are known ones, each once; the device exists."""
        if "columns" in values:
            try:
                parse_columns(values["columns"])
            except PhraseRescoreError as e:
                raise PhraseRescoreError(f"{name('columns')}: {e.message}") from None
        _check_device(values, name)

    def __post_init__(self):
        self.columns = parse_columns(self.columns)
        if self.rare_words == "unigram" and self.rare_counts is None:
            raise PhraseRescoreError("--rare-words unigram needs --rare-counts, the tokenized corpus of the "
                                     "target side")
        check(ScoreConfig, setting_values(self), combined=False)  # the device is resolved when scoring starts
        if self.threads is not None:
            self.threads = cap_to_cores(self.threads, "--threads")

    def output_identity(self) -> dict:
        """The options that change the output's bytes (a resume requires them unchanged)."""
        return {"columns": list(self.columns), "raw_logprob": self.raw_logprob, "on_error": self.on_error,
                "precision": self.precision, "max_tokens": self.max_tokens, "chunk_lines": self.chunk_lines,
                "compresslevel": self.compresslevel, "precompute_vocab": self.precompute_vocab,
                "matmul": self.matmul, "rare_words": self.rare_words}


MODES = ("sample", "greedy", "beam")


@dataclass
class SampleConfig:
    """How to generate. ``max_len`` counts words before ``<eos>``; None means 2 * source words + 10."""

    mode: str = setting("sample", choices=MODES,
                        help="sample: ancestral sampling (Table 3); greedy: the most probable word at each step; "
                             "beam: beam search, the BEAM most probable phrases.")
    n: int = setting(50, at_least=1, at_most=10_000, flag="num-samples", short="n",
                     help="Phrases to draw by ancestral sampling (Table 3 uses 50).")
    beam: int = setting(5, at_least=1, at_most=1_000, help="Beam width (mode beam); also how many phrases are returned.")
    max_len: int | None = setting(None, type=int, at_least=1, at_most=1_000,
                                  help="Most target words (default: 2 x source words + 10).")
    seed: int = setting(1, at_least=0, at_most=SEED_MAX, help="Sampling seed.")


@dataclass
class TrainCSLMConfig:
    """Options of ``phrase-rescore train-cslm`` and the workflow's ``[train-cslm]``."""

    preset: str = setting("small", choices=tuple(CSLM_PRESETS),
                          help="Model sizes. paper: embeddings 512, rectifier layers 1,536 and 1,024 (Cho et al. "
                               "section 5); small: 64, 256, 128.")
    emb_dim: int | None = setting(None, type=int, at_least=1, at_most=MODEL_DIM_MAX, help="Override the preset's embedding size.")
    hidden1: int | None = setting(None, type=int, at_least=1, at_most=MODEL_DIM_MAX, help="Override the preset's first layer.")
    hidden2: int | None = setting(None, type=int, at_least=1, at_most=MODEL_DIM_MAX, help="Override the preset's second layer.")
    order: int = setting(7, at_least=2, at_most=20, help="n: the previous n-1 words are the context (the paper: 7; at "
                                                          "most 20, the longest n-gram Moses and KenLM take).")
    shortlist: int = setting(8192, at_least=1, help="Most frequent words the softmax names; the rest share <unk>.")
    dropout: float = setting(0.2, at_least=0, below=1, help="Dropout on embeddings and hidden layers in training.")
    batch_size: int = setting(256, at_least=1, at_most=16_384, help="Events (words) per update.")
    lr: float = setting(1e-3, above=0, help="Adam's learning rate.")
    max_steps: int = setting(100_000, at_least=1, help="Stop after this many updates.")
    time_budget_s: float | None = setting(None, above=0, type=float,
                                          help="Stop after this many seconds of training (this and earlier runs).")
    patience: int | None = setting(5, at_least=0, optional=True,
                                   help="Stop after this many validations without improvement (0: never).")
    valid_every: int = setting(500, at_least=1, help="Updates between validations and checkpoints.")
    valid_size: int = setting(1000, at_least=1, help="Sentences held out of the corpus when no --valid is given.")
    seed: int = setting(1, at_least=0, at_most=SEED_MAX, help="Initial weights, batch order and dropout.")
    device: str = setting("auto", help="auto (CUDA when present), cpu, cuda or cuda:N.")
    resume: bool = setting(False, workflow=False, help="Continue exactly from OUT/last.pt.")

    TRAJECTORY = ("preset", "emb_dim", "hidden1", "hidden2", "order", "shortlist", "dropout", "batch_size", "lr",
                  "valid_every", "valid_size", "seed")

    def __post_init__(self):
        if self.patience == 0:
            self.patience = None

    @staticmethod
    def check_settings(values: dict, name) -> None:
        """The device exists."""
        _check_device(values, name)

    def model_config(self, vocab_size: int) -> CSLMConfig:
        """The CSLM's sizes: the preset's, with the given overrides, for a vocabulary of ``vocab_size``."""
        from .model.cslm import CSLMConfig  # torch: when a model is built

        over = {k: getattr(self, k) for k in ("emb_dim", "hidden1", "hidden2") if getattr(self, k) is not None}
        return CSLMConfig.preset(self.preset, vocab_size, order=self.order, dropout=self.dropout, **over)


#: the tuners of the re-ranking weights: the embedded MERT, or Moses's mert or kbmira
TUNERS = ("embedded", "mert", "kbmira")


@dataclass
class RescoreConfig:
    """Options of ``phrase-rescore rescore-nbest``.

    :param nbest: the Moses n-best list (``id ||| hyp ||| features ||| total``).
    :param source: the tokenized source sentences it translates (line i = sentence id i).
    :param checkpoints: Seq2Seq or phrase-level model checkpoint(s) (several, of one kind = ensemble), or
        one CSLM checkpoint (feature ``CSLM0``).
    :param out_nbest: the n-best list with the feature added (same order, other bytes unchanged).
    :param out_1best: the re-ranked best hypothesis of each sentence.
    :param feature_name: the new feature's name (default ``Seq2Seq0`` / ``RNNEncDec0`` by model kind).
    :param weights_ini: a moses.ini whose [weight] section (with a weight for the new feature) re-ranks;
        None = the paper's even average with the SMT total score. With ``dev_*`` it is MERT's starting point.
    :param dev_nbest, dev_src, dev_ref: tune the re-ranking weights with MERT on this dev n-best list
        (rescored first, written to ``out_nbest + ".dev"``) against tokenized references; the weights go to
        ``out_1best + ".weights.ini"`` and re-rank ``nbest``. With ``tuner`` ``mert`` or ``kbmira`` Moses's
        programs work in the folder ``out_1best + ".mert"`` (``".kbmira"``), their logs kept there. An existing
        file of a derived name that this command did not write is refused (:func:`check_derived_output`).
    """

    nbest: str
    source: str
    checkpoints: list[str]
    out_nbest: str
    out_1best: str
    feature_name: str | None = setting(None, type=str,
                                       help="Name of the added feature (default Seq2Seq0, or RNNEncDec0).")
    weights_ini: str | None = None
    sentences_per_chunk: int = setting(32, at_least=1, at_most=100_000, help="Sentences whose hypotheses are scored together.")
    hyp_batch: int = setting(256, at_least=1, at_most=65_536, help="Hypotheses per model batch.")
    device: str | None = setting(None, type=str, help="torch device (default: cuda when present).")
    dev_nbest: str | None = None
    dev_src: str | None = None
    dev_ref: str | None = None
    mert_restarts: int = setting(20, at_least=1, help="MERT's random restarts.")
    seed: int = setting(0, at_least=0, at_most=2 ** 31 - 1,
                       help="Seed of MERT's random restarts (mert -r, kbmira --random-seed, which read a C int).")
    tuner: str = setting("embedded", choices=TUNERS,
                         help="Who tunes the re-ranking weights on the dev n-best list: the embedded MERT, or "
                              "Moses's mert or kbmira (from MOSES_HOME).")
    moses_home: str | None = setting(None, type=str, envvar="MOSES_HOME",
                                     help="Moses installation root for --tuner mert/kbmira (default: $MOSES_HOME, "
                                          "or moses on PATH).")

    @staticmethod
    def check_settings(values: dict, name) -> None:
        """The device exists."""
        _check_device(values, name)


@dataclass
class TrainSeq2SeqConfig:
    """Options of ``phrase-rescore train-seq2seq`` (defaults are the paper's recipe; the model preset is ``small``).

    :param src, tgt: tokenized parallel training text, one sentence per line.
    :param out_dir: where ``model.pt``, ``last.pt``, ``vocab.json`` and ``train_log.jsonl`` go.
    :param valid_src, valid_tgt: validation pairs; when absent, ``valid_size`` training pairs are held out.
    :param vocab: an existing vocabulary JSON to share (e.g. the phrase model's); else built from the data.
    :param src_vocab_size, tgt_vocab_size: shortlist sizes when building (paper: 160k / 80k).
    :param preset: ``paper`` (4 x 1000, emb 1000) or ``small``; emb_dim/hidden_dim/num_layers override it.
    :param reverse: reverse the source (paper); False trains the forward baseline.
    """

    src: str
    tgt: str
    out_dir: str
    valid_src: str | None = None
    valid_tgt: str | None = None
    valid_size: int = setting(500, at_least=1, help="Pairs held out when no validation files are given.")
    vocab: str | None = None
    src_vocab_size: int = setting(160_000, at_least=1, at_most=1_000_000, help="Source shortlist size when building (the paper: 160k).")
    tgt_vocab_size: int = setting(80_000, at_least=1, at_most=1_000_000, help="Target shortlist size when building (the paper: 80k).")
    preset: str = setting("small", choices=("small", "paper"),
                          help="Model sizes. paper: 4 layers x 1000, embeddings 1000; small: 2 x 256, embeddings 128.")
    emb_dim: int | None = setting(None, type=int, at_least=1, at_most=MODEL_DIM_MAX, help="Override the preset's embedding size.")
    hidden_dim: int | None = setting(None, type=int, at_least=1, at_most=MODEL_DIM_MAX, help="Override the preset's LSTM size.")
    num_layers: int | None = setting(None, type=int, at_least=1, at_most=64, help="Override the preset's depth.")
    reverse: bool = setting(True, help="Reverse the source (the paper); off trains the forward baseline.")
    init_range: float = setting(0.08, above=0, help="Parameters uniform in [-r, r].")
    lr: float = setting(0.7, above=0, help="SGD learning rate (no momentum).")
    decay_start: float = setting(5.0, at_least=0, help="Epoch of the first halving.")
    decay_every: float = setting(0.5, above=0, help="Epochs between halvings.")
    decay_factor: float = setting(0.5, above=0, at_most=1, help="Learning-rate factor at each decay.")
    epochs: float = setting(7.5, above=0, help="Epochs to train.")
    batch_size: int = setting(128, at_least=1, at_most=4096, help="Sentence pairs per update.")
    clip_norm: float = setting(5.0, above=0, help="Global L2 norm limit of the batch-averaged gradient.")
    length_grouped: bool = setting(True, secondary="random-batches",
                                   help="Batches of sentences of similar length, or random batches.")
    valid_every: float = setting(0.5, above=0, help="Epochs between validations.")
    save_every: int = setting(1000, at_least=1, help="Updates between checkpoints of last.pt.")
    seed: int = setting(1, at_least=0, at_most=SEED_MAX, help="Initial weights and batch order.")
    device: str | None = setting(None, type=str, help="torch device (default: cuda when present).")
    resume: bool = setting(True, help="Continue from OUT_DIR/last.pt.")

    @staticmethod
    def check_settings(values: dict, name) -> None:
        """The device exists."""
        _check_device(values, name)

    # Fields that must not change when resuming: they decide the batches, the steps or the validations.
    TRAJECTORY = ("valid_size", "lr", "decay_start", "decay_every", "decay_factor", "batch_size", "clip_norm",
                  "length_grouped", "valid_every", "seed")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class TranslateConfig:
    """Options of ``phrase-rescore translate``.

    :param checkpoints: one Seq2Seq checkpoint, or several for an ensemble (same vocabularies).
    :param source: tokenized source sentences, one per line.
    :param output: where the translations go (one per line, tokenized; atomic write).
    :param beam: beam width (1 = greedy; the paper's best used 12).
    :param length_penalty: 0 = raw log-probability (the paper); alpha > 0 normalises by len**alpha.
    :param max_len_a, max_len_b: output budget floor(a * source words) + b tokens, ``<eos>`` included.
    :param batch_size: sentences decoded together.
    :param device: torch device; None = CUDA when present.
    :param scores: optional file for each translation's log-probability, one per line.
    """

    checkpoints: list[str]
    source: str
    output: str
    beam: int = setting(12, at_least=1, at_most=1_000, short="b", help="Beam width (1 = greedy; the paper's best used 12).")
    length_penalty: float = setting(0.0, at_least=0, help="Rank by logp / len**alpha (0 = raw logp, the paper).")
    max_len_a: float = setting(2.0, at_least=0, help="Output budget: a * source words + b.")
    max_len_b: int = setting(10, at_least=1, help="Output budget: a * source words + b.")
    batch_size: int = setting(64, at_least=1, at_most=4096, help="Sentences decoded together.")
    device: str | None = setting(None, type=str, help="torch device (default: cuda when present).")
    scores: str | None = None

    @staticmethod
    def check_settings(values: dict, name) -> None:
        """The device exists."""
        _check_device(values, name)

"""``phrase-rescore evaluate``: decode dev/test with each configuration, score with sacrebleu, and write Table 1.

For every configuration (the first is the baseline) and split, the tokenized source is decoded with the
chosen backend, the output is detruecased when the system is truecased (as Moses's ``detruecase.perl``),
detokenized (sacremoses, the target language's rules) and scored against
the raw references with sacrebleu's BLEU and chrF (default settings, so the numbers and signatures are
the ones ``sacrebleu`` prints). Each configuration is compared with the baseline by sacrebleu's own
paired bootstrap resampling (``sacrebleu.significance.PairedTest``, ``test_type="bs"``, the same seed
and sample count as ``sacrebleu --paired-bs``). The report is the paper's Table 1: configuration × dev/test
BLEU, the difference to the baseline and its p-value, as Markdown and CSV, with the sha256 of each
moses.ini and model and the sacrebleu signatures. The dev column is marked as the set MERT tuned on
(:data:`DEV_NOTE`): its BLEU is not a held-out score.

Decoding is resumable: an output whose stamp (hashes of the ini, its model and the input) matches is reused.
A configuration may bring its translations instead (``SystemSpec.outputs``: e.g. the +CSLM rows, re-ranked
from n-best lists); for one chosen from an n-best list (``SystemSpec.nbest``) the report adds the list's
oracle BLEU (:func:`oracle_bleu`), the ceiling any re-ranking of that list can reach.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import pandas as pd

from phrase_rescore.core.atomic_write import atomic_open
from phrase_rescore.core.cores import threads_or_cores
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.hashing import sha256_file
from phrase_rescore.core.reading import read_text_lines
from phrase_rescore.core.stamps import is_current, write_stamp

from .backend import Backend, get_backend
from .configs import CASES, DEFAULT_BOOTSTRAP, DEFAULT_SEED, EvaluateConfig, SystemSpec
from .embedded.detruecase import detruecase_line, detruecase_lines

METRICS = ("BLEU", "chrF2")
CASE_NOTE = "\nBLEU and chrF are case-insensitive: the system is lowercased, so are the references.\n"


@dataclass
class SplitScores:
    """Scores of one split for every system, in system order."""

    bleu: list[float]
    chrf: list[float]
    p_bleu: list[float | None]
    p_chrf: list[float | None]
    signatures: dict[str, str] = field(default_factory=dict)


@contextlib.contextmanager
def _sacrebleu_seed(seed: int) -> Iterator[None]:
    # PairedTest reads its seed from SACREBLEU_SEED at construction, as the sacrebleu CLI does.
    old = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = str(seed)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("SACREBLEU_SEED", None)
        else:
            os.environ["SACREBLEU_SEED"] = old


def score_systems(named_hyps: Sequence[tuple[str, Sequence[str]]], refs: Sequence[str],
                  n_samples: int = DEFAULT_BOOTSTRAP, seed: int = DEFAULT_SEED) -> SplitScores:
    """BLEU and chrF of each system, and paired-bootstrap p-values of each against the first (the baseline).

    Uses sacrebleu's own metrics and ``PairedTest``; the numbers equal
    ``sacrebleu REF -i BASE SYS... -m bleu chrf --paired-bs --paired-bs-n N`` with ``SACREBLEU_SEED=seed``.
    """
    from sacrebleu.metrics import BLEU, CHRF
    from sacrebleu.significance import PairedTest

    if seed <= 0:  # PairedTest passes a seed of 0 on as None, i.e. an unseeded, unrepeatable test
        raise PhraseRescoreError(f"the bootstrap seed must be a positive integer, got {seed}")
    for name, hyps in named_hyps:
        if len(hyps) != len(refs):
            raise PhraseRescoreError(f"system {name!r} has {len(hyps)} lines but the reference has {len(refs)}")
    if len(named_hyps) == 1:
        bleu, chrf = BLEU(), CHRF()
        b = bleu.corpus_score(list(named_hyps[0][1]), [list(refs)])
        c = chrf.corpus_score(list(named_hyps[0][1]), [list(refs)])
        return SplitScores([b.score], [c.score], [None], [None],
                           {"BLEU": str(bleu.get_signature()), "chrF2": str(chrf.get_signature())})
    with _sacrebleu_seed(seed):
        test = PairedTest([(n, list(h)) for n, h in named_hyps], {"BLEU": BLEU(), "chrF": CHRF()},
                          [list(refs)], test_type="bs", n_samples=n_samples)
        sigs, scores = test()
    out = SplitScores([r.score for r in scores["BLEU"]], [r.score for r in scores["chrF2"]],
                      [r.p_value for r in scores["BLEU"]], [r.p_value for r in scores["chrF2"]],
                      {k: str(v) for k, v in sigs.items()})
    return out


def detokenize_lines(lines: Sequence[str], lang: str | None) -> list[str]:
    """Moses detokenization (sacremoses) of each line; unchanged when ``lang`` is None."""
    if lang is None:
        return list(lines)
    from sacremoses import MosesDetokenizer

    md = MosesDetokenizer(lang=lang)
    return [md.detokenize(line.split()) for line in lines]


def _stamp(ini: Path, model: Path | None, src: Path, nbest: int = 0) -> dict:
    stamp = {"ini_sha256": sha256_file(ini), "model_sha256": sha256_file(model) if model else None,
             "input_sha256": sha256_file(src)}
    return {**stamp, "nbest": nbest} if nbest else stamp


def decode_split(backend: Backend, spec: SystemSpec, src: Path, out: Path, threads: int | None = 1,
                 nbest_path: Path | None = None, nbest: int = 0) -> Path:
    """Decode ``src`` with ``spec.ini`` into ``out`` (and, with ``nbest``, a distinct n-best list into
    ``nbest_path``) unless a matching earlier output exists (resume)."""
    stamp_path = out.with_name(out.name + ".stamp.json")
    nbest = nbest if nbest_path is not None else 0
    stamp = _stamp(Path(spec.ini), spec.model, Path(src), nbest)
    if is_current(stamp_path, stamp, [out, nbest_path] if nbest else [out]):
        return out
    backend.decode(spec.ini, src, out, nbest_path=nbest_path if nbest else None, nbest=nbest,
                   threads=threads_or_cores(threads))
    write_stamp(stamp_path, stamp)
    return out


def oracle_choices(nbest_path: Path, refs: Sequence[str], lang: str | None, case: str) -> list[str]:
    """Per sentence of an n-best list, the hypothesis of highest BLEU+1 (Lin & Och 2004: add-one smoothed
    n-gram precisions above unigrams) against its reference; the reference is tokenized as the system's
    training data was (the embedded tokenizer, ``lang`` and ``case``) for the choice. A truecased system's
    hypotheses are detruecased first and the reference is tokenized as it is, as the table scores them
    (detruecase.perl before BLEU). An empty line where the list has no hypothesis of a sentence."""
    from .embedded.bleu_stats import MAX_ORDER, REF_LEN, Reference, sentence_stats
    from .embedded.tokenizer import TokenizeConfig, Tokenizer
    from .nbest import read_nbest_groups

    truecased = case == "truecase"
    tok = Tokenizer(TokenizeConfig(lang=lang or "en", case=case if case in CASES and not truecased else "none"))
    out = []
    for sid, group in read_nbest_groups(nbest_path, num_sentences=len(refs)):
        ref = Reference(" ".join(tok.tokenize(refs[sid])))
        best, best_score = "", None
        for e in group:                                 # ties keep the decoder's order
            st = sentence_stats(detruecase_line(e.hypothesis) if truecased else e.hypothesis, ref)
            m, t = st[0:2 * MAX_ORDER:2].copy(), st[1:2 * MAX_ORDER:2].copy()
            m[1:] += 1
            t[1:] += 1
            score = -np.inf if m[0] == 0 else float(np.log(m / t).mean() + min(0.0, 1.0 - st[REF_LEN] / t[0]))
            if best_score is None or score > best_score:
                best, best_score = e.hypothesis, score
        out.append(best)
    return out


def oracle_bleu(nbest_path: Path, refs: Sequence[str], lang: str | None, case: str) -> float:
    """sacrebleu's corpus BLEU (as in the table) of the detokenized oracle choices (:func:`oracle_choices`)."""
    from sacrebleu.metrics import BLEU

    hyps = oracle_choices(nbest_path, refs, lang, case)
    hyps = detokenize_lines(detruecase_lines(hyps) if case == "truecase" else hyps, lang)
    return BLEU().corpus_score(hyps, [list(refs)]).score


def build_table(names: Sequence[str], test: SplitScores, dev: SplitScores | None,
                hashes: Sequence[dict], oracles: Sequence[dict] | None = None) -> pd.DataFrame:
    """Table 1 as a DataFrame: one row per configuration (``oracles[i]``: split -> the oracle BLEU of the
    n-best list row i was chosen from)."""
    rows = []
    for i, name in enumerate(names):
        row = {"configuration": name}
        for split, sc in (("dev", dev), ("test", test)):
            if sc is None:
                continue
            row[f"{split}_bleu"] = round(sc.bleu[i], 2)
            row[f"{split}_delta"] = round(sc.bleu[i] - sc.bleu[0], 2)
            row[f"{split}_p"] = sc.p_bleu[i]
            row[f"{split}_chrf"] = round(sc.chrf[i], 2)
            if oracles is not None and any(oracles):
                o = oracles[i].get(split)
                row[f"{split}_oracle_bleu"] = None if o is None else round(o, 2)
        row.update(hashes[i])
        rows.append(row)
    return pd.DataFrame(rows)


#: what the dev column is: the set the weights were tuned on, so not a held-out score
DEV_NOTE = ("Dev: the set MERT tuned each configuration's weights on (and the +CSLM rows' re-ranking weights), "
            "so its BLEU is not a held-out score; the test set is the held-out one.")


def to_markdown(df: pd.DataFrame, test: SplitScores, dev: SplitScores | None) -> str:
    """The Markdown report: the table (BLEU, Δ to the baseline, p-value), then hashes and signatures."""
    def p(x):
        return "–" if x is None or pd.isna(x) else f"{x:.4f}"

    head = ["Configuration"]
    if dev is not None:
        head += ["Dev BLEU (MERT's set)", "Δ dev", "p (dev)"]
    head += ["Test BLEU", "Δ test", "p (test)", "Test chrF"]
    oracle = [sp for sp in ("dev", "test") if f"{sp}_oracle_bleu" in df.columns]
    head += [f"Oracle {sp} BLEU" for sp in oracle]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]

    def num(x):
        return "–" if x is None or pd.isna(x) else f"{x:.2f}"

    for _, r in df.iterrows():
        cells = [str(r["configuration"])]
        if dev is not None:
            cells += [f"{r['dev_bleu']:.2f}", f"{r['dev_delta']:+.2f}", p(r["dev_p"])]
        cells += [f"{r['test_bleu']:.2f}", f"{r['test_delta']:+.2f}", p(r["test_p"]), f"{r['test_chrf']:.2f}"]
        cells += [num(r[f"{sp}_oracle_bleu"]) for sp in oracle]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "p: paired bootstrap resampling against the first row (sacrebleu)."]
    if dev is not None:
        lines += [DEV_NOTE]
    if oracle:
        lines += ["Oracle: BLEU of the n-best list the row's translations were chosen from, taking in each "
                  "sentence the hypothesis of highest BLEU+1 against the reference."]
    extra = [c for c in df.columns if c.endswith("_sha256") and c not in ("ini_sha256", "model_sha256")]
    lines += ["", "| Configuration | moses.ini sha256 | model sha256 |" + "".join(
        f" {c.removesuffix('_sha256').replace('_', ' ')} sha256 |" for c in extra),
        "|---|---|---|" + "---|" * len(extra)]

    def sha(x):
        return "–" if x is None or pd.isna(x) else f"`{x}`"  # a baseline has no model

    for _, r in df.iterrows():
        lines.append(f"| {r['configuration']} | `{r['ini_sha256']}` | {sha(r['model_sha256'])} |"
                     + "".join(f" {sha(r[c])} |" for c in extra))
    lines += ["", "Signatures:"]
    for split, sc in (("dev", dev), ("test", test)):
        if sc is not None:
            for k, v in sc.signatures.items():
                lines.append(f"- {split} {k}: `{v}`")
    return "\n".join(lines) + "\n"


def evaluate(cfg: EvaluateConfig) -> pd.DataFrame:
    """Decode, detokenize, score and write Table 1 (Markdown and CSV); return the table."""
    _check_systems(cfg)
    names = [s.name for s in cfg.systems]
    backend = get_backend(cfg.backend, cfg.moses_home)
    detok_lang = None if (cfg.target_lang or "none").lower() == "none" else cfg.target_lang
    work = Path(cfg.workdir)
    work.mkdir(parents=True, exist_ok=True)
    splits = _Splits(cfg, backend, work, detok_lang, [{} for _ in cfg.systems])
    dev = splits.score("dev", cfg.dev_src, cfg.dev_ref) if cfg.dev_src is not None else None
    test = splits.score("test", cfg.test_src, cfg.test_ref)
    extra = sorted({k for s in cfg.systems for k in s.hashes})
    hashes = [{"ini_sha256": sha256_file(s.ini), "model_sha256": sha256_file(s.model) if s.model else None,
               **{k: s.hashes.get(k) for k in extra}} for s in cfg.systems]
    df = build_table(names, test, dev, hashes, splits.oracles)
    out_md = Path(cfg.out_md) if cfg.out_md else work / "table1.md"
    out_csv = Path(cfg.out_csv) if cfg.out_csv else work / "table1.csv"
    with atomic_open(out_md, "wb") as f:
        f.write((to_markdown(df, test, dev) + (CASE_NOTE if cfg.case == "lower" else "")).encode("utf-8"))
    with atomic_open(out_csv, "wb") as f:
        f.write(df.to_csv(index=False).encode("utf-8"))
    df.attrs["markdown"], df.attrs["csv"] = str(out_md), str(out_csv)
    return df


def _check_systems(cfg: EvaluateConfig) -> None:
    """Refuse an evaluation with no system, two systems of one name, a missing file, or half a dev set."""
    if not cfg.systems:
        raise PhraseRescoreError("no configuration to evaluate: give at least the baseline moses.ini")
    names = [s.name for s in cfg.systems]
    if len(set(names)) != len(names):
        raise PhraseRescoreError(f"configuration names must differ: {names}")
    for s in cfg.systems:
        for p in (s.ini, s.model):
            if p is not None and not Path(p).is_file():
                raise PhraseRescoreError("file not found", p)
    if (cfg.dev_src is None) != (cfg.dev_ref is None):
        raise PhraseRescoreError("give both --dev-src and --dev-ref, or neither")


@dataclass
class _Splits:
    """The scoring of :func:`evaluate`'s splits: what they share, and the oracle BLEU of each system's
    n-best list per split (``oracles``; one computation per list file, ``oracle_of``)."""

    cfg: EvaluateConfig
    backend: Backend
    work: Path
    detok_lang: str | None
    oracles: list[dict]
    oracle_of: dict[str, float] = field(default_factory=dict)

    def score(self, split: str, src: Path, ref: Path) -> SplitScores:
        """Every system's detokenized output of ``split`` scored against ``ref``."""
        cfg = self.cfg
        refs = read_text_lines(ref)
        if cfg.case == "lower":
            refs = [r.lower() for r in refs]
        n_src = len(read_text_lines(src))
        if n_src != len(refs):
            raise PhraseRescoreError(f"{split} source has {n_src} lines but its reference has {len(refs)}", ref)
        named = [(s.name, self._detokenized(s, split, src, n_src)) for s in cfg.systems]
        for i, s in enumerate(cfg.systems):
            if split in s.nbest:
                key = os.fspath(s.nbest[split])
                if key not in self.oracle_of:
                    self.oracle_of[key] = oracle_bleu(Path(key), refs, self.detok_lang, cfg.case)
                self.oracles[i][split] = self.oracle_of[key]
        return score_systems(named, refs, cfg.bootstrap_samples, cfg.seed)

    def _detokenized(self, s: SystemSpec, split: str, src: Path, n_src: int) -> list[str]:
        """System ``s``'s translations of ``split`` (given, else decoded), detruecased and detokenized as
        Moses's recipe does, and written to ``work/SPLIT.NAME.detok``."""
        out = s.outputs.get(split)
        if out is None:
            out = decode_split(self.backend, s, Path(src), self.work / f"{split}.{_safe(s.name)}.tok",
                               self.cfg.threads)
        elif len(read_text_lines(out)) != n_src:
            raise PhraseRescoreError(f"has {len(read_text_lines(out))} translations of the {n_src} {split} "
                                     f"sentences ({s.name})", out)
        hyps = read_text_lines(out)
        if self.cfg.case == "truecase":  # Moses's recipe: detruecase.perl, then detokenizer.perl
            hyps = detruecase_lines(hyps)
        hyps = detokenize_lines(hyps, self.detok_lang)
        with atomic_open(self.work / f"{split}.{_safe(s.name)}.detok", "wb") as f:
            f.write("".join(h + "\n" for h in hyps).encode("utf-8"))
        return hyps


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_+." else "_" for c in name)

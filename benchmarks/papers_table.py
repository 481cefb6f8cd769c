"""Sutskever et al.'s rows on real text, scored from the stages' own files without decoding again.

``evaluate`` scores the rows of ``translate-seq2seq``, ``rerank-seq2seq`` and ``rerank-stack`` beside the baseline
it decodes itself. Where that decoding does not fit the time (a loaded machine), this script takes the
baseline's test translation from ``nbest-baseline`` instead (``test.1best``: the tuned baseline's 1-best,
the first hypothesis of the lists the LSTM re-ranks) and scores every row as ``evaluate`` does: detruecased
(``case = truecase``), detokenized, sacrebleu's BLEU with the paired bootstrap against the baseline
(:func:`~phrase_rescore.moses_integration.report.score_systems`), and each re-ranked row's oracle BLEU.
It also lists each stage's wall time from its manifest.

    python benchmarks/papers_table.py --nbest RUN/nbest-baseline/lists --rows RUN/translate-seq2seq/rows.json \\
        --rows RUN/rerank-seq2seq/rows.json --test-ref RUN/split/test.ref --stages RUN --out RUN/papers.md
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def score_rows(baseline_tok: Path, rows: list[dict], test_ref: Path, case: str, lang: str | None,
               n_boot: int, seed: int) -> list[dict]:
    """Each row (the baseline first) with its test BLEU, Δ, the paired-bootstrap p against the baseline, and
    the oracle BLEU of its n-best list."""
    from phrase_rescore.core.reading import read_text_lines
    from phrase_rescore.moses_integration.embedded.detruecase import detruecase_lines
    from phrase_rescore.moses_integration.report import detokenize_lines, oracle_bleu, score_systems

    refs = read_text_lines(test_ref)
    if case == "lower":
        refs = [r.lower() for r in refs]

    def post(path: Path) -> list[str]:
        hyps = read_text_lines(path)
        return detokenize_lines(detruecase_lines(hyps) if case == "truecase" else hyps, lang)

    named = [("Baseline", post(baseline_tok))] + [(r["name"], post(r["outputs"]["test"])) for r in rows]
    s = score_systems(named, refs, n_boot, seed)
    oracles: dict[str, float] = {}
    out = []
    for i, (name, _) in enumerate(named):
        nbest = rows[i - 1]["nbest"].get("test") if i else None
        if nbest is not None and str(nbest) not in oracles:
            oracles[str(nbest)] = oracle_bleu(Path(nbest), refs, lang, case)
        out.append({"name": name, "bleu": s.bleu[i], "delta": s.bleu[i] - s.bleu[0], "p": s.p_bleu[i],
                    "oracle": oracles.get(str(nbest)) if nbest is not None else None})
    return out


def stage_walls(run: Path) -> dict[str, float]:
    """Each finished stage's wall seconds in the run folder ``run``, from its manifest."""
    out = {}
    for m in sorted(run.glob("*/stage-manifest.json")):
        out[m.parent.name] = json.loads(m.read_text(encoding="utf-8")).get("wall_s")
    return out


def main(argv=None) -> None:
    from phrase_rescore.app.seq2seq_stages import read_rows

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nbest", required=True, help="nbest-baseline's lists folder (test.1best is the baseline)")
    ap.add_argument("--rows", action="append", default=[], help="a rows.json of translate-seq2seq or rerank-*")
    ap.add_argument("--test-ref", required=True, help="the raw test reference")
    ap.add_argument("--case", default="truecase", choices=("none", "lower", "truecase"))
    ap.add_argument("--lang", default="fr", help="detokenizer language ('none': as it is)")
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=12345)
    ap.add_argument("--stages", action="append", default=[], help="a run folder whose stages' wall times to list")
    ap.add_argument("--out", help="write the Markdown here too")
    args = ap.parse_args(argv)
    rows = [r for path in args.rows for r in read_rows(Path(path))]
    table = score_rows(Path(args.nbest) / "test.1best", rows, Path(args.test_ref), args.case,
                       None if args.lang == "none" else args.lang, args.bootstrap, args.seed)
    lines = ["| Row | test BLEU | Δ | p | oracle BLEU of its list |", "|---|---:|---:|---:|---:|"]
    for r in table:
        lines.append(f"| {r['name']} | {r['bleu']:.2f} | {'' if r['name'] == 'Baseline' else format(r['delta'], '+.2f')} | "
                     f"{'' if r['p'] is None else format(r['p'], '.4f')} | "
                     f"{'' if r['oracle'] is None else format(r['oracle'], '.2f')} |")
    for run in args.stages:
        walls = stage_walls(Path(run))
        lines += ["", f"Stage wall times in {run} (seconds): "
                  + ", ".join(f"{k} {v:.0f}" for k, v in walls.items() if v is not None)]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()

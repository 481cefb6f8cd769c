"""Seq2Seq at demo scale: the length-grouping speed-up, and the paper's Table 1 and rescoring rows.

Part 1 (speed): the same model trained on length-grouped batches of 128 and on random batches of 128,
in this process, on the demo corpus; reported as real (non-padding) tokens per second and their ratio
(the paper: 2x), plus the share of padding in each.

Part 2 (BLEU, on the demo data's test set; every stage cached in --workdir, so reruns are cheap):
  1. the demo corpus (phrase_rescore.data.demo_corpus) and the embedded phrase-based system (build-smt), optionally
     MERT-tuned on dev (--tune-smt); its 1-best and its n-best lists of dev and test (embedded decoder);
  2. Seq2Seq trained on the same tokenized, lowercased training corpus, reversed and forward (--no-reverse);
  3. direct translation with each (beam --beam), and with an ensemble of the reversed models when
     --ensemble N > 1 trains more seeds;
  4. n-best rescoring: the paper's even average of log p(hyp|src) and the SMT score (forward, reversed),
     and weights tuned by the embedded MERT on the dev n-best list; optionally the phrase-level
     encoder-decoder (--encdec CHECKPOINT) on whole sentences.
BLEU: sacrebleu on the tokenized lowercased text (tokenize=none), the signature printed with the table.

    python benchmarks/seq2seq_report.py --quick            # a few minutes on 2 CPU cores
    python benchmarks/seq2seq_report.py --workdir runs/s2s --epochs 7.5 --tune-smt
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

from phrase_rescore.pipeline.batching import pad_batch
from phrase_rescore.pipeline.model.seq2seq import Seq2Seq, Seq2SeqConfig
from phrase_rescore.pipeline.sentences import encode_eos, read_parallel
from phrase_rescore.pipeline.train_seq2seq import epoch_batches


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- part 1: length-grouped vs random batches -----------------------------------------------------

def speed_benchmark(src_path: str, tgt_path: str, steps: int, batch_size: int = 128, seed: int = 1) -> dict:
    """Train steps on length-grouped and on random batches of the same data; real tokens/s of each."""
    src, tgt = read_parallel(src_path, tgt_path)
    import collections

    from phrase_rescore.pipeline.vocab import Vocabularies, build_vocab

    cs, ct = collections.Counter(), collections.Counter()
    for x in src:
        cs.update(x)
    for y in tgt:
        ct.update(y)
    vocabs = Vocabularies(build_vocab(cs, 10_000), build_vocab(ct, 10_000))
    S = [encode_eos(vocabs.source, x) for x in src]
    T = [encode_eos(vocabs.target, y) for y in tgt]
    sl, tl = np.array([len(x) for x in S]), np.array([len(y) for y in T])
    out = {}
    for mode in ("random", "grouped", "random ", "grouped "):  # twice each, interleaved: fair to warm-up and load
        torch.manual_seed(seed)
        model = Seq2Seq(Seq2SeqConfig.preset("small", len(vocabs.source), len(vocabs.target)))
        opt = torch.optim.SGD(model.parameters(), lr=0.7)
        batches = epoch_batches(sl, tl, batch_size, seed, 0, length_grouped=mode.strip() == "grouped")[:steps]
        real = padded = 0
        t0 = time.perf_counter()
        for idx in batches:
            s, sm = pad_batch([S[i] for i in idx])
            t, tm = pad_batch([T[i] for i in idx])
            loss = -model(s, sm, t, tm).sum() / len(idx)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
            real += int(sm.sum() + tm.sum())
            padded += sm.numel() + tm.numel()
        dt = time.perf_counter() - t0
        prev = out.get(mode.strip(), {"seconds": 0.0, "real": 0, "padded": 0})
        out[mode.strip()] = {"seconds": prev["seconds"] + dt, "real": prev["real"] + real,
                             "padded": prev["padded"] + padded}
    for v in out.values():
        v["tokens_per_s"] = v["real"] / v["seconds"]
        v["padding_share"] = 1 - v["real"] / v["padded"]
    out["speedup"] = out["grouped"]["tokens_per_s"] / out["random"]["tokens_per_s"]
    return out


# --- part 2: the demo-scale Table 1 ---------------------------------------------------------------

def bleu(hyp_path: str | Path, ref_path: str | Path) -> tuple[float, str]:
    """sacrebleu corpus BLEU of tokenized lowercased text (no further tokenization) and its signature."""
    import sacrebleu

    hyps = Path(hyp_path).read_text(encoding="utf-8").split("\n")[:-1]
    refs = Path(ref_path).read_text(encoding="utf-8").split("\n")[:-1]
    assert len(hyps) == len(refs), (hyp_path, len(hyps), len(refs))
    metric = sacrebleu.metrics.BLEU(tokenize="none", force=True)
    return metric.corpus_score(hyps, [refs]).score, str(metric.get_signature())


def tokenize_file(raw: Path, out: Path, lang: str) -> None:
    from phrase_rescore.core.atomic_write import atomic_open
    from phrase_rescore.moses_integration.embedded.tokenizer import TokenizeConfig, Tokenizer

    if out.exists():
        return
    tok = Tokenizer(TokenizeConfig(lang=lang, case="lower"))
    with atomic_open(out, "w") as f:
        for line in raw.read_text(encoding="utf-8").split("\n")[:-1]:
            f.write(" ".join(tok.tokenize(line)) + "\n")


def demo_report(args) -> list[tuple[str, float]]:
    from phrase_rescore.data.demo_corpus import generate
    from phrase_rescore.moses_integration.configs import BuildConfig
    from phrase_rescore.moses_integration.embedded.build import build_smt
    from phrase_rescore.moses_integration.embedded.decoder import decode_file
    from phrase_rescore.pipeline.configs import RescoreConfig, TrainSeq2SeqConfig, TranslateConfig
    from phrase_rescore.pipeline.rescore_nbest import rescore_nbest
    from phrase_rescore.pipeline.train_seq2seq import train
    from phrase_rescore.pipeline.translate import translate_file

    w = Path(args.workdir)
    w.mkdir(parents=True, exist_ok=True)
    data = w / "data"
    log("demo corpus")
    generate(data, n_train=args.train, n_dev=args.dev, n_test=args.test, seed=1, noise_rate=0.04)
    for split in ("dev", "test"):
        tokenize_file(data / f"{split}.en", w / f"{split}.tok.en", "en")
        tokenize_file(data / f"{split}.fr", w / f"{split}.tok.fr", "fr")
    smt = w / "smt"
    if not (smt / "moses.ini").exists():
        log("build-smt")
        build_smt(data / "train.en", data / "train.fr", smt,
                  BuildConfig(source_lang="en", target_lang="fr", lm_order=4, max_phrase_length=5))
    ini = smt / "moses.ini"
    if args.tune_smt:
        tuned = w / "smt-tuned" / "moses.ini"
        if not tuned.exists():
            from phrase_rescore.moses_integration.embedded.tune import EmbeddedTuneConfig, tune_embedded

            log("tune the phrase-based system (embedded MERT)")
            tune_embedded(EmbeddedTuneConfig(str(ini), str(w / "dev.tok.en"), str(w / "dev.tok.fr"),
                                             str(w / "smt-tuned"), nbest=args.nbest, max_iterations=args.tune_iterations,
                                             threads=args.threads))
        ini = tuned
    for split in ("dev", "test"):
        if not (w / f"smt.{split}.nbest").exists():
            log(f"decode {split} ({args.nbest}-best)")
            decode_file(str(ini), str(w / f"{split}.tok.en"), str(w / f"smt.{split}.1best"),
                        str(w / f"smt.{split}.nbest"), args.nbest, threads=args.threads)
    rows = [("phrase-based (embedded Moses-style decoder" + (", MERT-tuned)" if args.tune_smt else ", untuned)"),
             w / "smt.test.1best")]

    # Seq2Seq on the build's tokenized, cleaned, lowercased training corpus
    clean_src, clean_tgt = smt / "corpus" / "clean.src", smt / "corpus" / "clean.tgt"
    models = {}
    runs = [("reversed", True, s) for s in range(1, args.ensemble + 1)] + [("forward", False, 1)]
    for name, reverse, seed in runs:
        out = w / f"s2s-{name}-{seed}"
        if not (out / "model.pt").exists() or not (out / "done").exists():
            log(f"train Seq2Seq {name} seed {seed}")
            s = train(TrainSeq2SeqConfig(
                str(clean_src), str(clean_tgt), str(out), valid_src=str(w / "dev.tok.en"), valid_tgt=str(w / "dev.tok.fr"),
                src_vocab_size=args.vocab, tgt_vocab_size=args.vocab, preset="small", emb_dim=args.emb,
                hidden_dim=args.hidden, num_layers=args.layers, reverse=reverse, lr=args.lr, epochs=args.epochs,
                decay_start=args.decay_start, batch_size=args.batch_size, seed=seed))
            log(f"  {s.steps} steps, {s.seconds:.0f}s, valid ppl {s.best_valid_ppl:.3f}")
            (out / "done").write_text(json.dumps({"best_valid_ppl": s.best_valid_ppl, "seconds": s.seconds}))
        models.setdefault(name, []).append(str(out / "model.pt"))

    def direct(label, cks):
        hyp = w / f"direct.{label}.test"
        if not hyp.exists():
            log(f"translate: {label}")
            translate_file(TranslateConfig(cks, str(w / "test.tok.en"), str(hyp), beam=args.beam))
        return hyp

    rows.append((f"Seq2Seq forward, beam {args.beam}", direct("forward", models["forward"][:1])))
    rows.append((f"Seq2Seq reversed, beam {args.beam}", direct("reversed", models["reversed"][:1])))
    if args.beam != 1:
        rows.append(("Seq2Seq reversed, greedy (beam 1)", _greedy(w, models["reversed"][:1], direct)))
    if len(models["reversed"]) > 1:
        rows.append((f"ensemble of {len(models['reversed'])} reversed, beam {args.beam}",
                     direct(f"ens{len(models['reversed'])}", models["reversed"])))

    def rescore(label, cks, tune=False, extra=None):
        one = w / f"rescore.{label}.test"
        if not one.exists():
            log(f"rescore: {label}")
            kw = dict(dev_nbest=str(w / "smt.dev.nbest"), dev_src=str(w / "dev.tok.en"),
                      dev_ref=str(w / "dev.tok.fr"), weights_ini=str(ini)) if tune else {}
            s = rescore_nbest(RescoreConfig(str(w / "smt.test.nbest"), str(w / "test.tok.en"), cks,
                                            str(w / f"rescore.{label}.nbest"), str(one), **kw))
            log(f"  {s.hypotheses} hypotheses, {s.hyps_per_s:.0f}/s, 1-best changed for {s.changed_1best}")
        return one

    rows.append(("rescore n-best, forward (even average)", rescore("forward", models["forward"][:1])))
    rows.append(("rescore n-best, reversed (even average)", rescore("reversed", models["reversed"][:1])))
    rows.append(("rescore n-best, reversed (MERT-tuned weights)", rescore("reversed-mert", models["reversed"][:1], True)))
    if len(models["reversed"]) > 1:
        rows.append((f"rescore n-best, ensemble of {len(models['reversed'])} reversed (even average)",
                     rescore("ensemble", models["reversed"])))
    encdec = args.encdec
    if args.train_encdec and not encdec:
        encdec = str(_train_encdec(w, smt, args.train_encdec))
    if encdec:
        rows.append(("rescore n-best, phrase-level encoder-decoder on sentences (even average)",
                     rescore("encdec", [encdec])))
    # the oracle: the best hypothesis of each n-best list by sentence BLEU
    oracle = w / "oracle.test"
    if not oracle.exists():
        _oracle(w / "smt.test.nbest", w / "test.tok.fr", oracle)
    rows.append((f"oracle of the {args.nbest}-best lists (sentence BLEU)", oracle))
    return [(label, *bleu(p, w / "test.tok.fr")) for label, p in rows]


def _train_encdec(w: Path, smt: Path, seconds: float) -> Path:
    """The phrase-level RNN Encoder-Decoder trained on this system's phrase table via the CLI."""
    import subprocess

    model = w / "encdec" / "model.pt"
    if not model.exists():
        log(f"prepare + train the phrase-level encoder-decoder ({seconds:.0f}s budget)")
        exe = [str(Path(sys.executable).parent / "phrase-rescore"), "--quiet"]  # the venv's console script
        subprocess.run(exe + ["prepare", str(smt / "phrase-table.gz"), "--out", str(w / "pairs"),
                              "--vocab-size", "1000", "--src-corpus", str(smt / "corpus" / "clean.src"),
                              "--tgt-corpus", str(smt / "corpus" / "clean.tgt")], check=True)
        subprocess.run(exe + ["train", str(w / "pairs"), "--out", str(w / "encdec"), "--time-budget-s", str(seconds),
                              "--valid-every", "250"], check=True)
    return model


def _greedy(w, cks, direct):
    from phrase_rescore.pipeline.configs import TranslateConfig
    from phrase_rescore.pipeline.translate import translate_file

    hyp = w / "direct.reversed-greedy.test"
    if not hyp.exists():
        translate_file(TranslateConfig(cks, str(w / "test.tok.en"), str(hyp), beam=1))
    return hyp


def _oracle(nbest, ref, out):
    from phrase_rescore.core.atomic_write import atomic_open
    from phrase_rescore.moses_integration.embedded.bleu_stats import Reference, sentence_stats
    from phrase_rescore.moses_integration.embedded.bleu_stats import bleu as sbleu
    from phrase_rescore.moses_integration.nbest import read_nbest_groups

    refs = Path(ref).read_text(encoding="utf-8").split("\n")[:-1]
    with atomic_open(out, "w") as f:
        for sid, group in read_nbest_groups(nbest, num_sentences=len(refs)):
            r = Reference(refs[sid])
            best = max(group, key=lambda e: sbleu(sentence_stats(e.hypothesis, r) + np.r_[np.ones(8), 0]),
                       default=None)  # +1 smoothing of the n-gram counts
            f.write((best.hypothesis if best else "") + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="Small corpus, few epochs, few speed steps.")
    ap.add_argument("--workdir", default="runs/seq2seq-report")
    ap.add_argument("--speed-only", action="store_true")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--speed-steps", type=int, default=30)
    ap.add_argument("--train", type=int, default=6000)
    ap.add_argument("--dev", type=int, default=200)
    ap.add_argument("--test", type=int, default=300)
    ap.add_argument("--nbest", type=int, default=50)
    ap.add_argument("--tune-smt", action="store_true", help="MERT-tune the phrase-based system on dev first.")
    ap.add_argument("--tune-iterations", type=int, default=3)
    ap.add_argument("--epochs", type=float, default=7.5)
    ap.add_argument("--decay-start", type=float, default=5.0)
    ap.add_argument("--lr", type=float, default=0.7)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=160_000)
    ap.add_argument("--emb", type=int, default=None)
    ap.add_argument("--hidden", type=int, default=None)
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--beam", type=int, default=12)
    ap.add_argument("--ensemble", type=int, default=1, help="Reversed models trained (different seeds).")
    ap.add_argument("--encdec", help="A phrase-level encoder-decoder checkpoint to compare in rescoring.")
    ap.add_argument("--train-encdec", type=float, default=0.0, metavar="SECONDS",
                    help="Train the phrase-level encoder-decoder on the phrase table for this long and compare it.")
    ap.add_argument("--threads", type=int, default=2, help="Decoding processes.")
    ap.add_argument("--torch-threads", type=int, default=1, help="1: on a shared machine more threads are much slower.")
    args = ap.parse_args()
    if args.quick:
        args.train, args.dev, args.test, args.speed_steps = min(args.train, 2000), min(args.dev, 100), min(args.test, 100), 10
    torch.set_num_threads(args.torch_threads)
    os.environ.setdefault("PHRASE_RESCORE_QUIET", "1")
    from phrase_rescore.core import progress

    progress.set_quiet(True)
    report = {}
    if not args.speed_only:
        rows = demo_report(args)
        print(f"\n## Seq2Seq at demo scale ({args.train} training pairs, test {args.test} sentences)\n")
        print("| system | BLEU |\n|---|---:|")
        for label, score, _ in rows:
            print(f"| {label} | {score:.2f} |")
        print(f"\nsacrebleu signature: {rows[0][2]}")
        report["bleu"] = {label: score for label, score, _ in rows}
    if not args.skip_speed:
        w = Path(args.workdir)
        src, tgt = w / "smt" / "corpus" / "clean.src", w / "smt" / "corpus" / "clean.tgt"
        if not src.exists():
            raise SystemExit(f"{src} missing: run once without --speed-only first")
        sp = speed_benchmark(str(src), str(tgt), args.speed_steps)
        print(f"\n## Length-grouped vs random batches of 128 ({args.speed_steps} steps each, twice, small preset)\n")
        print("| batches | real tokens/s | padding share |\n|---|---:|---:|")
        for k in ("random", "grouped"):
            print(f"| {k} | {sp[k]['tokens_per_s']:.0f} | {100 * sp[k]['padding_share']:.1f}% |")
        print(f"\nspeed-up of length grouping: {sp['speedup']:.2f}x (the paper: 2x)")
        report["speed"] = sp
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    (Path(args.workdir) / "report.json").write_text(json.dumps(report, indent=1, default=float))


if __name__ == "__main__":
    main()

"""Training Seq2Seq on sentence pairs, the recipe of Sutskever et al. (2014), Sec. 3.4.

* Teacher forcing: the decoder reads the true previous word; the loss is the summed cross-entropy of
  every target token (``<eos>`` included), i.e. -log p(T | S), averaged over the batch's sentences.
* Plain SGD without momentum, learning rate 0.7; from epoch 5 it is halved every half epoch; 7.5 epochs.
  (The first halving falls AT epoch 5.0, so the last half epoch runs at 0.7 / 2**5 = 0.022.)
* Parameters uniform in [-0.08, 0.08]; the batch-averaged gradient is clipped to global L2 norm 5.
* Batches of 128 sentences of similar length (source + target), in random order; ``length_grouped=False``
  gives random batches, the baseline of the paper's 2x speed-up. ``benchmarks/seq2seq_report.py`` measures ours:
  1.46x real tokens/s on the demo corpus (small preset, CPU), padding 42% of a random batch vs 9% grouped;
  the demo's sentences vary less in length than WMT's, so there is less padding to save.
* The training pairs' ids are written once into ``OUT_DIR/corpus-ids-<key>/`` (:class:`~.pairs.PairFile`'s
  layout, keyed by the corpus, the vocabulary and the held-out lines) and each batch is read from them by
  position, so that memory does not grow with the corpus; the validation pairs are held in memory.
* Validation perplexity exp(NLL / target tokens) every half epoch; ``last.pt`` after every validation and
  every ``save_every`` steps, ``model.pt`` at the lowest validation perplexity.
* Resumable: every epoch's batches are a function of (seed, epoch), and SGD has no state beyond the
  learning rate, which is a function of progress; ``last.pt`` stores (epoch, batch) and the weights, so a
  resumed run continues with exactly the batches an uninterrupted one would have drawn. It also stores the
  settings and the sha256 of every input file: a ``last.pt`` of other settings or other data is refused,
  and the log is rewritten from the checkpoint's history (a killed run may have logged past its last save).
* Data-parallel under ``torchrun`` (``WORLD_SIZE`` > 1), with DistributedDataParallel: every rank builds the
  same batches from (seed, epoch) and takes its contiguous slice of each (``numpy.array_split``); rank r's
  loss is its slice's summed -log p times N / (batch sentences), so DDP's average of the ranks' gradients is
  the gradient of the whole batch's mean, clipped as one, and SGD takes the single-process step on every rank
  (up to float rounding). A rank whose slice is empty (a last batch smaller than N) passes one sentence with
  weight 0. Validation is split across ranks and summed; rank 0 alone writes files. A resume must use the
  world size ``last.pt`` was saved with.
"""
from __future__ import annotations

import collections
import hashlib
import json
import math
import os
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import torch

from phrase_rescore.core.atomic_write import atomic_open
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.core.hashing import sha256_file
from phrase_rescore.core.progress import bar, set_quiet

from .batching import length_batches, pad_batch
from .configs import TrainSeq2SeqConfig
from .distributed import Dist
from .distributed import setup as setup_distributed
from .model.checkpoint import BEST, LAST, SEQ2SEQ, load_checkpoint, save_checkpoint
from .model.seq2seq import Seq2Seq, Seq2SeqConfig
from .pairs import PairFile, SplitWriter, corpus_arrays
from .sentences import check_same_length, encode_eos, held_out_lines, iter_sentences, read_parallel
from .train import TrainSummary
from .training_loop import check_world_size
from .vocab import EOS_ID, Vocabularies, build_vocab


def _data_hashes(cfg: TrainSeq2SeqConfig) -> dict:
    """sha256 of every file the run reads its sentences and vocabulary from."""
    files = {"src": cfg.src, "tgt": cfg.tgt, "valid_src": cfg.valid_src, "valid_tgt": cfg.valid_tgt, "vocab": cfg.vocab}
    return {k: sha256_file(v) for k, v in files.items() if v}


def _check_resumable(cfg: TrainSeq2SeqConfig, state: dict, hashes: dict, last_path: Path) -> None:
    """Refuse a ``last.pt`` made with other settings or from other files than this run's."""
    old = state.get("train_config") or {}
    changed = [k for k in TrainSeq2SeqConfig.TRAJECTORY if k in old and old[k] != getattr(cfg, k)]
    if changed:
        raise PhraseRescoreError("cannot resume with different settings: " + ", ".join(
            f"{k} was {old[k]!r}, now {getattr(cfg, k)!r}" for k in changed) + " (use another --out-dir or "
            "--no-resume)", last_path)
    recorded = state.get("data_sha256")
    if recorded is not None:
        differ = sorted(k for k in set(recorded) | set(hashes) if recorded.get(k) != hashes.get(k))
        if differ:
            raise PhraseRescoreError(f"cannot resume: the {', '.join(differ)} file(s) are not the ones last.pt was "
                                     "trained on (use another --out-dir or --no-resume)", last_path)


def _write_log(path: Path, history: list) -> None:
    """The log as the run's history says (a killed run may have logged validations after its last save)."""
    with atomic_open(path, "w") as f:
        for rec in history:
            f.write(json.dumps(rec) + "\n")


def learning_rate(cfg: TrainSeq2SeqConfig, progress: float) -> float:
    """The learning rate at ``progress`` epochs: ``lr`` until ``decay_start``, then multiplied by
    ``decay_factor`` at ``decay_start`` and every ``decay_every`` epochs after it."""
    if progress < cfg.decay_start:
        return cfg.lr
    halvings = int(math.floor((progress - cfg.decay_start) / cfg.decay_every + 1e-9)) + 1
    return cfg.lr * cfg.decay_factor ** halvings


def epoch_batches(src_len: np.ndarray, tgt_len: np.ndarray, batch_size: int, seed: int, epoch: int,
                  length_grouped: bool) -> list[np.ndarray]:
    """The batches of one epoch as index arrays, a function of (seed, epoch) only.

    Length-grouped: a random permutation, stably sorted by (source + target length) and cut into runs of
    ``batch_size`` (so ties are broken at random and groups differ between epochs), in random order.
    Random: consecutive runs of ``batch_size`` of a random permutation.
    """
    rng = np.random.default_rng([seed, epoch])
    perm = rng.permutation(len(src_len))
    if not length_grouped:
        return [perm[i:i + batch_size] for i in range(0, len(perm), batch_size)]
    lengths = np.stack([src_len[perm], tgt_len[perm]], axis=1)
    groups = length_batches(lengths, max_tokens=np.iinfo(np.int64).max // 4, max_batch=batch_size,
                            seed=int(rng.integers(2 ** 31)))
    return [perm[g] for g in groups]


def _encode_pairs(vocabs: Vocabularies, src, tgt):
    s = [encode_eos(vocabs.source, x) for x in src]
    t = [encode_eos(vocabs.target, y) for y in tgt]
    return s, t


@torch.no_grad()
def evaluate_perplexity(model: Seq2Seq, src: list[np.ndarray], tgt: list[np.ndarray], batch_size: int = 128,
                        dist: Dist | None = None) -> float:
    """exp(total -log p(target token) / target tokens), ``<eos>`` tokens counted, teacher-forced.

    With ``dist`` of several ranks, each scores every N-th batch and the sums are all-reduced."""
    if not src:
        return float("nan")
    was_training = model.training
    model.eval()
    nll, n_tok = 0.0, 0
    order = np.argsort([len(x) + len(y) for x, y in zip(src, tgt)], kind="stable")
    starts = range(0, len(order), batch_size)
    if dist is not None and dist.enabled:
        starts = starts[dist.rank::dist.world_size]
    for i in starts:
        idx = order[i:i + batch_size]
        s, sm = pad_batch([src[j] for j in idx], device=model.device)
        t, tm = pad_batch([tgt[j] for j in idx], device=model.device)
        nll -= float(model(s, sm, t, tm).sum())
        n_tok += int(tm.sum())
    if dist is not None and dist.enabled:
        nll, n_tok = dist.all_reduce_sum([nll, n_tok])
    model.train(was_training)
    return math.exp(nll / n_tok)


def _vocabularies(cfg: TrainSeq2SeqConfig, src, tgt) -> Vocabularies:
    if cfg.vocab:
        return Vocabularies.load(cfg.vocab)
    cs, ct = collections.Counter(), collections.Counter()
    for x in src:
        cs.update(x)
    for y in tgt:
        ct.update(y)
    return Vocabularies(build_vocab(cs, cfg.src_vocab_size), build_vocab(ct, cfg.tgt_vocab_size))


def _model_config(cfg: TrainSeq2SeqConfig, vocabs: Vocabularies) -> Seq2SeqConfig:
    over = {k: getattr(cfg, k) for k in ("emb_dim", "hidden_dim", "num_layers") if getattr(cfg, k) is not None}
    return Seq2SeqConfig.preset(cfg.preset, len(vocabs.source), len(vocabs.target), reverse=cfg.reverse,
                                init_range=cfg.init_range, **over)


class _TrainingSide:
    """The training sentences of one side of the corpus (its lines less the held-out ones), read from the file
    each time they are iterated."""

    def __init__(self, path: str, held: set[int]):
        self.path, self.held = path, held

    def __iter__(self):
        return (s for i, s in enumerate(iter_sentences(self.path)) if i not in self.held)


def _read_pairs(cfg: TrainSeq2SeqConfig) -> tuple[_TrainingSide, _TrainingSide, list, list, set[int]]:
    """The training and validation pairs: ``(src, tgt, valid_src, valid_tgt, held)``: the training sides as
    iterables of word lists read from disk, the validation pairs as word lists, and the line numbers held out
    of the training files for validation (none when validation files are given)."""
    n = check_same_length(cfg.src, cfg.tgt)
    if cfg.valid_src or cfg.valid_tgt:
        if not (cfg.valid_src and cfg.valid_tgt):
            raise PhraseRescoreError("give both --valid-src and --valid-tgt, or neither")
        vsrc, vtgt = read_parallel(cfg.valid_src, cfg.valid_tgt)
        held = set()
    else:  # hold out a fixed random subset of the training pairs
        held = held_out_lines(n, cfg.valid_size, cfg.seed)
        vsrc, vtgt = [], []
        for i, (x, y) in enumerate(zip(iter_sentences(cfg.src), iter_sentences(cfg.tgt))):
            if i in held:
                vsrc.append(x)
                vtgt.append(y)
    if n == len(held):
        raise PhraseRescoreError("no training pairs", cfg.src)
    return _TrainingSide(cfg.src, held), _TrainingSide(cfg.tgt, held), vsrc, vtgt, held


#: pairs encoded (as Python lists) before they are appended to the arrays on disk
PAIRS_CHUNK = 1 << 14


def _write_pairs(folder: Path, cfg: TrainSeq2SeqConfig, held: set[int], vocabs: Vocabularies) -> None:
    """The training pairs' ids, ``<eos>`` appended, as the arrays of :class:`~.pairs.PairFile`'s split ``train``."""
    out, src, tgt = SplitWriter(folder, "train"), [], []
    ids = pa.list_(pa.int32())
    for x, y in zip(_TrainingSide(cfg.src, held), _TrainingSide(cfg.tgt, held)):
        src.append(vocabs.source.encode(x) + [EOS_ID])
        tgt.append(vocabs.target.encode(y) + [EOS_ID])
        if len(src) >= PAIRS_CHUNK:
            out.append(pa.array(src, ids), pa.array(tgt, ids))
            src, tgt = [], []
    out.append(pa.array(src, ids), pa.array(tgt, ids))
    out.close()


def _training_pairs(cfg: TrainSeq2SeqConfig, dist: Dist, vocabs: Vocabularies, held: set[int]) -> PairFile:
    """The training pairs, read by position from id arrays written once per corpus and vocabulary in OUT_DIR."""
    key = {"src": sha256_file(cfg.src), "tgt": sha256_file(cfg.tgt),
           "held_out": [cfg.seed, cfg.valid_size] if held else None,
           "vocab": hashlib.sha256(vocabs.to_json().encode()).hexdigest()}
    folder = corpus_arrays(cfg.out_dir, key, lambda d: _write_pairs(d, cfg, held, vocabs), dist.is_main,
                           dist.barrier)
    return PairFile(folder, "train")


def _model_and_vocabularies(cfg: TrainSeq2SeqConfig, dist: Dist, hashes: dict, src, tgt) -> tuple:
    """``(model, vocabs, train_state)``: from ``last.pt`` when resuming (checked against this run's settings,
    data and world size; ``train_state`` None otherwise), else a new vocabulary and model seeded by
    ``cfg.seed``."""
    last_path = Path(cfg.out_dir) / LAST
    if not (cfg.resume and last_path.exists()):
        vocabs = _vocabularies(cfg, src, tgt)
        torch.manual_seed(cfg.seed)
        return Seq2Seq(_model_config(cfg, vocabs)).to(dist.device), vocabs, None  # uniform init inside
    ck = load_checkpoint(last_path, dist.device, SEQ2SEQ)
    if ck.vocabs is None or not ck.train_state:
        raise PhraseRescoreError("cannot resume: this last.pt holds no vocabulary or training state (use "
                                 "another --out-dir or --no-resume)", last_path)
    if ck.model.cfg != _model_config(cfg, ck.vocabs):
        raise PhraseRescoreError(f"cannot resume: the checkpoint's model {ck.model.cfg} differs from the "
                                 f"requested one (use another --out-dir or --no-resume)", last_path)
    _check_resumable(cfg, ck.train_state, hashes, last_path)
    check_world_size(ck.train_state.get("world_size", 1), dist, last_path, "use another --out-dir or --no-resume")
    return ck.model, ck.vocabs, ck.train_state


class _Trainer:
    """One run's model, data and counters; :meth:`run` trains epoch by epoch, batch by batch."""

    def __init__(self, cfg: TrainSeq2SeqConfig, dist: Dist, model: Seq2Seq, vocabs: Vocabularies, state: dict,
                 hashes: dict, pairs: tuple[list, list, list, list]):
        self.cfg, self.dist, self.model, self.vocabs, self.state, self.hashes = cfg, dist, model, vocabs, state, hashes
        self.out = Path(cfg.out_dir)
        self.train_set, vsrc, vtgt = pairs
        self.va_src, self.va_tgt = _encode_pairs(vocabs, vsrc, vtgt)
        lengths = self.train_set.lengths()
        self.src_len, self.tgt_len = lengths[:, 0], lengths[:, 1]
        self.opt = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=0.0)  # plain SGD: no state to save
        self.params = [p for p in model.parameters()]
        self.forward = dist.data_parallel(model)        # gradients averaged over the ranks in backward
        self.tokens_seen, self.pairs_here, self.t_train = 0, 0, 0.0
        self.last_ppl = state["history"][-1]["valid_ppl"] if state["history"] else float("nan")
        self.log = None

    def save(self, path: Path, epoch: int, batch: int, n_batches: int) -> None:
        """Rank 0 writes the checkpoint (weights, vocabulary, where the run is, its settings and data)."""
        if self.dist.is_main:
            st = dict(self.state, epoch=epoch, batch=batch, progress_in_epoch=batch / n_batches,
                      train_config=self.cfg.to_dict(), data_sha256=self.hashes, world_size=self.dist.world_size)
            save_checkpoint(path, self.model, self.vocabs, st)
        self.dist.barrier()                  # no rank runs ahead of the checkpoint

    def run(self) -> None:
        """The epochs from where ``state`` says the run is; the log is rewritten from ``state`` first."""
        if self.dist.is_main:
            _write_log(self.out / "train_log.jsonl", self.state["history"])
            self.log = open(self.out / "train_log.jsonl", "a", encoding="utf-8")
        self.model.train()
        try:
            for epoch in range(self.state["epoch"], math.ceil(self.cfg.epochs)):
                self.run_epoch(epoch)
        finally:
            if self.log is not None:
                self.log.close()

    def run_epoch(self, epoch: int) -> None:
        """The epoch's batches (from where a resumed run stopped), validating every ``valid_every`` epochs and
        where a fractional last epoch stops; ``last.pt`` at the end."""
        cfg, state = self.cfg, self.state
        batches = epoch_batches(self.src_len, self.tgt_len, cfg.batch_size, cfg.seed, epoch, cfg.length_grouped)
        n_b = len(batches)
        stop_at = n_b if epoch + 1 <= cfg.epochs else int(round((cfg.epochs - epoch) * n_b))
        valid_at = {min(n_b, int(round(f * n_b))) for f in np.arange(cfg.valid_every, 1.0 + 1e-9, cfg.valid_every)}
        valid_at.add(stop_at)
        first = state["batch"] if epoch == state["epoch"] else 0
        with bar(total=stop_at, initial=first, desc=f"epoch {epoch + 1}", unit="batch") as pb:
            for b in range(first, stop_at):
                lr = learning_rate(cfg, epoch + b / n_b)
                idx = batches[b]
                loss_v, n_tok, gnorm = self.step(idx, lr)
                pb.set_postfix(loss=f"{loss_v:.3f}", ppl=f"{math.exp(loss_v * len(idx) / n_tok):.2f}",
                               lr=f"{lr:.3g}", gnorm=f"{gnorm:.2f}", refresh=False)
                pb.update(1)
                if b + 1 in valid_at:
                    self.validate(epoch, b + 1, n_b, lr, loss_v)
                elif cfg.save_every and state["step"] % cfg.save_every == 0:
                    self.save(self.out / LAST, epoch, b + 1, n_b)
        # the end of an epoch, or where a fractional last epoch stops
        state["epoch"], state["batch"] = (epoch + 1, 0) if stop_at == n_b else (epoch, stop_at)
        self.save(self.out / LAST, state["epoch"], state["batch"], n_b)

    def step(self, idx: np.ndarray, lr: float) -> tuple[float, int, float]:
        """One SGD update on the batch ``idx`` at learning rate ``lr``: ``(loss, target tokens, gradient norm)``,
        the loss being the batch's mean -log p(T|S) over its sentences."""
        dist, device = self.dist, self.dist.device
        for g in self.opt.param_groups:
            g["lr"] = lr
        t0 = time.perf_counter()
        mine = np.array_split(idx, dist.world_size)[dist.rank] if dist.enabled else idx
        weight = 1.0
        if len(mine) == 0:      # fewer sentences than ranks: one sentence, weight 0
            mine, weight = idx[:1], 0.0
        s, sm, t, tm = self.train_set.batch(mine, device=device)  # (b, S), (b, S), (b, T), (b, T)
        if dist.enabled:    # this slice's share; DDP averages the N ranks' gradients
            nll = -self.forward(s, sm, t, tm).sum() * weight
            loss = nll * (dist.world_size / len(idx))
            nll_sum, n_tok = dist.all_reduce_sum([nll.item(), tm.sum().item() * weight])
            loss_v, n_tok = nll_sum / len(idx), int(n_tok)
        else:
            loss = -self.forward(s, sm, t, tm).sum() / len(idx)  # -log p(T|S), averaged over sentences
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = float(torch.nn.utils.clip_grad_norm_(self.params, self.cfg.clip_norm))
        self.opt.step()
        self.t_train += time.perf_counter() - t0
        if not dist.enabled:
            n_tok = int(tm.sum())
            loss_v = float(loss.detach())
        self.tokens_seen += n_tok
        self.pairs_here += len(idx)
        self.state["step"] += 1
        return loss_v, n_tok, gnorm

    def validate(self, epoch: int, batch: int, n_batches: int, lr: float, loss_v: float) -> None:
        """Validation perplexity into the history and the log; ``model.pt`` when it is the best, ``last.pt``."""
        state = self.state
        self.last_ppl = evaluate_perplexity(self.model, self.va_src, self.va_tgt, dist=self.dist)
        rec = {"epoch": round(epoch + batch / n_batches, 4), "step": state["step"], "lr": lr,
               "train_loss": loss_v, "valid_ppl": self.last_ppl}
        state["history"].append(rec)
        if self.log is not None:
            self.log.write(json.dumps(rec) + "\n")
            self.log.flush()
        if self.last_ppl < state["best_valid_ppl"] or not math.isfinite(state["best_valid_ppl"]):
            state["best_valid_ppl"] = self.last_ppl
            self.save(self.out / BEST, epoch, batch, n_batches)
        self.save(self.out / LAST, epoch, batch, n_batches)


def train(cfg: TrainSeq2SeqConfig) -> TrainSummary:
    """Train (or resume) a Seq2Seq model; writes ``model.pt``, ``last.pt``, ``vocab.json``, ``train_log.jsonl``."""
    t_start = time.perf_counter()
    for name, v in (("batch_size", cfg.batch_size), ("epochs", cfg.epochs), ("lr", cfg.lr)):
        if not v > 0:
            raise PhraseRescoreError(f"{name} must be positive, got {v}")
    out = Path(cfg.out_dir)
    dist = setup_distributed(cfg.device)
    if dist.is_main:
        out.mkdir(parents=True, exist_ok=True)
    if not dist.is_main:
        set_quiet(True)                 # one progress bar: rank 0's
    pairs = _read_pairs(cfg)
    hashes = _data_hashes(cfg)
    model, vocabs, resumed = _model_and_vocabularies(cfg, dist, hashes, pairs[0], pairs[1])
    state: dict = {"epoch": 0, "batch": 0, "step": 0, "best_valid_ppl": math.inf, "history": []}
    state.update(resumed or {})
    resumed_from = None if resumed is None else state["epoch"] + state.get("progress_in_epoch", 0.0)
    if dist.is_main:
        vocabs.save(out / "vocab.json")
    train_set = _training_pairs(cfg, dist, vocabs, pairs[4])
    trainer = _Trainer(cfg, dist, model, vocabs, state, hashes, (train_set, pairs[2], pairs[3]))
    run_start = time.perf_counter()
    trainer.run()
    wall = time.perf_counter() - run_start
    pairs_here = trainer.pairs_here
    return TrainSummary(steps=state["step"], stop_reason="epochs", best_valid_ppl=state["best_valid_ppl"],
                        last_valid_ppl=trainer.last_ppl,
                        pairs_per_s=pairs_here / wall if wall > 0 and pairs_here else 0.0,
                        seconds=time.perf_counter() - t_start, out_dir=os.fspath(out), model=os.fspath(out / BEST),
                        device=str(dist.device), history=state["history"],
                        epochs=min(cfg.epochs, float(math.ceil(cfg.epochs))),
                        target_tokens_per_s=trainer.tokens_seen / trainer.t_train if trainer.t_train else 0.0,
                        resumed_from=resumed_from)

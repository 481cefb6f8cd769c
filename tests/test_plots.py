"""The pictures as a person sees them: PNGs that open, have the stated size and something drawn on them,
the same bytes on every run; t-SNE maps that keep clusters apart with labels that never overlap; the
`plot` commands and their one-line errors; report.html self-contained, with the table, and rendered by a
real browser (headless Chromium) with the table visible."""
from __future__ import annotations

import base64
import html.parser
import io
import random
import re
import shutil
import subprocess

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from PIL import Image

from phrase_rescore.app.cli import main
from phrase_rescore.app.pictures import (
    PHRASES,
    TRAINING_CURVES,
    WORDS_SOURCE,
    WORDS_TARGET,
    encdec_pictures,
    evaluation_report,
)
from phrase_rescore.core.errors import PhraseRescoreError
from phrase_rescore.pipeline.configs import PrepareConfig, TrainConfig
from phrase_rescore.pipeline.model.checkpoint import load_checkpoint
from phrase_rescore.pipeline.prepare import prepare
from phrase_rescore.pipeline.representations import phrase_vectors, select_phrases, word_vectors
from phrase_rescore.pipeline.train import train
from phrase_rescore.pipeline.vocab import EOS_ID, Vocab
from phrase_rescore.plots import curves, maps
from phrase_rescore.plots.report_html import HEADER_BG, Picture, markdown_to_html, write_report

pytestmark = pytest.mark.usefixtures("one_thread")

FAST_MAP = maps.MapConfig(iterations=250, max_words=60, max_phrases=80)
TABLE_MD = """| Configuration | Dev BLEU | Δ dev | p (dev) | Test BLEU | Δ test | p (test) | Test chrF |
|---|---:|---:|---:|---:|---:|---:|---:|
| Baseline | 68.26 | +0.00 | – | 66.57 | +0.00 | – | 85.58 |
| +RNN | 68.16 | -0.10 | 0.3526 | 66.85 | +0.28 | 0.2178 | 85.76 |
| +RNN+WP | 68.11 | -0.14 | 0.3157 | 66.79 | +0.22 | 0.2607 | 85.85 |

p: paired bootstrap resampling against the first row (sacrebleu).

| Configuration | moses.ini sha256 | model sha256 |
|---|---|---|
| Baseline | `543d42bd52138aa98284e814db68b770cad8ca9c6be978e955d844559a558ba9` | – |
| +RNN | `91338da6c6648ec212ad5521bebe4e32477a9b670d509c8ed3ef59e8227d72ac` | `3f31f8b6` |

Signatures:
- test BLEU: `nrefs:1|bs:1000|seed:12345|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0`
"""


def image(data: bytes) -> np.ndarray:
    """The PNG decoded as an (H, W, 3) uint8 array (it must be a valid PNG)."""
    im = Image.open(io.BytesIO(data))
    im.verify()
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def assert_drawn(data: bytes, size: tuple[int, int], min_ink: int = 2000) -> np.ndarray:
    """A valid PNG of ``size`` (width, height) with more than ``min_ink`` non-white pixels."""
    px = image(data)
    assert (px.shape[1], px.shape[0]) == size
    assert px.std() > 0
    ink = int((px.min(axis=2) < 200).sum())
    assert ink > min_ink, ink
    return px


def write_log(path, rows=12):
    lines = ["step,pairs_seen,elapsed_s,train_loss,train_ppl,valid_ppl,best_valid_ppl,lr"]
    for i in range(1, rows + 1):
        loss = 20 / i ** 0.5
        lines.append(f"{250 * i},{16000 * i},{i:.3f},{loss},{np.exp(loss / 4)},{np.exp(loss / 3.5)},"
                     f"{np.exp(loss / 3.5)},1.0")
    path.write_text("\n".join(lines) + "\n")
    return path


def write_tune_log(path, bleus):
    lines = ["iteration,dev_bleu,mert_bleu,candidates,seconds_decode,seconds_mert,LM0,TM0"]
    lines += [f"{i},{b:.4f},{b + 1:.4f},{100 * i},1.00,1.00,0.5,0.2" for i, b in enumerate(bleus, start=1)]
    path.write_text("\n".join(lines) + "\n")
    return path


# ----------------------------------------------------------------------------- curves

def test_training_curves_are_a_drawn_png_of_their_size_and_the_same_bytes_again(tmp_path):
    log = write_log(tmp_path / "train_log.csv")
    data = curves.training_curves(log, "RNN Encoder-Decoder")
    px = assert_drawn(data, curves.TRAINING_SIZE)
    assert curves.training_curves(log, "RNN Encoder-Decoder") == data
    # both panels hold a curve: coloured pixels in the left and in the right half
    coloured = (px.max(axis=2).astype(int) - px.min(axis=2)) > 80
    half = px.shape[1] // 2
    assert coloured[:, :half].sum() > 300 and coloured[:, half:].sum() > 300
    # another log draws another picture
    assert curves.training_curves(write_log(tmp_path / "other.csv", rows=5), "RNN Encoder-Decoder") != data


def test_a_json_lines_log_and_any_loss_or_perplexity_columns_draw_alike(tmp_path):
    """train-seq2seq's train_log.jsonl, or any model's log: x is the step, columns named *loss* or *ppl*."""
    log = tmp_path / "train_log.jsonl"
    log.write_text("".join(f'{{"epoch": {i / 4}, "step": {10 * i}, "lr": 0.7, "train_loss": {5 / i}, '
                           f'"valid_ppl": {2 + 30 / i}}}\n' for i in range(1, 9)))
    parsed = curves.read_log(log)
    assert parsed.columns == ["epoch", "step", "lr", "train_loss", "valid_ppl"]
    assert curves.curve_columns(parsed) == (["train_loss"], ["valid_ppl"])
    assert_drawn(curves.training_curves(log), curves.TRAINING_SIZE)
    only_ppl = tmp_path / "cslm_log.csv"
    only_ppl.write_text("step,valid_perplexity,best_valid_perplexity\n100,80.5,80.5\n200,60.25,60.25\n")
    assert curves.curve_columns(curves.read_log(only_ppl)) == ([], ["valid_perplexity"])
    assert_drawn(curves.training_curves(only_ppl), curves.TRAINING_SIZE, min_ink=1000)


def test_tuning_curves_one_line_per_configuration(tmp_path):
    logs = [("Baseline", write_tune_log(tmp_path / "a.csv", [64.2, 68.9, 69.3, 69.2])),
            ("+RNN", write_tune_log(tmp_path / "b.csv", [66.3, 68.0, 69.1]))]
    data = curves.tuning_curves(logs)
    px = assert_drawn(data, curves.TUNING_SIZE)
    assert curves.tuning_curves(logs) == data
    blue, orange = np.array([0x1f, 0x77, 0xb4]), np.array([0xff, 0x7f, 0x0e])   # the first two colours
    assert (np.abs(px.astype(int) - blue).sum(axis=2) < 30).sum() > 200
    assert (np.abs(px.astype(int) - orange).sum(axis=2) < 30).sum() > 200
    with pytest.raises(PhraseRescoreError, match=r"x.csv:1: no 'dev_bleu' column"):
        (tmp_path / "x.csv").write_text("iteration,bleu\n1,3\n")
        curves.tuning_curves([("x", tmp_path / "x.csv")])


@pytest.mark.parametrize("text, where, what", [
    ("step,train_loss\n1,2.5\n2,x\n", ":3:", "column 'train_loss': 'x' is not a number"),
    ("step,train_loss\n1,2.5\n2,3,4\n", ":3:", "3 fields; expected 2 as in the header"),
    ("step,train_loss\n", "", "a header but no rows"),
    ("", "", "the log is empty"),
    ('{"step": 1, "train_loss": 2}\n[1, 2]\n', ":2:", "not a JSON object"),
    ("epoch_of,lr\n1,2\n", ":1:", "no step column"),
    ("step,lr\n1,2\n", ":1:", "no loss or perplexity column"),
])
def test_a_bad_log_is_one_error_line_naming_file_and_line(tmp_path, text, where, what):
    bad = tmp_path / "bad.csv"
    bad.write_text(text)
    r = CliRunner().invoke(main, ["plot", "training", str(bad), "--out", str(tmp_path / "t.png")])
    assert r.exit_code == 1, r.output
    assert r.output.count("\n") == 1 and r.output.startswith(f"error: {bad}{where}") and what in r.output, r.output
    assert not (tmp_path / "t.png").exists()


def test_plot_training_and_tuning_commands(tmp_path):
    log = write_log(tmp_path / "train_log.csv")
    r = CliRunner().invoke(main, ["plot", "training", str(log), "--out", str(tmp_path / "t.png")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "t.png").read_bytes() == curves.training_curves(log, "Training")
    a, b = write_tune_log(tmp_path / "a.csv", [60, 61]), write_tune_log(tmp_path / "b.csv", [59, 62, 63])
    r = CliRunner().invoke(main, ["plot", "tuning", f"Baseline={a}", f"+RNN={b}", "--out", str(tmp_path / "u.png")])
    assert r.exit_code == 0, r.output
    assert_drawn((tmp_path / "u.png").read_bytes(), curves.TUNING_SIZE)
    # an output that is its own input is refused before anything is written
    r = CliRunner().invoke(main, ["plot", "training", str(log), "--out", str(log)])
    assert r.exit_code == 1 and "would overwrite the input" in r.output
    assert log.read_text().startswith("step,")


# ----------------------------------------------------------------------------- maps

def clusters(n_per=30, dims=16, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 10, (3, dims))
    x = np.concatenate([c + rng.normal(0, 0.5, (n_per, dims)) for c in centres])
    return x, np.repeat(np.arange(3), n_per)


def test_tsne_keeps_clusters_apart_and_gives_the_same_map_again():
    x, group = clusters()
    xy = maps.tsne_2d(x, FAST_MAP)
    assert xy.shape == (90, 2)
    d = np.linalg.norm(xy[:, None] - xy[None], axis=2)
    same = group[:, None] == group[None]
    assert d[same & ~np.eye(90, dtype=bool)].mean() < 0.5 * d[~same].mean()
    assert np.array_equal(maps.tsne_2d(x, FAST_MAP), xy)               # same seed, same map
    with pytest.raises(PhraseRescoreError, match="at least 5 vectors"):
        maps.tsne_2d(x[:4], FAST_MAP)


def test_labels_are_placed_most_frequent_first_and_never_overlap():
    x, _ = clusters(n_per=40)
    xy = maps.tsne_2d(x, FAST_MAP)
    words = [f"word{i:03d}" for i in range(len(xy))]
    with maps.styled():
        fig = maps.new_figure(*maps.MAP_SIZE)
        ax = fig.add_axes((0.02, 0.02, 0.96, 0.92))
        ax.set_xlim(xy[:, 0].min() - 1, xy[:, 0].max() + 1)
        ax.set_ylim(xy[:, 1].min() - 1, xy[:, 1].max() + 1)
        chosen = maps.place_labels(ax, xy, words, max_labels=1000)
    assert chosen[0][0] == 0                       # the most frequent word is always labelled
    assert 5 < len(chosen) < len(xy)               # sparse: crowded points go without
    boxes = np.array([b for _, b in chosen])
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            a, b = boxes[i], boxes[j]
            assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (words[chosen[i][0]],
                                                                                 words[chosen[j][0]])
    assert [i for i, _ in chosen] == sorted(i for i, _ in chosen)


@pytest.mark.parametrize("word, shown", [
    ("d&apos;", "d'"), ("l&apos; homme", "l' homme"), ("&quot;oui&quot;", '"oui"'), ("a &amp; b", "a & b"),
    ("&lt;s&gt;", "<s>"), ("&#91;x&#93;", "[x]"), ("a&#124;b", "a|b"),
    ("&amp;lt;", "&lt;"),                       # one pass, as deescape-special-chars.perl: an escaped escape
    ("&nbsp; &#39;", "&nbsp; &#39;"),           # not Moses's escapes: as they are
])
def test_map_labels_show_the_words_as_the_text_had_them_not_mosess_escapes(word, shown):
    assert maps.unescape_moses(word) == shown
    with maps.styled():
        fig = maps.new_figure(*maps.MAP_SIZE)
        ax = fig.add_axes((0.02, 0.02, 0.96, 0.92))
        maps.place_labels(ax, np.array([[0.2, 0.5]]), [word], max_labels=1)
        assert [t.get_text().strip() for t in ax.texts] == [shown]


def test_a_map_png_is_drawn_and_the_same_bytes_again(tmp_path):
    x, _ = clusters()
    words = [f"w{i}" for i in range(len(x))]
    res = maps.write_map(x, words, tmp_path / "m.png", "words", FAST_MAP)
    data = (tmp_path / "m.png").read_bytes()
    assert res == {"points": 90, "bytes": len(data)}
    assert_drawn(data, maps.MAP_SIZE)
    maps.write_map(x, words, tmp_path / "again.png", "words", FAST_MAP)
    assert (tmp_path / "again.png").read_bytes() == data
    # too few points: a picture that says so, not a crash
    maps.write_map(x[:3], words[:3], tmp_path / "few.png", "phrases", FAST_MAP, what="phrases")
    assert_drawn((tmp_path / "few.png").read_bytes(), maps.MAP_SIZE, min_ink=300)


# ----------------------------------------------------------------------------- a trained model's pictures

@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny encoder-decoder trained for 30 steps on word-for-word pairs of 1-6 words."""
    d = tmp_path_factory.mktemp("trained")
    r = random.Random(0)
    lines = set()
    while len(lines) < 500:
        src = [r.randrange(40) for _ in range(r.randint(1, 6))]
        lines.add(f"{' '.join(f's{w}' for w in src)} ||| {' '.join(f't{(7 * w + 3) % 40}' for w in src)} "
                  "||| 0.1 0.2 0.3 0.4\n")
    (d / "table.txt").write_text("".join(sorted(lines)))
    prepare(d / "table.txt", d / "pairs", PrepareConfig(vocab_size=100, valid_fraction=0.1, seed=1))
    train(d / "pairs", d / "model", TrainConfig(model_overrides=dict(emb_dim=8, hidden_dim=16, maxout_units=8,
                                                                     rank=8), batch_size=32, max_steps=30,
                                                valid_every=10, seed=3))
    return d


def test_select_phrases_long_known_most_paired_first():
    vocab = Vocab(["<eos>", "<unk>", "a", "b", "c", "d"])
    sources = ["a b c d", "a b", "b c d a", "a b c d", "a b c x", "d c b a", "b c d a", "b c d a"]
    assert select_phrases(sources, vocab, 4, 10) == ["b c d a", "a b c d", "d c b a"]
    assert select_phrases(sources, vocab, 4, 2) == ["b c d a", "a b c d"]
    assert select_phrases(sources, vocab, 2, 10)[-1] == "d c b a" and "a b" in select_phrases(sources, vocab, 2, 10)


def test_phrase_vectors_are_the_encoders_summary_c(trained):
    ck = load_checkpoint(trained / "model" / "model.pt")
    phrases, c = phrase_vectors(ck, trained / "pairs", min_words=4, max_phrases=50)
    assert len(phrases) == 50 and c.shape == (50, 16)
    assert all(len(p.split()) >= 4 for p in phrases)
    for k in (0, 17, 49):   # batched with padding = one phrase alone
        ids = torch.tensor([ck.vocabs.source.encode(phrases[k].split()) + [EOS_ID]])
        with torch.no_grad():
            alone = ck.model.encode(ids, torch.ones_like(ids, dtype=torch.bool)).double().numpy()[0]
        np.testing.assert_allclose(c[k], alone, rtol=1e-5, atol=1e-6)
    words, e = word_vectors(ck, "target", 10)
    assert words == [w for w in ck.vocabs.target.words if w.startswith("t")][:10]
    np.testing.assert_array_equal(e[0], ck.model.decoder.E_tgt.detach().double().numpy()[
        ck.vocabs.target.index[words[0]]])


def test_a_trained_model_gets_its_four_pictures_the_same_bytes_again(trained, tmp_path):
    first = encdec_pictures(trained / "model" / "model.pt", trained / "pairs", tmp_path / "a", FAST_MAP)
    assert list(first) == [TRAINING_CURVES, WORDS_SOURCE, WORDS_TARGET, PHRASES]
    assert first[WORDS_SOURCE]["points"] == 40 and first[PHRASES]["points"] == 80
    for name, size in ((TRAINING_CURVES, curves.TRAINING_SIZE), (WORDS_SOURCE, maps.MAP_SIZE),
                       (WORDS_TARGET, maps.MAP_SIZE), (PHRASES, maps.MAP_SIZE)):
        assert_drawn((tmp_path / "a" / name).read_bytes(), size)
    r = CliRunner().invoke(main, ["plot", "embeddings", str(trained / "model" / "model.pt"), "--pairs",
                                  str(trained / "pairs"), "--out", str(tmp_path / "b"), "--iterations", "250",
                                  "--max-words", "60", "--max-phrases", "80"])
    assert r.exit_code == 0, r.output
    for name in (WORDS_SOURCE, WORDS_TARGET, PHRASES):
        assert (tmp_path / "b" / name).read_bytes() == (tmp_path / "a" / name).read_bytes(), name
    r = CliRunner().invoke(main, ["plot", "embeddings", str(trained / "model"), "--out", str(tmp_path / "c"),
                                  "--iterations", "100"])
    assert r.exit_code == 1 and r.output == "error: --iterations 100: expected at least 250\n", r.output
    assert not (tmp_path / "c").exists()


# ----------------------------------------------------------------------------- report.html

class _Tags(html.parser.HTMLParser):
    VOID = {"meta", "img", "br", "hr", "link", "input"}

    def __init__(self):
        super().__init__()
        self.stack, self.srcs, self.errors = [], [], []

    def handle_starttag(self, tag, attrs):
        self.srcs += [v for k, v in attrs if k in ("src", "href")]
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack.pop() != tag:
            self.errors.append(tag)


def make_report(tmp_path, md=TABLE_MD):
    (tmp_path / "table1.md").write_text(md, encoding="utf-8")
    tune = tmp_path / "tune-baseline"
    (tune / "work").mkdir(parents=True)
    (tune / "moses.ini").write_text("[weight]\n")
    write_tune_log(tune / "work" / "tune-log.csv", [60, 62, 63])
    pics = tmp_path / "pictures"
    pics.mkdir()
    (pics / TRAINING_CURVES).write_bytes(curves.training_curves(write_log(tmp_path / "log.csv")))
    return evaluation_report(tmp_path / "table1.md", tmp_path, {"Baseline": tune / "moses.ini", "+RNN": None},
                             {"RNN Encoder-Decoder": pics})


def test_report_html_is_self_contained_valid_and_holds_the_table_and_pictures(tmp_path):
    res = make_report(tmp_path)
    assert res["pictures"] == ["tuning-curves.png", TRAINING_CURVES]
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    tags = _Tags()
    tags.feed(page)
    assert tags.errors == [] and tags.stack == []                       # every tag closed, in order
    assert tags.srcs and all(s.startswith("data:image/png;base64,") for s in tags.srcs)
    assert not re.search(r"https?://|<link|<script|url\(", page)       # nothing fetched from anywhere
    embedded = [base64.b64decode(s.split(",", 1)[1]) for s in tags.srcs]
    assert embedded == [(tmp_path / "tuning-curves.png").read_bytes(),
                        (tmp_path / "pictures" / TRAINING_CURVES).read_bytes()]
    assert "<th>Configuration</th>" in page and "<td>+RNN+WP</td>" in page
    assert '<td class="num">66.85</td>' in page
    assert "<code>543d42bd52138aa98284e814db68b770cad8ca9c6be978e955d844559a558ba9</code>" in page
    assert "nrefs:1|bs:1000|seed:12345" in page
    # the same inputs give the same page
    (tmp_path / "again").mkdir()
    make_report(tmp_path / "again")
    assert (tmp_path / "again" / "report.html").read_bytes() == (tmp_path / "report.html").read_bytes()


def test_markdown_is_escaped():
    out = markdown_to_html("a <b> & `x<y>` **bold**\n")
    assert out == "<p>a &lt;b&gt; &amp; <code>x&lt;y&gt;</code> <strong>bold</strong></p>"


def test_plot_report_command_and_a_missing_picture(tmp_path):
    (tmp_path / "table1.md").write_text(TABLE_MD, encoding="utf-8")
    png = tmp_path / TRAINING_CURVES
    png.write_bytes(curves.training_curves(write_log(tmp_path / "log.csv")))
    r = CliRunner().invoke(main, ["plot", "report", str(tmp_path / "table1.md"), str(png), "--out",
                                  str(tmp_path / "r.html")])
    assert r.exit_code == 0, r.output
    assert "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode() in (tmp_path / "r.html").read_text()
    with pytest.raises(PhraseRescoreError, match="picture not found"):
        write_report(tmp_path / "table1.md", [Picture("x", tmp_path / "none.png")], tmp_path / "s.html")


def _chromium() -> str | None:
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome", "chrome")) if p),
                None)


def _screenshot(browser: str, page, out, size=(1200, 900)) -> np.ndarray:
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
           "--disable-dev-shm-usage", f"--user-data-dir={out.parent / 'chromium-profile'}",
           f"--screenshot={out}", f"--window-size={size[0]},{size[1]}", page.as_uri()]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and out.is_file(), res.stderr[-2000:]
    return image(out.read_bytes())


@pytest.mark.skipif(_chromium() is None, reason="no chromium binary on PATH (Debian: apt-get install chromium); "
                                                "the browser rendering of report.html is not checked")
def test_report_html_renders_in_headless_chromium_with_the_table_visible(tmp_path):
    browser = _chromium()
    make_report(tmp_path)
    page = tmp_path / "report.html"
    shot = _screenshot(browser, page, tmp_path / "page.png")
    assert shot.shape[:2] == (900, 1200) and shot.std() > 0
    assert ((shot.min(axis=2) < 128).sum()) > 5000                      # text and pictures drawn
    header = np.array([int(HEADER_BG[i:i + 2], 16) for i in (1, 3, 5)])
    is_header = np.abs(shot.astype(int) - header).sum(axis=2) < 12
    assert is_header.sum() > 20000, is_header.sum()                      # the table headers' background
    rows = np.nonzero(is_header.any(axis=1))[0]
    assert rows.min() < 450                                              # near the top: seen without scrolling
    # the same page without its tables has none of that colour: it is the table that shows
    text = page.read_text(encoding="utf-8")
    bare = tmp_path / "bare.html"
    bare.write_text(re.sub(r"<table>.*?</table>", "", text, flags=re.S), encoding="utf-8")
    without = _screenshot(browser, bare, tmp_path / "bare.png")
    assert (np.abs(without.astype(int) - header).sum(axis=2) < 12).sum() < 100
    # the embedded picture shows too: the tuning curve's blue line further down the page
    tall = _screenshot(browser, page, tmp_path / "tall.png", size=(1200, 1600))
    blue = np.abs(tall.astype(int) - np.array([0x1f, 0x77, 0xb4])).sum(axis=2) < 30
    assert blue.sum() > 200


def test_the_train_cslm_stage_draws_its_training_curves(tmp_path):
    """Any model's log draws alike: the CSLM stage's train_log.csv becomes its pictures/training-curves.png."""
    r = random.Random(1)
    words = [f"w{i}" for i in range(30)]
    for name, n in (("train.tok", 400), ("dev.tok", 40)):
        (tmp_path / name).write_text("".join(" ".join(r.choice(words) for _ in range(r.randint(3, 9))) + "\n"
                                             for _ in range(n)))
    (tmp_path / "wf.toml").write_text(f"""[workflow]
name = "cslm"
stages = ["train-cslm"]
[inputs]
train_tgt_tok = "{tmp_path / 'train.tok'}"
dev_ref_tok = "{tmp_path / 'dev.tok'}"
[train-cslm]
emb_dim = 8
hidden1 = 16
hidden2 = 16
shortlist = 40
batch_size = 64
max_steps = 20
valid_every = 10
""")
    res = CliRunner().invoke(main, ["--quiet", "run", str(tmp_path / "wf.toml"), "--workdir", str(tmp_path / "w")])
    assert res.exit_code == 0, res.output + repr(res.exception)
    png = tmp_path / "w" / "train-cslm" / "pictures" / TRAINING_CURVES
    assert_drawn(png.read_bytes(), curves.TRAINING_SIZE)
    assert png.read_bytes() == curves.training_curves(tmp_path / "w" / "train-cslm" / "model" / "train_log.csv",
                                                      "CSLM")


def test_the_evaluate_commands_page_takes_tuning_logs_and_only_our_pictures(tmp_path):
    """`evaluate`'s page: tune --workdir W's log beside W/moses.tuned.ini, train --out M's training-curves.png;
    a user's own PNG beside the model is not put on the page."""
    from phrase_rescore.app.pictures import command_report

    (tmp_path / "table1.md").write_text(TABLE_MD, encoding="utf-8")
    tune = tmp_path / "tune.rnn"
    tune.mkdir()
    (tune / "moses.tuned.ini").write_text("[weight]\n")
    write_tune_log(tune / "tune-log.csv", [50, 52])
    model = tmp_path / "rnn"
    model.mkdir()
    (model / "model.pt").write_bytes(b"")
    (model / TRAINING_CURVES).write_bytes(curves.training_curves(write_log(tmp_path / "log.csv")))
    (model / "mine.png").write_bytes((model / TRAINING_CURVES).read_bytes())
    res = command_report(tmp_path / "table1.md", tmp_path, {"+RNN": tune / "moses.tuned.ini"},
                         {"+RNN": model / "model.pt", "+RNN+WP": model / "model.pt"})
    assert res["pictures"] == ["tuning-curves.png", TRAINING_CURVES]
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "model of +RNN, +RNN+WP: Training loss" in page and "mine.png" not in page

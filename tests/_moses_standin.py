"""A stand-in Moses installation for tests: executable scripts at the real paths that do what the real tools do
with files (a real Moses is what the code is for; this exercises command lines, file layout and collection).

- ``bin/moses``: ``-f/-config INI``, ``-show-weights``, ``-threads N``, ``-n-best-list FILE N [distinct]``; "translates"
  each stdin line to itself and writes an n-best list in Moses's format with the ini's feature names.
- ``bin/extractor``, ``bin/mert``: read/write the files mert-moses.pl passes them (``run1.features.dat``,
  ``weights.txt``).
- ``scripts/training/mert-moses.pl``: parses mert-moses.pl's command line, runs one iteration of decoder → extractor →
  mert in ``--working-dir``, and writes ``moses.ini`` there in mert-moses.pl's ``create_config`` layout.
"""
from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

_COMMON = r'''
import os, sys, json, subprocess

def ini_weights(path):
    """[weight] lines of a moses.ini as [(name, n_values)] in order."""
    out, sec = [], None
    for raw in open(path, encoding="utf-8"):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("["):
            sec = line[1:line.index("]")]
        elif sec == "weight":
            toks = line.split()
            out.append((toks[0][:-1], len(toks) - 1))
    return out
'''

MOSES = _COMMON + r'''
args = sys.argv[1:]
ini = args[args.index("-f") + 1] if "-f" in args else args[args.index("-config") + 1]
feats = [(n, k) for n, k in ini_weights(ini) if n != "UnknownWordPenalty0"]
if "-show-weights" in args:
    for n, k in feats:
        print(n + "= " + " ".join(["0.1"] * k))
    sys.exit(0)
nbest = None
if "-n-best-list" in args:
    i = args.index("-n-best-list")
    nbest = (args[i + 1], int(args[i + 2]))
nb = open(nbest[0], "w") if nbest else None
print("Defined parameters (per moses.ini or switch):", file=sys.stderr)
for sid, line in enumerate(sys.stdin):
    words = line.split()
    print(f"Translating: {line.strip()}", file=sys.stderr)   # the real decoder's per-sentence chatter
    print(" ".join(words))
    if nb:
        for j in range(min(nbest[1], 2)):
            hyp = words if j == 0 else words + ["."]
            fs = " ".join(n + "= " + " ".join(str(-(len(hyp) + j + m) * 0.5) for m in range(k)) for n, k in feats)
            nb.write(f"{sid} ||| {' '.join(hyp)}  ||| {fs} ||| {-(len(hyp) + j)}\n")
if nb:
    nb.close()
'''

EXTRACTOR = _COMMON + r'''
args = sys.argv[1:]
ffile = args[args.index("--ffile") + 1]
sfile = args[args.index("--scfile") + 1]
nbest = args[args.index("-n") + 1]
with open(ffile, "w") as ff, open(sfile, "w") as sf:
    for line in open(nbest):
        fields = line.split("|||")
        vals = [t for t in fields[2].split() if not t.endswith("=")]
        ff.write(" ".join(vals) + "\n")
        sf.write("1 2 1 1 0 0 0 0 2\n")
'''

MERT = _COMMON + r'''
args = sys.argv[1:]
json.dump(args, open("mert-argv.json", "w"))
d = int(args[args.index("-d") + 1])
ws = [round((-1) ** i / (i + 2), 6) for i in range(d)]
s = sum(abs(w) for w in ws)
open("weights.txt", "w").write(" ".join(str(round(w / s, 6)) for w in ws) + "\n")
print(f"Best point: {' '.join(map(str, ws))} => 0.231455", file=sys.stderr)
'''

MERT_MOSES = _COMMON + r'''
argv = sys.argv[1:]
pos = [a for a in argv if not a.startswith("--")]
opts = dict(a[2:].split("=", 1) if "=" in a else (a[2:], "1") for a in argv if a.startswith("--"))
dev_f, dev_e, decoder, config = pos
work = opts["working-dir"]; mertdir = opts["mertdir"]
os.makedirs(work, exist_ok=True)
os.chdir(work)
json.dump(sys.argv, open("standin-argv.json", "w"))
if os.environ.get("STANDIN_FAIL"):
    print("Executing: " + decoder + " -config " + config)
    print("ERROR: Failed to run '" + decoder + "'.", file=sys.stderr)
    sys.exit(2)
feats = ini_weights(config)
def run(cmd, shown="", **kw):
    print("Executing: " + " ".join(cmd) + shown, flush=True)
    subprocess.run(cmd, check=True, **kw)
n = opts.get("nbest", "100")
with open(dev_f) as fin, open("run1.out", "w") as fout:
    run([decoder, "-config", config, "-n-best-list", f"run1.best{n}.out", n, "distinct"], " > run1.out",
        stdin=fin, stdout=fout)
print("Scoring the nbestlist.", flush=True)
run([os.path.join(mertdir, "extractor"), "--scconfig", "case:true", "--scfile", "run1.scores.dat",
     "--ffile", "run1.features.dat", "-r", dev_e, "-n", f"run1.best{n}.out"])
dims = sum(k for name, k in feats if name != "UnknownWordPenalty0")
open("run1.init.opt", "w").write("0\n")
run([os.path.join(mertdir, "mert"), "-d", str(dims), "--scconfig", "case:true", "--ffile", "run1.features.dat",
     "--scfile", "run1.scores.dat", "--ifile", "run1.init.opt", "-n", "20"])
print("Executing: \\cp -f weights.txt run1.weights.txt", flush=True)
weights = [float(x) for x in open("weights.txt").read().split()]
print("(1) BEST at 1: " + " ".join(map(str, weights)) + " => 0.231455 at Mon Nov 30 03:12:45 UTC 2026", flush=True)
# create_config: header, the ini without its [weight] section (first line swallowed), then [weight] last
out = open("moses.ini", "w")
out.write("# MERT optimized configuration\n# decoder " + decoder + "\n# BLEU 0.231455 on dev " + dev_f +
          "\n# We were before running iteration 2\n# finished Mon Nov 30 03:12:45 UTC 2026\n")
lines = open(config).readlines()
i, skipping = 1, False
while i < len(lines):
    line = lines[i]
    if line.startswith("["):
        skipping = line.strip() == "[weight]"
    if not skipping:
        out.write(line)
    i += 1
out.write("[weight]\n\n")
k = 0
for name, cnt in feats:
    if name == "UnknownWordPenalty0":
        out.write("UnknownWordPenalty0= 1\n"); continue
    out.write(name + "= " + " ".join(str(w) for w in weights[k:k + cnt]) + "\n"); k += cnt
out.close()
print("Saved: " + os.path.join(work, "moses.ini"))
'''


def _script(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{sys.executable}\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def make_standin_moses(root: Path) -> Path:
    """Create the stand-in installation under ``root`` and return ``root`` (use it as MOSES_HOME)."""
    _script(root / "bin" / "moses", MOSES)
    _script(root / "bin" / "extractor", EXTRACTOR)
    _script(root / "bin" / "mert", MERT)
    _script(root / "scripts" / "training" / "mert-moses.pl", MERT_MOSES)
    return root


def add_process_phrase_table_min(root: Path) -> None:
    """``bin/processPhraseTableMin``: checks its options and writes ``-out`` + ``.minphr`` (a marker file)."""
    _script(root / "bin" / "processPhraseTableMin", r'''
import sys
a = sys.argv[1:]
inp, out, n = a[a.index("-in") + 1], a[a.index("-out") + 1], int(a[a.index("-nscores") + 1])
import gzip
first = (gzip.open if open(inp, "rb").read(2) == b"\x1f\x8b" else open)(inp, "rt").readline()
assert len(first.split("|||")[2].split()) == n, "wrong -nscores"
out = out if out.endswith(".minphr") else out + ".minphr"
open(out, "w").write("minphr stand-in\n")
print("Output phrase table will be written to: " + out)
''')


__all__ = ["make_standin_moses", "add_process_phrase_table_min", "os"]

"""The embedded decoder's worker processes end with the pool, under the command's own signal handling: the
command turns SIGTERM into an orderly exit (app/cli.py), and a pool worker that inherited that handler could
be left waiting for the task queue's lock when the pool ended, so a decode or a tuning with two or more
processes waited for ever at its end. Real processes, no mocks."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from _tiny_smt import make_tiny_system

# as a command runs: its SIGTERM handler set, then many translations in a pool of two processes
SCRIPT = """
import signal, sys
from phrase_rescore.app.cli import _terminated
from phrase_rescore.moses_integration.embedded.decoder import Decoder, DecoderConfig
signal.signal(signal.SIGTERM, _terminated)
sentences = [line.split() for line in open(sys.argv[2])]
dec = Decoder.from_ini(sys.argv[1], DecoderConfig(), sentences)
for _ in range(30):
    dec.translate_all(sentences, 0, 2)
import phrase_rescore.moses_integration.embedded.decoder as decoder
def probe(words):   # what each worker has
    return signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
decoder._work = probe
print(all(dec.translate_all(sentences, 0, 2)))
"""


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: the decoder runs no pool of processes")
def test_a_pool_of_decoders_ends_under_the_commands_sigterm_handler(tmp_path):
    sys_ = make_tiny_system(tmp_path / "sys")
    src = tmp_path / "in.txt"
    src.write_text("das haus ist klein\ndas haus\nhaus ist klein\nklein\n" * 4)
    try:
        r = subprocess.run([sys.executable, "-c", SCRIPT, str(sys_["ini"]), str(src)], capture_output=True,
                           text=True, timeout=90, env={**os.environ, "OMP_NUM_THREADS": "1", "PHRASE_RESCORE_QUIET": "1"})
    except subprocess.TimeoutExpired:
        pytest.fail("30 pools of two decoder processes did not end within 90 s: a worker was left waiting")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True"], "a worker kept the command's SIGTERM handler"

#!/usr/bin/env bash
# The GPU path, measured on one CUDA device in at most 8 minutes (the steps' limits add up to 460 s):
#
#   1. the GPU and torch; the GPU's dense matmul TFLOP/s in bf16, TF32 and fp32 (torch.matmul, n = 8192),
#      the yardstick for the fraction of peak the scorer reaches (pairs/s x FLOPs per pair / TFLOP/s);
#   2. the CUDA-marked tests (tests/test_cuda.py: fp32 CUDA scores = CPU scores within 1e-4, training on
#      CUDA follows the CPU, the max and mean |Δ log p| of bf16 autocast and TF32 on a trained model);
#   3. benchmarks/score_bench.py --device cuda on a 1,000,000-line table, presets paper and small
#      (the score stage end to end, the scorer alone in fp32/bf16/fp16, FLOPs per pair);
#   4. benchmarks/train_bench.py --device cuda (training pairs/s, both presets, both GRU forms).
#
# Usage: bash benchmarks/gpu_check.sh [--dry-run]
#   --dry-run   print the steps and check that the scripts take the options used, without a GPU.
# PYTHON names the interpreter (default: python), which must import torch and phrase_rescore
# (pip install -e '.[test]'). The log is also written to $GPU_CHECK_LOG (default: $OUT/gpu_check.log
# when OUT is set, else /tmp/gpu_check.log). Exit status: 0 when every step passed, 1 when one failed,
# 2 when there is no CUDA device.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-python}
dry=0
case "${1:-}" in
    --dry-run) dry=1 ;;
    "") ;;
    *) echo "usage: bash benchmarks/gpu_check.sh [--dry-run]" >&2; exit 2 ;;
esac
log=${GPU_CHECK_LOG:-${OUT:-/tmp}/gpu_check.log}
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Python runs outside the repository root: its phrase_rescore/ folder would shadow the installed package.
if ! (cd "$work" && "$PY" -c "import torch, phrase_rescore.pipeline.score") 2>/dev/null; then
    echo "gpu_check: $PY cannot import torch and phrase_rescore; install the project first (pip install -e '.[test]'; offline, with torch and the dependencies present: pip install --no-deps --no-build-isolation -e .)" >&2
    exit 2
fi
if [[ $dry == 0 ]] && ! (cd "$work" && "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"); then
    echo "gpu_check: no CUDA device: torch.cuda.is_available() is False ($(cd "$work" && "$PY" -c \
        "import torch; print(f'torch {torch.__version__}, built for CUDA {torch.version.cuda}')")); nothing was measured" >&2
    exit 2
fi

: >"$log"
say() { echo "$@" | tee -a "$log"; }
failed=()
summary=()
# step NAME SECONDS DIR COMMAND...: run COMMAND in DIR under a time limit, log its output, note the result
step() {
    local name=$1 limit=$2 dir=$3
    shift 3
    say ""
    say "== $name (limit ${limit}s): $*"
    if [[ $dry == 1 ]]; then
        return 0
    fi
    local t0=$SECONDS rc
    (cd "$dir" && timeout --kill-after=10 "$limit" "$@") 2>&1 | tee -a "$log"
    rc=${PIPESTATUS[0]}
    summary+=("$(printf '%-12s rc %-3s %4ss' "$name" "$rc" $((SECONDS - t0)))")
    if [[ $rc != 0 ]]; then
        failed+=("$name")
        [[ $rc == 124 || $rc == 137 ]] && say "gpu_check: $name ran past its ${limit}s limit"
    fi
}

cat >"$work/matmul.py" <<'EOF'
"""Dense matmul TFLOP/s of this GPU: best of 3 rounds of 20 products, n = 8192, CUDA events."""
import subprocess

import torch

dev = torch.device("cuda")
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(dev)}, "
      f"{torch.cuda.get_device_properties(dev).total_memory / 2**30:.0f} GiB")
try:
    print(subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,power.limit",
                          "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout.strip())
except (OSError, subprocess.SubprocessError):
    pass


def tflops(dtype, tf32, n=8192, reps=20):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = torch.randn(n, n, device=dev, dtype=dtype)
    b = torch.randn(n, n, device=dev, dtype=dtype)
    for _ in range(3):
        torch.matmul(a, b)
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            torch.matmul(a, b)
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3 / reps)
    return 2 * n ** 3 / best / 1e12


rates = {"bf16": tflops(torch.bfloat16, False), "TF32": tflops(torch.float32, True),
         "fp32": tflops(torch.float32, False)}
torch.backends.cuda.matmul.allow_tf32 = False
print("matmul n=8192 (torch.matmul, best of 3 x 20): " + ", ".join(f"{k} {v:.1f} TFLOP/s" for k, v in rates.items()))
EOF

step matmul 35 "$work" "$PY" "$work/matmul.py"
step cuda-tests 80 "$root" "$PY" -m pytest -q -s -rs -m cuda -p no:cacheprovider tests
step score-bench 300 "$work" "$PY" "$root/benchmarks/score_bench.py" --device cuda --lines 1000000 --presets paper,small
step train-bench 45 "$work" "$PY" "$root/benchmarks/train_bench.py" --device cuda --rounds 2

if [[ $dry == 1 ]]; then
    say ""
    say "== dry run: the options used, as the scripts define them"
    rc=0
    for s in "score_bench.py --device --lines --presets" "train_bench.py --device --rounds"; do
        read -r script opts <<<"$s"
        help=$(cd "$work" && "$PY" "$root/benchmarks/$script" --help 2>&1) || { say "  $script --help failed"; rc=1; }
        for o in $opts; do
            if grep -q -- "$o" <<<"$help"; then say "  $script $o: ok"; else say "  $script has no $o"; rc=1; fi
        done
    done
    collected=$(cd "$root" && "$PY" -m pytest -q --collect-only -m cuda -p no:cacheprovider tests 2>&1 | grep -c "::")
    say "  CUDA-marked tests collected: $collected"
    [[ $collected -ge 1 ]] || rc=1
    exit $rc
fi

say ""
say "== summary (log: $log)"
for line in "${summary[@]}"; do say "  $line"; done
if [[ ${#failed[@]} -gt 0 ]]; then
    say "gpu_check: FAILED: ${failed[*]}"
    exit 1
fi
say "gpu_check: all steps passed"

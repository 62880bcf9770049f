#!/usr/bin/env bash
# GPU checks on a CUDA machine (under 8 minutes on one modern GPU):
#   1. the test suite's GPU-marked tests (bf16 autocast, fused SDPA kernels, training steps on CUDA,
#      GPU checkpoints loading on CPU);
#   2. `polymask bench` at the base preset (BERT-base size) for MLM, MAE-LM and ExLM next to HF.
# Usage: benchmarks/gpu.sh [OUT_DIR]   (PYTHON=... to choose the interpreter; default: .venv if present)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
OUT=${1:-docs/results/bench-gpu}
"$PYTHON" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.cuda.get_device_name())"
timeout 240 "$PYTHON" -m pytest -q -m gpu tests/
timeout 330 "$PYTHON" -m polymask bench --preset base --batch-size 64 --max-len 128 --warmup 5 --steps 30 \
    --objectives mlm,maelm,exlm --mask-ratios 0.15,0.4 --out "$OUT"

#!/usr/bin/env bash
# GPU check: QLoRA nf4, FlashAttention + flash_mask, bf16 O2, weight-only int8/int4 chat and (2+ GPUs)
# tensor parallel 2, through the studio's verbs; see bench/gpu_check.py. Exit 2 where no CUDA GPU is visible.
set -uo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-.venv/bin/python}" bench/gpu_check.py "$@"

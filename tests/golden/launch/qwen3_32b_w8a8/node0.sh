#!/usr/bin/env bash
# ascendflow plan f3d713ec7c238d6a: node 0 of 1 (atlas_800i_a2, Ascend 910B (64 GB); vllm-ascend-0.23.0)
# DP ranks from 0, devices [0, 1, 2, 3]. Generated: recompile instead of editing.
set -euo pipefail

# Values the config did not give: set them before launching (the script stops if one is missing).
: "${ASCENDFLOW_MODEL_PATH:?set ASCENDFLOW_MODEL_PATH (the msModelSlim checkpoint directory, or give model.path in the config)}"

export HCCL_BUFFSIZE=200
export HCCL_CONNECT_TIMEOUT=120
export HCCL_EXEC_TIMEOUT=300
export HCCL_OP_EXPANSION_MODE=AIV
export OMP_NUM_THREADS=10
export OMP_PROC_BIND=false
export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True
export TASK_QUEUE_ENABLE=1
export VLLM_LOGGING_LEVEL=INFO
export ASCEND_RT_VISIBLE_DEVICES=0,1,2,3

exec vllm serve "${ASCENDFLOW_MODEL_PATH}" --served-model-name Qwen/Qwen3-32B --tensor-parallel-size 4 --pipeline-parallel-size 1 --data-parallel-size 1 --dtype bfloat16 --max-model-len 40960 --max-num-seqs 80 --max-num-batched-tokens 40960 --gpu-memory-utilization 0.9 --block-size 128 --seed 0 --compilation-config '{"cudagraph_mode":"FULL_AND_PIECEWISE","cudagraph_capture_sizes":[1,2,4,8,16,24,32,40,48,56,64,72,80]}' --host 0.0.0.0 --port 8000 "$@"

#!/usr/bin/env bash
# ascendflow plan 5d54ca07b079bf78: node 0 of 1 (atlas_800i_a2, Ascend 910B (64 GB); vllm-ascend-0.23.0)
# DP ranks from 0, devices [0, 1, 2, 3, 4, 5, 6, 7]. Generated: recompile instead of editing.
set -euo pipefail

# Values the config did not give: set them before launching (the script stops if one is missing).
: "${ASCENDFLOW_MODEL_PATH:?set ASCENDFLOW_MODEL_PATH (the msModelSlim checkpoint directory, or give model.path in the config)}"

export HCCL_BUFFSIZE=512
export HCCL_CONNECT_TIMEOUT=120
export HCCL_EXEC_TIMEOUT=300
export OMP_NUM_THREADS=1
export OMP_PROC_BIND=false
export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True
export TASK_QUEUE_ENABLE=1
export VLLM_LOGGING_LEVEL=INFO
export ASCEND_RT_VISIBLE_DEVICES=0,1,2,3,4,5,6,7

exec vllm serve "${ASCENDFLOW_MODEL_PATH}" --served-model-name Qwen/Qwen3-235B-A22B --tensor-parallel-size 8 --pipeline-parallel-size 1 --data-parallel-size 1 --enable-expert-parallel --dtype bfloat16 --max-model-len 40960 --max-num-seqs 32 --max-num-batched-tokens 8096 --gpu-memory-utilization 0.95 --block-size 128 --seed 1024 --compilation-config '{"cudagraph_mode":"FULL_DECODE_ONLY","cudagraph_capture_sizes":[8,16,24,32]}' --additional-config '{"enable_flashcomm1":true}' --host 0.0.0.0 --port 8000 "$@"

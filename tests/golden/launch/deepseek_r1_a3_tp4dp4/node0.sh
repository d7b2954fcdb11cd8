#!/usr/bin/env bash
# ascendflow plan 96a2039e668017af: node 0 of 1 (atlas_800i_a3, Ascend 910C die (64 GB); vllm-ascend-0.23.0)
# DP ranks from 0, devices [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]. Generated: recompile instead of editing.
set -euo pipefail

# Values the config did not give: set them before launching (the script stops if one is missing).
: "${ASCENDFLOW_MODEL_PATH:?set ASCENDFLOW_MODEL_PATH (the msModelSlim checkpoint directory, or give model.path in the config)}"

export HCCL_BUFFSIZE=1024
export HCCL_CONNECT_TIMEOUT=600
export HCCL_EXEC_TIMEOUT=600
export HCCL_OP_EXPANSION_MODE=AIV
export OMP_NUM_THREADS=10
export OMP_PROC_BIND=false
export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True
export TASK_QUEUE_ENABLE=1
export VLLM_LOGGING_LEVEL=INFO
export ASCEND_RT_VISIBLE_DEVICES=0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15

exec vllm serve "${ASCENDFLOW_MODEL_PATH}" --served-model-name deepseek-ai/DeepSeek-R1 --tensor-parallel-size 4 --pipeline-parallel-size 1 --data-parallel-size 4 --enable-expert-parallel --dtype bfloat16 --max-model-len 16384 --max-num-seqs 16 --max-num-batched-tokens 4096 --gpu-memory-utilization 0.92 --block-size 128 --seed 0 --speculative-config '{"method":"deepseek_mtp","num_speculative_tokens":3}' --compilation-config '{"cudagraph_mode":"FULL_DECODE_ONLY","cudagraph_capture_sizes":[4,8,16,24,32,40,48,56,64]}' --host 0.0.0.0 --port 8000 "$@"

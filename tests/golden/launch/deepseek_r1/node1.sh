#!/usr/bin/env bash
# ascendflow plan f7fe8146f1f459cc: node 1 of 2 (atlas_800i_a3, Ascend 910C die (64 GB); vllm-ascend-0.23.0)
# DP ranks from 1, devices [0, 1, 2, 3, 4, 5, 6, 7]. Generated: recompile instead of editing.
set -euo pipefail

# Values the config did not give: set them before launching (the script stops if one is missing).
: "${ASCENDFLOW_MODEL_PATH:?set ASCENDFLOW_MODEL_PATH (the msModelSlim checkpoint directory, or give model.path in the config)}"
: "${ASCENDFLOW_NIC:?set ASCENDFLOW_NIC (or give parallel.nic_name in the config)}"
: "${ASCENDFLOW_NODE0_IP:?set ASCENDFLOW_NODE0_IP (or give parallel.node_addresses in the config)}"
: "${ASCENDFLOW_NODE1_IP:?set ASCENDFLOW_NODE1_IP (or give parallel.node_addresses in the config)}"

export GLOO_SOCKET_IFNAME="${ASCENDFLOW_NIC}"
export HCCL_BUFFSIZE=1024
export HCCL_CONNECT_TIMEOUT=600
export HCCL_EXEC_TIMEOUT=600
export HCCL_OP_EXPANSION_MODE=AIV
export HCCL_SOCKET_IFNAME="${ASCENDFLOW_NIC}"
export OMP_NUM_THREADS=10
export OMP_PROC_BIND=false
export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True
export TASK_QUEUE_ENABLE=1
export TP_SOCKET_IFNAME="${ASCENDFLOW_NIC}"
export VLLM_LOGGING_LEVEL=INFO
export ASCEND_RT_VISIBLE_DEVICES=0,1,2,3,4,5,6,7
export HCCL_IF_IP="${ASCENDFLOW_NODE1_IP}"

exec vllm serve "${ASCENDFLOW_MODEL_PATH}" --served-model-name deepseek-ai/DeepSeek-R1 --tensor-parallel-size 8 --pipeline-parallel-size 1 --data-parallel-size 2 --enable-expert-parallel --dtype bfloat16 --max-model-len 16384 --max-num-seqs 16 --max-num-batched-tokens 2048 --gpu-memory-utilization 0.9 --block-size 128 --seed 0 --compilation-config '{"cudagraph_mode":"FULL_DECODE_ONLY","cudagraph_capture_sizes":[1,2,4,8,16]}' --data-parallel-size-local 1 --data-parallel-address "${ASCENDFLOW_NODE0_IP}" --data-parallel-rpc-port 13389 --headless --data-parallel-start-rank 1 --host 0.0.0.0 --port 8000 "$@"

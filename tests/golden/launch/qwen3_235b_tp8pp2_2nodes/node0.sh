#!/usr/bin/env bash
# ascendflow plan 9ddb8ba1c46db10d: node 0 of 2 (atlas_800i_a2, Ascend 910B (64 GB); vllm-ascend-0.23.0)
# mp-nnodes: worker ranks 0-7 (PP stages [0]) of one DP rank, devices [0, 1, 2, 3, 4, 5, 6, 7]. Generated: recompile instead of editing.
set -euo pipefail

# Values the config did not give: set them before launching (the script stops if one is missing).
: "${ASCENDFLOW_MODEL_PATH:?set ASCENDFLOW_MODEL_PATH (the msModelSlim checkpoint directory, or give model.path in the config)}"
: "${ASCENDFLOW_NIC:?set ASCENDFLOW_NIC (or give parallel.nic_name in the config)}"
: "${ASCENDFLOW_NODE0_IP:?set ASCENDFLOW_NODE0_IP (or give parallel.node_addresses in the config)}"

export GLOO_SOCKET_IFNAME="${ASCENDFLOW_NIC}"
export HCCL_BUFFSIZE=512
export HCCL_CONNECT_TIMEOUT=120
export HCCL_EXEC_TIMEOUT=300
export HCCL_INTRA_PCIE_ENABLE=1
export HCCL_INTRA_ROCE_ENABLE=0
export HCCL_SOCKET_IFNAME="${ASCENDFLOW_NIC}"
export OMP_NUM_THREADS=1
export OMP_PROC_BIND=false
export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True
export TASK_QUEUE_ENABLE=1
export TP_SOCKET_IFNAME="${ASCENDFLOW_NIC}"
export VLLM_LOGGING_LEVEL=INFO
export ASCEND_RT_VISIBLE_DEVICES=0,1,2,3,4,5,6,7
export HCCL_IF_IP="${ASCENDFLOW_NODE0_IP}"

exec vllm serve "${ASCENDFLOW_MODEL_PATH}" --served-model-name Qwen/Qwen3-235B-A22B --tensor-parallel-size 8 --pipeline-parallel-size 2 --data-parallel-size 1 --enable-expert-parallel --dtype bfloat16 --max-model-len 40960 --max-num-seqs 32 --max-num-batched-tokens 8096 --gpu-memory-utilization 0.95 --block-size 128 --seed 1024 --compilation-config '{"cudagraph_mode":"FULL_DECODE_ONLY","cudagraph_capture_sizes":[1,2,4,8,16,24,32]}' --distributed-executor-backend mp --nnodes 2 --node-rank 0 --master-addr "${ASCENDFLOW_NODE0_IP}" --master-port 29501 --host 0.0.0.0 --port 8000 "$@"

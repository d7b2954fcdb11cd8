#!/usr/bin/env bash
# ascendflow plan 95fab7f6525fe27b: node 1 of 2 (atlas_800i_a2, Ascend 910B (64 GB); vllm-ascend-0.23.0)
# ray: worker ranks 8-15 (PP stages [1]) of one DP rank, devices [0, 1, 2, 3, 4, 5, 6, 7]. Generated: recompile instead of editing.
set -euo pipefail

# Values the config did not give: set them before launching (the script stops if one is missing).
: "${ASCENDFLOW_NIC:?set ASCENDFLOW_NIC (or give parallel.nic_name in the config)}"
: "${ASCENDFLOW_NODE0_IP:?set ASCENDFLOW_NODE0_IP (or give parallel.node_addresses in the config)}"
: "${ASCENDFLOW_NODE1_IP:?set ASCENDFLOW_NODE1_IP (or give parallel.node_addresses in the config)}"

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
export RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=1
export TASK_QUEUE_ENABLE=1
export TP_SOCKET_IFNAME="${ASCENDFLOW_NIC}"
export VLLM_LOGGING_LEVEL=INFO
export ASCEND_RT_VISIBLE_DEVICES=0,1,2,3,4,5,6,7
export HCCL_IF_IP="${ASCENDFLOW_NODE1_IP}"

exec ray start "--address=${ASCENDFLOW_NODE0_IP}:6379" "--node-ip-address=${ASCENDFLOW_NODE1_IP}" --block "$@"

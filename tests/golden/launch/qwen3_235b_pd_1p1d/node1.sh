#!/usr/bin/env bash
# ascendflow plan 8daf741b3db08991: PD node 1 of 2 (atlas_800i_a3, Ascend 910C die (64 GB); vllm-ascend-0.23.0). Generated: recompile instead of editing.
set -euo pipefail

# Values the config did not give: set them before launching (the script stops if one is missing).
: "${ASCENDFLOW_NIC:?set ASCENDFLOW_NIC (or give parallel.nic_name in the config)}"
: "${ASCENDFLOW_NODE1_IP:?set ASCENDFLOW_NODE1_IP (or give parallel.node_addresses in the config)}"

# decode (kv_consumer): TP4 × DP4, internal DP
( export ASCEND_RT_VISIBLE_DEVICES=0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15; export GLOO_SOCKET_IFNAME="${ASCENDFLOW_NIC}"; export HCCL_BUFFSIZE=1024; export HCCL_CONNECT_TIMEOUT=600; export HCCL_EXEC_TIMEOUT=600; export HCCL_IF_IP="${ASCENDFLOW_NODE1_IP}"; export HCCL_OP_EXPANSION_MODE=AIV; export HCCL_SOCKET_IFNAME="${ASCENDFLOW_NIC}"; export OMP_NUM_THREADS=1; export OMP_PROC_BIND=false; export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True; export TASK_QUEUE_ENABLE=1; export TP_SOCKET_IFNAME="${ASCENDFLOW_NIC}"; export VLLM_LOGGING_LEVEL=INFO; exec vllm serve /models/Qwen/Qwen3-235B-A22B --served-model-name Qwen/Qwen3-235B-A22B --tensor-parallel-size 4 --pipeline-parallel-size 1 --data-parallel-size 4 --enable-expert-parallel --dtype bfloat16 --max-model-len 8192 --max-num-seqs 32 --max-num-batched-tokens 8192 --gpu-memory-utilization 0.9 --block-size 128 --no-enable-prefix-caching --seed 1024 --compilation-config '{"cudagraph_mode":"FULL_DECODE_ONLY","cudagraph_capture_sizes":[4,8,16,24,32]}' --additional-config '{"enable_fused_mc2":1,"enable_flashcomm1":true}' --data-parallel-size-local 4 --data-parallel-start-rank 0 --data-parallel-address "${ASCENDFLOW_NODE1_IP}" --data-parallel-rpc-port 13389 --kv-transfer-config '{"kv_connector":"MooncakeConnectorV1","kv_role":"kv_consumer","kv_port":36100,"engine_id":"decode0","kv_connector_extra_config":{"prefill":{"dp_size":2,"tp_size":8},"decode":{"dp_size":4,"tp_size":4}}}' --host 0.0.0.0 --port 8080 "$@" ) &

wait -n  # the node stops when any engine exits
kill 0

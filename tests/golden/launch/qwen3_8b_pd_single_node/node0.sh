#!/usr/bin/env bash
# ascendflow plan 014f0400e218e1ce: PD node 0 of 1 (atlas_800i_a2, Ascend 910B (64 GB); vllm-ascend-0.23.0). Generated: recompile instead of editing.
set -euo pipefail

# Values the config did not give: set them before launching (the script stops if one is missing).
: "${ASCENDFLOW_NIC:?set ASCENDFLOW_NIC (or give parallel.nic_name in the config)}"

# prefill (kv_producer): TP1 × DP1, external DP
( export ASCEND_RT_VISIBLE_DEVICES=0; export GLOO_SOCKET_IFNAME="${ASCENDFLOW_NIC}"; export HCCL_BUFFSIZE=200; export HCCL_CONNECT_TIMEOUT=120; export HCCL_EXEC_TIMEOUT=300; export HCCL_OP_EXPANSION_MODE=AIV; export HCCL_SOCKET_IFNAME="${ASCENDFLOW_NIC}"; export OMP_NUM_THREADS=10; export OMP_PROC_BIND=false; export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True; export TASK_QUEUE_ENABLE=1; export TP_SOCKET_IFNAME="${ASCENDFLOW_NIC}"; export VLLM_LOGGING_LEVEL=INFO; exec vllm serve /models/Qwen/Qwen3-8B --served-model-name Qwen/Qwen3-8B --tensor-parallel-size 1 --pipeline-parallel-size 1 --data-parallel-size 1 --dtype bfloat16 --max-model-len 40000 --max-num-batched-tokens 40000 --gpu-memory-utilization 0.9 --block-size 128 --no-enable-prefix-caching --seed 1024 --enforce-eager --kv-transfer-config '{"kv_connector":"MooncakeConnectorV1","kv_role":"kv_producer","kv_port":30000,"engine_id":"prefill0","kv_connector_extra_config":{"prefill":{"dp_size":1,"tp_size":1},"decode":{"dp_size":1,"tp_size":1}}}' --host 0.0.0.0 --port 13700 "$@" ) &

# decode (kv_consumer): TP1 × DP1, external DP
( export ASCEND_RT_VISIBLE_DEVICES=1; export GLOO_SOCKET_IFNAME="${ASCENDFLOW_NIC}"; export HCCL_BUFFSIZE=200; export HCCL_CONNECT_TIMEOUT=120; export HCCL_EXEC_TIMEOUT=300; export HCCL_OP_EXPANSION_MODE=AIV; export HCCL_SOCKET_IFNAME="${ASCENDFLOW_NIC}"; export OMP_NUM_THREADS=10; export OMP_PROC_BIND=false; export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True; export TASK_QUEUE_ENABLE=1; export TP_SOCKET_IFNAME="${ASCENDFLOW_NIC}"; export VLLM_LOGGING_LEVEL=INFO; exec vllm serve /models/Qwen/Qwen3-8B --served-model-name Qwen/Qwen3-8B --tensor-parallel-size 1 --pipeline-parallel-size 1 --data-parallel-size 1 --dtype bfloat16 --max-model-len 40000 --max-num-batched-tokens 40000 --gpu-memory-utilization 0.9 --block-size 128 --no-enable-prefix-caching --seed 1024 --compilation-config '{"cudagraph_mode":"FULL_DECODE_ONLY","cudagraph_capture_sizes":[1,2,4,8,16,24,32,40,48,56,64,72,80,88,96,104,112,120,128,136,144,152,160,168,176,184,192,200,208,216,224,232,240,248,256]}' --kv-transfer-config '{"kv_connector":"MooncakeConnectorV1","kv_role":"kv_consumer","kv_port":30100,"engine_id":"decode0","kv_connector_extra_config":{"prefill":{"dp_size":1,"tp_size":1},"decode":{"dp_size":1,"tp_size":1}}}' --host 0.0.0.0 --port 13701 "$@" ) &

wait -n  # the node stops when any engine exits
kill 0

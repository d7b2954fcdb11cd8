#!/usr/bin/env bash
# ascendflow plan 014f0400e218e1ce: PD proxy (load_balance_proxy_server_example.py) on ${ASCENDFLOW_NODE0_IP}:8080; start it after every node<k>.sh serves.
set -euo pipefail

# Values the config did not give: set them before launching (the script stops if one is missing).
: "${ASCENDFLOW_NODE0_IP:?set ASCENDFLOW_NODE0_IP (or give parallel.node_addresses in the config)}"
: "${ASCENDFLOW_PD_PROXY_DIR:?set ASCENDFLOW_PD_PROXY_DIR (vllm-ascend's examples/disaggregated_prefill_v1 directory at the plan's tag)}"

exec python "${ASCENDFLOW_PD_PROXY_DIR}/load_balance_proxy_server_example.py" --host "${ASCENDFLOW_NODE0_IP}" --port 8080 --prefiller-hosts "${ASCENDFLOW_NODE0_IP}" --prefiller-ports 13700 --decoder-hosts "${ASCENDFLOW_NODE0_IP}" --decoder-ports 13701 "$@"

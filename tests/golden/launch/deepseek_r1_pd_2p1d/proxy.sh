#!/usr/bin/env bash
# ascendflow plan 219f32a0513cc3fc: PD proxy (load_balance_proxy_server_example.py) on ${ASCENDFLOW_NODE0_IP}:1999; start it after every node<k>.sh serves.
set -euo pipefail

# Values the config did not give: set them before launching (the script stops if one is missing).
: "${ASCENDFLOW_NODE0_IP:?set ASCENDFLOW_NODE0_IP (or give parallel.node_addresses in the config)}"
: "${ASCENDFLOW_NODE1_IP:?set ASCENDFLOW_NODE1_IP (or give parallel.node_addresses in the config)}"
: "${ASCENDFLOW_NODE2_IP:?set ASCENDFLOW_NODE2_IP (or give parallel.node_addresses in the config)}"
: "${ASCENDFLOW_NODE3_IP:?set ASCENDFLOW_NODE3_IP (or give parallel.node_addresses in the config)}"
: "${ASCENDFLOW_PD_PROXY_DIR:?set ASCENDFLOW_PD_PROXY_DIR (vllm-ascend's examples/disaggregated_prefill_v1 directory at the plan's tag)}"

exec python "${ASCENDFLOW_PD_PROXY_DIR}/load_balance_proxy_server_example.py" --host "${ASCENDFLOW_NODE0_IP}" --port 1999 --prefiller-hosts "${ASCENDFLOW_NODE0_IP}" "${ASCENDFLOW_NODE0_IP}" "${ASCENDFLOW_NODE1_IP}" "${ASCENDFLOW_NODE1_IP}" --prefiller-ports 7100 7101 7100 7101 --decoder-hosts "${ASCENDFLOW_NODE2_IP}" "${ASCENDFLOW_NODE2_IP}" "${ASCENDFLOW_NODE2_IP}" "${ASCENDFLOW_NODE2_IP}" "${ASCENDFLOW_NODE2_IP}" "${ASCENDFLOW_NODE2_IP}" "${ASCENDFLOW_NODE2_IP}" "${ASCENDFLOW_NODE2_IP}" "${ASCENDFLOW_NODE2_IP}" "${ASCENDFLOW_NODE2_IP}" "${ASCENDFLOW_NODE2_IP}" "${ASCENDFLOW_NODE2_IP}" "${ASCENDFLOW_NODE2_IP}" "${ASCENDFLOW_NODE2_IP}" "${ASCENDFLOW_NODE2_IP}" "${ASCENDFLOW_NODE2_IP}" "${ASCENDFLOW_NODE3_IP}" "${ASCENDFLOW_NODE3_IP}" "${ASCENDFLOW_NODE3_IP}" "${ASCENDFLOW_NODE3_IP}" "${ASCENDFLOW_NODE3_IP}" "${ASCENDFLOW_NODE3_IP}" "${ASCENDFLOW_NODE3_IP}" "${ASCENDFLOW_NODE3_IP}" "${ASCENDFLOW_NODE3_IP}" "${ASCENDFLOW_NODE3_IP}" "${ASCENDFLOW_NODE3_IP}" "${ASCENDFLOW_NODE3_IP}" "${ASCENDFLOW_NODE3_IP}" "${ASCENDFLOW_NODE3_IP}" "${ASCENDFLOW_NODE3_IP}" "${ASCENDFLOW_NODE3_IP}" --decoder-ports 7100 7101 7102 7103 7104 7105 7106 7107 7108 7109 7110 7111 7112 7113 7114 7115 7100 7101 7102 7103 7104 7105 7106 7107 7108 7109 7110 7111 7112 7113 7114 7115 "$@"

"""PD node scripts and preflight on Atlas A3 (issue 25 row 13): prefill nodes get the socket-interface variables the
decode nodes get, and the preflight counts the devices the scripts number (dies 0-15), not npu-smi's NPU IDs."""

from __future__ import annotations

import re

import pytest

from ascendflow.compiler.deployment import deployment_scripts
from ascendflow.compiler.launch.pd_scripts import pd_preflight_script
from tests.compiler.test_pd import _plan

SOCKETS = ('export GLOO_SOCKET_IFNAME="${ASCENDFLOW_NIC}"', 'export HCCL_SOCKET_IFNAME="${ASCENDFLOW_NIC}"',
           'export TP_SOCKET_IFNAME="${ASCENDFLOW_NIC}"')


@pytest.mark.parametrize("recipe", ["deepseek_r1_pd_2p1d", "qwen3_235b_pd_1p1d", "qwen3_235b_w8a8_pd_3nodes"])
def test_every_engine_of_a_multi_node_pd_plan_binds_the_same_interface(recipe):
    plan = _plan(recipe)
    scripts = deployment_scripts(plan)
    engines = [line for name, text in scripts.items() if re.fullmatch(r"node\d+\.sh", name)
               for line in text.splitlines() if "exec vllm serve" in line]
    assert engines
    for line in engines:  # before: prefill engines exported HCCL_IF_IP without these
        assert all(s in line for s in SOCKETS) and 'export HCCL_IF_IP="${ASCENDFLOW_NODE' in line, line[:300]
    assert {k: plan.roles["prefill"].env[k] for k in ("HCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME",
                                                      "TP_SOCKET_IFNAME")} == {
        "HCCL_SOCKET_IFNAME": "${ASCENDFLOW_NIC}", "GLOO_SOCKET_IFNAME": "${ASCENDFLOW_NIC}",
        "TP_SOCKET_IFNAME": "${ASCENDFLOW_NIC}"}


def test_a_given_nic_is_used_by_the_prefill_role_too():
    plan = _plan("deepseek_r1_pd_2p1d", "parallel.nic_name=enp189s0f0")
    assert plan.roles["prefill"].env["HCCL_SOCKET_IFNAME"] == plan.roles["decode"].env["HCCL_SOCKET_IFNAME"] == \
        "enp189s0f0"


def test_single_node_pd_sets_the_socket_interface_too():
    """vllm-ascend's single-node PD tutorial exports the socket variables per engine (v0.25.1rc1
    ``pd_disaggregation_mooncake_single_node.md``), so a single-node PD plan's roles get them as well."""
    env = _plan("qwen3_8b_pd_single_node").roles["prefill"].env
    assert {k: env[k] for k in ("HCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME")} == {
        k: "${ASCENDFLOW_NIC}" for k in ("HCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME")}


def test_the_a3_preflight_counts_the_16_devices_the_scripts_use():
    """Before: "At least 8 NPUs visible" (the largest single engine, TP8) counted by npu-smi's NPU IDs, while a node
    runs two TP8 prefill engines on devices 0-15 (or 16 TP1 decode engines)."""
    plan = _plan("deepseek_r1_pd_2p1d")
    used = {w.node_rank: set() for w in plan.workers}
    for w in plan.workers:
        used[w.node_rank] |= set(w.devices)
    assert {k: sorted(v) for k, v in used.items()} == {k: list(range(16)) for k in range(4)}
    lines = pd_preflight_script(plan).splitlines()
    assert lines[lines.index("# 2. At least 16 devices visible: the devices the runtime numbers "
                             "(ASCEND_RT_VISIBLE_DEVICES 0-15 in launch/node<k>.sh),") + 4:][:2] == [
        "found=$(python3 -c 'import torch, torch_npu; print(torch.npu.device_count())' 2>/dev/null || echo 0)",
        '[ "$found" -ge 16 ] || fail "$found devices visible to torch_npu (0 also when torch_npu does not import: '
        'see check 3), the plan needs 16 per node (devices 0-15)"']

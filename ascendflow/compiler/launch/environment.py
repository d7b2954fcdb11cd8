"""Environment pass: the variables every node exports, and each worker's own (``shared/reference/vllm_ascend.md`` §6).

Values unknown at compile time (node addresses, NIC name) are written as ``${ASCENDFLOW_...}`` references; the launch
scripts refuse to start until they are set (``${VAR:?...}``), so no placeholder is ever used silently.
"""

from __future__ import annotations

from ascendflow.platforms import platform_for
from ascendflow.schema.errors import ConfigError
from ascendflow.schema.secrets import env_ref, is_secret
from ascendflow.schema.spec import RunSpec

#: vLLM reads the server's API key from this variable as from ``--api-key`` (``vllm/envs.py`` ``VLLM_API_KEY``;
#: ``vllm/entrypoints/serve/middleware/register.py``, vLLM 0.32.0: ``args.api_key or [envs.VLLM_API_KEY]``), so the
#: key never appears on a command line or in a file.
API_KEY_ENV = "VLLM_API_KEY"

NIC_REF = "${ASCENDFLOW_NIC}"


def node_address(spec: RunSpec, node: int) -> str:
    """Node ``node``'s IP from ``parallel.node_addresses``, else the reference ``${ASCENDFLOW_NODE<k>_IP}``."""
    addresses = spec.parallel.node_addresses
    return addresses[node] if node < len(addresses) else f"${{ASCENDFLOW_NODE{node}_IP}}"


def common_env(spec: RunSpec, *, graphs_on: bool) -> dict[str, str]:
    """Environment shared by every node: :func:`_kind_env`, secret values replaced by ``${NAME}`` references, and
    ``VLLM_API_KEY=${<run.api_key_env>}`` when an API key is asked for (the launch script refuses to start while a
    referenced variable is unset).

    Raises:
        ConfigError: see :func:`_kind_env`.
    """
    env = _kind_env(spec, graphs_on=graphs_on)
    marked = spec.ascend.secret_env
    env = {k: env_ref(k) if is_secret(k, marked) and k in spec.ascend.env else v for k, v in env.items()}
    if spec.run.api_key_env:
        env[API_KEY_ENV] = env_ref(spec.run.api_key_env)
    return env


def _kind_env(spec: RunSpec, *, graphs_on: bool) -> dict[str, str]:
    """Environment shared by every node, per hardware kind.

    Raises:
        ConfigError: ``ASCEND_LAUNCH_BLOCKING=1`` with graph capture on (rejected by vllm-ascend), or node addresses
            that do not match ``parallel.nodes``.
    """
    hw, asc, par = spec.hardware, spec.ascend, spec.parallel
    env = dict(asc.env)  # the user's variables reach the engine on every target (HF_TOKEN, proxies, vLLM switches)
    if not platform_for(hw.kind).hccl_env:
        return {"VLLM_LOGGING_LEVEL": "INFO", **env}
    if graphs_on and env.get("ASCEND_LAUNCH_BLOCKING") == "1":
        raise ConfigError("ascend.env.ASCEND_LAUNCH_BLOCKING", "1",
                          "is rejected by vllm-ascend while graph capture is on; use graph=eager to debug with it")
    if par.node_addresses and len(par.node_addresses) != par.nodes:
        raise ConfigError("parallel.node_addresses", list(par.node_addresses),
                          f"needs one address per node (parallel.nodes={par.nodes})")
    bundle_keys = {"PYTORCH_NPU_ALLOC_CONF": None, "TASK_QUEUE_ENABLE": None, "OMP_PROC_BIND": None,
                   "OMP_NUM_THREADS": "ascend.omp_num_threads", "HCCL_BUFFSIZE": "ascend.hccl_buffsize_mb",
                   "HCCL_CONNECT_TIMEOUT": "ascend.hccl_connect_timeout_s",
                   "HCCL_EXEC_TIMEOUT": "ascend.hccl_exec_timeout_s",
                   "HCCL_OP_EXPANSION_MODE": "ascend.hccl_op_expansion_mode_aiv"}
    for key, setting in bundle_keys.items():
        if key in env:
            raise ConfigError(f"ascend.env.{key}", env[key], "is set by the environment bundle"
                              + (f"; use {setting}" if setting else " (reference §6); remove it from ascend.env"))
    env.update({
        "PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True",
        "TASK_QUEUE_ENABLE": "1",
        "OMP_PROC_BIND": "false",
        "OMP_NUM_THREADS": str(asc.omp_num_threads),
        "HCCL_BUFFSIZE": str(asc.hccl_buffsize_mb),
        "HCCL_CONNECT_TIMEOUT": str(asc.hccl_connect_timeout_s),
        "HCCL_EXEC_TIMEOUT": str(asc.hccl_exec_timeout_s),
        "VLLM_LOGGING_LEVEL": "INFO",
    })
    if asc.hccl_op_expansion_mode_aiv:
        env["HCCL_OP_EXPANSION_MODE"] = "AIV"
    if par.nodes > 1:
        env.update(socket_env(spec))
        if par.enable_expert_parallel:
            env.update(hw.multinode_moe_env)
    return env


def socket_env(spec: RunSpec) -> dict[str, str]:
    """The network interface HCCL, Gloo and torch's TP sockets bind to on a multi-node Ascend deployment:
    ``HCCL_SOCKET_IFNAME``, ``GLOO_SOCKET_IFNAME``, ``TP_SOCKET_IFNAME`` = ``parallel.nic_name`` (else
    ``${ASCENDFLOW_NIC}``, set on each node). Every engine of a multi-node PD deployment gets them, whatever its role
    spans (issue 25 row 13: single-node prefill instances set ``HCCL_IF_IP`` alone)."""
    nic = spec.parallel.nic_name or NIC_REF
    return {"HCCL_SOCKET_IFNAME": nic, "GLOO_SOCKET_IFNAME": nic, "TP_SOCKET_IFNAME": nic}


def worker_env(spec: RunSpec, node: int, devices: list[int]) -> dict[str, str]:
    """Per-node environment: visible devices and, on multi-node Ascend, ``HCCL_IF_IP``."""
    hw = spec.hardware
    env = {hw.visible_devices_env: ",".join(map(str, devices))} if hw.visible_devices_env else {}
    if platform_for(hw.kind).hccl_env and spec.parallel.nodes > 1:
        env["HCCL_IF_IP"] = node_address(spec, node)
    return env

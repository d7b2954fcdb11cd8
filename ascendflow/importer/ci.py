"""vllm-ascend CI configs as ``vllm serve`` commands, rendered as vllm-ascend's own CI harness renders them (v0.23.0).

Three formats (``tests/e2e/nightly`` and ``tests/e2e/weekly`` of vllm-project/vllm-ascend):

- single node (``test_cases[]``: ``model``, ``envs``, ``server_cmd`` + ``server_cmd_extra``;
  ``single_node/models/scripts/single_node_config.py``: ``full_cmd = list(server_cmd) + list(server_cmd_extra)``,
  ``$VAR`` from ``envs``, ``DEFAULT_PORT`` a free port: 8000 here);
- multi node, internal DP (``deployment[].server_cmd``: one ``vllm serve`` per node, ``$VAR`` from the node's
  ``envs`` with ``LOCAL_IP`` / ``MASTER_IP`` added by ``DistEnvBuilder.build``; ``multi_node_config.py``
  ``_expand_env``); with ``disaggregated_prefill``, each node is a PD role (``prefiller_host_index``);
- multi node, external DP (``templates`` + ``config``: one ``vllm serve`` per DP rank,
  ``external_dp/scripts/runtime.py`` ``ServerCommandBuilder.build`` over ``external_dp_config.py``
  ``RankResolver._expand_node``; roles from ``routing.groups``).

CI resolves node IPs from LWS DNS; here node ``k``'s address is :func:`node_ip` (documentation range, RFC 5737).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from ascendflow.importer.command import KEY, ServeCommand, parse_command
from ascendflow.schema.errors import ConfigError

ROLES = {"prefiller": "prefill", "decoder": "decode"}


def node_ip(k: int) -> str:
    """Node ``k``'s address in an imported CI config (RFC 5737 TEST-NET-1: never a real host)."""
    return f"192.0.2.{k + 1}"


def is_pd(raw: Any) -> bool:
    """Whether the CI config is a PD-disaggregated deployment (``disaggregated_prefill`` or ``routing.type``)."""
    return isinstance(raw, dict) and (bool(raw.get("disaggregated_prefill")) or (
        (raw.get("routing") or {}).get("type") == "disaggregated_prefill"))


def ci_commands(raw: Any, source: str, case: str | None = None) -> list[ServeCommand]:
    """The commands of a co-located CI config: a single-node config's test cases (``case``: one of them), or a
    multi-node internal-DP config's nodes (one deployment, node 0 first).

    Raises:
        ConfigError: not a CI config, a PD config (:func:`pd_commands`), an unknown case.
    """
    if is_pd(raw):
        raise ConfigError(KEY, source, "is a PD config; its roles are imported by ascendflow.importer.pd")
    if isinstance(raw, dict) and isinstance(raw.get("deployment"), list):
        return [node[0] for node in _internal_dp(raw, source)]
    if not isinstance(raw, dict) or "test_cases" not in raw:
        raise ConfigError(KEY, source, "is not a vllm-ascend CI config (no test_cases, deployment or templates)")
    out = []
    for test in raw["test_cases"]:
        if case is not None and test["name"] != case:
            continue
        env = {k: str(v) for k, v in (test.get("envs") or {}).items()}
        port = env.pop("SERVER_PORT", "8000")
        port = "8000" if port == "DEFAULT_PORT" else port
        args = [str(a) for a in [*(test.get("server_cmd") or []), *(test.get("server_cmd_extra") or [])]]
        args = [a.replace("$SERVER_PORT", port) for a in args]
        out.append(parse_command(["vllm", "serve", test["model"], *args], env=env,
                                 source=f"{source} test case {test['name']}", name=test["name"]))
    if not out:
        raise ConfigError(KEY, case or source, "no such test case in the CI config")
    return out


def pd_commands(raw: dict[str, Any], source: str) -> list[list[ServeCommand]]:
    """Every ``vllm serve`` a PD CI config starts, per node (node 0 first), per process (DP rank for external DP);
    each command's ``role`` is ``prefill`` or ``decode``."""
    return _external_dp(raw, source) if "templates" in raw else _internal_dp(raw, source)


def _internal_dp(raw: dict[str, Any], source: str) -> list[list[ServeCommand]]:
    pd = raw.get("disaggregated_prefill") or {}
    out = []
    for k, deploy in enumerate(raw["deployment"]):
        # DistEnvBuilder.build adds LOCAL_IP (the node's own) and MASTER_IP (node 0's; a PD role here is one node)
        master = node_ip(k) if pd else node_ip(0)
        env = {key: str(v) for key, v in (deploy.get("envs") or {}).items()}
        variables = {**env, "LOCAL_IP": node_ip(k), "MASTER_IP": master}
        argv = [_render(a, variables) for a in shlex.split(_ips(str(deploy["server_cmd"])))]
        role = ("prefill" if k in pd["prefiller_host_index"] else "decode") if pd else ""
        out.append([_command(argv, env, f"{source} node {k}", raw, role, k)])
    return out


def _external_dp(raw: dict[str, Any], source: str) -> list[list[ServeCommand]]:
    roles = {i: ROLES[g] for g, idx in raw["routing"]["groups"].items() for i in idx}
    out = []
    for k, (node, template) in enumerate(zip(raw["config"], raw["templates"])):
        tp = int(node.get("tp_size", 1))
        ranks = []
        for local in range(int(node.get("dp_size_local", 1))):
            variables = {"PORT": str(int(node["port_start"]) + local), "DP_SIZE": str(node.get("dp_size", 1)),
                         "DP_RANK": str(int(node.get("dp_rank_start", 0)) + local), "TP_SIZE": str(tp),
                         "DP_ADDRESS": _ips(str(node["dp_address"])), "DP_RPC_PORT": str(node["dp_rpc_port"]),
                         "VISIBLE_DEVICES": ",".join(str(d) for d in range(local * tp, (local + 1) * tp))}
            env = {key: _render(str(v), variables) for key, v in template["envs"].items()}
            args = [_render(_ips(str(a)), {**variables, **env}) for a in template["server_cmd_template"]]
            ranks.append(_command(["vllm", "serve", raw["model"], *args], env, f"{source} node {k} rank {local}",
                                  raw, roles[k], k))
        out.append(ranks)
    return out


def _command(argv: list[str], env: dict[str, str], source: str, raw: dict, role: str, node: int) -> ServeCommand:
    command = parse_command(argv, env=env, source=source, name=str(raw.get("test_name") or ""))  # errors name it
    command.role, command.node = role, node
    return command


def _ips(text: str) -> str:
    return re.sub(r"\$\{NODE_(\d+)_IP\}", lambda m: node_ip(int(m.group(1))), text)


def _render(text: str, variables: dict[str, str]) -> str:
    text = re.sub(r"\$\{(\w+)\}", lambda m: variables.get(m.group(1), m.group(0)), text)
    return re.sub(r"\$(\w+)", lambda m: variables.get(m.group(1), m.group(0)), text)


def ci_hardware(path: str, raw: Any) -> str:
    """The hardware option a co-located CI config runs on: ``atlas_300i_duo`` when its name says 310P; A2 when its name
    says A2 or ``npu_per_node`` is 8; else A3 (vllm-ascend's nightly single-node configs run on A3 unless the file
    says A2, ``Qwen3-32B-Int8-A2.yaml``)."""
    name = Path(path).name
    if "310p" in name.lower():
        return "atlas_300i_duo"
    if re.search(r"(^|[-_])A2([-_.@]|$)", name) or (isinstance(raw, dict) and raw.get("npu_per_node") == 8):
        return "atlas_800i_a2"
    return "atlas_800i_a3"


def ci_name(path: str) -> str:
    """A recipe name from a CI config's file name (``QWEN3_235B_PD@v0.23.0.yaml`` -> ``qwen3_235b_pd_v0_23_0``)."""
    return re.sub(r"\W+", "_", Path(path).stem.lower()).strip("_")

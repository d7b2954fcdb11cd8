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

The config's benchmark (``benchmarks``: AISBench cases, ``tools/aisbench.py``; a single-node test case's own, a
multi-node config's top level) becomes the recipe's workload, co-located and PD alike (:func:`carry_workload`): its
performance case's input and output lengths, prompts, concurrency and rate.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from ascendflow.importer.command import KEY, ServeCommand, parse_command
from ascendflow.schema.errors import ConfigError

ROLES = {"prefiller": "prefill", "decoder": "decode"}


def ci_workload(bench: dict[str, Any]) -> dict[str, Any]:
    """The benchmark case's workload: input length from the AISBench dataset name (``GSM8K-in3500``: about 3,500
    tokens through the chat template; ``in128k``: 131,072; ``random``: ``input_len``), output length ``max_out_len``
    (CI perf cases ignore EOS), prompts, concurrency (``batch_size``), rate (0: all at once), prefix share when the
    name says so. (The corpus builder, ``scripts/import_ci_config.py``, reads CI's cases with it too.)"""
    path = str(bench.get("dataset_path") or "")
    m = re.search(r"in(\d+(?:\.\d+)?)(k?)", path, re.I)
    isl = None
    if m:
        isl = int(float(m[1]) * (1024 if m[2].lower() == "k" else 1))
    if bench.get("input_len"):
        isl = int(bench["input_len"])
    rate = bench.get("request_rate")
    prefix = re.search(r"prefix[-_]?(\d+)", path, re.I)
    return {"dataset": path, "input_len": isl, "output_len": int(bench["max_out_len"]) if bench.get("max_out_len")
            else None, "num_prompts": int(bench["num_prompts"]) if bench.get("num_prompts") else None,
            "max_concurrency": int(bench["batch_size"]) if bench.get("batch_size") else None,
            "request_rate": float(rate) if rate not in (None, 0, "0") else None,
            "prefix_percent": int(prefix[1]) if prefix else None}


def perf_case(benchmarks: Any) -> tuple[str, dict[str, Any]] | None:
    """``(name, case)`` of the last ``case_type: performance`` case that generates more than one token (a
    ``max_out_len: 1`` case is CI's warm-up, ``DeepSeek_V3.1T_MTP1_128K_1K_PD.yaml`` ``perf_wram_up``), or ``None``."""
    cases = [(k, b) for k, b in (benchmarks or {}).items() if isinstance(b, dict)
             and b.get("case_type") == "performance" and int(b.get("max_out_len") or 0) > 1]
    return cases[-1] if cases else None


def carry_workload(recipe: dict[str, Any], named: list[tuple[str, str]], benchmarks: Any) -> None:
    """Set ``recipe``'s workload from the CI config's performance case (:func:`perf_case`): ``workload=random`` with
    ``random_input_len`` (ESTIMATE: the dataset name's length, AISBench pads the prompt to it through the chat
    template), ``random_output_len`` (``max_out_len``), ``num_prompts``, ``max_concurrency`` (``batch_size``),
    ``request_rate`` (0: all at once, ``inf``) and ``ignore_eos`` (on unless the case says otherwise); each choice is
    named. Without a performance case the workload option's defaults stay, named."""
    found = perf_case(benchmarks)
    if found is None:
        kinds = sorted({str(b.get("case_type")) for b in (benchmarks or {}).values() if isinstance(b, dict)})
        only = f" (only {', '.join(kinds)})" if kinds else ""
        named.append(("workload", f"the CI config has no performance benchmark case{only}: the workload option's "
                                  "defaults"))
        return
    key, bench = found
    w = ci_workload(bench)
    block: dict[str, Any] = {}
    if w["input_len"] is not None:
        block["random_input_len"] = w["input_len"]
    if w["output_len"] is not None:
        block["random_output_len"] = w["output_len"]
    if w["num_prompts"] is not None:
        block["num_prompts"] = w["num_prompts"]
    block["max_concurrency"] = w["max_concurrency"]
    block["request_rate"] = w["request_rate"] if w["request_rate"] else float("inf")
    block["ignore_eos"] = bench.get("ignore_eos") is not False
    defaults = recipe["defaults"]
    for d in defaults:
        if "override /workload" in d:
            d["override /workload"] = "random"
            break
    else:
        defaults.append({"override /workload": "random"})
    recipe["workload"] = block
    rate = f"{w['request_rate']:g} req/s" if w["request_rate"] else "all at once (request_rate 0)"
    named.append(("workload", f"CI's performance case {key} ({w['dataset'] or 'no dataset_path'}) as the random "
                              f"dataset: {w['input_len'] if w['input_len'] is not None else 'default'} input tokens "
                              f"(ESTIMATE: the dataset name's in<N>, AISBench's prompt through the chat template), "
                              f"{w['output_len']} output (max_out_len, EOS "
                              f"{'ignored' if block['ignore_eos'] else 'kept'}), "
                              f"{w['num_prompts']} prompts, concurrency {w['max_concurrency']} (batch_size), {rate}"))
    if w["input_len"] is None:
        named.append(("workload.random_input_len", f"{w['dataset']!r} names no input length (in<N>): the workload "
                                                   "option's default"))
    if w["prefix_percent"] is not None:
        named.append(("workload", f"the dataset's {w['prefix_percent']} % shared prefix ({w['dataset']}): no workload "
                                  "key for it (random prompts share none); not carried"))


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

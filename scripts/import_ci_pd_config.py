"""Import a vllm-ascend CI PD config as an ascendflow recipe: ``python scripts/import_ci_pd_config.py CONFIG.yaml``.

vllm-ascend's multi-node CI (``tests/e2e/{nightly,weekly}/multi_node/{external,internal}_dp/config/*.yaml`` at
v0.23.0 and v0.25.1rc1) describes each PD deployment as per-node ``vllm serve`` argument lists typed by hand. This
script reads one such config and prints the same deployment as an ascendflow recipe (``recipes/recipe/*.yaml``
shape: ``# @package _global_``, group overrides, then values), so ascendflow can plan, check and launch it.

Two formats, both read as CI reads them (v0.23.0):
- ``external_dp`` (``routing.groups`` + ``config`` + ``templates``; ``external_dp/scripts/external_dp_config.py``):
  one ``vllm serve`` per DP rank, the node's ``server_cmd_template`` with ``${DP_RANK}``/``$SERVER_PORT`` filled in;
- ``internal_dp`` (``disaggregated_prefill`` + ``deployment[].server_cmd``;
  ``internal_dp/scripts/multi_node_config.py``): one ``vllm serve`` per node, ``shlex.split`` of the command.

What changes on purpose (the importer says so on stderr): ``kv_port`` is moved out of AscendDirect's random-port range
``[20000, 20000 + 1000 × NPUs per node)`` (vllm-ascend multi-node PD tutorial, kv_port guide) by the same offset for
every role, so the roles' port spacing is kept. Flags ascendflow has no key for stop the import with their name.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import yaml

#: CI model repo (substring, lower case) -> ascendflow catalogue option (``conf/model``). DeepSeek-V3/V3.1/R1 share
#: one architecture (``DeepseekV3ForCausalLM``, same config.json shape fields), so they plan from ``deepseek_r1``.
MODELS = {"deepseek-v3.1": "deepseek_r1", "deepseek-v3-": "deepseek_r1", "deepseek-r1": "deepseek_r1",
          "qwen3-235b-a22b": "qwen3_235b_a22b"}
#: NPUs per node -> hardware option (``conf/hardware``).
HARDWARE = {16: "atlas_800i_a3", 8: "atlas_800i_a2"}
#: Flags that set the layout, ports and transfer config (read from the node config), not role knobs.
LAYOUT_FLAGS = {"--host", "--port", "--data-parallel-size", "--data-parallel-rank", "--data-parallel-address",
                "--data-parallel-rpc-port", "--tensor-parallel-size", "--data-parallel-size-local",
                "--data-parallel-start-rank", "--kv-transfer-config", "--headless"}
BOOL_FLAGS = {"--enable-expert-parallel", "--enforce-eager", "--trust-remote-code", "--no-enable-prefix-caching",
              "--async-scheduling", "--headless"}
#: vLLM flags CI uses that ascendflow has no key for yet: the importer refuses the config naming them.
UNSUPPORTED = {"--async-scheduling"}
ASCEND_DIRECT_BASE = 20000  # AscendDirectTransport's random ports start here (multi-node PD tutorial, kv_port guide)
#: ``--additional-config`` keys the supported releases no longer read (ascendflow refuses them by name).
OBSOLETE_EXTRA = {"ascend_scheduler_config": "last read by vllm-ascend 0.11.0 (compiler/rules/data/"
                                             "additional_config_keys.yaml); 0.23.0 ignores it",
                  # v0.23.0 vllm_ascend/ascend_config.py: EPLB keys are read under "eplb_config" (EplbConfig) only
                  **{key: "read only under eplb_config from vllm-ascend 0.18.0 (v0.23.0 ascend_config.py EplbConfig)"
                     for key in ("dynamic_eplb", "num_iterations_eplb_update", "num_wait_worker_iterations",
                                 "init_redundancy_expert", "gate_eplb")}}
ROLES = {"prefiller": "prefill", "decoder": "decode"}
TYPED_EXTRA = ("enable_shared_expert_dp", "multistream_overlap_shared_expert", "recompute_scheduler_enable",
               "enable_kv_nz")


def parse_flags(argv: list[str]) -> dict[str, Any]:
    """``--flag value`` / ``--flag`` pairs of an argv (after ``vllm serve MODEL``) as a dict; JSON values parsed.

    Raises:
        ValueError: a positional argument where a flag was expected.
    """
    flags: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        flag = argv[i]
        if not flag.startswith("--"):
            raise ValueError(f"positional argument {flag!r} at {i} where a flag was expected")
        if flag in BOOL_FLAGS or i + 1 == len(argv) or argv[i + 1].startswith("--"):
            flags[flag], i = True, i + 1
            continue
        value = argv[i + 1]
        if value[:1] in "{[":
            value = json.loads(value)
        flags[flag], i = value, i + 2
    return flags


def ci_node_argvs(raw: dict[str, Any], ips: list[str]) -> dict[int, list[dict[str, Any]]]:
    """Every ``vllm serve`` CI starts, per node: ``{"argv": [...], "env": {...}, "role": ...}``, rendered as the
    v0.23.0 harness renders it (``external_dp/scripts/runtime.py`` ``ServerCommandBuilder.build`` over
    ``external_dp_config.py`` ``RankResolver._expand_node``; ``internal_dp``: ``shlex.split`` of ``server_cmd``
    with ``$VAR`` from the node's envs, ``multi_node_config.py`` ``_expand_env``).

    Args:
        raw: the CI config (YAML anchors merged by the loader).
        ips: one IP per node (CI resolves them from LWS DNS).
    """
    out: dict[int, list[dict[str, Any]]] = {}
    if "templates" in raw:
        roles = {i: ROLES[g] for g, idx in raw["routing"]["groups"].items() for i in idx}
        for k, (node, template) in enumerate(zip(raw["config"], raw["templates"])):
            tp = int(node.get("tp_size", 1))
            for local in range(int(node.get("dp_size_local", 1))):
                port = int(node["port_start"]) + local
                variables = {"PORT": str(port), "DP_SIZE": str(node.get("dp_size", 1)),
                             "DP_RANK": str(int(node.get("dp_rank_start", 0)) + local), "TP_SIZE": str(tp),
                             "DP_ADDRESS": _ips(str(node["dp_address"]), ips), "DP_RPC_PORT": str(node["dp_rpc_port"]),
                             "VISIBLE_DEVICES": ",".join(str(d) for d in range(local * tp, (local + 1) * tp))}
                env = {key: re.sub(r"\$\{(\w+)\}", lambda m: variables.get(m.group(1), m.group(0)), str(v))
                       for key, v in template["envs"].items()}
                args = [_render(str(a), {**variables, **env}, ips) for a in template["server_cmd_template"]]
                out.setdefault(k, []).append({"argv": ["vllm", "serve", raw["model"], *args], "env": env,
                                              "role": roles[k]})
        return out
    pd = raw["disaggregated_prefill"]
    for k, deploy in enumerate(raw["deployment"]):
        # DistEnvBuilder.build adds LOCAL_IP / MASTER_IP (the node's own IP: each PD instance here is one node)
        env = {**{key: str(v) for key, v in deploy["envs"].items()}, "LOCAL_IP": ips[k], "MASTER_IP": ips[k]}
        cmd = re.sub(r"\$(\w+)", lambda m: env.get(m.group(1), m.group(0)), deploy["server_cmd"])
        role = "prefill" if k in pd["prefiller_host_index"] else "decode"
        out[k] = [{"argv": shlex.split(_ips(cmd, ips)), "env": env, "role": role}]
    return out


def _ips(text: str, ips: list[str]) -> str:
    return re.sub(r"\$\{NODE_(\d+)_IP\}", lambda m: ips[int(m.group(1))], text)


def _render(text: str, variables: dict[str, str], ips: list[str]) -> str:
    text = re.sub(r"\$\{(\w+)\}", lambda m: variables.get(m.group(1), m.group(0)), _ips(text, ips))
    return re.sub(r"\$(\w+)", lambda m: variables.get(m.group(1), m.group(0)), text)


def kv_port_offset(raw: dict[str, Any], ci_ports: list[int]) -> int:
    """Offset added to every CI ``kv_port``: 0 when the lowest is clear of AscendDirect's range, else the distance to
    its end (``20000 + 1000 × npu_per_node``), rounded up to a whole thousand."""
    end = ASCEND_DIRECT_BASE + 1000 * int(raw["npu_per_node"])
    low = min(ci_ports)
    return 0 if low >= end else -(-(end - low) // 1000) * 1000


def to_recipe(raw: dict[str, Any], *, name: str) -> dict[str, Any]:
    """The CI config as an ascendflow recipe (a dict: ``defaults`` overrides, then values).

    Raises:
        ValueError: a model or hardware ascendflow has no option for, roles whose shared flags differ
            (``--max-model-len``, ``--seed``, prefix caching, quantization), or a flag ascendflow has no key for.
    """
    ips = [f"ip{k}" for k in range(int(raw["num_nodes"]))]
    nodes = ci_node_argvs(raw, ips)
    model = next((opt for key, opt in MODELS.items() if key in raw["model"].lower()), None)
    if model is None or int(raw["npu_per_node"]) not in HARDWARE:
        raise ValueError(f"model {raw['model']!r} / npu_per_node {raw['npu_per_node']} has no ascendflow option")
    per_node = {k: parse_flags(ranks[0]["argv"][3:]) for k, ranks in nodes.items()}
    kv = {k: f["--kv-transfer-config"] for k, f in per_node.items()}
    offset = kv_port_offset(raw, [int(c["kv_port"]) for c in kv.values()])
    shared = {"--max-model-len", "--seed", "--no-enable-prefix-caching", "--quantization", "--trust-remote-code"}
    first = next(iter(per_node.values()))
    for k, flags in per_node.items():
        for flag in shared:
            if flags.get(flag) != first.get(flag):
                raise ValueError(f"node {k}: {flag} {flags.get(flag)!r} differs from node 0's {first.get(flag)!r}")
    recipe: dict[str, Any] = {
        "defaults": [{"override /hardware": HARDWARE[int(raw["npu_per_node"])]}, {"override /model": model},
                     *([{"override /quantization": "w8a8_dynamic_ascend"}] if first.get("--quantization") == "ascend"
                       else []),
                     # vLLM's default graph mode where CI sets none (a role's own --enforce-eager /
                     # --compilation-config wins)
                     {"override /ascend": "moe_ep"}, {"override /workload": "random"}, {"override /graph": "compiled"}],
        "engine": {"max_model_len": int(first["--max-model-len"]), "seed": int(first.get("--seed", 0)),
                   "enable_prefix_caching": not first.get("--no-enable-prefix-caching", False)},
        "model": {"trust_remote_code": bool(first.get("--trust-remote-code"))},
        "pd": {"name": name, "connector": first["--kv-transfer-config"]["kv_connector"],
               "proxy": {"kind": "layerwise" if "Layerwise" in first["--kv-transfer-config"]["kv_connector"]
                         else "load_balance",
                         # external_dp_config.py: proxy_port = 1999; internal_dp multi_node_config.py takes a free
                         # port (get_available_port), not the engines' --port: pd=none's 8000
                         "port": 1999 if "templates" in raw else 8000}},
    }
    for role in ("prefill", "decode"):
        ks = [k for k, ranks in nodes.items() if ranks[0]["role"] == role]
        recipe["pd"][role] = _role(raw, role, ks, nodes, per_node, kv, offset, recipe)
    return recipe


def _role(raw: dict[str, Any], role: str, ks: list[int], nodes: dict, per_node: dict, kv: dict, offset: int,
          recipe: dict[str, Any]) -> dict[str, Any]:
    """The ``pd.<role>`` block of the nodes ``ks`` (instances are the distinct ``engine_id``s, else one per node)."""
    flags = per_node[ks[0]]
    for k in ks[1:]:
        knobs = {f: v for f, v in per_node[k].items() if f not in LAYOUT_FLAGS}
        if knobs != {f: v for f, v in flags.items() if f not in LAYOUT_FLAGS}:
            raise ValueError(f"{role} node {k}: flags differ from node {ks[0]}'s; ascendflow runs one set per role")
    ids = [kv[k].get("engine_id", f"node{k}") for k in ks]
    instances = list(dict.fromkeys(ids))
    ports = [int(kv[ks[ids.index(i)]]["kv_port"]) for i in instances]
    tp = int(flags["--tensor-parallel-size"])
    dp = int(flags.get("--data-parallel-size", 1))
    local = len(nodes[ks[0]]) if "templates" in raw else int(flags.get("--data-parallel-size-local", dp))
    out: dict[str, Any] = {
        "instances": len(instances), "nodes": len(ks) // len(instances), "tensor_parallel_size": tp,
        "data_parallel_size": dp, "dp_ranks_per_node": local,
        "dp_launch": "external" if "templates" in raw else "internal",
        "enable_expert_parallel": bool(flags.get("--enable-expert-parallel")),
        "max_num_seqs": int(flags["--max-num-seqs"]), "max_num_batched_tokens": int(flags["--max-num-batched-tokens"]),
        "gpu_memory_utilization": float(flags["--gpu-memory-utilization"]),
        "kv_port": ports[0] + offset, "kv_port_stride": (ports[1] - ports[0]) if len(ports) > 1 else 100,
        "api_port": int(nodes[ks[0]][0]["argv"][nodes[ks[0]][0]["argv"].index("--port") + 1]),
    }
    if flags.get("--enforce-eager"):
        out["enforce_eager"] = True
    compilation = flags.get("--compilation-config")
    if compilation:
        out["cudagraph_mode"] = compilation.pop("cudagraph_mode")
        if "cudagraph_capture_sizes" in compilation:
            out["cudagraph_capture_sizes"] = compilation.pop("cudagraph_capture_sizes")
        if compilation:
            raise ValueError(f"{role}: --compilation-config keys {sorted(compilation)} have no ascendflow key")
    spec = flags.get("--speculative-config")
    if spec:
        recipe["engine"]["speculative_method"] = spec["method"]
        out["num_speculative_tokens"] = int(spec["num_speculative_tokens"])
        if role == "prefill" and out["num_speculative_tokens"] > 1:
            # multi-node PD tutorial (v0.25.1rc1), speculative-decoding note: non-hybrid models run 1 on P nodes
            recipe.setdefault("_notes", []).append(f"prefill num_speculative_tokens {out['num_speculative_tokens']} -> 1"
                                                   " (PD tutorial: 1 on P nodes for non-hybrid models)")
            out["num_speculative_tokens"] = 1
    extra = dict(flags.get("--additional-config") or {})
    if role == "prefill" and extra.pop("recompute_scheduler_enable", None) is not None:
        # vllm-ascend v0.23.0 vllm_ascend/platform.py check_and_update_config: "recompute_scheduler_enable is ignored
        # on PD-disaggregated P nodes" (set to False there); ascendflow refuses it on prefill instead
        recipe.setdefault("_notes", []).append("recompute_scheduler_enable dropped from prefill (ignored on P nodes)")
    for key, why in OBSOLETE_EXTRA.items():
        if extra.pop(key, None) is not None:
            recipe.setdefault("_notes", []).append(f"{role}: {key} dropped ({why})")
    typed = {key: extra.pop(key) for key in TYPED_EXTRA if key in extra}
    out["additional_config"] = {**typed, "other": extra}
    env = nodes[ks[0]][0]["env"]
    if "HCCL_BUFFSIZE" in env:
        out["hccl_buffsize_mb"] = int(env["HCCL_BUFFSIZE"])
    unknown = set(flags) - LAYOUT_FLAGS - (BOOL_FLAGS - UNSUPPORTED) - {
        "--seed", "--max-model-len", "--max-num-batched-tokens", "--max-num-seqs", "--gpu-memory-utilization",
        "--quantization", "--speculative-config", "--compilation-config", "--additional-config"}
    if unknown:
        raise ValueError(f"{role}: flags {sorted(unknown)} have no ascendflow key")
    return out


def recipe_text(recipe: dict[str, Any], source: str) -> str:
    """The recipe as YAML text with its header (source, the command that plans it)."""
    name = recipe["pd"]["name"]
    notes = "".join(f"# - {n}\n" for n in recipe.get("_notes", []))
    header = (f"# @package _global_\n# Imported from vllm-ascend CI config {source} by scripts/import_ci_pd_config.py;"
              f" kv_port moved out of AscendDirect's range where CI's lies inside it.\n{notes}"
              f"#   python -m ascendflow +recipe={name} run.mode=plan\n")
    return header + yaml.safe_dump({k: v for k, v in recipe.items() if k != "_notes"}, sort_keys=False, width=120)


def main(argv: list[str]) -> int:
    """Print the recipe of the CI config ``argv[0]`` (``--name NAME`` optional); exit 2 with one line on stderr if
    the config has something ascendflow cannot express."""
    if not argv:
        print("usage: import_ci_pd_config.py CONFIG.yaml [--name NAME]", file=sys.stderr)
        return 2
    path = Path(argv[0])
    name = argv[argv.index("--name") + 1] if "--name" in argv else re.sub(r"\W", "_", path.stem.lower())
    try:
        print(recipe_text(to_recipe(yaml.safe_load(path.read_text()), name=name), str(path)), end="")
    except (ValueError, KeyError) as error:
        print(f"import_ci_pd_config: {path}: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""A vllm-ascend CI PD config (``tests/e2e/*/multi_node/*/config/*PD*.yaml``) as an ascendflow ``pd`` recipe.

Each node's commands (:func:`ascendflow.importer.ci.pd_commands`, parsed by the installed vLLM's parser) become one
role block (``pd.prefill`` / ``pd.decode``: layout, engine knobs, graph, speculative tokens, additional config,
``HCCL_BUFFSIZE``, ports); the flags both roles share (``--max-model-len``, ``--seed``, prefix caching, quantization,
``--trust-remote-code``) become run keys. Every flag a role gives has a key, or is named with its reason; further
flags go to ``engine.extra_args`` token for token when both roles give the same ones, else the config is refused
(one line: ``engine.extra_args`` is one list for the run). :func:`ascendflow.importer.pd_roundtrip.pd_round_trip` plans the recipe and
reads every process's argv back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from ascendflow.importer.ci import node_ip
from ascendflow.importer.command import ServeCommand
from ascendflow.importer.recipe import (ENV_KEYS, ENV_LAUNCHER, NOT_CARRIED, Imported, _additional_config_keys,
                                        _quantization, misnamed_env, model_option)
from ascendflow.schema.errors import ConfigError
from ascendflow.schema.secrets import is_secret

#: NPUs per node -> hardware option (``conf/hardware``): vllm-ascend's CI runs A3 (16 dies) and A2 (8) nodes.
HARDWARE = {16: "atlas_800i_a3", 8: "atlas_800i_a2"}
#: vLLM dests that set a role's layout and ports (the launcher writes them per process), not role knobs.
LAYOUT = {"host", "port", "data_parallel_size", "data_parallel_rank", "data_parallel_address", "data_parallel_rpc_port",
          "tensor_parallel_size", "data_parallel_size_local", "data_parallel_start_rank", "kv_transfer_config",
          "headless"}
#: vLLM dests the roles must share (one run key each): ``dest -> run key``.
SHARED = {"max_model_len": "engine.max_model_len", "seed": "engine.seed",
          "enable_prefix_caching": "engine.enable_prefix_caching", "quantization": "quantization=<option>",
          "trust_remote_code": "model.trust_remote_code"}
#: vLLM dest -> role key, one to one.
ROLE_KEYS = {"enable_expert_parallel": "enable_expert_parallel", "max_num_seqs": "max_num_seqs",
             "max_num_batched_tokens": "max_num_batched_tokens", "gpu_memory_utilization": "gpu_memory_utilization",
             "kv_cache_memory_bytes": "kv_cache_memory_bytes", "async_scheduling": "async_scheduling",
             "enforce_eager": "enforce_eager"}
HANDLED = {"model_tag", "speculative_config", "compilation_config", "additional_config"}
#: AscendDirectTransport's random ports start here (multi-node PD tutorial, kv_port guide, v0.25.1rc1).
ASCEND_DIRECT_BASE = 20000
TYPED_EXTRA = ("enable_shared_expert_dp", "multistream_overlap_shared_expert", "recompute_scheduler_enable",
               "enable_kv_nz")


@dataclass
class ImportedPD(Imported):
    """A PD deployment's recipe (:class:`Imported`, ``commands`` one per node) and per-role what was not carried.

    Attributes:
        nodes: every command CI starts, per node, per process (DP rank for external DP).
        role_dropped: ``{role: {vLLM dest: reason}}`` of the options a role gives and does not carry.
        role_dropped_additional: ``{role: [--additional-config keys not carried]}``.
        role_changed: ``{role: {vLLM dest: reason}}`` of values the recipe changes on purpose.
        kv_port_offset: added to every CI ``kv_port`` (0 when clear of AscendDirect's range).
        engine_ids: node -> the ``engine_id`` ascendflow writes there (``<role><i>``).
        kv_ports: node -> the ``kv_port`` ascendflow writes for its instance (``kv_port + i × kv_port_stride``).
    """

    nodes: list[list[ServeCommand]] = field(default_factory=list)
    role_dropped: dict[str, dict[str, str]] = field(default_factory=dict)
    role_dropped_additional: dict[str, list[str]] = field(default_factory=dict)
    role_changed: dict[str, dict[str, str]] = field(default_factory=dict)
    kv_port_offset: int = 0
    engine_ids: dict[int, str] = field(default_factory=dict)
    kv_ports: dict[int, int] = field(default_factory=dict)


    def text(self, command_line: str | None = None) -> str:
        """The recipe as YAML text with its header: the config, each node's first command, what is named."""
        source = self.commands[0].source.rsplit(" node ", 1)[0]
        lines = ["# @package _global_",
                 f"# Imported by `python -m ascendflow.import` from the PD CI config {source}; kv_port moved out of "
                 "AscendDirect's range where CI's lies inside it. Each node's first command:",
                 *[f"#   node {c.node} ({c.role}): {c.text}" for c in self.commands],
                 f"# Plan it: python -m ascendflow +recipe={self.name} run.mode=plan"]
        if command_line:
            lines.append(f"# Re-import: {command_line}")
        if self.named:
            lines.append("# Not carried, or chosen by the importer:")
            lines += [f"#   {flag}: {why}" for flag, why in self.named]
        return "\n".join(lines) + "\n" + yaml.safe_dump(self.recipe, sort_keys=False, width=120)


def kv_port_offset(npu_per_node: int, ci_ports: list[int]) -> int:
    """Offset added to every CI ``kv_port``: 0 when the lowest is clear of AscendDirect's range, else the distance to
    its end (``20000 + 1000 × npu_per_node``), rounded up to a whole thousand."""
    end = ASCEND_DIRECT_BASE + 1000 * npu_per_node
    low = min(ci_ports)
    return 0 if low >= end else -(-(end - low) // 1000) * 1000


def instance_key(command: ServeCommand) -> tuple[str, str]:
    """The instance a command belongs to: its ``--kv-transfer-config`` ``engine_id`` (else its node: vLLM draws a
    random id) and its DP group's address (CI gives two one-node DP groups the same ``engine_id`` in
    ``DeepSeek_V3.1T_layerwise_PD.yaml``: two instances, each its own DP master)."""
    ci_id = str(command.values["kv_transfer_config"].get("engine_id", f"node{command.node}"))
    return ci_id, str(command.values.get("data_parallel_address", f"node{command.node}"))


def pd_recipe(nodes: list[list[ServeCommand]], *, npu_per_node: int, name: str, external: bool,
              release: str | None = None) -> ImportedPD:
    """The ``pd`` recipe of a PD CI config's commands (:func:`ascendflow.importer.ci.pd_commands`).

    Args:
        npu_per_node: the config's ``npu_per_node`` (picks the hardware option, :data:`HARDWARE`).
        external: external DP (``templates``: one ``vllm serve`` per DP rank) or internal (one per node).
        release: ``hardware.software`` (a version-matrix row); ``None``: the hardware option's.

    Raises:
        ConfigError: no hardware option for ``npu_per_node``, an unknown model, nodes whose shared flags differ, nodes
            of one role whose knobs differ, a role flag with no ascendflow key.
    """
    if npu_per_node not in HARDWARE:
        raise ConfigError("npu_per_node", npu_per_node, f"has no hardware option ({sorted(HARDWARE)})")
    hardware = HARDWARE[npu_per_node]
    first = nodes[0][0]
    for ranks in nodes:
        for dest in SHARED:
            if ranks[0].values.get(dest) != first.values.get(dest):
                raise ConfigError(f"node {ranks[0].node}", _flag(ranks[0], dest, first),
                                  f"{ranks[0].values.get(dest)!r} differs from node 0's {first.values.get(dest)!r}; "
                                  f"both roles run one {SHARED[dest]}")
    option = model_option(first.model)
    defaults: list[dict[str, str]] = [{"override /hardware": hardware}, {"override /model": option}]
    recipe: dict[str, Any] = {"defaults": defaults}
    named: list[tuple[str, str]] = [("model", f"{first.model} planned from the catalogue option {option}")]
    dropped: dict[str, str] = {}
    checkpoint = _quantization(first, recipe, defaults, named, None, dropped)
    # the MoE EP environment bundle; vLLM's default graph mode where CI sets none (a role's own flags win)
    defaults += [{"override /ascend": "moe_ep"}, {"override /workload": "random"}, {"override /graph": "compiled"}]
    values = first.values
    recipe["engine"] = {"max_model_len": values["max_model_len"], "seed": values.get("seed", 0),
                        "enable_prefix_caching": values.get("enable_prefix_caching") is not False}
    recipe["model"] = {"trust_remote_code": bool(values.get("trust_remote_code"))}
    if release:
        recipe["hardware"] = {"software": release}
    kv = first.values["kv_transfer_config"]
    offset = kv_port_offset(npu_per_node, [int(r[0].values["kv_transfer_config"]["kv_port"]) for r in nodes])
    recipe["pd"] = {"name": name, "connector": kv["kv_connector"],
                    "proxy": {"kind": "layerwise" if "Layerwise" in kv["kv_connector"] else "load_balance",
                              # external_dp_config.py: proxy_port = 1999; internal DP's multi_node_config.py
                              # takes a free port (get_available_port): 8000 here
                              "port": 1999 if external else 8000}}
    out = ImportedPD(recipe=recipe, named=named, commands=[r[0] for r in nodes], name=name, dropped=dropped,
                     checkpoint_quantization=checkpoint, nodes=nodes, kv_port_offset=offset)
    known = _additional_config_keys(hardware, release)
    for role in ("prefill", "decode"):
        ranks = [r for r in nodes if r[0].role == role]
        recipe["pd"][role] = _role(role, ranks, external, out, known)
    _run_env(nodes, recipe, named)
    if not recipe["engine"]["extra_args"]:
        del recipe["engine"]["extra_args"]
    return out


def _run_env(nodes: list[list[ServeCommand]], recipe: dict[str, Any], named: list[tuple[str, str]]) -> None:
    """The environment bundle's settings (``ascend.omp_num_threads``, HCCL timeouts, ``HCCL_OP_EXPANSION_MODE``):
    run keys, so every node must give the same value (else named, not carried)."""
    for key in [*(k for k in ENV_KEYS if k != "HCCL_BUFFSIZE"), "HCCL_OP_EXPANSION_MODE"]:
        values = {r[0].env.get(key) for r in nodes}
        if values == {None}:
            continue
        if len(values) > 1:
            named.append((key, f"{sorted(map(str, values))} differ between nodes; ascendflow runs one value: not "
                               "carried"))
            continue
        value = values.pop()
        if key == "HCCL_OP_EXPANSION_MODE":
            recipe.setdefault("ascend", {})["hccl_op_expansion_mode_aiv"] = value == "AIV"
        else:
            recipe.setdefault("ascend", {})[ENV_KEYS[key]] = int(value)


def _flag(command: ServeCommand, dest: str, other: ServeCommand | None = None) -> str:
    tokens = command.given.get(dest) or (other.given.get(dest) if other else None)
    return tokens[0].split("=", 1)[0] if tokens else "--" + dest.replace("_", "-")


def _role(role: str, nodes: list[list[ServeCommand]], external: bool, out: ImportedPD,
          known: frozenset[str] | None) -> dict[str, Any]:
    """The ``pd.<role>`` block of the role's nodes (instances: the distinct ``engine_id``s, else one per node)."""
    first = nodes[0][0]
    knobs = {d: v for d, v in first.values.items() if d not in LAYOUT}
    for ranks in nodes[1:]:
        other = {d: v for d, v in ranks[0].values.items() if d not in LAYOUT}
        if other != knobs:
            diff = sorted(set(other) ^ set(knobs) | {d for d in knobs if d in other and other[d] != knobs[d]})
            raise ConfigError(f"{role} node {ranks[0].node}", ", ".join(_flag(ranks[0], d, first) for d in diff),
                              f"differ from node {first.node}'s; ascendflow runs one set of flags per role")
    unknown = [d for d in first.given if d not in LAYOUT | set(SHARED) | set(ROLE_KEYS) | HANDLED]
    tokens = [t for d in unknown for t in first.given[d]]
    extra = out.recipe["engine"].setdefault("extra_args", tokens)
    if extra != tokens:  # engine.extra_args is the run's: both roles must give the same further flags
        raise ConfigError(role, " ".join(tokens) or "(none)", f"further flags differ from the other role's "
                                                               f"({' '.join(extra) or 'none'}); engine.extra_args is "
                                                               "one list for both roles")
    ids = [instance_key(r[0]) for r in nodes]
    instances = list(dict.fromkeys(ids))
    ports = [int(nodes[ids.index(i)][0].values["kv_transfer_config"]["kv_port"]) for i in instances]
    # instances on their own nodes may share a port (CI's layerwise config); ascendflow strides them (>= 1)
    stride = ports[1] - ports[0] if len(ports) > 1 and ports[1] > ports[0] else 100
    for ranks, key in zip(nodes, ids):
        i = instances.index(key)
        out.engine_ids[ranks[0].node] = f"{role}{i}"
        out.kv_ports[ranks[0].node] = ports[0] + out.kv_port_offset + i * stride
    values = first.values
    dp = values.get("data_parallel_size") or 1
    block: dict[str, Any] = {
        "instances": len(instances), "nodes": len(nodes) // len(instances),
        "tensor_parallel_size": values.get("tensor_parallel_size") or 1, "data_parallel_size": dp,
        "dp_ranks_per_node": len(nodes[0]) if external else (values.get("data_parallel_size_local") or dp),
        "dp_launch": "external" if external else "internal",
        **{key: values[dest] for dest, key in ROLE_KEYS.items() if dest in values},
        "kv_port": ports[0] + out.kv_port_offset, "kv_port_stride": stride,
        "api_port": values.get("port") or 8000,
    }
    block["enable_expert_parallel"] = bool(values.get("enable_expert_parallel"))
    dropped = {d: NOT_CARRIED[d] for d in values if d in NOT_CARRIED}
    changed: dict[str, str] = {}
    compilation = dict(values.get("compilation_config") or {})
    if compilation and values.get("enforce_eager"):
        dropped["compilation_config"] = "ignored by vLLM with --enforce-eager"
    elif compilation:
        block["cudagraph_mode"] = compilation.pop("cudagraph_mode")
        if "cudagraph_capture_sizes" in compilation:
            block["cudagraph_capture_sizes"] = compilation.pop("cudagraph_capture_sizes")
        if compilation:
            raise ConfigError(f"{role} --compilation-config", sorted(compilation), "keys have no pd.<role> key")
    spec = values.get("speculative_config")
    if spec:
        out.recipe["engine"]["speculative_method"] = spec["method"]
        block["num_speculative_tokens"] = int(spec["num_speculative_tokens"])
        if role == "prefill" and block["num_speculative_tokens"] > 1:
            # multi-node PD tutorial (v0.25.1rc1), speculative-decoding note: non-hybrid models run 1 on P nodes
            changed["speculative_config"] = (f"num_speculative_tokens {block['num_speculative_tokens']} -> 1 on "
                                             "prefill (PD tutorial: 1 on P nodes for non-hybrid models)")
            block["num_speculative_tokens"] = 1
    extra = dict(values.get("additional_config") or {})
    not_read = [k for k in extra if known is not None and k not in known]
    if role == "prefill" and "recompute_scheduler_enable" in extra:
        # vllm-ascend v0.23.0 vllm_ascend/platform.py check_and_update_config: "recompute_scheduler_enable is ignored
        # on PD-disaggregated P nodes" (set to False there); ascendflow refuses it on prefill instead
        not_read.append("recompute_scheduler_enable")
    if not_read:
        out.named.append((f"{role} --additional-config", f"keys {not_read} are not read by the target vllm-ascend "
                                                         "(compiler/rules/data/additional_config_keys.yaml"
                                                         + ("; recompute_scheduler_enable: ignored on P nodes"
                                                            if "recompute_scheduler_enable" in not_read else "")
                                                         + "); not carried"))
    extra = {k: v for k, v in extra.items() if k not in not_read}
    typed = {k: extra.pop(k) for k in TYPED_EXTRA if k in extra}
    block["additional_config"] = {**typed, "other": extra}
    env = first.env
    if "HCCL_BUFFSIZE" in env:
        block["hccl_buffsize_mb"] = int(env["HCCL_BUFFSIZE"])
    carried = {}
    for key, value in env.items():
        if key in ENV_KEYS or key == "HCCL_OP_EXPANSION_MODE":
            continue  # HCCL_BUFFSIZE: the role's; the rest run keys (_run_env)
        if key in ENV_LAUNCHER:
            out.named.append((f"{role} {key}", ENV_LAUNCHER[key]))
        elif misnamed_env(key):
            out.named.append((f"{role} {key}", misnamed_env(key)))
        elif is_secret(key, []):
            out.named.append((f"{role} {key}", "a secret: not written into a recipe; export it where the engine starts"))
        elif "$" in value:
            out.named.append((f"{role} {key}", f"{value!r} extends the node's own ${key}; set it on the node"))
        else:
            carried[key] = value
    if carried:
        block["env"] = carried
    out.role_dropped[role] = dropped
    out.role_dropped_additional[role] = not_read
    out.role_changed[role] = changed
    return block


def plan_address(ip: str) -> str | None:
    """The plan's deploy-time reference (``${ASCENDFLOW_NODE<k>_IP}``) of an imported node address
    (:func:`~ascendflow.importer.ci.node_ip`), ``None`` for any other text."""
    for k in range(256):
        if node_ip(k) == ip:
            return f"${{ASCENDFLOW_NODE{k}_IP}}"
    return None

"""``compile_plan``, the compiler's one entry: a co-located plan (the named passes of
:func:`~ascendflow.compiler.compile.compile_colocated`), or a PD plan whose roles are each compiled by the same passes
with the role's own rules, then wired: per-node ``--kv-transfer-config``, per-DP-rank workers
(:class:`~ascendflow.compiler.launch.pd_workers.PDLauncher`), the proxy, the consistency checks
(:mod:`ascendflow.compiler.checks.pd`) and one hash.

Launch conventions (vllm-ascend v0.25.1rc1): ``examples/external_online_dp/launch_online_dp.py`` (external DP: rank
``start + i`` on port ``vllm_start_port + i`` with devices ``i·TP .. (i+1)·TP − 1``), the multi-node PD tutorial
(``kv_role`` per role, ``kv_connector_extra_config`` ``prefill``/``decode`` ``dp_size``/``tp_size``, proxy flags).
"""

from __future__ import annotations

import json

from ascendflow.compiler.checks.pd import (check_decode_capacity, check_kv_ports, check_kv_transfer,
                                          check_listen_ports, check_prefill_capacity, check_proxy, check_roles, dp_ranks_per_node,
                                          request_tokens)
from ascendflow.compiler.compile import compile_colocated
from ascendflow.compiler.launch.common import serve_args
from ascendflow.compiler.launch.environment import node_address, pd_socket_env
from ascendflow.compiler.launch.pd_proxy import proxy_command
from ascendflow.compiler.launch.pd_scripts import pd_launch_scripts
from ascendflow.compiler.launch.pd_workers import PDLauncher
from ascendflow.compiler.launch.scripts import launch_scripts
from ascendflow.compiler.placement.idle import idle_warning
from ascendflow.compiler.plan import Plan, RolePlan, plan_hash
from ascendflow.platforms import HostFacts
from ascendflow.schema.architecture import ModelArchitecture
from ascendflow.schema.ascend import AdditionalConfig
from ascendflow.schema.checkpoint import CheckpointInventory
from ascendflow.schema.engine import with_speculative_tokens
from ascendflow.schema.errors import ConfigError
from ascendflow.schema.graph import GraphSpec
from ascendflow.schema.pd import PDSpec, RoleSpec
from ascendflow.schema.spec import RunSpec

ROLES = ("prefill", "decode")
KV_ROLE = {"prefill": "kv_producer", "decode": "kv_consumer"}


def compile_plan(spec: RunSpec, arch: ModelArchitecture, *, model_path: str, host: HostFacts = HostFacts(),
                 checkpoint: CheckpointInventory | None = None, draft: ModelArchitecture | None = None) -> Plan:
    """The plan of ``spec``: co-located (``pd=none``, exactly :func:`compile_colocated`) or PD-disaggregated.

    ``draft``: the EAGLE draft's architecture (its ``config.json``) with ``engine.speculative_config`` method
    ``eagle``/``eagle3``; ``host``: the compiling machine's facts (:class:`~ascendflow.platforms.HostFacts`, detected once by
    :func:`ascendflow.runner.detect.host_facts`); the default is a host whose facts are not read.

    A PD plan's top-level ``memory``/``kv_cache``/``graph``/``engine_args``/``serve_command`` are the decode role's
    (its first worker's argv); ``workers`` hold every engine process of both roles; ``roles`` and ``proxy`` carry the
    rest (see :class:`RolePlan`). ``plan_hash`` covers the roles (every worker's argv after the model path), the
    proxy, the target and the model, not the model path.

    Raises:
        ConfigError: every refusal of :func:`compile_colocated` per role, and the PD consistency and sizing checks.
    """
    if not spec.pd.enabled:
        return compile_colocated(spec, arch, model_path=model_path, host=host, checkpoint=checkpoint,
                                 draft=draft)
    pd, hw = spec.pd, spec.hardware
    specs = {name: _role_spec(spec, getattr(pd, name)) for name in ROLES}
    check_roles(pd, hw.devices_per_node, specs["prefill"].engine.num_speculative_tokens,
                specs["decode"].engine.num_speculative_tokens, specs["prefill"].ascend.additional_config.as_dict())
    instances = {name: _compile_role(specs[name], arch, name, model_path, host, checkpoint, draft)
                 for name in ROLES}
    sizing = _check_sizing(spec, pd, instances)

    layout = {name: {"dp_size": getattr(pd, name).data_parallel_size, "tp_size": getattr(pd, name).tensor_parallel_size}
              for name in ROLES}
    roles: dict[str, RolePlan] = {}
    next_node, next_device = 0, 0
    for name in ROLES:
        role, plan = getattr(pd, name), instances[name]
        roles[name], next_node, next_device = _role_plan(spec, name, role, plan, layout, next_node, next_device)
    kv_configs = [c for r in roles.values() for c in r.kv_transfer]
    check_kv_transfer(kv_configs, layout)
    node_of: dict[str, int] = {}  # a host's first node: nodes sharing a host (a rehearsal) share its ports
    for k in range(1 if pd.single_node else next_node):
        node_of.setdefault(node_address(spec, k), k)
    check_kv_ports([(node_of[h], a, b, e) for r in roles.values() for h, a, b, e in r.kv_port_ranges],
                   hw.devices_per_node)
    proxy = proxy_command(pd.proxy, roles["prefill"].endpoints, roles["decode"].endpoints,
                          default_host=node_address(spec, 0))
    check_proxy(proxy.command, {n: r.endpoints for n, r in roles.items()})
    check_listen_ports(_listeners(pd, roles, node_of, proxy.host, proxy.port))

    nodes = 1 if pd.single_node else next_node
    used = [0] * nodes
    for r in roles.values():
        for w in r.workers:
            used[w.node_rank] += len(w.devices)
    warnings = [f"{n}: {w}" for n, r in roles.items() for w in r.warnings] + [f"decode: {w}" for w in sizing]
    idle = idle_warning(used, hw.devices_per_node, pd.decode.tensor_parallel_size, 1, pd.decode.data_parallel_size)
    in_use = ", ".join(f"{u} devices on node {k}" for k, u in enumerate(used))
    warnings += [f"PD deployment: {idle.split(' with ')[0]} (the roles use {in_use})"] if idle else []
    decode = instances["decode"]
    target = decode.target.model_copy(update={"nodes": nodes})
    workers = [w for r in roles.values() for w in r.workers]
    semantic = {"target": target.model_dump(exclude={"k8s_device_resource"}), "model": decode.model,
                # worker argvs name the model path, which is not hashed (as in a co-located plan)
                "roles": {n: r.model_dump(exclude={"workers": {"__all__": {"command"}}}) for n, r in roles.items()},
                "engine_args": {n: [w.command[w.command.index("--served-model-name"):] for w in r.workers]
                                for n, r in roles.items()},
                "proxy": proxy.model_dump()}
    return decode.model_copy(update={
        "plan_hash": plan_hash(semantic), "target": target, "workers": workers,
        "serve_command": roles["decode"].workers[0].command, "warnings": warnings,
        "launcher": PDLauncher.name_for(pd.connector),
        "placement": [], "roles": roles, "proxy": proxy})


def _listeners(pd: PDSpec, roles: dict[str, RolePlan], node_of: dict[str, int], proxy_host: str,
               proxy_port: int) -> list[tuple[int, int, str, int, str]]:
    """Every port the plan listens on, ``(node, port, key, key's value, what)``, in the order a clash is blamed on the
    later one: handshake ports, prefill then decode API ports, the proxy's port (when its host is a plan node)."""
    out = []
    for name, role in roles.items():
        spec = getattr(pd, name)
        out += [(node_of[h], p, f"pd.{name}.kv_port", spec.kv_port, f"{e}'s handshake port {p}")
                for h, a, b, e in role.kv_port_ranges for p in range(a, b + 1)]
    for name, role in roles.items():
        for w in role.workers:
            if "--headless" not in w.command:
                port = int(w.command[w.command.index("--port") + 1])
                engine = json.loads(w.command[w.command.index("--kv-transfer-config") + 1])["engine_id"]
                out.append((w.node_rank, port, f"pd.{name}.api_port", getattr(pd, name).api_port,
                            f"{engine}'s API port {port} (DP rank {w.dp_rank})"))
    if proxy_host in node_of:
        out.append((node_of[proxy_host], proxy_port, "pd.proxy.port", proxy_port, f"the proxy's port {proxy_port}"))
    return out


def _compile_role(spec: RunSpec, arch: ModelArchitecture, name: str, model_path: str, host: HostFacts,
                  checkpoint: CheckpointInventory | None, draft: ModelArchitecture | None) -> Plan:
    """:func:`compile_colocated` of one instance of role ``name``; a refusal of a key the role sets names the role's key
    (``pd.decode.max_num_seqs``, not ``engine.max_num_seqs``).

    Raises:
        ConfigError: the instance's refusal, its key mapped to the role's where the role holds it.
    """
    try:
        return compile_colocated(spec, arch, model_path=model_path, host=host, checkpoint=checkpoint, role=name,
                                 draft=draft)
    except ConfigError as error:
        group, _, field = error.key.partition(".")
        if group in ("engine", "parallel", "graph") and field in RoleSpec.model_fields:
            raise ConfigError(f"pd.{name}.{field}", error.value, error.rule) from None
        raise ConfigError(error.key, error.value, f"({name} role) {error.rule}") from None


def _role_spec(spec: RunSpec, role: RoleSpec) -> RunSpec:
    """One instance of ``role`` as a co-located spec: the role's layout, engine knobs, graph, additional_config and
    environment over the run's (``None`` inherits)."""
    eng_update = {k: getattr(role, k) for k in ("max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization",
                                                 "kv_cache_memory_bytes", "async_scheduling")
                  if getattr(role, k) is not None}
    engine = spec.engine if role.num_speculative_tokens is None else with_speculative_tokens(
        spec.engine, role.num_speculative_tokens)
    graph = spec.graph
    if role.enforce_eager:
        graph = GraphSpec(name="eager", enforce_eager=True)
    elif role.cudagraph_mode:
        graph = GraphSpec(name=role.cudagraph_mode.lower(), cudagraph_mode=role.cudagraph_mode,
                          cudagraph_capture_sizes=role.cudagraph_capture_sizes)
    base = spec.ascend.additional_config
    extra = AdditionalConfig(**{**base.model_dump(exclude={"other"}, exclude_none=True),
                                **role.additional_config.model_dump(exclude={"other"}, exclude_none=True),
                                "other": {**base.other, **role.additional_config.other}})
    ascend = spec.ascend.model_copy(update={
        "additional_config": extra, "env": {**spec.ascend.env, **role.env},
        **({"hccl_buffsize_mb": role.hccl_buffsize_mb} if role.hccl_buffsize_mb else {})})
    parallel = spec.parallel.model_copy(update={
        "tensor_parallel_size": role.tensor_parallel_size, "pipeline_parallel_size": 1,
        "data_parallel_size": role.data_parallel_size, "enable_expert_parallel": role.enable_expert_parallel,
        "nodes": role.nodes, "node_addresses": ()})
    return spec.model_copy(update={"engine": engine.model_copy(update=eng_update), "graph": graph,
                                   "ascend": ascend, "parallel": parallel, "pd": PDSpec()})


def _check_sizing(spec: RunSpec, pd: PDSpec, instances: dict[str, Plan]) -> list[str]:
    """Decode KV holds ``max_num_seqs × (ISL + OSL + k)`` per DP rank (else a warning: vLLM runs fewer at once,
    :func:`~ascendflow.compiler.checks.pd.check_decode_capacity`); prefill KV holds one step's batched tokens.
    ISL/OSL are the workload's ``random_input_len``/``random_output_len`` (``random``, ``prefix_repetition``: prefix
    + suffix); the chat dataset has no fixed lengths, so decode is then sized for ``max_model_len`` requests."""
    wl = spec.workload
    decode = instances["decode"]
    if wl.dataset == "random":
        isl, osl = wl.random_input_len, wl.random_output_len
    elif wl.dataset == "prefix_repetition":
        isl, osl = wl.random_input_len + wl.prefix_suffix_len, wl.random_output_len
    else:
        isl, osl = decode.engine_args["max_model_len"], 0
    k = decode.engine_args.get("speculative_config", {}).get("num_speculative_tokens", 0)
    hint = (f"more decode DP ranks or instances (now {pd.decode.instances} × DP{pd.decode.data_parallel_size})")
    kv = decode.kv_cache
    notes = []
    if kv.attention != "hybrid":
        notes = check_decode_capacity(kv.num_blocks, kv.block_size, decode.engine_args["max_num_seqs"],
                                      request_tokens(isl, osl, k), hint)
    prefill = instances["prefill"].kv_cache
    if prefill.attention != "hybrid":
        check_prefill_capacity(prefill.num_blocks, prefill.block_size,
                               instances["prefill"].engine_args["max_num_batched_tokens"])
    return notes


def _role_plan(spec: RunSpec, name: str, role: RoleSpec, plan: Plan, layout: dict[str, dict[str, int]],
               first_node: int, first_device: int) -> tuple[RolePlan, int, int]:
    """Workers, ``--kv-transfer-config`` and endpoints of every instance of ``role``; returns the next free node and
    (single-node PD) the next free device."""
    pd = spec.pd
    per_node = dp_ranks_per_node(role, name)
    tp = role.tensor_parallel_size
    workers, configs, ranges, endpoints, nodes = [], [], [], [], []
    launcher = PDLauncher()
    written = serve_args(plan.engine_args, plan.engine_defaults, plan.extra_args)
    for instance in range(role.instances):
        engine_id = f"{name}{instance}"
        kv_port = role.kv_port + instance * role.kv_port_stride
        # instances sharing node 0 (single-node PD) continue the API port numbering: launch_online_dp.py gives DP
        # rank i of a node port vllm_start_port + i, so instance k starts after k × (API servers per node)
        api_port = role.api_port + (instance * (per_node if role.dp_launch == "external" else 1)
                                    if pd.single_node else 0)
        config = {"kv_connector": pd.connector, "kv_role": KV_ROLE[name], "kv_port": kv_port, "engine_id": engine_id,
                  "kv_connector_extra_config": layout}
        configs.append(config)
        head = 0 if pd.single_node else first_node + instance * role.nodes
        for local_node in range(role.nodes):
            node = head if pd.single_node else head + local_node
            nodes.append(node)
            host = node_address(spec, node)
            ranges.append([host, kv_port + local_node * per_node * tp, kv_port + (local_node + 1) * per_node * tp - 1,
                           engine_id])
            offset = first_device if pd.single_node else 0
            dp_start = local_node * per_node
            common = dict(host=host, head=node_address(spec, head), dp_start=dp_start, offset=offset, config=config)
            if role.dp_launch == "external":
                for j in range(per_node):
                    devices = list(range(offset + j * tp, offset + (j + 1) * tp))
                    port = api_port + j
                    workers.append(launcher.worker(spec, written, node, dp_start + j, devices, port, common,
                                                   external=True))
                    endpoints.append([host, port])
            else:
                devices = list(range(offset, offset + per_node * tp))
                workers.append(launcher.worker(spec, written, node, dp_start, devices, api_port, common,
                                               external=False, headless=local_node > 0))
                if local_node == 0:
                    endpoints.append([host, api_port])
            if pd.single_node:
                first_device += per_node * tp
    next_node = first_node + (0 if pd.single_node else role.instances * role.nodes)
    if pd.single_node:
        next_node = 1
    env = {**plan.env, **pd_socket_env(spec)}
    return RolePlan(kv_role=KV_ROLE[name], instances=role.instances, nodes=sorted(set(nodes)),
                    tensor_parallel_size=tp, data_parallel_size=role.data_parallel_size, dp_launch=role.dp_launch,
                    engine_args={k: v for k, v in plan.engine_args.items() if k != "model"}, env=env,
                    memory=plan.memory, kv_cache=plan.kv_cache, graph=plan.graph, workers=workers,
                    kv_transfer=configs, kv_port_ranges=ranges, endpoints=endpoints,
                    warnings=plan.warnings), next_node, first_device if pd.single_node else 0


def deployment_scripts(plan: Plan) -> dict[str, str]:
    """The launch files of ``plan``: :func:`~ascendflow.compiler.launch.pd_scripts.pd_launch_scripts` for a PD plan,
    else :func:`~ascendflow.compiler.launch.scripts.launch_scripts` (co-located, unchanged)."""
    return pd_launch_scripts(plan) if plan.roles else launch_scripts(plan)


def compile_role(spec: RunSpec, name: str, arch: ModelArchitecture, *, model_path: str, host: HostFacts = HostFacts(),
                 checkpoint: CheckpointInventory | None = None, draft: ModelArchitecture | None = None) -> Plan:
    """One instance of PD role ``name`` (``prefill`` or ``decode``) of ``spec`` compiled alone, exactly as
    :func:`compile_plan` compiles it before wiring the roles: the deployment search (:mod:`ascendflow.search`) prices
    and checks each role layout once and reuses it across P:D counts.

    Raises:
        ConfigError: the instance's refusal, named by the role's key where the role sets it (``pd.decode.max_num_seqs``).
    """
    return _compile_role(_role_spec(spec, getattr(spec.pd, name)), arch, name, model_path, host, checkpoint, draft)

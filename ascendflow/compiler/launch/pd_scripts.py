"""PD launch scripts (pure text): ``node<k>.sh`` per node running its role's ``vllm serve`` processes (one per DP rank
with external DP, each with its own ``ASCEND_RT_VISIBLE_DEVICES`` and port, as vllm-ascend's
``examples/external_online_dp/launch_online_dp.py`` starts them), ``proxy.sh`` and a PD ``preflight.sh``. As in the
co-located scripts, a node script's own arguments (``"$@"``) are appended to every ``vllm serve`` it starts.
"""

from __future__ import annotations

from ascendflow.compiler.launch.common import ref_guard, required_refs, shell_value
from ascendflow.compiler.launch.lws import LWSGroup, lws_manifest
from ascendflow.compiler.launch.scripts import preflight_script
from ascendflow.compiler.plan import Plan
from ascendflow.platforms import platform_for


def pd_launch_scripts(plan: Plan) -> dict[str, str]:
    """``node<k>.sh`` for every node of a PD plan, ``proxy.sh`` and ``preflight.sh``."""
    scripts: dict[str, str] = {}
    nodes = sorted({w.node_rank for w in plan.workers})
    for node in nodes:
        lines, texts = [], []
        for name, role in plan.roles.items():
            workers = [w for w in role.workers if w.node_rank == node]
            if not workers:
                continue
            lines += ["", f"# {name} ({role.kv_role}): TP{role.tensor_parallel_size} × DP{role.data_parallel_size}, "
                          f"{role.dp_launch} DP"]
            for w in workers:
                env = {**role.env, **w.env}
                texts += [*env.values(), *w.command]
                exports = "; ".join(f"export {k}={shell_value(v)}" for k, v in sorted(env.items()))
                lines.append(f"( {exports}; exec {' '.join(shell_value(a) for a in w.command)} \"$@\" ) &")
        scripts[f"node{node}.sh"] = "\n".join([
            "#!/usr/bin/env bash",
            f"# ascendflow plan {plan.plan_hash}: PD node {node} of {plan.target.nodes} ({plan.target.hardware}, "
            f"{plan.target.device_name}; {plan.target.engine['row']}). Generated: recompile instead of editing.",
            "set -euo pipefail", "", *ref_guard(required_refs(texts)), *lines[1:],
            "", "wait -n  # the node stops when any engine exits", "kill 0", ""])
    proxy = plan.proxy
    scripts["proxy.sh"] = "\n".join([
        "#!/usr/bin/env bash",
        f"# ascendflow plan {plan.plan_hash}: PD proxy ({proxy.script}) on {proxy.host}:{proxy.port}; start it after "
        "every node<k>.sh serves.",
        "set -euo pipefail", "", *ref_guard(required_refs(proxy.command)),
        "exec " + " ".join(shell_value(a) for a in proxy.command) + ' "$@"', ""])
    scripts["preflight.sh"] = pd_preflight_script(plan)
    if platform_for(plan.target.kind).k8s_manifests and plan.target.nodes > 1 and plan.target.k8s_device_resource:
        scripts["lws.yaml"] = pd_lws_manifests(plan)
    return scripts


def pd_lws_manifests(plan: Plan) -> str:
    """One LeaderWorkerSet per PD instance (``prefill0``, ``prefill1``, ``decode0`` ...; an instance's scripts
    differ by ``engine_id`` and ``kv_port``, so instances are groups of their own, not replicas), as one multi-document
    YAML text. Each group's leader runs the instance's first node script; the proxy (``proxy.sh``) is not in them.
    """
    docs = []
    for name, role in plan.roles.items():
        per_instance = len(role.nodes) // role.instances
        for i in range(role.instances):
            nodes = role.nodes[i * per_instance:(i + 1) * per_instance]
            workers = [w for w in role.workers if w.node_rank in nodes]
            head = [w for w in workers if w.node_rank == nodes[0]]
            refs = required_refs([t for w in workers for t in [*role.env.values(), *w.env.values(), *w.command]])
            port = int(head[0].command[head[0].command.index("--port") + 1])
            devices = max(sum(len(w.devices) for w in workers if w.node_rank == n) for n in nodes)
            docs.append(lws_manifest(plan, refs, LWSGroup(head=nodes[0], size=len(nodes), devices=devices, port=port,
                                                          instance=f"{name}{i}", pd_role=name)))
    return "---\n".join(docs)


def pd_preflight_script(plan: Plan) -> str:
    """:func:`preflight_script` plus the PD checks: Mooncake importable, every handshake and API port of the node
    free, and the RoCE links of every device (``hccn_tool``) between the roles' nodes."""
    base = preflight_script(plan).rstrip("\n").split("\n")
    assert base[-1] == 'echo "preflight: OK"'
    ports = sorted({p for r in plan.roles.values() for _, first, last, _ in r.kv_port_ranges
                    for p in (first, last)} | {p for r in plan.roles.values() for _, p in r.endpoints})
    lines = base[:-1]
    while lines and not lines[-1]:
        lines.pop()
    if plan.target.nodes == 1:
        lines += ["", "# 4. RoCE links of every device (KV moves between the roles' devices).",
                  f"for i in $(seq 0 {plan.target.devices_per_node - 1}); do",
                  '  hccn_tool -i "$i" -link -g | grep -qi "up" || fail "device $i: link down (hccn_tool -i $i -link -g)"',
                  "done"]
    lines += [
        "", "# 5. PD: Mooncake importable (vllm-ascend mooncake_connector.py: from mooncake.engine import TransferEngine).",
        'python3 -c "from mooncake.engine import TransferEngine" 2>/dev/null || fail "mooncake not importable: build Mooncake with '
        '-DUSE_ASCEND_DIRECT=ON and add its site-packages dir to LD_LIBRARY_PATH (PD tutorial, Install Mooncake)"',
        "", f"# 6. PD: handshake and API ports free (first/last of each range and every API port): {ports}",
        f"for p in {' '.join(map(str, ports))}; do",
        '  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then fail "port $p in use (kv_port / --port of the plan)"; fi',
        "done", "", 'echo "preflight: OK"']
    return "\n".join(lines) + "\n"

"""Ray launcher (pure): the ``ray start`` argv of the head and the workers, the head's start lines in ``node0.sh`` and
``ray_preflight.sh``, which waits until the cluster shows every NPU of the plan before ``vllm serve`` starts.

Sources: vllm-ascend v0.23.0 ``docs/source/tutorials/features/ray.md`` (head ``ray start --head``, workers ``ray start
--address=<head>:6379 --node-ip-address=<local>``, per-node ``HCCL_IF_IP``/``GLOO_SOCKET_IFNAME``/``TP_SOCKET_IFNAME``,
``ASCEND_RT_VISIBLE_DEVICES`` and ``RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=1`` exported *before* ``ray
start``: Ray workers inherit the environment of the node's raylet, so a change needs a Ray restart); vllm-ascend
``vllm_ascend/platform.py`` (v0.11.0 … v0.23.0) ``ray_device_key = "NPU"`` (the Ray resource the NPUs are counted in;
``GPU`` on CUDA). :class:`RayLauncher` is the ``ray`` launcher.
"""

from __future__ import annotations

from typing import Any, Callable

from ascendflow.compiler.launch.base import Launcher
from ascendflow.compiler.launch.common import engine_args_to_argv, serve_prefix
from ascendflow.compiler.launch.environment import node_address
from ascendflow.compiler.plan import RAY, NodePlacement, Plan
from ascendflow.schema.spec import RunSpec
from ascendflow.platforms import platform_for

#: Seconds ``ray_preflight.sh`` waits for the workers to join (override with ``ASCENDFLOW_RAY_WAIT_S``).
RAY_WAIT_S = 600


def ray_worker_argv(*, head_addr: str, ray_port: int, node_addr: str) -> list[str]:
    """``ray start`` argv that joins node ``node_addr`` to the Ray head at ``head_addr:ray_port`` and blocks."""
    return ["ray", "start", f"--address={head_addr}:{ray_port}", f"--node-ip-address={node_addr}", "--block"]


def ray_head_argv(*, head_addr: str, ray_port: int) -> list[str]:
    """``ray start`` argv of the Ray head on node 0 (vllm-ascend v0.23.0 ``ray.md``: ``ray start --head``; Ray
    finds the NPUs itself and names the resource ``NPU``, vllm-ascend ``platform.py`` ``ray_device_key``)."""
    return ["ray", "start", "--head", f"--port={ray_port}", f"--node-ip-address={head_addr}"]


def ray_devices(plan: Plan) -> int:
    """Devices the Ray cluster must show: every node's devices (TP × PP of the one DP rank)."""
    return sum(len(w.devices) for w in plan.workers)


def ray_head(plan: Plan) -> tuple[str, int]:
    """Node 0's address (a literal or a ``${ASCENDFLOW_NODE0_IP}`` reference) and the Ray port, as the workers'
    ``ray start --address=<head>:<port>`` names them."""
    address = next(a for a in plan.workers[1].command if a.startswith("--address="))
    head, port = address.split("=", 1)[1].rsplit(":", 1)
    return head, int(port)


def ray_head_lines(plan: Plan, quote) -> list[str]:
    """Lines of ``node0.sh`` before ``exec vllm serve``: start the head, then wait for the cluster.

    Args:
        plan: a plan with ``launcher == "ray"``.
        quote: the launch pass's shell quoting (keeps references expandable).
    """
    head_addr, port = ray_head(plan)
    return [
        "# Ray head (node 0); then start launch/node<k>.sh on every other node: they join and block.",
        " ".join(quote(a) for a in ray_head_argv(head_addr=head_addr, ray_port=port)),
        'bash "$(dirname "$0")/ray_preflight.sh"',
        "",
    ]


def ray_preflight_script(plan: Plan) -> str:
    """``ray_preflight.sh``: polls ``ray.cluster_resources()`` until it counts the plan's devices (resource
    ``Platform.ray_device_key``) and ``len(plan.workers)`` alive nodes; exits non-zero with ``ray status`` after
    ``ASCENDFLOW_RAY_WAIT_S`` seconds (default :data:`RAY_WAIT_S`)."""
    resource, need, nodes = platform_for(plan.target.kind).ray_device_key, ray_devices(plan), len(plan.workers)
    lines = [
        "#!/usr/bin/env bash",
        f"# ascendflow Ray preflight for plan {plan.plan_hash}: wait until the cluster shows {need} {resource} on "
        f"{nodes} nodes.",
        "# node0.sh runs it after `ray start --head`; run it by hand on node 0 to check a cluster.",
        "set -euo pipefail",
        f'wait_s="${{ASCENDFLOW_RAY_WAIT_S:-{RAY_WAIT_S}}}"',
        "python3 - \"$wait_s\" <<'PY' || { ray status >&2 || true; exit 1; }",
        "import sys, time",
        "import ray",
        f"need, resource, nodes = {need}, {resource!r}, {nodes}",
        "deadline = time.monotonic() + float(sys.argv[1])",
        "ray.init(address='auto', logging_level='ERROR')",
        "while True:",
        "    have = int(ray.cluster_resources().get(resource, 0))",
        "    alive = sum(1 for n in ray.nodes() if n.get('Alive'))",
        "    if have >= need and alive >= nodes:",
        "        print(f'ray preflight: {alive} nodes, {have} {resource}: OK')",
        "        break",
        "    if time.monotonic() > deadline:",
        "        sys.exit(f'ray preflight: {alive}/{nodes} nodes, {have}/{need} {resource} after {sys.argv[1]} s: start '",
        "                 'launch/node<k>.sh on every node; check HCCL_IF_IP/GLOO_SOCKET_IFNAME and '",
        "                 'RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES were exported before ray start')",
        "    time.sleep(5)",
        "PY",
    ]
    return "\n".join(lines) + "\n"


class RayLauncher(Launcher):
    """``ray``: one DP rank spanning nodes on a Ray cluster (executor ``ray``). Node 0 starts the head
    (:func:`ray_head_lines`, then ``ray_preflight.sh``) and runs the one ``vllm serve``; nodes k > 0 run
    :func:`ray_worker_argv`."""

    name = RAY
    executor_backend = "ray"
    spans_nodes = True
    needs_ray = True

    def env(self, kind: str) -> dict[str, str]:
        """On NPU, ``RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=1``: Ray must not rewrite
        ``ASCEND_RT_VISIBLE_DEVICES`` per worker, vLLM assigns the devices itself (vllm-ascend v0.23.0
        ``docs/source/tutorials/features/ray.md``; ``platform.py`` ``ray_noset_device_env_vars``)."""
        variable = platform_for(kind).ray_noset_devices_env
        return {variable: "1"} if variable else {}

    def argv(self, spec: RunSpec, engine_args: dict[str, Any], node: NodePlacement) -> list[str]:
        """Node 0: ``vllm serve`` (one node's entry point, no DP flags); node k > 0: ``ray start`` joining the head."""
        if node.node_rank > 0:
            return ray_worker_argv(head_addr=node_address(spec, 0), ray_port=spec.parallel.ray_port,
                                   node_addr=node_address(spec, node.node_rank))
        return [*serve_prefix(spec.hardware.kind, False), str(engine_args["model"]), *engine_args_to_argv(engine_args),
                "--host", "0.0.0.0", "--port", str(spec.run.launch_port)]

    def head_lines(self, plan: Plan, node: int, quote: Callable[[str], str]) -> list[str]:
        """Node 0 starts the Ray head and waits for the cluster (:func:`ray_head_lines`)."""
        return ray_head_lines(plan, quote) if node == 0 else []

    def scripts(self, plan: Plan) -> dict[str, str]:
        """``ray_preflight.sh`` (:func:`ray_preflight_script`)."""
        return {"ray_preflight.sh": ray_preflight_script(plan)}

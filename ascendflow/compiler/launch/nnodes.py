"""Per-node argv of vLLM's ``--nnodes`` multiprocessing launcher, for a DP rank that spans nodes (pure). The other
launcher for that shape, Ray, is :mod:`.ray_cluster`. :class:`NnodesLauncher` is the ``mp-nnodes`` launcher.

- ``mp-nnodes`` (vLLM >= 0.12; vllm-ascend v0.13.0 ``long_sequence_context_parallel_multi_node.md`` runs TP16 over two
  nodes this way): every node runs ``vllm serve MODEL ... --nnodes N --node-rank k --master-addr <node 0>
  --master-port P``; nodes k > 0 add ``--headless`` (``vllm/entrypoints/cli/serve.py`` ``run_headless`` starts only
  the multiproc workers when ``node_rank_within_dp > 0``).
- ``ray`` (vllm-ascend v0.23.0 ``docs/source/tutorials/features/ray.md``): node 0 starts the Ray head and runs
  ``vllm serve ... --distributed-executor-backend ray``; node k > 0 joins with ``ray start --address=<head>:<port>
  --node-ip-address=<node k> --block`` (``--block`` keeps the script in the foreground, like ``exec vllm``).
"""

from __future__ import annotations

from typing import Any

from ascendflow.compiler.launch.base import Launcher
from ascendflow.compiler.launch.common import engine_args_to_argv, serve_prefix
from ascendflow.compiler.launch.environment import node_address
from ascendflow.compiler.plan import MP_NNODES, NodePlacement
from ascendflow.schema.spec import RunSpec


def nnodes_argv(kind: str, engine_args: dict[str, Any], *, host: str, port: int, node: int, nodes: int,
                master_addr: str, master_port: int) -> list[str]:
    """``vllm serve`` argv of node ``node`` under vLLM's multi-node multiprocessing launcher.

    Args:
        kind: hardware kind (entry point, :func:`~ascendflow.compiler.launch.common.serve_prefix`).
        engine_args: the plan's engine arguments (``distributed_executor_backend: mp`` among them).
        host, port: API server bind address and TCP port (used by node 0; kept on every node for one argv shape).
        node, nodes: this node's rank and the node count (``--node-rank``, ``--nnodes``).
        master_addr, master_port: node 0's address and the torch.distributed port (``--master-addr/--master-port``).
    """
    argv = [*serve_prefix(kind, True), str(engine_args["model"]), *engine_args_to_argv(engine_args),
            "--nnodes", str(nodes), "--node-rank", str(node), "--master-addr", master_addr,
            "--master-port", str(master_port)]
    if node > 0:
        argv.append("--headless")
    return argv + ["--host", host, "--port", str(port)]


class NnodesLauncher(Launcher):
    """``mp-nnodes``: one DP rank spanning nodes under vLLM's multi-node multiprocessing (``--nnodes``), executor
    ``mp``; every node runs :func:`nnodes_argv`."""

    name = MP_NNODES
    executor_backend = "mp"
    spans_nodes = True

    def argv(self, spec: RunSpec, engine_args: dict[str, Any], node: NodePlacement) -> list[str]:
        """:func:`nnodes_argv` of the node, node 0 as master (``parallel.master_port``)."""
        par = spec.parallel
        return nnodes_argv(spec.hardware.kind, engine_args, host="0.0.0.0", port=spec.run.launch_port,
                           node=node.node_rank, nodes=par.nodes, master_addr=node_address(spec, 0),
                           master_port=par.master_port)

"""Multi-node data parallel launcher (pure): the per-node ``vllm serve`` argv when every node runs whole DP ranks
(:class:`MultinodeDPLauncher`, ``mp-dp``), and its one-node case (:class:`SingleLauncher`, ``single``).

``shared/reference/vllm_ascend.md`` §7: node 0 runs ``vllm serve MODEL --data-parallel-size D
--data-parallel-size-local d --data-parallel-address <node0> --data-parallel-rpc-port P ...``; node k > 0 the same plus
``--headless --data-parallel-start-rank k·d``.
"""

from __future__ import annotations

from typing import Any

from ascendflow.compiler.launch.base import Launcher
from ascendflow.compiler.launch.common import data_parallel_flags, engine_args_to_argv, serve_prefix
from ascendflow.compiler.launch.environment import node_address
from ascendflow.compiler.plan import MP_DP, SINGLE, NodePlacement
from ascendflow.schema.spec import RunSpec


def node_argv(kind: str, engine_args: dict[str, Any], *, host: str, port: int, node: int, nodes: int,
              dp_local: int, dp_start: int, dp_address: str, dp_rpc_port: int) -> list[str]:
    """The server argv of node ``node``: entry point, model, engine flags, multi-node DP flags, host and port."""
    argv = [*serve_prefix(kind, nodes > 1), str(engine_args["model"]), *engine_args_to_argv(engine_args)]
    if nodes > 1:
        argv += data_parallel_flags(address=dp_address, rpc_port=dp_rpc_port, local=dp_local,
                                    start=dp_start if node > 0 else None, headless=node > 0,
                                    start_after_headless=True)
    return argv + ["--host", host, "--port", str(port)]


class MultinodeDPLauncher(Launcher):
    """``mp-dp``: every DP rank fits one node; one ``vllm serve`` per node with its local DP ranks, nodes > 0
    headless (vLLM's default ``mp`` executor inside each node)."""

    name = MP_DP

    def argv(self, spec: RunSpec, engine_args: dict[str, Any], node: NodePlacement) -> list[str]:
        """:func:`node_argv` of the node: its first DP rank and DP-rank count, node 0's address as DP address."""
        par = spec.parallel
        return node_argv(spec.hardware.kind, engine_args, host="0.0.0.0", port=spec.run.launch_port,
                         node=node.node_rank, nodes=par.nodes, dp_local=len(node.dp_ranks), dp_start=node.dp_ranks[0],
                         dp_address=node_address(spec, 0), dp_rpc_port=par.data_parallel_rpc_port)


class SingleLauncher(MultinodeDPLauncher):
    """``single``: one node, one ``vllm serve`` (no DP flags); nothing to rehearse."""

    name = SINGLE
    multinode = False
    rehearsable = False

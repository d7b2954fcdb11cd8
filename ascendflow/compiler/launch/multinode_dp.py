"""Multi-node data parallel launcher (pure): the per-node ``vllm serve`` argv when every node runs whole DP ranks.

``shared/reference/vllm_ascend.md`` §7: node 0 runs ``vllm serve MODEL --data-parallel-size D
--data-parallel-size-local d --data-parallel-address <node0> --data-parallel-rpc-port P ...``; node k > 0 the same plus
``--headless --data-parallel-start-rank k·d``.
"""

from __future__ import annotations

from typing import Any

from ascendflow.compiler.launch.common import engine_args_to_argv, serve_prefix


def node_argv(kind: str, engine_args: dict[str, Any], *, host: str, port: int, node: int, nodes: int,
              dp_local: int, dp_start: int, dp_address: str, dp_rpc_port: int) -> list[str]:
    """The server argv of node ``node``: entry point, model, engine flags, multi-node DP flags, host and port."""
    argv = [*serve_prefix(kind, nodes > 1), str(engine_args["model"]), *engine_args_to_argv(engine_args)]
    if nodes > 1:
        argv += ["--data-parallel-size-local", str(dp_local), "--data-parallel-address", dp_address,
                 "--data-parallel-rpc-port", str(dp_rpc_port)]
        if node > 0:
            argv += ["--headless", "--data-parallel-start-rank", str(dp_start)]
    return argv + ["--host", host, "--port", str(port)]

"""Placement pass: which worker ranks run on which node, and which launcher starts them (pure).

Two shapes (``shared/reference/vllm_ascend.md`` §7; vLLM ``vllm/engine/arg_utils.py``):

- every DP rank fits one node (TP × PP <= devices per node): DP ranks spread evenly over the nodes, one
  ``vllm serve`` per node with ``--data-parallel-size-local`` (launcher ``mp-dp``; ``single`` on one node);
- one DP rank spans nodes (TP × PP > devices per node): its ranks fill whole nodes in vLLM's rank order (TP16 on two
  8-device nodes = 8 + 8; TP8 × PP2 = one stage per node), launched by vLLM's multi-node multiprocessing
  (``mp-nnodes``: ``--nnodes/--node-rank/--master-addr/--master-port``, ``--headless`` on nodes > 0) or by Ray
  (``ray``: ``--distributed-executor-backend ray``, ``vllm serve`` on node 0 only).
"""

from __future__ import annotations

from ascendflow.compiler.plan import MP_DP, MP_NNODES, RAY, SINGLE, NodePlacement
from ascendflow.compiler.rules.engine_rules import EngineRules
from ascendflow.compiler.placement.topology import devices_per_dp_rank, place_nodes
from ascendflow.schema.errors import ConfigError
from ascendflow.schema.hardware import HardwareSpec
from ascendflow.schema.parallel import ParallelSpec

#: Public report behind ``EngineRules.ray_cross_node_pp = False``.
RAY_PP_SOURCE = ("vllm-ascend issue #10910: Ray across two nodes on vLLM 0.19.1, TP works, PP and DP fail")


def place(parallel: ParallelSpec, hardware: HardwareSpec, rules: EngineRules,
          release: str) -> tuple[str, list[NodePlacement]]:
    """The launcher and every node's ranks.

    Args:
        parallel: TP/PP/DP, node count and ``distributed_executor_backend``.
        hardware: the node type (``devices_per_node``).
        rules: the target release's rules (``multinode_mp_launcher``, ``ray_cross_node_pp``).
        release: the software row's name, for messages.

    Returns:
        ``(launcher, placement)``: ``single``, ``mp-dp``, ``mp-nnodes`` or ``ray``, and one
        :class:`~ascendflow.compiler.plan.NodePlacement` per node.

    Raises:
        ConfigError: a DP rank that spans nodes without filling whole nodes, or with DP > 1; more nodes than it
            fills; ``mp`` on a release without ``--nnodes``; Ray with PP across nodes where the release fails it;
            Ray for DP ranks that fit a node; or the DP rules of
            :func:`~ascendflow.compiler.placement.topology.place_nodes`.
    """
    per_rank, per_node = devices_per_dp_rank(parallel), hardware.devices_per_node
    pp, backend = parallel.pipeline_parallel_size, parallel.distributed_executor_backend
    if per_rank <= per_node:
        if backend == "ray":
            raise ConfigError("parallel.distributed_executor_backend", backend,
                              f"Ray is planned only for a DP rank that spans nodes (TP×PP > {per_node} devices per "
                              f"node); TP×PP = {per_rank} fits one node, which the multi-node DP launch serves "
                              f"(reference §7); use parallel.distributed_executor_backend=mp")
        nodes = []
        for node, first, local, devices in place_nodes(parallel, hardware):
            dp_ranks = list(range(first, first + local))
            nodes.append(NodePlacement(node_rank=node, devices=devices,
                                       ranks=[r for d in dp_ranks for r in range(d * per_rank, (d + 1) * per_rank)],
                                       dp_ranks=dp_ranks, pp_stages=list(range(pp))))
        return (SINGLE if parallel.nodes == 1 else MP_DP), nodes
    return _spanning_launcher(parallel, hardware, rules, release), _spanning_placement(parallel, hardware)


def _spanning_launcher(parallel: ParallelSpec, hardware: HardwareSpec, rules: EngineRules, release: str) -> str:
    """Check a DP rank spanning nodes against vLLM's rules and the release's; return the launcher.

    vLLM 0.13.0 ``arg_utils.py`` ``create_engine_config``: ``world_size % nnodes == 0``; ``vllm/config/parallel.py``:
    ``nnodes > 1`` only with the ``mp``/``uni``/``external_launcher`` executor (Ray uses its own cluster instead).
    """
    per_rank, per_node = devices_per_dp_rank(parallel), hardware.devices_per_node
    tp, pp = parallel.tensor_parallel_size, parallel.pipeline_parallel_size
    backend = parallel.distributed_executor_backend
    if per_rank % per_node:
        raise ConfigError("parallel.tensor_parallel_size", tp,
                          f"TP×PP = {tp}×{pp} = {per_rank} devices spans nodes of {per_node} (hardware="
                          f"{hardware.name}) without filling whole nodes; a DP rank across nodes fills each node "
                          f"(vLLM arg_utils.py: world_size % nnodes == 0); use TP×PP a multiple of {per_node}")
    if parallel.data_parallel_size > 1:
        raise ConfigError("parallel.data_parallel_size", parallel.data_parallel_size,
                          f"a DP rank spanning nodes (TP×PP = {per_rank} > {per_node}) is planned with "
                          f"data_parallel_size=1 only (Ray DP across nodes fails: {RAY_PP_SOURCE}); use "
                          f"data_parallel_size=1, or TP×PP <= {per_node} for multi-node DP")
    need = per_rank // per_node
    if parallel.nodes != need:
        raise ConfigError("parallel.nodes", parallel.nodes,
                          f"TP×PP = {per_rank} devices fill exactly {need} nodes of {per_node}; vLLM --nnodes needs "
                          f"world_size % nnodes == 0 and Ray places every worker of the cluster (vLLM "
                          f"arg_utils.py); use parallel.nodes={need}")
    if backend == "mp" and not rules.multinode_mp_launcher:
        raise ConfigError("parallel.distributed_executor_backend", backend,
                          f"{release} pairs a vLLM without --nnodes/--node-rank/--master-addr (vLLM 0.11.0 "
                          f"vllm/engine/arg_utils.py; added by 0.13.0); use parallel.distributed_executor_backend=ray "
                          f"or hardware.software=vllm-ascend-0.13.0 or later")
    if backend == "ray" and pp > 1 and not rules.ray_cross_node_pp:
        raise ConfigError("parallel.pipeline_parallel_size", pp,
                          f"pipeline stages across nodes under Ray fail on {release} ({RAY_PP_SOURCE}); use "
                          f"parallel.distributed_executor_backend=mp, TP across nodes (tensor_parallel_size="
                          f"{per_rank}, pipeline_parallel_size=1), or hardware.software=vllm-ascend-0.20.2rc1 or later")
    return MP_NNODES if backend == "mp" else RAY


def _spanning_placement(parallel: ParallelSpec, hardware: HardwareSpec) -> list[NodePlacement]:
    """Node ``k`` holds ranks ``[k × D, (k + 1) × D)`` of the one DP rank (``D`` devices per node): vLLM's
    ``--nnodes`` launcher gives node ``k`` local world ``[node_rank × local_world_size, ...)`` (vLLM 0.13.0
    ``arg_utils.py``); Ray's executor sorts workers by node, the driver's node first (``ray_executor.py``)."""
    per_node, tp = hardware.devices_per_node, parallel.tensor_parallel_size
    nodes = []
    for node in range(parallel.nodes):
        ranks = list(range(node * per_node, (node + 1) * per_node))
        nodes.append(NodePlacement(node_rank=node, devices=list(range(per_node)), ranks=ranks, dp_ranks=[0],
                                   pp_stages=sorted({r // tp for r in ranks})))
    return nodes

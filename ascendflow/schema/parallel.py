"""Parallelism option (``conf/parallel/*.yaml``): TP/PP/DP/EP and node count, in vLLM's names."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ascendflow.schema.base import Spec


class ParallelSpec(Spec):
    """How the model is split over devices and nodes (vLLM ``ParallelConfig`` names).

    Attributes:
        tensor_parallel_size: TP degree (devices per model replica stage).
        pipeline_parallel_size: PP degree (stages).
        data_parallel_size: DP degree (replicas).
        enable_expert_parallel: shard MoE experts over TP × DP instead of TP.
        nodes: number of nodes the deployment spans.
        node_addresses: IP address of each node (node 0 first): node 0's is ``--data-parallel-address`` and
            ``HCCL_IF_IP`` per node. Empty: launch scripts require ``ASCENDFLOW_NODE<k>_IP`` at launch time.
        nic_name: network interface used by HCCL/GLOO/TP sockets on every node (``GLOO_SOCKET_IFNAME``...). ``None``:
            launch scripts require ``ASCENDFLOW_NIC`` at launch time.
        data_parallel_rpc_port: vLLM ``--data-parallel-rpc-port`` on node 0.
        distributed_executor_backend: how one DP rank that spans nodes (TP × PP > devices per node) is launched
            (vLLM ``--distributed-executor-backend``): ``mp``: vLLM's multi-node multiprocessing (``--nnodes``,
            ``--node-rank``, ``--master-addr``, ``--master-port``, ``--headless`` on nodes > 0; vLLM >= 0.12);
            ``ray``: a Ray cluster (head on node 0, workers join), ``vllm serve`` on node 0 only. Plans whose DP ranks
            each fit one node keep the multi-node DP launch and need ``mp``.
        master_port: vLLM ``--master-port`` on node 0 for the ``mp`` multi-node launcher (vLLM default 29501).
        ray_port: the Ray head's GCS port (``ray start --head --port``; Ray's default 6379).
    """

    tensor_parallel_size: int = Field(default=1, ge=1)
    pipeline_parallel_size: int = Field(default=1, ge=1)
    data_parallel_size: int = Field(default=1, ge=1)
    enable_expert_parallel: bool = False
    nodes: int = Field(default=1, ge=1)
    node_addresses: tuple[str, ...] = ()
    nic_name: str | None = None
    data_parallel_rpc_port: int = Field(default=13389, ge=1, le=65535)
    distributed_executor_backend: Literal["mp", "ray"] = "mp"
    master_port: int = Field(default=29501, ge=1, le=65535)
    ray_port: int = Field(default=6379, ge=1, le=65535)

    @property
    def world_size(self) -> int:
        """Devices used in total: TP × PP × DP."""
        return self.tensor_parallel_size * self.pipeline_parallel_size * self.data_parallel_size

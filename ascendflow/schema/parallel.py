"""Parallelism option (``conf/parallel/*.yaml``): TP/PP/DP/EP and node count, in vLLM's names."""

from __future__ import annotations

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
    """

    tensor_parallel_size: int = Field(default=1, ge=1)
    pipeline_parallel_size: int = Field(default=1, ge=1)
    data_parallel_size: int = Field(default=1, ge=1)
    enable_expert_parallel: bool = False
    nodes: int = Field(default=1, ge=1)

    @property
    def world_size(self) -> int:
        """Devices used in total: TP × PP × DP."""
        return self.tensor_parallel_size * self.pipeline_parallel_size * self.data_parallel_size

"""Parallelism option (``conf/parallel/*.yaml``): TP/PP/DP/EP and node count, in vLLM's names."""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator

from ascendflow.schema.base import Spec
from ascendflow.schema.bounds import MAX_NODES, MAX_PARALLEL


#: A Linux network interface name as ``ip link`` lists it: 1-15 characters (kernel ``IFNAMSIZ`` 16 with the NUL,
#: ``dev_valid_name`` in net/core/dev.c rejects '/', ':' and whitespace); kept to letters, digits, '_', '-', '.' since
#: the name is also read by HCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME, where ',', '=' and '^' have meanings.
NIC_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,14}")


def _ip_address(value: str) -> str:
    """One node address: an IPv4 or IPv6 address, since ``HCCL_IF_IP`` takes an IP (CANN HCCL environment variable
    reference) and the same value is ``--data-parallel-address`` / ``--master-addr`` / the Ray head address."""
    try:
        return str(ipaddress.ip_address(value.strip()))
    except ValueError:
        raise ValueError("is not an IPv4 or IPv6 address (HCCL_IF_IP on each node needs the node's IP, not a host "
                         "name); give each node's IP, e.g. parallel.node_addresses=[10.0.0.1,10.0.0.2]") from None


class ParallelSpec(Spec):
    """How the model is split over devices and nodes (vLLM ``ParallelConfig`` names).

    Attributes:
        tensor_parallel_size: TP degree (devices per model replica stage).
        pipeline_parallel_size: PP degree (stages).
        data_parallel_size: DP degree (replicas).
        enable_expert_parallel: shard MoE experts over TP × DP instead of TP.
        nodes: number of nodes the deployment spans.
        node_addresses: IP address of each node (node 0 first; IPv4 or IPv6, distinct unless loopback): node 0's is
            ``--data-parallel-address`` and ``HCCL_IF_IP`` per node. Empty: launch scripts require
            ``ASCENDFLOW_NODE<k>_IP`` at launch time.
        nic_name: network interface used by HCCL/GLOO/TP sockets on every node (``GLOO_SOCKET_IFNAME``...; a Linux
            interface name, :data:`NIC_NAME`). ``None``:
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

    tensor_parallel_size: int = Field(default=1, ge=1, le=MAX_PARALLEL)
    pipeline_parallel_size: int = Field(default=1, ge=1, le=MAX_PARALLEL)
    data_parallel_size: int = Field(default=1, ge=1, le=MAX_PARALLEL)
    enable_expert_parallel: bool = False
    nodes: int = Field(default=1, ge=1, le=MAX_NODES)
    node_addresses: tuple[Annotated[str, AfterValidator(_ip_address)], ...] = ()
    nic_name: str | None = None
    data_parallel_rpc_port: int = Field(default=13389, ge=1, le=65535)
    distributed_executor_backend: Literal["mp", "ray"] = "mp"
    master_port: int = Field(default=29501, ge=1, le=65535)
    ray_port: int = Field(default=6379, ge=1, le=65535)

    @field_validator("node_addresses")
    @classmethod
    def _distinct_nodes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        # Loopback repeats are one host standing in for every node (a rehearsal: ascendflow/rehearsal/scale.py).
        repeated = sorted({a for a in value if value.count(a) > 1 and not ipaddress.ip_address(a).is_loopback})
        if repeated:
            raise ValueError(f"names {', '.join(repeated)} more than once; give one distinct IP per node (node 0 "
                             "first)")
        return value

    @field_validator("nic_name")
    @classmethod
    def _interface_name(cls, value: str | None) -> str | None:
        if value is not None and not NIC_NAME.fullmatch(value):
            raise ValueError("is not a network interface name (1-15 letters, digits, '_', '-', '.', as `ip link` "
                             "lists them); give the interface of the nodes' HCCL network, e.g. parallel.nic_name=eth0")
        return value

    @property
    def world_size(self) -> int:
        """Devices used in total: TP × PP × DP."""
        return self.tensor_parallel_size * self.pipeline_parallel_size * self.data_parallel_size

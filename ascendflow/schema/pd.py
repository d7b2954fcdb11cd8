"""Prefill/decode disaggregation option (``conf/pd/*.yaml``): the connector, the proxy and the two roles.

``pd=none`` (default) is a co-located deployment: no roles, today's plan. Sources of every default are in the
``Field`` descriptions below and in ``conf/pd/*.yaml``; the deployments they follow are vllm-ascend's PD tutorials
(``docs/source/tutorials/features/pd_disaggregation_mooncake_{single,multi}_node.md`` at v0.25.1rc1).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ascendflow.schema.ascend import AdditionalConfig, EnvDict
from ascendflow.schema.base import Spec
from ascendflow.schema.bounds import (MAX_BYTES, MAX_COUNT, MAX_ENV_INT, MAX_NODES, MAX_NUM_SEQS, MAX_PARALLEL,
                                     MAX_SPECULATIVE_TOKENS, MAX_TOKENS)
from ascendflow.schema.graph import CudagraphMode

#: KV connectors vllm-ascend registers (``vllm_ascend/distributed/kv_transfer/__init__.py`` ``register_connector``,
#: v0.23.0 and v0.25.1rc1) that move KV from prefill to decode instances point to point.
Connector = Literal["MooncakeConnectorV1", "MooncakeLayerwiseConnector"]


class RoleSpec(Spec):
    """One role (prefill or decode): its instances, layout, engine knobs and ports. ``None`` inherits the run's
    value (``engine.*``, ``graph.*``).

    Attributes:
        instances: engine instances of this role (one ``engine_id`` each).
        nodes: nodes one instance spans.
        tensor_parallel_size / data_parallel_size / enable_expert_parallel: one instance's layout (vLLM names).
        dp_ranks_per_node: DP ranks of an instance on each of its nodes; ``None``: ``data_parallel_size / nodes``.
        dp_launch: ``external``: one ``vllm serve`` per DP rank with ``--data-parallel-rank`` (vllm-ascend
            ``examples/external_online_dp/launch_online_dp.py``: port ``vllm_start_port + i``, devices
            ``i·TP .. (i+1)·TP − 1``); ``internal``: one ``vllm serve`` per node with ``--data-parallel-size-local``
            (the nightly ``Qwen3-235B-disagg-pd.yaml``), API on the instance's first node only.
        max_num_seqs / max_num_batched_tokens / gpu_memory_utilization / kv_cache_memory_bytes: engine knobs.
        async_scheduling: ``--async-scheduling`` / ``--no-async-scheduling`` of this role (vLLM's scheduler option;
            vllm-ascend's nightly PD configs set it on decode only, e.g. ``QWEN3_235B_PD.yaml`` at v0.23.0).
        enforce_eager / cudagraph_mode / cudagraph_capture_sizes: graph settings of this role.
        num_speculative_tokens: MTP draft tokens of this role.
        additional_config: ``--additional-config`` keys added to the run's for this role.
        env: environment added on this role's nodes.
        hccl_buffsize_mb: ``HCCL_BUFFSIZE`` on this role's nodes.
        kv_port: Mooncake handshake base port of the role's first instance; each engine listens on
            ``kv_port + dp_rank × TP × PP + tp_rank`` (``mooncake_connector.py`` ``MooncakeConnectorScheduler``).
        kv_port_stride: added to ``kv_port`` per further instance (tutorial: 36000, 36100).
        api_port: HTTP port of the role's first DP rank on a node (``--port``; external DP adds the local index).
        measured_capacity_rps: requests/s one instance of this role was measured to sustain within its SLO target
            (prefill: ``slo.p99_ttft_ms``, decode: ``slo.p99_tpot_ms``), e.g. by a ``run.mode=capacity`` run of that
            role's configuration; the P:D recommendation uses it instead of the performance model
            (:mod:`ascendflow.perfmodel.pd_ratio`). ``None``: predicted.
    """

    instances: int = Field(default=1, ge=1, le=MAX_PARALLEL)
    nodes: int = Field(default=1, ge=1, le=MAX_NODES)
    tensor_parallel_size: int = Field(default=1, ge=1, le=MAX_PARALLEL)
    data_parallel_size: int = Field(default=1, ge=1, le=MAX_PARALLEL)
    enable_expert_parallel: bool = False
    dp_ranks_per_node: int | None = Field(default=None, ge=1, le=MAX_PARALLEL)
    dp_launch: Literal["external", "internal"] = "external"
    max_num_seqs: int | None = Field(default=None, ge=1, le=MAX_NUM_SEQS)
    max_num_batched_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    kv_cache_memory_bytes: int | None = Field(default=None, ge=1, le=MAX_BYTES)
    async_scheduling: bool | None = None
    enforce_eager: bool | None = None
    cudagraph_mode: CudagraphMode | None = None
    cudagraph_capture_sizes: tuple[Annotated[int, Field(gt=0, le=MAX_NUM_SEQS)], ...] | None = Field(
        default=None, min_length=1, max_length=MAX_NUM_SEQS)
    num_speculative_tokens: int | None = Field(default=None, ge=0, le=MAX_SPECULATIVE_TOKENS)
    additional_config: AdditionalConfig = Field(default_factory=AdditionalConfig)
    env: EnvDict = Field(default_factory=dict)
    hccl_buffsize_mb: int | None = Field(default=None, ge=1, le=MAX_ENV_INT)
    kv_port: int = Field(default=36000, ge=1024, le=65535)
    kv_port_stride: int = Field(default=100, ge=1, le=65535)
    api_port: int = Field(default=7100, ge=1, le=65535)
    measured_capacity_rps: float | None = Field(default=None, gt=0, le=MAX_COUNT)


class ProxySpec(Spec):
    """The PD proxy (vllm-ascend ``examples/disaggregated_prefill_v1/``): ``load_balance``:
    ``load_balance_proxy_server_example.py`` (requests go to prefill first; for ``MooncakeConnectorV1``);
    ``layerwise``: ``load_balance_proxy_layerwise_server_example.py`` (decode first; for
    ``MooncakeLayerwiseConnector``). ``host``: ``None`` is the first prefill node (the tutorials run it there)."""

    kind: Literal["load_balance", "layerwise"] = "load_balance"
    host: str | None = None
    port: int = Field(default=8000, ge=1, le=65535)


class PDSpec(Spec):
    """Prefill/decode disaggregation; ``connector=None`` is co-located (no roles).

    Attributes:
        name: option name.
        connector: the KV connector (``--kv-transfer-config`` ``kv_connector``).
        single_node: both roles share node 0 (devices split: prefill first), as the single-node tutorial does.
        proxy: the proxy the clients call.
        prefill / decode: the roles.
    """

    name: str = "none"
    connector: Connector | None = None
    single_node: bool = False
    proxy: ProxySpec = Field(default_factory=ProxySpec)
    prefill: RoleSpec = Field(default_factory=RoleSpec)
    decode: RoleSpec = Field(default_factory=lambda: RoleSpec(kv_port=36100, api_port=7200))

    @property
    def enabled(self) -> bool:
        """A disaggregated deployment (a connector is named)."""
        return self.connector is not None

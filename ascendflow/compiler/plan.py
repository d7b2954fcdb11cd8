"""The plan: what the compiler emits and the runner executes (contract in ``shared/DESIGN.md`` §3)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_serializer


#: Launcher names, as ``Plan.launcher`` holds them (plan.json keeps the string). The classes behind them, and the only
#: code that tells launchers apart, are in :mod:`ascendflow.compiler.launch` (``registry.py``); the names live here so
#: the placement pass, a floor below the launchers, can return them.
SINGLE, MP_DP, MP_NNODES, RAY = "single", "mp-dp", "mp-nnodes", "ray"
#: A PD plan's launcher is ``pd-<kv connector>`` (``pd-MooncakeConnectorV1``).
PD_PREFIX = "pd-"


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TargetPlan(_Frozen):
    """Where the plan runs: hardware option, node count and the software row (versions)."""

    hardware: str
    kind: str
    device_name: str
    nodes: int
    devices_per_node: int
    engine: dict[str, str | None]
    #: Kubernetes resource name of one device (``hardware.k8s_device_resource``); deployment metadata, not hashed.
    k8s_device_resource: str | None = None


class WorkerPlan(_Frozen):
    """One engine process group on one node: its DP rank, devices, environment delta and command."""

    node_rank: int
    dp_rank: int
    devices: list[int]
    env: dict[str, str]
    command: list[str]


class NodePlacement(_Frozen):
    """What one node runs: its local devices and the vLLM worker ranks on them.

    Attributes:
        node_rank: the node (0 serves the API).
        devices: local device indices used.
        ranks: global worker ranks on the node; vLLM orders ranks DP-major, then PP, then TP (TP fastest:
            ``rank = dp × PP × TP + pp × TP + tp``, ``vllm/distributed/parallel_state.py``
            ``initialize_model_parallel``).
        dp_ranks: DP ranks with a worker on the node.
        pp_stages: pipeline stages with a worker on the node.
    """

    node_rank: int
    devices: list[int]
    ranks: list[int]
    dp_ranks: list[int]
    pp_stages: list[int]


class MemoryPlan(_Frozen):
    """Per-device memory at the bottleneck device, in bytes.

    ``requested = device_total × gpu_memory_utilization``; ``kv_cache_bytes`` is the explicit budget when one is
    given, else ``requested − weights − activation − non_torch`` (vLLM worker semantics,
    ``shared/reference/vllm_ascend.md`` §3). ``graph_bytes`` is not subtracted by the engine (captured afterwards).
    """

    device_total_bytes: int
    requested_bytes: int
    weights_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    graph_bytes: int
    kv_cache_bytes: int
    #: Of ``weights_bytes``: a separate speculative draft model's weights (EAGLE / EAGLE-3), ``None`` (left out of
    #: the JSON) without one.
    draft_weights_bytes: int | None = None

    @model_serializer(mode="wrap")
    def _without_unset_draft(self, handler: Any) -> dict[str, Any]:
        """Dump without ``draft_weights_bytes`` when there is no draft model (plans without one are unchanged)."""
        data = handler(self)
        if data.get("draft_weights_bytes") is None:
            data.pop("draft_weights_bytes", None)
        return data


class StagePlan(_Frozen):
    """One pipeline stage's device: its layers and memory (bytes) and KV blocks; the plan's ``memory`` and
    ``kv_cache`` are those of the stage with the fewest blocks."""

    stage: int
    first_layer: int
    num_layers: int
    weights_bytes: int
    activation_bytes: int
    kv_cache_bytes: int
    num_blocks: int


class KVCachePlan(_Frozen):
    """KV cache capacity per device.

    Attributes:
        block_size: tokens per block.
        bytes_per_token: pool bytes per token of a block, ``bytes_per_block / block_size`` (for models whose layers
            all keep full-length KV: the KV bytes one token takes on the device, over all its layers).
        num_blocks: ``floor(kv_cache_bytes / bytes_per_block)``.
        tokens: the capacity vLLM logs (``KV cache size: N tokens``): ``int(num_blocks / blocks_per_request ×
            max_model_len)`` (``vllm/v1/core/kv_cache_utils.py`` ``get_kv_cache_capacity``, vLLM >= 0.20).
        max_concurrency: requests of ``max_model_len`` tokens that fit at once.
        attention: ``mha`` (incl. GQA/MQA; every layer full attention), ``mla``, or ``hybrid`` (sliding, chunked or
            Mamba/linear-attention layers present: see ``groups``).
        dtype: KV storage dtype.
        groups: vLLM's KV cache groups on the device: ``kind`` (full/sliding/chunked/mla/mamba), ``layers``,
            ``block_size``, ``page_bytes`` (summed over the group's layers), ``window``, ``blocks_per_request``.
        bytes_per_block: bytes one pool block takes (the largest group's summed pages).
        blocks_per_request: blocks one ``max_model_len`` request needs over all groups.
        fits: vLLM's start-up check for one ``max_model_len`` request passes.
        needed_bytes: KV bytes one ``max_model_len`` request needs.
        estimated_max_model_len: when ``fits`` is false, vLLM's estimate of the longest context that fits.
        mamba_page_bytes: padded Mamba state page (hybrid models only).
        max_num_batched_tokens: scheduler budget the sliding/chunked admission counts used.
    """

    block_size: int
    bytes_per_token: int
    num_blocks: int
    tokens: int
    max_concurrency: float
    attention: str
    dtype: str
    groups: list[dict[str, Any]] = []
    bytes_per_block: int = 0
    blocks_per_request: int = 0
    fits: bool = True
    needed_bytes: int = 0
    estimated_max_model_len: int | None = None
    mamba_page_bytes: int | None = None
    max_num_batched_tokens: int | None = None


class GraphPlan(_Frozen):
    """Graph capture: vLLM's ``cudagraph_mode`` (``NONE`` when eager) and the batch sizes captured."""

    cudagraph_mode: str
    capture_sizes: list[int]
    enforce_eager: bool


class RolePlan(_Frozen):
    """One PD role (``prefill`` or ``decode``): one instance's memory, KV and graph (every instance is alike), the
    workers of all its instances (``node_rank`` global over the deployment), the ``--kv-transfer-config`` of each
    instance, and the API endpoints the proxy lists (``[host, port]``, one per DP rank with external DP, one per
    instance with internal DP).

    Attributes:
        kv_role: ``kv_producer`` (prefill) or ``kv_consumer`` (decode) (vLLM ``KVTransferConfig.kv_role``).
        nodes: global node indices of the role.
        kv_port_ranges: ``[host, first, last]`` handshake ports each instance listens on (inclusive).
    """

    kv_role: str
    instances: int
    nodes: list[int]
    tensor_parallel_size: int
    data_parallel_size: int
    dp_launch: str
    engine_args: dict[str, Any]
    env: dict[str, str]
    memory: MemoryPlan
    kv_cache: KVCachePlan
    graph: GraphPlan
    workers: list[WorkerPlan]
    kv_transfer: list[dict[str, Any]]
    kv_port_ranges: list[list[Any]]
    endpoints: list[list[Any]]
    warnings: list[str] = Field(default_factory=list)


class ProxyPlan(_Frozen):
    """The PD proxy: vllm-ascend's example script (``examples/disaggregated_prefill_v1/``), where it runs, and its
    argv."""

    script: str
    host: str
    port: int
    command: list[str]


class Plan(_Frozen):
    """An executable plan. ``plan_hash`` covers the semantic content only (no paths, no timestamps)."""

    plan_hash: str
    target: TargetPlan
    model: dict[str, Any]
    engine_args: dict[str, Any]
    serve_command: list[str]
    env: dict[str, str]
    workers: list[WorkerPlan]
    memory: MemoryPlan
    kv_cache: KVCachePlan
    graph: GraphPlan
    stages: list[StagePlan] = Field(default_factory=list)
    #: How the nodes are launched: ``single`` (one node), ``mp-dp`` (multi-node DP, each DP rank within a node),
    #: ``mp-nnodes`` (vLLM ``--nnodes`` multiprocessing, a DP rank spanning nodes) or ``ray`` (Ray cluster).
    launcher: str = SINGLE
    #: Worker ranks per node (:class:`NodePlacement`).
    placement: list[NodePlacement] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    #: The release rules the plan was compiled with (``compiler/rules/data/engine_rules.yaml`` row, with its sources).
    rules: dict[str, Any] = Field(default_factory=dict)
    #: Plan fields that are estimates, each with what it rests on and its measured error (``compiler/memory/estimates.py``).
    estimates: dict[str, str] = Field(default_factory=dict)
    #: Predicted serving performance (``ascendflow/perfmodel``), attached by the app after compiling; not hashed,
    #: absent from ``plan.json`` when not predicted (so the compiler's golden plans do not carry it).
    performance: dict[str, Any] | None = None
    #: PD disaggregation (``pd`` option): the prefill and decode roles; ``None`` (and absent from ``plan.json``) for
    #: a co-located plan. The plan's own ``memory``/``kv_cache``/``graph``/``engine_args`` are then the decode role's.
    roles: dict[str, RolePlan] | None = None
    #: The PD proxy; ``None`` for a co-located plan.
    proxy: ProxyPlan | None = None
    #: ``engine_args`` names whose value is the release's vLLM default (the config left them unset): planned with
    #: that value, not written in the scripts (vLLM resolves it itself at start-up). A PD plan: the decode role's.
    engine_defaults: list[str] = Field(default_factory=list)
    #: ``engine.extra_args`` as argv tokens, appended to every ``vllm serve`` of the plan (hashed).
    extra_args: list[str] = Field(default_factory=list)
    #: The separate EAGLE / EAGLE-3 draft (hashed when set): ``architecture`` (its ``config.json`` fields, or the
    #: ESTIMATE from the target's shape) and ``estimated`` (true: no ``config.json`` was on this machine, see
    #: ``estimates["draft"]``); ``None`` (absent from ``plan.json``) without one.
    draft: dict[str, Any] | None = None

    def to_json(self) -> str:
        """The plan as pretty JSON (the ``plan.json`` format); unset optional parts (performance, PD roles, draft, empty
        ``engine_defaults`` / ``extra_args``) absent."""
        exclude = {k for k in ("performance", "roles", "proxy", "draft") if getattr(self, k) is None}
        exclude |= {k for k in ("engine_defaults", "extra_args") if not getattr(self, k)}
        return self.model_dump_json(indent=2, exclude=exclude or None)


def plan_hash(content: dict[str, Any]) -> str:
    """SHA-256 (first 16 hex digits) of the canonical JSON of ``content``.

    The caller passes only semantic fields: the model is named by its id and architecture, never its path.
    """
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]

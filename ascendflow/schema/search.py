"""Deployment search option (``conf/search/*.yaml``): the space ``run.mode=search`` enumerates and what it writes.

The search (:mod:`ascendflow.search`) enumerates co-located TP × PP × DP × EP layouts over whole nodes and PD
deployments (prefill and decode role layouts, P:D instance counts), with the graph modes and the
``max_num_seqs`` / ``max_num_batched_tokens`` grids below, compiles each with the release's exact rules, and ranks the
feasible ones by predicted goodput per device at the ``slo`` option's targets (docs/search.md).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ascendflow.schema.base import Spec
from ascendflow.schema.bounds import MAX_COUNT, MAX_NODES, MAX_NUM_SEQS, MAX_PARALLEL, MAX_SEED, MAX_TOKENS
from ascendflow.schema.graph import CudagraphMode

Positive = Annotated[int, Field(ge=1, le=MAX_PARALLEL)]


class SearchSpec(Spec):
    """What ``run.mode=search`` enumerates, ranks and writes.

    Attributes:
        name: option name.
        nodes: nodes the deployment may use; ``None``: ``parallel.nodes``.
        quantizations: quantization options (``conf/quantization/<name>.yaml``) to try; empty: the run's own.
        tensor_parallel_sizes: TP degrees to try; empty: every power of two up to one instance's devices.
        pipeline_parallel_sizes: PP degrees of co-located layouts (PP > 1 is compiled, listed feasible or not, and
            left unranked: the performance model does not time pipelines, ``perfmodel/predict.py``).
        expert_parallel: ``enable_expert_parallel`` values tried for MoE models (dense models: ``false`` only).
        graph_modes: ``compilation_config.cudagraph_mode`` values tried (``NONE`` is ``--enforce-eager``); a mode
            the release's rules row refuses is counted infeasible with the compiler's reason.
        max_num_seqs: the co-located and decode-role ``max_num_seqs`` grid.
        max_num_batched_tokens: the co-located and prefill-role ``max_num_batched_tokens`` grid.
        pd: also search PD (prefill/decode) deployments with ``pd_connector``.
        pd_connector: the KV connector of searched PD deployments.
        pd_max_nodes_per_instance: most nodes one prefill or decode instance spans.
        pd_prefill_graph_modes: graph modes of the prefill role (the PD tutorials run prefill eager).
        pd_role_keep: per role and nodes-per-instance, how many role configs with the highest predicted rate per
            instance are paired; the others are dominated for goodput (a PD deployment's goodput is
            ``min(P × prefill rate, D × decode rate)``, increasing in both) and counted as pruned.
        top_k: recipes written for the best candidates (ties included up to this count).
        show: rows of the printed table.
        children: MLflow child runs: ``shown`` (the table's rows and the recipes' candidates; every candidate with
            its reason is in ``candidates.json``, an artifact of the parent), ``ranked``, ``feasible``, or ``all``
            candidates (infeasible ones with their reason; each child costs about 0.1-0.3 s in a SQLite store),
            ``none``.
        measure_top: serve the top K ranked co-located candidates here, one at a time, and measure each one's capacity
            at the SLO with ``run.mode=capacity``'s search (the ``slo`` option's load range and points, the
            ``workload``); refused in one line when the hardware is not on this machine or fewer candidates are
            ranked (docs/search.md "Measure the advice"). ``None``: nothing is served.
        measure_random: the random control: this many other ranked co-located candidates, drawn from below the top
            K, measured the same way; ``None``: as many as ``measure_top`` (fewer when fewer are left).
        measure_seed: seed of the random control's draw (the same seed picks the same candidates).
    """

    name: str = "default"
    nodes: int | None = Field(default=None, ge=1, le=MAX_NODES)
    quantizations: tuple[str, ...] = ()
    tensor_parallel_sizes: tuple[Positive, ...] = ()
    pipeline_parallel_sizes: tuple[Positive, ...] = (1, 2)
    expert_parallel: tuple[bool, ...] = (False, True)
    graph_modes: tuple[CudagraphMode, ...] = ("NONE", "PIECEWISE", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")
    max_num_seqs: tuple[Annotated[int, Field(ge=1, le=MAX_NUM_SEQS)], ...] = (16, 32, 64)
    max_num_batched_tokens: tuple[Annotated[int, Field(ge=1, le=MAX_TOKENS)], ...] = (4096, 8192)
    pd: bool = True
    pd_connector: Literal["MooncakeConnectorV1", "MooncakeLayerwiseConnector"] = "MooncakeConnectorV1"
    pd_max_nodes_per_instance: int = Field(default=2, ge=1, le=MAX_NODES)
    pd_prefill_graph_modes: tuple[CudagraphMode, ...] = ("NONE",)
    pd_role_keep: int = Field(default=3, ge=1, le=MAX_COUNT)
    top_k: int = Field(default=3, ge=1, le=MAX_COUNT)
    show: int = Field(default=15, ge=1, le=MAX_COUNT)
    children: Literal["shown", "ranked", "feasible", "all", "none"] = "shown"
    measure_top: int | None = Field(default=None, ge=1, le=MAX_COUNT)
    measure_random: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    measure_seed: int = Field(default=0, ge=0, le=MAX_SEED)

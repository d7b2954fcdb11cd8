"""Graph-capture pass: ``cudagraph_mode`` and capture sizes as the target engine version derives them.

Rules (``shared/reference/vllm_ascend.md`` §4):

* Default maximum capture size on Ascend (>= v0.18, ``platform.py`` ``_get_default_max_cudagraph_capture_size``):
  ``min(max_num_seqs × (1 + num_speculative_tokens), 512)``; before v0.18 and elsewhere vLLM's
  ``min(max_num_seqs × 2, 512)``.
* vLLM's default ladder: 1, 2, 4, multiples of 8 below 256, multiples of 16 up to the maximum.
* MLA models: full graphs only for uniform decode batches (``FULL`` is refused; recipes use ``FULL_DECODE_ONLY``), and
  with graphs ``num_heads / TP`` must be 32, 64 or 128 (error ``EZ9999 ... MLA only support {32, 64, 128}``).
* TP > 1 with sequence parallelism, ``enable_shared_expert_dp`` or ``enable_dsa_cp``: sizes must be multiples of TP.
* Ascend 950: piecewise modes keep at most 4 sizes.
* ``FULL_AND_PIECEWISE`` is native from v0.21.0rc1; before, it runs as ``PIECEWISE``.
* Stream budget (v0.11.0 … v0.20.2rc1, ``update_aclgraph_sizes``, PIECEWISE only): at most ``N`` sizes, sampled at
  indices ``round(i·(len−1)/(N−1))``; later versions prune nothing, so the compiler warns (error 207008 risk).
"""

from __future__ import annotations

from dataclasses import dataclass

from ascendflow.compiler.plan import GraphPlan
from ascendflow.compiler.software import version_at_least
from ascendflow.schema.architecture import ModelArchitecture
from ascendflow.schema.errors import ConfigError
from ascendflow.schema.graph import GraphSpec
from ascendflow.schema.hardware import HardwareSpec
from ascendflow.schema.parallel import ParallelSpec

MLA_GRAPH_HEADS = (32, 64, 128)
STREAM_LIMIT = 1800
#: vllm-ascend versions with the automatic stream-budget pruning (``update_aclgraph_sizes``).
STREAM_BUDGET_FIRST, STREAM_BUDGET_LAST = "0.11.0", "0.20.2rc1"


@dataclass(frozen=True)
class GraphContext:
    """What graph capture depends on besides the graph option."""

    arch: ModelArchitecture
    parallel: ParallelSpec
    hardware: HardwareSpec
    vllm_ascend: str | None
    max_num_seqs: int
    max_num_batched_tokens: int
    num_speculative_tokens: int
    enforce_eager: bool
    tp_aligned: bool  # sequence parallelism, enable_shared_expert_dp or enable_dsa_cp
    aiv: bool  # HCCL_OP_EXPANSION_MODE=AIV
    multistream_overlap_shared_expert: bool


def default_capture_sizes(max_size: int) -> list[int]:
    """vLLM's default capture ladder up to ``max_size``: 1, 2, 4, multiples of 8 below 256, multiples of 16."""
    ladder = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, max_size + 1, 16))
    return [s for s in ladder if s <= max_size]


def sample_sizes(sizes: list[int], n: int) -> list[int]:
    """Keep ``n`` of the ascending ``sizes`` at indices ``round(i·(len−1)/(n−1))`` (smallest and largest kept)."""
    sizes = sorted(sizes)
    if n >= len(sizes):
        return sizes
    if n <= 1:
        return sizes[:1]
    return sorted({sizes[round(i * (len(sizes) - 1) / (n - 1))] for i in range(n)})


def stream_budget(ctx: GraphContext) -> int:
    """Most capture sizes the ACL stream budget allows in PIECEWISE mode (vllm-ascend ``update_aclgraph_sizes``).

    ``R = layers + 1`` (+ draft layers + 1 with MTP), ``G = [DP > 1] + [TP > 1]``; non-AIV
    ``N = floor((1800 − 40·G) / R / (1 + 2·G))``; AIV ``P = 1 + G + [EP] + [multistream_overlap_shared_expert]``
    (+ ``[DP > 1]`` for MoE), ``N = floor(MAX' / R / P)`` with ``MAX' = 1800`` (MoE) or ``1800 − P·R`` (dense).
    """
    a, par = ctx.arch, ctx.parallel
    r = a.num_hidden_layers + 1
    if ctx.num_speculative_tokens and a.num_nextn_predict_layers:
        r += a.num_nextn_predict_layers + 1
    g = int(par.data_parallel_size > 1) + int(par.tensor_parallel_size > 1)
    if not ctx.aiv:
        return (STREAM_LIMIT - 40 * g) // r // (1 + 2 * g)
    moe = a.routed_experts > 0
    p = 1 + g + int(par.enable_expert_parallel) + int(ctx.multistream_overlap_shared_expert)
    p += int(moe and par.data_parallel_size > 1)
    max_streams = STREAM_LIMIT if moe else STREAM_LIMIT - p * r
    return max_streams // r // p


def _check_mla_heads(ctx: GraphContext) -> None:
    heads = ctx.arch.num_attention_heads
    per_rank = heads // ctx.parallel.tensor_parallel_size
    if per_rank not in MLA_GRAPH_HEADS:
        valid = [tp for tp in range(1, heads + 1) if heads % tp == 0 and heads // tp in MLA_GRAPH_HEADS]
        raise ConfigError("parallel.tensor_parallel_size", ctx.parallel.tensor_parallel_size,
                          f"MLA with graph capture needs num_attention_heads / TP in {list(MLA_GRAPH_HEADS)} "
                          f"(vllm-ascend EZ9999), got {heads}/{ctx.parallel.tensor_parallel_size} = {per_rank}; "
                          f"use TP in {valid} or graph=eager")


def graph_plan(graph: GraphSpec, ctx: GraphContext) -> tuple[GraphPlan, list[str]]:
    """Resolve graph capture for the target.

    Returns:
        The :class:`GraphPlan` and warnings.

    Raises:
        ConfigError: a mode the hardware or model does not support, the MLA head rule, no TP-aligned size left.
    """
    warnings: list[str] = []
    hw, version = ctx.hardware, ctx.vllm_ascend
    if ctx.enforce_eager or graph.enforce_eager:
        return GraphPlan(cudagraph_mode="NONE", capture_sizes=[], enforce_eager=True), warnings
    if hw.kind == "cpu":
        if graph.cudagraph_mode not in (None, "NONE"):
            raise ConfigError("graph.cudagraph_mode", graph.cudagraph_mode,
                              "the CPU engine captures no graphs: cudagraph_mode must be NONE or null "
                              "(graph=eager or graph=compiled)")
        return GraphPlan(cudagraph_mode="NONE", capture_sizes=[], enforce_eager=False), warnings

    native_fap = hw.kind != "npu" or version_at_least(version, "0.21.0rc1")
    mode = graph.cudagraph_mode or ("FULL_AND_PIECEWISE" if native_fap else "PIECEWISE")
    if mode == "FULL_AND_PIECEWISE" and not native_fap:
        warnings.append(f"vllm-ascend {version} runs FULL_AND_PIECEWISE as PIECEWISE (native from 0.21.0rc1)")
        mode = "PIECEWISE"
    if mode == "NONE":
        return GraphPlan(cudagraph_mode="NONE", capture_sizes=[], enforce_eager=False), warnings
    if ctx.arch.is_mla and hw.kind == "npu":
        if mode == "FULL":
            raise ConfigError("graph.cudagraph_mode", mode, "MLA attention supports full graphs only for uniform "
                                                            "decode batches; use graph=full_decode_only")
        _check_mla_heads(ctx)

    spec_factor = 1 + ctx.num_speculative_tokens
    if graph.cudagraph_capture_sizes is not None:
        sizes = sorted(set(graph.cudagraph_capture_sizes))
        if sizes and sizes[-1] > ctx.max_num_seqs * spec_factor:
            warnings.append(f"capture size {sizes[-1]} exceeds max_num_seqs × (1 + speculative tokens) = "
                            f"{ctx.max_num_seqs * spec_factor}: batches above max_num_seqs never occur")
    else:
        ascend_rule = hw.kind == "npu" and version_at_least(version, "0.18.0")
        default_max = min(ctx.max_num_seqs * (spec_factor if ascend_rule else 2), 512)
        sizes = default_capture_sizes(graph.max_cudagraph_capture_size or default_max)

    if sizes and sizes[-1] > ctx.max_num_batched_tokens:
        kept = [x for x in sizes if x <= ctx.max_num_batched_tokens]
        warnings.append(f"capture sizes above max_num_batched_tokens={ctx.max_num_batched_tokens} dropped "
                        f"({len(sizes) - len(kept)} of {len(sizes)}): no batch is larger")
        sizes = kept or [ctx.max_num_batched_tokens]
    tp = ctx.parallel.tensor_parallel_size
    if ctx.tp_aligned and tp > 1:
        aligned = [s for s in sizes if s % tp == 0]
        if not aligned:
            raise ConfigError("graph.cudagraph_capture_sizes", sizes,
                              f"sequence parallelism / shared-expert DP / DSA CP with TP={tp} need capture sizes "
                              f"that are multiples of {tp}; none left")
        sizes = aligned
    piecewise = "PIECEWISE" in mode
    if piecewise and hw.max_piecewise_capture_sizes and len(sizes) > hw.max_piecewise_capture_sizes:
        sizes = sample_sizes(sizes, hw.max_piecewise_capture_sizes)
        warnings.append(f"{hw.device_name} keeps at most {hw.max_piecewise_capture_sizes} piecewise capture sizes")

    if hw.kind == "npu" and piecewise:
        budget = stream_budget(ctx)
        automatic = (version_at_least(version, STREAM_BUDGET_FIRST) and not version_at_least(version, "0.21.0rc1")
                     and mode == "PIECEWISE")
        if automatic and len(sizes) > budget:
            sizes = sample_sizes(sizes, budget)
            warnings.append(f"vllm-ascend {version} keeps {budget} capture sizes (ACL stream budget)")
        elif not automatic and len(sizes) > budget:
            warnings.append(f"{len(sizes)} capture sizes exceed the ACL stream budget estimate ({budget}); capture "
                            f"may fail with error 207008. Smaller list: "
                            f"graph.cudagraph_capture_sizes={sample_sizes(sizes, budget)}")
    return GraphPlan(cudagraph_mode=mode, capture_sizes=sizes, enforce_eager=False), warnings

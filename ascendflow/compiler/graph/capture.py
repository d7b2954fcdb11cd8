"""Graph-capture pass: ``cudagraph_mode`` and capture sizes as the target release derives them.

Every rule that differs by release comes from the row's :class:`~ascendflow.compiler.rules.engine_rules.EngineRules`
(``rules/data/engine_rules.yaml``, sources there). The steps run in vllm-ascend's order (``platform.py``
``check_and_update_config``): default sizes (vLLM ``_set_cudagraph_sizes`` with the release's ladder and maximum),
the v0.11 Qwen3-MoE DP ladder, sequence-parallel TP alignment, the Ascend 950 cap, the ACL stream budget
(``utils.py`` ``update_aclgraph_sizes``, PIECEWISE only, with its v0.11 speculative enlargement), and vLLM's
rounding of full-graph sizes to multiples of ``1 + k`` with speculative decoding
(``compilation.py`` ``adjust_cudagraph_sizes_for_spec_decode``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ascendflow.compiler.plan import GraphPlan
from ascendflow.compiler.rules.engine_rules import EngineRules
from ascendflow.platforms import platform_for
from ascendflow.schema.architecture import ModelArchitecture
from ascendflow.schema.errors import ConfigError
from ascendflow.schema.graph import GraphSpec
from ascendflow.schema.hardware import HardwareSpec
from ascendflow.schema.parallel import ParallelSpec

#: ACL graphs one device can capture (2048 streams less a 248-stream buffer; vllm-ascend ``utils.py``
#: ``update_aclgraph_sizes`` ``MAX_CAPTURE_SIZE``, v0.11.0 … v0.20.2rc1).
STREAM_LIMIT = 1800
#: Largest default capture size (vLLM ``_set_cudagraph_sizes``; vllm-ascend ``_get_default_max_cudagraph_capture_size``).
DEFAULT_MAX_CAPTURE = 512


@dataclass(frozen=True)
class GraphContext:
    """What graph capture depends on besides the graph option."""

    arch: ModelArchitecture
    parallel: ParallelSpec
    hardware: HardwareSpec
    rules: EngineRules
    max_num_seqs: int
    max_num_batched_tokens: int
    num_speculative_tokens: int
    enforce_eager: bool
    sequence_parallel: bool  # capture sizes filtered to multiples of TP (vLLM's pass or vllm-ascend's enable_sp())
    aiv: bool  # HCCL_OP_EXPANSION_MODE=AIV
    multistream_overlap_shared_expert: bool
    torchair: bool = False  # v0.11.0 torchair_graph_config.enabled: no ACL graphs
    ascend_sp: bool = False  # vllm-ascend enable_sp(): spec-decode sizes rounded to multiples of max(1 + k, TP)
    #: A separate EAGLE draft's decoder layers (its own ``hf_config.num_hidden_layers``); ``None``: MTP or none.
    draft_layers: int | None = None


def default_capture_sizes(max_size: int, ladder: str = "step8_16") -> list[int]:
    """vLLM's default capture sizes up to ``max_size``, ascending.

    ``step8`` (vLLM 0.11 ``_set_cudagraph_sizes``): 1, 2, 4 and every multiple of 8; ``step8_16`` (vLLM >= 0.13):
    1, 2, 4, multiples of 8 below 256, multiples of 16 from 256.
    """
    if ladder == "step8":
        sizes = [1, 2, 4] + list(range(8, max_size + 1, 8))
    else:
        sizes = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, max_size + 1, 16))
    return [s for s in sizes if s <= max_size]


def default_max_capture_size(rules: EngineRules, max_num_seqs: int, num_speculative_tokens: int) -> int:
    """The default largest capture size (``EngineRules.default_max_capture``), capped at 512."""
    k = num_speculative_tokens
    factor = {"vllm_2x": 2, "vllm_2x_spec": 2 * (1 + k), "seqs_spec": 1 + k}[rules.default_max_capture]
    return min(max_num_seqs * factor, DEFAULT_MAX_CAPTURE)


def sample_sizes(sizes: list[int], n: int, order: str = "ascending") -> list[int]:
    """Keep ``n`` sizes as vllm-ascend ``update_aclgraph_sizes`` does, returned ascending.

    Over the list in the release's order (``descending`` at vLLM 0.11): ``step = (len − 1) / (n − 1)`` (a float),
    indices ``round(i · step)`` for i = 0 … n−1 (Python's round: ties to even), then the first and last index forced.

    Raises:
        ConfigError: ``n <= 1`` (upstream divides by ``n − 1`` and crashes).
    """
    if n >= len(sizes):
        return sorted(sizes)
    if n <= 1:
        raise ConfigError("graph.cudagraph_capture_sizes", sizes,
                          f"the ACL stream budget leaves {n} capture size(s): vllm-ascend's sampler divides by "
                          f"N − 1 and fails at start; use graph=eager, fewer layers per device (PP) or "
                          f"HCCL_OP_EXPANSION_MODE=AIV")
    ordered = sorted(sizes, reverse=order == "descending")
    step = (len(ordered) - 1) / (n - 1)
    indices = [round(i * step) for i in range(n)]
    indices[0], indices[-1] = 0, len(ordered) - 1
    return sorted(ordered[i] for i in indices)


def stream_budget(ctx: GraphContext) -> int:
    """Most capture sizes the ACL stream budget allows in PIECEWISE mode (vllm-ascend ``update_aclgraph_sizes``).

    ``R = layers + 1``, plus the draft's layers + 1 with speculative decoding (``draft_layers_in_budget``: the
    draft's ``hf_config.num_hidden_layers`` — the target's count for DeepSeek MTP — at v0.11/v0.13, its MTP layers
    from v0.18; an EAGLE draft's own layer count at every release, ``draft_layers``); ``G = [DP > 1] + [TP > 1]``;
    non-AIV ``N = floor((1800 − 40·G) / R / (1 + 2·G))``; AIV
    ``P = 1 + G + [EP] + [multistream_overlap_shared_expert]`` (+ ``[DP > 1]`` for MoE),
    ``N = floor(MAX' / R / P)`` with ``MAX' = 1800`` (MoE) or ``1800 − P·R`` (dense).
    """
    a, par = ctx.arch, ctx.parallel
    r = a.num_hidden_layers + 1
    if ctx.num_speculative_tokens and ctx.draft_layers is not None:  # an EAGLE draft: its own config's layers
        r += ctx.draft_layers + 1
    elif ctx.num_speculative_tokens:
        draft = a.num_hidden_layers if ctx.rules.draft_layers_in_budget == "hf_num_hidden_layers" else (
            a.mtp_layer_count)
        r += draft + 1
    g = int(par.data_parallel_size > 1) + int(par.tensor_parallel_size > 1)
    if not ctx.aiv:
        return (STREAM_LIMIT - 40 * g) // r // (1 + 2 * g)
    moe = a.routed_experts > 0
    p = 1 + g + int(par.enable_expert_parallel) + int(ctx.multistream_overlap_shared_expert)
    p += int(moe and par.data_parallel_size > 1)
    max_streams = STREAM_LIMIT if moe else STREAM_LIMIT - p * r
    return max_streams // r // p


def _mode(graph: GraphSpec, ctx: GraphContext, warnings: list[str]) -> str:
    rules, hw = ctx.rules, ctx.hardware
    mode = graph.cudagraph_mode or "FULL_AND_PIECEWISE"  # vLLM V1's default
    if ctx.torchair:
        if graph.cudagraph_mode not in (None, "NONE"):
            warnings.append("torchair graph mode is on: vllm-ascend sets cudagraph_mode to NONE (platform.py, v0.11.0)")
        return "NONE"
    if mode == "FULL_AND_PIECEWISE" and platform_for(hw.kind).acl_graphs and not rules.native_full_and_piecewise:
        if graph.cudagraph_mode:
            warnings.append(f"{rules_name(ctx)} runs FULL_AND_PIECEWISE as PIECEWISE (platform.py "
                            "check_and_update_config)")
        mode = "PIECEWISE"
    if mode == "FULL" and platform_for(hw.kind).acl_graphs and rules.full_mode_fallback == "none":
        warnings.append(f"{rules_name(ctx)} does not run cudagraph_mode FULL on NPU and falls back to NONE "
                        "(platform.py check_and_update_config); use graph=full_decode_only")
        return "NONE"
    if mode == "FULL" and ctx.arch.is_mla:
        warnings.append("MLA attention captures full graphs only for uniform decode batches: vLLM downgrades "
                        "cudagraph_mode FULL to FULL_DECODE_ONLY")
        mode = "FULL_DECODE_ONLY"
    return mode


def _round_for_spec_decode(sizes: list[int], k: int, max_size: int, tp: int) -> list[int]:
    """vLLM ``adjust_cudagraph_sizes_for_spec_decode``: sizes rounded up to a multiple of ``1 + k`` (``max(1 + k, TP)``
    with sequence parallelism), de-duplicated, those above the largest size dropped; ``[1 + k]`` when none is left
    but it fits.

    Raises:
        ConfigError: no size can be kept, or ``max(1 + k, TP)`` is not a multiple of both.
    """
    q = 1 + k
    multiple = max(q, tp)
    if multiple % q or multiple % tp:
        raise ConfigError("engine.num_speculative_tokens", k,
                          f"vLLM cannot find capture sizes that are multiples of both 1 + k = {q} and TP = {tp} "
                          f"(adjust_cudagraph_sizes_for_spec_decode); choose k so that 1 + k divides TP or the reverse")
    rounded = sorted({-(-s // multiple) * multiple for s in sizes if -(-s // multiple) * multiple <= max_size})
    if not rounded and multiple <= max_size:
        rounded = [multiple]
    if not rounded:
        raise ConfigError("engine.num_speculative_tokens", k,
                          f"no capture size is left after rounding up to multiples of {multiple} (vLLM "
                          f"adjust_cudagraph_sizes_for_spec_decode, largest {max_size}); raise "
                          f"graph.max_cudagraph_capture_size or lower num_speculative_tokens")
    return rounded


def rules_name(ctx: GraphContext) -> str:
    """The software row's name for messages (``vllm-ascend-0.20.2rc1``)."""
    return ctx.hardware.software


def graph_plan(graph: GraphSpec, ctx: GraphContext) -> tuple[GraphPlan, list[str]]:
    """Resolve graph capture for the target release: the mode, then the sizes in vllm-ascend's order
    (:func:`_listed_sizes`, :func:`_aligned_sizes`, :func:`_device_sizes`, :func:`_spec_decode_sizes`).

    Returns:
        The :class:`GraphPlan` (sizes ascending) and warnings.

    Raises:
        ConfigError: a mode the CPU engine does not run, no TP-aligned size left, a stream budget of one size or
            less, no size left after rounding for speculative decoding. (MLA heads per rank are not a graph rule: see
            :func:`~ascendflow.compiler.placement.topology.check_mla_heads`.)
    """
    warnings: list[str] = []
    if ctx.enforce_eager or graph.enforce_eager:
        return GraphPlan(cudagraph_mode="NONE", capture_sizes=[], enforce_eager=True), warnings
    if not platform_for(ctx.hardware.kind).captures_graphs:
        if graph.cudagraph_mode not in (None, "NONE"):
            raise ConfigError("graph.cudagraph_mode", graph.cudagraph_mode,
                              "the CPU engine captures no graphs: cudagraph_mode must be NONE or null "
                              "(graph=eager or graph=compiled)")
        return GraphPlan(cudagraph_mode="NONE", capture_sizes=[], enforce_eager=False), warnings

    mode = _mode(graph, ctx, warnings)
    if mode == "NONE":
        return GraphPlan(cudagraph_mode="NONE", capture_sizes=[], enforce_eager=False), warnings
    sizes, listed = _listed_sizes(graph, ctx)
    sizes, aligned = _aligned_sizes(sizes, ctx)
    sizes, device = _device_sizes(sizes, mode, ctx)
    sizes = _spec_decode_sizes(sizes, mode, ctx)
    return GraphPlan(cudagraph_mode=mode, capture_sizes=sizes, enforce_eager=False), [*warnings, *listed, *aligned,
                                                                                      *device]


def _listed_sizes(graph: GraphSpec, ctx: GraphContext) -> tuple[list[int], list[str]]:
    """The capture sizes given, or the release's default ladder (vLLM ``_set_cudagraph_sizes`` with the release's
    maximum and appended sizes; the v0.11 Qwen3-MoE DP ladder); with a warning for sizes above
    ``max_num_seqs × (1 + k)``."""
    rules, par, k = ctx.rules, ctx.parallel, ctx.num_speculative_tokens
    if graph.cudagraph_capture_sizes is not None:
        sizes = sorted(set(graph.cudagraph_capture_sizes))
        warnings = [] if sizes[-1] <= ctx.max_num_seqs * (1 + k) else [
            f"capture size {sizes[-1]} exceeds max_num_seqs × (1 + speculative tokens) = "
            f"{ctx.max_num_seqs * (1 + k)}: batches above max_num_seqs never occur"]
        return sizes, warnings
    max_size = graph.max_cudagraph_capture_size or default_max_capture_size(rules, ctx.max_num_seqs, k)
    if rules.capture_ladder == "step8_16":  # vLLM >= 0.13: the largest size within the batch budget
        max_size = min(max_size, ctx.max_num_batched_tokens)
    sizes = default_capture_sizes(max_size, rules.capture_ladder)
    if rules.ladder_appends == "max_capture" and sizes[-1] < max_size:
        sizes.append(max_size)
    if (rules.ladder_appends in ("batched_tokens", "batched_tokens_and_max")
            and ctx.max_num_batched_tokens <= max_size and ctx.max_num_batched_tokens not in sizes):
        sizes = sorted({*sizes, ctx.max_num_batched_tokens})
    if rules.ladder_appends == "batched_tokens_and_max" and graph.max_cudagraph_capture_size is None:
        # vllm-ascend v0.30.0rc1 platform.py: the defaulted largest size (reduced_cg_cap, already capped at
        # max_num_batched_tokens above) joins the list before vLLM rebuilds it.
        sizes = sorted({*sizes, max_size})
    if (rules.qwen3_moe_dp_ladder and ctx.arch.model_type == "qwen3_moe" and par.tensor_parallel_size == 1
            and par.data_parallel_size > 1 and sizes[-1] <= ctx.max_num_batched_tokens):
        # v0.11.0 utils.py update_default_aclgraph_sizes: kinder shapes for _npu_paged_attention (only when
        # the default list is intact, i.e. nothing was dropped for max_num_batched_tokens).
        sizes = [1, 2, 5, 10, 15, 20] + list(range(24, max_size + 1, 8))
    return sizes, []


def _aligned_sizes(sizes: list[int], ctx: GraphContext) -> tuple[list[int], list[str]]:
    """Sizes above ``max_num_batched_tokens`` dropped (not from the v0.11 Qwen3-MoE ladder), then, with sequence
    parallelism, only multiples of TP (vLLM ``VllmConfig.update_sizes_for_sequence_parallelism``)."""
    warnings = []
    if sizes[-1] > ctx.max_num_batched_tokens and not (ctx.rules.qwen3_moe_dp_ladder
                                                       and sizes[:6] == [1, 2, 5, 10, 15, 20]):
        kept = [x for x in sizes if x <= ctx.max_num_batched_tokens]
        warnings.append(f"capture sizes above max_num_batched_tokens={ctx.max_num_batched_tokens} dropped "
                        f"({len(sizes) - len(kept)} of {len(sizes)}): no batch is larger")
        sizes = kept or [ctx.max_num_batched_tokens]
    tp = ctx.parallel.tensor_parallel_size
    if ctx.sequence_parallel and tp > 1:
        # vLLM VllmConfig.update_sizes_for_sequence_parallelism (called from vllm-ascend platform.py).
        aligned = [s for s in sizes if s % tp == 0]
        if not aligned:
            raise ConfigError("graph.cudagraph_capture_sizes", sizes,
                              f"sequence parallelism with TP={tp} needs capture sizes that are multiples of {tp}; "
                              f"none left")
        sizes = aligned
    return sizes, warnings


def _device_sizes(sizes: list[int], mode: str, ctx: GraphContext) -> tuple[list[int], list[str]]:
    """The device's limits: the Ascend 950's piecewise cap, then the ACL stream budget (PIECEWISE on NPU: pruned
    where the release prunes, with its v0.11 speculative enlargement, else a warning with a smaller list)."""
    hw, rules, k, warnings = ctx.hardware, ctx.rules, ctx.num_speculative_tokens, []
    cap = rules.piecewise_size_cap_950 if hw.soc == "950" else None
    if "PIECEWISE" in mode and cap and len(sizes) > cap:
        sizes = sample_sizes(sizes, cap, rules.capture_order)
        warnings.append(f"{hw.device_name} keeps at most {cap} piecewise capture sizes ({rules_name(ctx)})")
    if platform_for(hw.kind).acl_graphs and mode == "PIECEWISE":
        budget = stream_budget(ctx)
        if rules.stream_budget_pruning:
            if len(sizes) > budget:
                sizes = sample_sizes(sizes, budget, rules.capture_order)
                warnings.append(f"{rules_name(ctx)} keeps {budget} capture sizes (ACL stream budget)")
            if rules.spec_sizes_multiplied and k > 1 and sizes[-1] < (k + 1) * ctx.max_num_seqs:
                sizes = sorted({(k + 1) * s for s in sizes})
                warnings.append(f"{rules_name(ctx)} multiplies the capture sizes by {k + 1} for speculative decoding")
        elif len(sizes) > budget:
            smaller = sample_sizes(sizes, budget, rules.capture_order) if budget > 1 else sizes[:1]
            warnings.append(f"{len(sizes)} capture sizes exceed the ACL stream budget estimate ({budget}); capture "
                            f"may fail with error 207008. Smaller list: graph.cudagraph_capture_sizes={smaller}")
    return sizes, warnings


def _spec_decode_sizes(sizes: list[int], mode: str, ctx: GraphContext) -> list[int]:
    """With speculative decoding: vLLM's rounding to multiples of ``1 + k`` where the release rounds the mode, and
    the release's FULL_DECODE_ONLY multiple check.

    Raises:
        ConfigError: see :func:`_round_for_spec_decode`; FULL_DECODE_ONLY sizes that are no multiples of ``1 + k``.
    """
    k, rules, tp = ctx.num_speculative_tokens, ctx.rules, ctx.parallel.tensor_parallel_size
    if k and mode in rules.spec_decode_round_modes:
        # The largest size is the last one left (vLLM keeps max_cudagraph_capture_size = sizes[-1] after each step).
        sizes = _round_for_spec_decode(sizes, k, sizes[-1], tp if ctx.ascend_sp and tp > 1 else 1)
    if k and mode == "FULL_DECODE_ONLY" and rules.full_decode_spec_multiple_check:
        q = 1 + k
        off = [s for s in sizes if q <= s <= ctx.max_num_seqs * q and s % q]
        if off:
            raise ConfigError("graph.cudagraph_capture_sizes", sizes,
                              f"{rules_name(ctx)} needs every FULL_DECODE_ONLY size in [{q}, {ctx.max_num_seqs * q}] "
                              f"to be a multiple of num_speculative_tokens + 1 = {q} (model_runner_v1.py "
                              f"_capture_model), not {off}; use graph.cudagraph_capture_sizes="
                              f"{sorted({-(-s // q) * q for s in sizes})}")
    return sizes

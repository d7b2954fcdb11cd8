"""Parallel topology: checks TP/PP/DP/EP against the model and the hardware, and places workers on devices."""

from __future__ import annotations

from ascendflow.compiler.rules.engine_rules import EngineRules
from ascendflow.platforms import platform_for
from ascendflow.schema.architecture import ModelArchitecture
from ascendflow.schema.errors import ConfigError
from ascendflow.schema.hardware import HardwareSpec
from ascendflow.schema.parallel import ParallelSpec


def check_parallel(parallel: ParallelSpec, hardware: HardwareSpec, arch: ModelArchitecture) -> None:
    """Reject parallel layouts vLLM would refuse.

    Rules: TP divides ``num_attention_heads`` (vLLM ``ModelConfig.verify_with_parallel_config``); PP is at most the
    number of layers; TP × PP × DP fits on ``nodes × devices_per_node``; expert parallel needs a MoE model.

    Raises:
        ConfigError: the first broken rule.
    """
    tp = parallel.tensor_parallel_size
    if arch.num_attention_heads % tp:
        # Only TPs that also fit the hardware with this PP × DP (a hint of 9 for a 1-device CPU is no fix).
        room = parallel.nodes * hardware.devices_per_node // (parallel.pipeline_parallel_size *
                                                              parallel.data_parallel_size)
        divisors = [d for d in range(1, min(arch.num_attention_heads, room) + 1) if arch.num_attention_heads % d == 0]
        raise ConfigError(
            "parallel.tensor_parallel_size", tp,
            f"must divide the model's num_attention_heads ({arch.num_attention_heads}); valid: {divisors}")
    kv = arch.kv_heads
    if not arch.is_mla and tp % kv and kv % tp:
        raise ConfigError("parallel.tensor_parallel_size", tp,
                          f"must divide the model's num_key_value_heads ({kv}) or be a multiple of it "
                          "(vLLM QKVParallelLinear)")
    widths = [("intermediate_size", arch.dense_intermediate_size)]
    moe_tp = tp * parallel.data_parallel_size  # FusedMoEParallelConfig.make: without EP, TP flattened over DP
    inter = arch.moe_intermediate_size
    if not parallel.enable_expert_parallel and arch.routed_experts and inter and inter % moe_tp:
        raise ConfigError("parallel.tensor_parallel_size", tp,
                          f"TP × DP = {moe_tp} must divide the model's moe_intermediate_size ({inter}) without expert "
                          f"parallel (vLLM fused_moe/layer.py shards experts over TP × DP); turn on "
                          f"parallel.enable_expert_parallel or change TP/DP")
    for name, width in widths:
        if width and (arch.routed_experts == 0 or name != "intermediate_size" or arch.first_k_dense_replace) \
                and width % tp:
            raise ConfigError("parallel.tensor_parallel_size", tp,
                              f"must divide the model's {name} ({width}) (vLLM MergedColumnParallelLinear)")
    if parallel.pipeline_parallel_size > arch.num_hidden_layers:
        raise ConfigError("parallel.pipeline_parallel_size", parallel.pipeline_parallel_size,
                          f"exceeds the model's num_hidden_layers ({arch.num_hidden_layers})")
    available = parallel.nodes * hardware.devices_per_node
    if parallel.world_size > available:
        pp, dp, per_node = parallel.pipeline_parallel_size, parallel.data_parallel_size, hardware.devices_per_node
        fits_dp = available // (tp * pp)  # DP ranks that fit when TP×PP is kept
        key, value, fix = (("parallel.data_parallel_size", dp, f"use parallel.data_parallel_size={fits_dp}")
                           if dp > 1 and fits_dp >= 1 else
                           ("parallel.tensor_parallel_size", tp, f"use TP×PP×DP ≤ {available}"))
        nodes_needed = -(-parallel.world_size // per_node)
        raise ConfigError(
            key, value,
            f"TP×PP×DP = {tp}×{pp}×{dp} = {parallel.world_size} devices, but hardware={hardware.name} × "
            f"parallel.nodes={parallel.nodes} has {available}; {fix}"
            + (f", or parallel.nodes={nodes_needed}" if platform_for(hardware.kind).more_nodes_fix else "")
            + " (or a hardware option with more devices per node)")
    if parallel.enable_expert_parallel and arch.routed_experts == 0:
        raise ConfigError("parallel.enable_expert_parallel", True,
                          "the model is dense (no routed experts); expert parallel needs a MoE model")


def devices_per_dp_rank(parallel: ParallelSpec) -> int:
    """Devices one DP rank uses: TP × PP."""
    return parallel.tensor_parallel_size * parallel.pipeline_parallel_size


def place_nodes(parallel: ParallelSpec, hardware: HardwareSpec) -> list[tuple[int, int, int, list[int]]]:
    """Spread DP ranks evenly over ``parallel.nodes`` nodes (vLLM runs one server per node with
    ``--data-parallel-size-local`` ranks; ``shared/reference/vllm_ascend.md`` §7).

    Returns:
        ``(node_rank, first_dp_rank, local_dp_ranks, devices)`` per node, devices being local indices.

    Raises:
        ConfigError: DP not divisible by the node count, or a node's share larger than its devices.
    """
    nodes, dp = parallel.nodes, parallel.data_parallel_size
    if dp % nodes:
        tp, pp = parallel.tensor_parallel_size, parallel.pipeline_parallel_size
        raise ConfigError("parallel.nodes", nodes, f"must divide data_parallel_size ({dp}): each node runs the same "
                                                   f"number of DP ranks (--data-parallel-size-local), and one DP "
                                                   f"rank (TP×PP = {tp}×{pp} = {tp * pp} devices) spans nodes only "
                                                   f"when it needs more than one node's {hardware.devices_per_node}; "
                                                   f"use parallel.nodes=1, a data_parallel_size that is a multiple "
                                                   f"of {nodes}, or TP×PP = {nodes * hardware.devices_per_node}")
    local = dp // nodes
    per_node = local * devices_per_dp_rank(parallel)
    if per_node > hardware.devices_per_node:
        raise ConfigError("parallel.nodes", nodes, f"{local} DP rank(s) × TP×PP {devices_per_dp_rank(parallel)} = "
                                                   f"{per_node} devices per node, but hardware={hardware.name} has "
                                                   f"{hardware.devices_per_node}")
    return [(node, node * local, local, list(range(per_node))) for node in range(nodes)]


def check_mla_heads(parallel: ParallelSpec, hardware: HardwareSpec, arch: ModelArchitecture,
                    rules: EngineRules) -> None:
    """Reject MLA query heads per rank (``num_attention_heads / TP``) the target release's decode kernel cannot take.

    ``rules.mla_heads_per_rank``: ``power_of_two`` (vllm-ascend v0.11.0 … v0.20.2rc1: ``mla_v1.py`` ``_forward_decode``
    passes the heads unpadded to ``npu_fused_infer_attention_score(_v2)``, which needs a power of two, vllm-ascend
    PR #9560), ``any`` (from v0.21.0rc1 the heads are padded to the next power of two). Eager and graph mode alike:
    the same kernel decodes in both. Only vllm-ascend (``Platform.checks_mla_heads_per_rank``) is checked.

    Raises:
        ConfigError: an MLA model on NPU whose heads per rank are not a power of two where the release needs one.
    """
    applies = platform_for(hardware.kind).checks_mla_heads_per_rank
    if not applies or not arch.is_mla or rules.mla_heads_per_rank == "any":
        return
    heads, tp = arch.num_attention_heads, parallel.tensor_parallel_size
    per_rank = heads // tp
    if per_rank & (per_rank - 1) == 0:
        return
    room = parallel.nodes * hardware.devices_per_node // (parallel.pipeline_parallel_size *
                                                          parallel.data_parallel_size)
    valid = [d for d in range(1, min(heads, room) + 1) if heads % d == 0 and (heads // d) & (heads // d - 1) == 0]
    raise ConfigError("parallel.tensor_parallel_size", tp,
                      f"MLA decode on {hardware.software} needs num_attention_heads / TP to be a power of two "
                      f"(npu_fused_infer_attention_score; mla_v1.py pads the heads only from vllm-ascend 0.21.0rc1, "
                      f"PR #9560), got {heads}/{tp} = {per_rank}; use TP in {valid} or "
                      f"hardware.software=vllm-ascend-0.21.0rc1 or later")

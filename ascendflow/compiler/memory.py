"""Memory pass: activation, non-torch and graph estimates, and the KV budget per device.

vLLM worker semantics (``shared/reference/vllm_ascend.md`` §3, vLLM ``gpu_worker.determine_available_memory``):
``requested = device_total × gpu_memory_utilization`` and
``kv_cache_bytes = requested − (weights + peak activation + non-torch)``; graph memory is captured afterwards and is
not subtracted (vllm-ascend), unless the plan pins ``kv_cache_memory_bytes`` to reserve it.
"""

from __future__ import annotations

from ascendflow.compiler.weights import Layout
from ascendflow.schema.architecture import ModelArchitecture
from ascendflow.schema.parallel import ParallelSpec

MIB = 1 << 20
GIB = 1 << 30
#: Margin vllm-ascend adds to its suggested ``--kv-cache-memory`` (PR #8289, reference §3).
KV_PIN_MARGIN_BYTES = 150 * MIB
#: Fixed memory per captured graph (task/stream bookkeeping); first-order estimate, to calibrate against
#: vllm-ascend's logged graph GiB.
GRAPH_OVERHEAD_BYTES = 2 * MIB


def activation_bytes(a: ModelArchitecture, layout: Layout, *, max_num_batched_tokens: int, max_num_seqs: int,
                     dtype_bytes: int) -> int:
    """Peak activation of vLLM's profiling run (dummy forward at ``max_num_batched_tokens``, then the sampler at
    ``max_num_seqs``), first-order model.

    Per token: the residual and hidden states (4 × hidden), the QKV output of this rank, and the widest MLP
    intermediate (dense: 2 × intermediate / TP; MoE: top-k routed copies of 2 × moe_intermediate, split by TP
    without expert parallel; an upper bound, as if every copy ran on this rank). Sampler: fp32 logits over the full
    vocabulary for ``max_num_seqs`` rows, on the last PP stage. Bytes.
    """
    tp = layout.tp
    heads = a.num_attention_heads // tp
    qkv = heads * ((a.qk_nope_head_dim or 0) + (a.qk_rope_head_dim or 0)) if a.is_mla else (
        (heads + 2 * max(1, a.kv_heads // tp)) * a.attention_head_dim)
    dense = 2 * (a.dense_intermediate_size or 0) // tp
    moe = 0
    if a.routed_experts:  # upper bound: every routed copy of the token computed on this rank
        inter = (a.moe_intermediate_size or 0) // (1 if layout.ep > 1 else tp)
        moe = (a.num_experts_per_tok or 1) * 2 * inter
    per_token = (4 * a.hidden_size + qkv + max(dense, moe)) * dtype_bytes
    logits = max_num_seqs * a.vocab_size * 4 if layout.last_stage else 0
    return max_num_batched_tokens * per_token + logits


def communicator_count(parallel: ParallelSpec) -> int:
    """HCCL communicators a rank belongs to: one per parallel group larger than 1 (TP, PP, DP, and EP when on)."""
    groups = [parallel.tensor_parallel_size, parallel.pipeline_parallel_size, parallel.data_parallel_size]
    if parallel.enable_expert_parallel:
        groups.append(parallel.tensor_parallel_size * parallel.data_parallel_size)
    return sum(1 for g in groups if g > 1)


def non_torch_bytes(runtime_bytes: int, parallel: ParallelSpec, hccl_buffsize_mb: int) -> int:
    """Runtime memory outside torch plus ``HCCL_BUFFSIZE`` MB for each communicator (reference §6). Bytes."""
    return runtime_bytes + communicator_count(parallel) * hccl_buffsize_mb * MIB


def graph_bytes(a: ModelArchitecture, layout: Layout, *, mode: str, capture_sizes: list[int],
                dtype_bytes: int) -> int:
    """Graph-pool estimate: per capture size, its input/output buffers (piecewise modes: one pair per piece, i.e.
    per layer + 1; full modes: one pair) of ``size × hidden`` elements, plus :data:`GRAPH_OVERHEAD_BYTES` per
    captured graph. First-order; vllm-ascend logs the measured value (reference §3). Bytes."""
    if mode == "NONE" or not capture_sizes:
        return 0
    pieces = len(layout.layers) + 1 if "PIECEWISE" in mode else 1
    graphs = len(capture_sizes) * (pieces if mode == "PIECEWISE" else 1 + (pieces if "PIECEWISE" in mode else 0))
    buffers = sum(2 * s * a.hidden_size * dtype_bytes for s in capture_sizes) * pieces
    return buffers + graphs * GRAPH_OVERHEAD_BYTES

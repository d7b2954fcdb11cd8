"""Weight bytes per device, estimated from the architecture.

Parameter counts follow the Hugging Face modules of Llama/Qwen (GQA + gated MLP) and DeepSeek-V3 (MLA + MoE with
shared experts, ``first_k_dense_replace`` dense layers). First-order sharding: every matrix is divided by TP and
layers by PP; routed experts by the expert-parallel group. Exact per-tensor sharding, vocab padding and quantized
checkpoints are refined in the Ascend compiler issue.
"""

from __future__ import annotations

from ascendflow.compiler.dtypes import DTYPE_BYTES
from ascendflow.schema.architecture import ModelArchitecture


def _attention_params(a: ModelArchitecture) -> int:
    h, heads = a.hidden_size, a.num_attention_heads
    if a.is_mla:
        qk_head = (a.qk_nope_head_dim or 0) + (a.qk_rope_head_dim or 0)
        if a.q_lora_rank:
            q = h * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * heads * qk_head
        else:
            q = h * heads * qk_head
        kv_a = h * (a.kv_lora_rank + (a.qk_rope_head_dim or 0)) + a.kv_lora_rank
        kv_b = a.kv_lora_rank * heads * ((a.qk_nope_head_dim or 0) + (a.v_head_dim or 0))
        o = heads * (a.v_head_dim or 0) * h
        return q + kv_a + kv_b + o
    hd = a.attention_head_dim
    return h * heads * hd + 2 * h * a.kv_heads * hd + heads * hd * h


def _is_moe_layer(a: ModelArchitecture, layer: int) -> bool:
    return a.routed_experts > 0 and layer >= (a.first_k_dense_replace or 0)


def _mlp_params(a: ModelArchitecture, layer: int, expert_parallel: int) -> int:
    h = a.hidden_size
    if not _is_moe_layer(a, layer):
        return 3 * h * (a.intermediate_size or 0)
    inter = a.moe_intermediate_size or 0
    routed = 3 * h * inter * a.routed_experts // expert_parallel
    shared = 3 * h * inter * (a.n_shared_experts or 0)
    router = h * a.routed_experts
    return routed + shared + router


def weight_bytes_per_device(
    a: ModelArchitecture, *, dtype: str, tensor_parallel_size: int, pipeline_parallel_size: int,
    expert_parallel_size: int,
) -> int:
    """Estimated weight bytes on the most loaded device.

    Args:
        a: model architecture.
        dtype: weight dtype.
        tensor_parallel_size: TP degree (divides attention, dense MLP, embeddings).
        pipeline_parallel_size: PP degree (divides layers; the embedding stage is the bottleneck).
        expert_parallel_size: devices routed experts are spread over (TP, or TP × DP with expert parallel).

    Returns:
        Bytes.
    """
    tp, ep = tensor_parallel_size, expert_parallel_size
    layers_per_stage = -(-a.num_hidden_layers // pipeline_parallel_size)
    per_layer_total = 0
    for layer in range(layers_per_stage):
        per_layer_total += _attention_params(a) // tp + 2 * a.hidden_size
        mlp = _mlp_params(a, layer, ep)
        per_layer_total += mlp // tp if not _is_moe_layer(a, layer) else mlp
    embed = a.vocab_size * a.hidden_size // tp
    lm_head = 0 if a.tie_word_embeddings else embed
    # With PP the first stage holds the embedding and the last the LM head; with PP = 1 one device holds both.
    head_params = embed + lm_head if pipeline_parallel_size == 1 else max(embed, lm_head)
    params = per_layer_total + head_params + a.hidden_size
    return params * DTYPE_BYTES[dtype]


def total_params(a: ModelArchitecture) -> int:
    """Total parameter count of the model (no sharding)."""
    return weight_bytes_per_device(
        a, dtype="int8", tensor_parallel_size=1, pipeline_parallel_size=1, expert_parallel_size=1)

"""Weights pass: exact per-rank weight bytes from the architecture, the parallel layout and the quantization.

Each tensor vLLM allocates on a rank is enumerated with its sharded shape (vLLM's parallel layers):

* ``VocabParallelEmbedding`` / ``ParallelLMHead``: vocab padded to a multiple of 64 (``DEFAULT_VOCAB_PADDING_SIZE``,
  ``vllm/model_executor/layers/vocab_parallel_embedding.py``), rows split by TP; the first PP stage holds the
  embedding, the last the LM head (shared with the embedding when tied and PP = 1).
* ``QKVParallelLinear``: Q heads split by TP; KV heads split by TP, replicated (one head per rank) when
  ``num_key_value_heads < TP``. ``RowParallelLinear`` o_proj / down_proj: input split by TP.
* MLA (``DeepseekV2MLAAttention``): ``fused_qkv_a_proj`` (q_a + kv_a_with_mqa) and the q_a/kv_a layernorms are
  replicated; ``q_b_proj`` / ``q_proj``, ``kv_b_proj`` and ``o_proj`` are split by TP.
* MoE (``FusedMoE``): routed experts split over the expert-parallel group (TP × DP with ``enable_expert_parallel``,
  whole experts per rank), else every rank holds every expert with its intermediate size split by TP; the router
  gate is replicated; shared experts are a TP-split MLP.
* PP stages: ``vllm/distributed/utils.py`` ``get_pp_indices`` (remainder layers go to the stages before the last).
* Quantized checkpoints (msModelSlim, ``shared/reference/vllm_ascend.md`` §5): linear weights in int8 (int4 for W4A8)
  plus per-output-channel ``weight_scale``/``weight_offset`` (float32 assumed), W8A8 static adds ``quant_bias`` int32
  and ``deq_scale`` (8 B) per output channel; embeddings, LM head, norms, router and biases stay in the model dtype
  (``FLOAT``). MTP (``num_nextn_predict_layers``) layers are loaded only with speculative decoding and not counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from ascendflow.compiler.dtypes import DTYPE_BYTES
from ascendflow.schema.architecture import ModelArchitecture

VOCAB_PADDING = 64

#: Extra bytes per output channel and bytes per weight element, per msModelSlim scheme (reference §5).
QUANT_SCHEMES: dict[str, tuple[float, int]] = {
    "W8A8": (1.0, 4 + 4 + 4 + 8),          # int8 weight; scale, offset (fp32), quant_bias (int32), deq_scale (8 B)
    "W8A8_DYNAMIC": (1.0, 4 + 4),          # int8 weight; scale, offset
    "W8A16": (1.0, 4 + 4),
    "W4A8_DYNAMIC": (0.5, 4 + 4),          # int4 packed two per byte
}


#: Model types whose decoder layers add pre- and post-feed-forward RMSNorms (vLLM ``gemma2.py``, ``gemma3.py``).
_SANDWICH_NORM_MODELS = ("gemma2", "gemma3", "gemma3_text")


@dataclass(frozen=True)
class Tensor:
    """One weight tensor on a rank: ``rows × cols`` elements; ``kind`` decides its dtype under quantization.

    ``kind``: ``float`` (embedding, LM head, norms, router, biases: always the model dtype), ``fp32`` (kept in float32
    by vLLM, e.g. DeepSeek-V3's ``e_score_correction_bias``), ``linear`` (attention and dense MLP projections) or
    ``expert`` (MoE expert projections).
    """

    name: str
    rows: int
    cols: int
    kind: str


@dataclass(frozen=True)
class Layout:
    """Parallel layout of one rank: TP and EP degrees, PP stage and its layer range."""

    tp: int
    ep: int
    first_stage: bool
    last_stage: bool
    layers: range
    pp: int = 1


def pp_partition(num_layers: int, pp: int) -> list[range]:
    """Layer ranges per PP stage, as vLLM's ``get_pp_indices``: even split, the remainder added one layer each to
    the stages before the last (``partitions[-i] += 1`` for i = 2 .. remainder + 1)."""
    parts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    ranges, start = [], 0
    for n in parts:
        ranges.append(range(start, start + n))
        start += n
    return ranges


def padded_vocab(vocab_size: int) -> int:
    """Vocabulary rounded up to a multiple of 64 (vLLM ``pad_vocab_size``)."""
    return -(-vocab_size // VOCAB_PADDING) * VOCAB_PADDING


def _attention(a: ModelArchitecture, tp: int) -> Iterator[Tensor]:
    h, heads = a.hidden_size, a.num_attention_heads
    if a.is_mla:
        qk = (a.qk_nope_head_dim or 0) + (a.qk_rope_head_dim or 0)
        kv_a = a.kv_lora_rank + (a.qk_rope_head_dim or 0)
        if a.q_lora_rank:
            yield Tensor("fused_qkv_a_proj", a.q_lora_rank + kv_a, h, "linear")
            yield Tensor("q_a_layernorm", 1, a.q_lora_rank, "float")
            yield Tensor("q_b_proj", heads // tp * qk, a.q_lora_rank, "linear")
        else:
            yield Tensor("kv_a_proj_with_mqa", kv_a, h, "linear")
            yield Tensor("q_proj", heads // tp * qk, h, "linear")
        yield Tensor("kv_a_layernorm", 1, a.kv_lora_rank, "float")
        yield Tensor("kv_b_proj", heads // tp * ((a.qk_nope_head_dim or 0) + (a.v_head_dim or 0)), a.kv_lora_rank,
                     "linear")
        yield Tensor("o_proj", h, heads // tp * (a.v_head_dim or 0), "linear")
        return
    hd = a.attention_head_dim
    kv_per_rank = max(1, a.kv_heads // tp)
    qkv_rows = (heads // tp + 2 * kv_per_rank) * hd
    yield Tensor("qkv_proj", qkv_rows, h, "linear")
    if a.has_qkv_bias:
        yield Tensor("qkv_proj.bias", 1, qkv_rows, "float")
    if a.has_qk_norm:
        yield Tensor("q_norm+k_norm", 2, hd, "float")
    yield Tensor("o_proj", h, heads // tp * hd, "linear")


def _mlp(a: ModelArchitecture, layer: int, tp: int, ep: int) -> Iterator[Tensor]:
    h = a.hidden_size
    if not a.is_moe_layer(layer):
        inter = a.layer_intermediate_size(layer) // tp
        yield Tensor("gate_up_proj", 2 * inter, h, "linear")
        yield Tensor("down_proj", h, inter, "linear")
        return
    experts, inter = a.routed_experts, a.moe_intermediate_size or 0
    yield Tensor("gate (router)", experts, h, "float")
    if a.topk_method == "noaux_tc":  # vllm/model_executor/models/deepseek_v2.py: float32 parameter
        yield Tensor("gate.e_score_correction_bias", 1, experts, "fp32")
    if ep > 1:  # whole experts, spread over the EP group
        local, inter_local = -(-experts // ep), inter
    else:
        local, inter_local = experts, inter // tp
    yield Tensor("experts.w13", local * 2 * inter_local, h, "expert")
    yield Tensor("experts.w2", local * h, inter_local, "expert")
    if a.n_shared_experts:
        shared = inter * a.n_shared_experts // tp
        yield Tensor("shared_experts.gate_up_proj", 2 * shared, h, "linear")
        yield Tensor("shared_experts.down_proj", h, shared, "linear")


def rank_tensors(a: ModelArchitecture, layout: Layout) -> Iterator[Tensor]:
    """Every weight tensor one rank holds, sharded as vLLM shards it."""
    vocab_rows = padded_vocab(a.vocab_size) // layout.tp
    if layout.first_stage:
        yield Tensor("embed_tokens", vocab_rows, a.hidden_size, "float")
    if layout.last_stage and not (a.tie_word_embeddings and layout.first_stage):
        yield Tensor("lm_head", vocab_rows, a.hidden_size, "float")
    if layout.last_stage:
        yield Tensor("norm", 1, a.hidden_size, "float")
    for layer in layout.layers:
        yield Tensor("input_layernorm+post_attention_layernorm", 2, a.hidden_size, "float")
        if a.model_type in _SANDWICH_NORM_MODELS:  # gemma2.py / gemma3.py: pre_ and post_feedforward_layernorm
            yield Tensor("pre_feedforward_layernorm+post_feedforward_layernorm", 2, a.hidden_size, "float")
        yield from _attention(a, layout.tp)
        yield from _mlp(a, layer, layout.tp, layout.ep)


def tensor_bytes(t: Tensor, dtype: str, linear_scheme: str | None, expert_scheme: str | None) -> int:
    """Bytes of one tensor: ``float`` tensors in ``dtype``; ``linear``/``expert`` in their quantization scheme
    (``None``: ``dtype``)."""
    if t.kind == "fp32":
        return t.rows * t.cols * 4
    scheme = {"linear": linear_scheme, "expert": expert_scheme}.get(t.kind)
    if scheme is None:
        return t.rows * t.cols * DTYPE_BYTES[dtype]
    per_elem, per_row = QUANT_SCHEMES[scheme]
    return int(t.rows * t.cols * per_elem) + t.rows * per_row


def weight_bytes(a: ModelArchitecture, layout: Layout, *, dtype: str, linear_scheme: str | None = None,
                 expert_scheme: str | None = None) -> int:
    """Weight bytes on one rank.

    Args:
        a: model architecture.
        layout: the rank's TP/EP degrees and PP stage.
        dtype: model dtype (``bfloat16``...).
        linear_scheme: msModelSlim scheme of attention/dense projections, or ``None`` for unquantized.
        expert_scheme: scheme of MoE experts, or ``None``.

    Returns:
        Bytes.
    """
    return sum(tensor_bytes(t, dtype, linear_scheme, expert_scheme) for t in rank_tensors(a, layout))


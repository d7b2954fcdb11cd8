"""Per-rank weight tensors of the decoder families whose layers are not plain attention + MLP, as vLLM 0.32.0 builds
them (``vllm/model_executor/models/*.py`` and ``vllm/model_executor/layers/mamba/*``, read at the installed 0.32.0):

* Qwen3-Next (``qwen3_next.py``): Gated-DeltaNet mixers (``QwenGatedDeltaNetAttention``,
  ``layers/mamba/gdn/qwen_gdn_linear_attn.py``), gated full attention (``Qwen3NextAttention``: Q doubled by
  ``attn_output_gate``), ``Qwen3NextSparseMoeBlock`` with a shared expert and its ``shared_expert_gate``.
* Granite-4.0-H (``granitemoehybrid.py``): Mamba2 mixers (``MambaMixer2``, ``layers/mamba/mamba_mixer2.py``),
  ``GraniteMoeSharedMLP``.
* gpt-oss (``gpt_oss.py``): ``OAIAttention`` (Q/K/V and O biases, ``sinks``), ``MLPBlock`` (router with bias, experts
  with ``w13_bias``/``w2_bias``: ``UnquantizedFusedMoEMethod.create_weights``).
* Llama-4 text (``llama4.py``): ``Llama4MoE`` (router, shared expert), dense layers at ``intermediate_size_mlp``;
  its Q/K norm has no weight.
* Gemma-4 / Gemma-3n (``gemma4.py``, ``gemma3n.py``): per-layer head sizes, KV-shared layers holding only ``q_proj``,
  ``layer_scalar``, per-layer inputs (PLE), AltUp and Laurel.
* MiniMax-M2 / M2.5 / M2.7 (``minimax_m2.py``): full-width Q/K RMSNorms (``MiniMaxText01RMSNormTP``, weight split
  by TP), a float32 router and ``e_score_correction_bias``, 256 routed experts, no shared expert.

Sharding follows the layer classes: ``ColumnParallelLinear``/``MergedColumnParallelLinear``/``QKVParallelLinear``
split output rows by TP, ``RowParallelLinear`` its input columns (its bias replicated), ``ReplicatedLinear``, norms
and the MoE router are whole on every rank. Parameters vLLM creates in float32 (GDN ``A_log``, Mamba2 ``A``, Gemma-3n
``correct_output_scale``) are ``fp32`` whatever the checkpoint stores.
"""

from __future__ import annotations

from typing import Callable, Iterator

from ascendflow.compiler.memory.kv_specs import _per_layer_overrides, layer_kinds
from ascendflow.compiler.memory.weight_tensors import Layout, Tensor, padded_vocab
from ascendflow.schema.architecture import ModelArchitecture


def fused_experts(n: int, inter: int, h: int, layout: Layout, *, bias: bool = False) -> Iterator[Tensor]:
    """``FusedMoE`` weights of ``n`` experts of width ``inter``: with EP whole experts (ceil(n / EP) on the fullest
    rank), else every expert with ``inter`` split over TP × DP (``FusedMoEParallelConfig.make``). ``bias``: gpt-oss's
    ``w13_bias`` (split like ``w13``) and ``w2_bias`` (``[experts, hidden]``, not split:
    ``UnquantizedFusedMoEMethod.create_weights``)."""
    if layout.ep > 1:
        local, inter_local = -(-n // layout.ep), inter
    else:
        local, inter_local = n, inter // (layout.tp * layout.dp)
    yield Tensor("experts.w13", local * 2 * inter_local, h, "expert")
    yield Tensor("experts.w2", local * h, inter_local, "expert_w2")
    if bias:
        yield Tensor("experts.w13_bias", local, 2 * inter_local, "float")
        yield Tensor("experts.w2_bias", local, h, "float")


def dense_mlp(h: int, inter: int, tp: int, prefix: str = "mlp") -> Iterator[Tensor]:
    """``gate_up_proj`` (``MergedColumnParallelLinear``) and ``down_proj`` (``RowParallelLinear``), width ``inter``."""
    yield Tensor(f"{prefix}.gate_up_proj", 2 * (inter // tp), h, "mlp")
    yield Tensor(f"{prefix}.down_proj", h, inter // tp, "mlp")


def attention(h: int, heads: int, kv_heads: int, hd: int, tp: int, *, q_groups: int = 1, bias: bool = False,
              o_bias: bool = False, kv: bool = True) -> Iterator[Tensor]:
    """``QKVParallelLinear`` (KV heads replicated, one per rank, below TP; ``q_groups`` 2 for Qwen3-Next's output
    gate) or, for a KV-shared layer (``kv=False``), a ``q_proj`` ``ColumnParallelLinear``; ``o_proj`` row-parallel."""
    q_rows = heads * q_groups // tp * hd
    rows = q_rows + (2 * max(1, kv_heads // tp) * hd if kv else 0)
    yield Tensor("qkv_proj" if kv else "q_proj", rows, h, "linear")
    if bias:
        yield Tensor("qkv_proj.bias", 1, rows, "float")
    yield Tensor("o_proj", h, heads // tp * hd, "linear")
    if o_bias:
        yield Tensor("o_proj.bias", 1, h, "float")


def gdn_mixer(a: ModelArchitecture, tp: int) -> Iterator[Tensor]:
    """``QwenGatedDeltaNetAttention`` (vLLM 0.32.0): ``in_proj_qkvz`` (2 × key + 2 × value dims), ``in_proj_ba``
    (2 × V heads), ``conv1d`` (2 × key + value dims × kernel, no quant config), ``dt_bias`` and float32 ``A_log``
    (V heads), all split by TP; ``norm`` (``RMSNormGated`` over ``linear_value_head_dim``) replicated; ``out_proj``
    row-parallel."""
    nk, nv = a.linear_num_key_heads or 0, a.linear_num_value_heads or 0
    key, value = nk * (a.linear_key_head_dim or 0), nv * (a.linear_value_head_dim or 0)
    h = a.hidden_size
    yield Tensor("linear_attn.in_proj_qkvz", (2 * key + 2 * value) // tp, h, "linear")
    yield Tensor("linear_attn.in_proj_ba", 2 * nv // tp, h, "linear")
    yield Tensor("linear_attn.conv1d", (2 * key + value) // tp, a.linear_conv_kernel_dim or 4, "float")
    yield Tensor("linear_attn.dt_bias", 1, nv // tp, "float")
    yield Tensor("linear_attn.A_log", 1, nv // tp, "fp32")
    yield Tensor("linear_attn.norm", 1, a.linear_value_head_dim or 0, "float")
    yield Tensor("linear_attn.out_proj", h, value // tp, "linear")


def mamba2_dims(a: ModelArchitecture, tp: int) -> tuple[int, int]:
    """(intermediate, conv dim) of a ``MambaMixer2`` on TP ranks: ``mamba_expand × hidden`` and intermediate + 2 ×
    groups × ``mamba_d_state``, groups padded to a multiple of TP when they do not divide it
    (``extra_groups_for_head_shards``: ``n_groups == 1`` duplicated onto every rank), whole-model sizes."""
    groups = a.mamba_n_groups or 1
    if groups % tp:
        groups += tp - groups
    inter = (a.mamba_expand or 2) * a.hidden_size
    return inter, inter + 2 * groups * (a.mamba_d_state or 0)


def mamba2_mixer(a: ModelArchitecture, tp: int) -> Iterator[Tensor]:
    """``MambaMixer2`` (vLLM 0.32.0): groups padded to TP when they do not divide it
    (``extra_groups_for_head_shards``); ``in_proj`` (intermediate + conv dim + heads) and ``conv1d`` (intermediate +
    2 × groups × state, × ``d_conv``, with bias when ``mamba_conv_bias``) split by TP; float32 ``A``, ``D`` and
    ``dt_bias`` (heads / TP); ``norm`` (``Mixer2RMSNormGated``, intermediate / TP); ``out_proj`` row-parallel."""
    h, heads = a.hidden_size, a.mamba_n_heads or 0
    inter, conv_dim = mamba2_dims(a, tp)
    in_rows = (inter + conv_dim + heads) // tp
    yield Tensor("mamba.in_proj", in_rows, h, "linear")
    if a.mamba_proj_bias:
        yield Tensor("mamba.in_proj.bias", 1, in_rows, "float")
    yield Tensor("mamba.conv1d", conv_dim // tp, a.mamba_d_conv or 4, "float")
    if a.mamba_conv_bias is not False:
        yield Tensor("mamba.conv1d.bias", 1, conv_dim // tp, "float")
    yield Tensor("mamba.A", 1, heads // tp, "fp32")
    yield Tensor("mamba.D+dt_bias", 2, heads // tp, "float")
    yield Tensor("mamba.norm", 1, inter // tp, "float")
    yield Tensor("mamba.out_proj", h, inter // tp, "linear")
    if a.mamba_proj_bias:
        yield Tensor("mamba.out_proj.bias", 1, h, "float")


def _norms(h: int, count: int) -> Tensor:
    return Tensor(f"{count} RMSNorms", count, h, "float")


def _kind(a: ModelArchitecture, layer: int) -> str:
    """Layer type of ``layer``; indices past ``num_hidden_layers`` (MTP draft layers) are full attention."""
    kinds = layer_kinds(a)
    return kinds[layer] if layer < len(kinds) else "full_attention"


def qwen3_next_layer(a: ModelArchitecture, layer: int, layout: Layout) -> Iterator[Tensor]:
    """``Qwen3NextDecoderLayer``: GDN or gated full attention (Q/K ``GemmaRMSNorm``s), then the sparse MoE block on
    layers ``(i + 1) % decoder_sparse_step == 0`` outside ``mlp_only_layers``, else a dense MLP."""
    h, tp = a.hidden_size, layout.tp
    yield _norms(h, 2)
    if _kind(a, layer) == "linear_attention":
        yield from gdn_mixer(a, tp)
    else:
        hd = a.attention_head_dim
        gate = 1 if a.attn_output_gate is False else 2
        yield from attention(h, a.num_attention_heads, a.kv_heads, hd, tp, q_groups=gate)
        yield Tensor("q_norm+k_norm", 2, hd, "float")
    experts = a.num_experts or 0
    if experts and layer not in (a.mlp_only_layers or ()) and (layer + 1) % (a.decoder_sparse_step or 1) == 0:
        yield Tensor("mlp.gate (router)", experts, h, "float")
        yield from fused_experts(experts, a.moe_intermediate_size or 0, h, layout)
        if a.shared_expert_intermediate_size:
            yield from dense_mlp(h, a.shared_expert_intermediate_size, tp, "mlp.shared_expert")
        yield Tensor("mlp.shared_expert_gate", 1, h, "float")  # ReplicatedLinear(hidden, 1), quant_config=None
    else:
        yield from dense_mlp(h, a.layer_intermediate_size(layer), tp)


def granite_hybrid_layer(a: ModelArchitecture, layer: int, layout: Layout) -> Iterator[Tensor]:
    """``GraniteMoeHybrid{Mamba,Attention}DecoderLayer``: a Mamba2 mixer or attention (head dim hidden / heads, biases
    with ``attention_bias``), ``GraniteMoeMoE`` when ``num_local_experts`` > 0 and ``GraniteMoeSharedMLP``
    (``input_linear`` 2 × ``shared_intermediate_size``, ``output_linear``) when ``shared_intermediate_size`` > 0."""
    h, tp = a.hidden_size, layout.tp
    yield _norms(h, 2)
    if _kind(a, layer) == "full_attention":
        yield from attention(h, a.num_attention_heads, a.kv_heads, h // a.num_attention_heads, tp,
                             bias=a.attention_bias, o_bias=a.attention_bias)
    else:
        yield from mamba2_mixer(a, tp)
    if a.num_local_experts:
        yield Tensor("block_sparse_moe.router", a.num_local_experts, h, "float")
        yield from fused_experts(a.num_local_experts, a.layer_intermediate_size(layer), h, layout)
    if a.shared_intermediate_size:
        yield from dense_mlp(h, a.shared_intermediate_size, tp, "shared_mlp")


def gpt_oss_layer(a: ModelArchitecture, layer: int, layout: Layout) -> Iterator[Tensor]:
    """``TransformerBlock``: ``OAIAttention`` (Q/K/V and O biases, one ``sinks`` value per Q head split by TP) and
    ``MLPBlock`` (``GateLinear`` router with bias; experts of width ``intermediate_size`` with biases)."""
    h, tp = a.hidden_size, layout.tp
    yield _norms(h, 2)
    yield from attention(h, a.num_attention_heads, a.kv_heads, a.attention_head_dim, tp, bias=True, o_bias=True)
    yield Tensor("self_attn.sinks", 1, a.num_attention_heads // tp, "float")
    experts = a.num_local_experts or 0
    yield Tensor("mlp.router+bias", experts, h + 1, "float")
    yield from fused_experts(experts, a.layer_intermediate_size(layer), h, layout, bias=True)


def llama4_layer(a: ModelArchitecture, layer: int, layout: Layout) -> Iterator[Tensor]:
    """``Llama4DecoderLayer``: attention without biases (its Q/K ``RMSNorm`` has no weight); ``Llama4MoE`` (router,
    shared expert and experts at ``intermediate_size``) on layers ``(i + 1) % interleave_moe_layer_step == 0``, else
    a ``LlamaMLP`` at ``intermediate_size_mlp``."""
    h, tp = a.hidden_size, layout.tp
    yield _norms(h, 2)
    yield from attention(h, a.num_attention_heads, a.kv_heads, a.attention_head_dim, tp)
    step = a.interleave_moe_layer_step or 0
    if step > 0 and (layer + 1) % step == 0:
        experts, inter = a.num_local_experts or 0, a.layer_intermediate_size(layer)
        yield Tensor("feed_forward.router", experts, h, "float")
        yield from dense_mlp(h, inter, tp, "feed_forward.shared_expert")
        yield from fused_experts(experts, inter, h, layout)
    else:
        yield from dense_mlp(h, a.intermediate_size_mlp or a.layer_intermediate_size(layer), tp, "feed_forward")


def _kv_shared(a: ModelArchitecture, layer: int) -> bool:
    """Layer reuses an earlier layer's KV (``num_kv_shared_layers``): it holds ``q_proj`` only, no ``k_norm``."""
    return a.num_kv_shared_layers > 0 and layer >= a.num_hidden_layers - a.num_kv_shared_layers


def _gemma_attention(a: ModelArchitecture, layer: int, hd: int, kv_heads: int, tp: int) -> Iterator[Tensor]:
    """Gemma-3n/4 attention: ``qkv_proj`` + ``k_norm`` (``v_norm`` has no weight), or ``q_proj`` alone on KV-shared
    layers; ``o_proj``; ``q_norm``."""
    shared = _kv_shared(a, layer)
    yield from attention(a.hidden_size, a.num_attention_heads, kv_heads, hd, tp, bias=a.attention_bias,
                         o_bias=a.attention_bias, kv=not shared)
    yield Tensor("q_norm" if shared else "q_norm+k_norm", 1 if shared else 2, hd, "float")


def _per_layer_input(a: ModelArchitecture) -> Iterator[Tensor]:
    """Gemma-3n/4 per-layer input (PLE) of a decoder layer: ``per_layer_input_gate`` / ``per_layer_projection``
    (``ReplicatedLinear``) and ``post_per_layer_input_norm``."""
    p, h = a.hidden_size_per_layer_input or 0, a.hidden_size
    if p > 0:
        yield Tensor("per_layer_input_gate", p, h, "linear")
        yield Tensor("per_layer_projection", h, p, "linear")
        yield _norms(h, 1)


def gemma4_layer(a: ModelArchitecture, layer: int, layout: Layout) -> Iterator[Tensor]:
    """``Gemma4DecoderLayer`` (dense MLP only: the ``enable_moe_block`` router and experts are not modelled):
    per-layer head size / KV heads (``per_layer_config``), four RMSNorms, ``layer_scalar``, MLP doubled on KV-shared
    layers with ``use_double_wide_mlp``, PLE."""
    h, tp = a.hidden_size, layout.tp
    override = _per_layer_overrides(a).get(layer, {})
    hd = override.get("head_dim", a.attention_head_dim)
    yield _norms(h, 4)
    yield from _gemma_attention(a, layer, hd, override.get("num_key_value_heads", a.kv_heads), tp)
    yield Tensor("layer_scalar", 1, 1, "float")
    inter = a.layer_intermediate_size(layer) * (2 if a.use_double_wide_mlp and _kv_shared(a, layer) else 1)
    yield from dense_mlp(h, inter, tp)
    yield from _per_layer_input(a)


def gemma3n_layer(a: ModelArchitecture, layer: int, layout: Layout) -> Iterator[Tensor]:
    """``Gemma3nDecoderLayer``: attention, four RMSNorms, MLP of the layer's width, ``Gemma3nAltUp``
    (``correction_coefs`` n × n, ``prediction_coefs`` n² × n, ``modality_router`` n × hidden, ``router_norm``,
    float32 ``correct_output_scale``), ``Gemma3nLaurelBlock`` (``linear_left`` column- and ``linear_right``
    row-parallel over ``laurel_rank``, ``post_laurel_norm``) and PLE."""
    h, tp, n = a.hidden_size, layout.tp, a.altup_num_inputs or 0
    yield _norms(h, 4)
    yield from _gemma_attention(a, layer, a.attention_head_dim, a.kv_heads, tp)
    yield from dense_mlp(h, a.layer_intermediate_size(layer), tp)
    yield Tensor("altup.correction_coefs", n, n, "linear")
    yield Tensor("altup.prediction_coefs", n * n, n, "linear")
    yield Tensor("altup.modality_router", n, h, "linear")
    yield _norms(h, 1)  # altup.router_norm
    yield Tensor("altup.correct_output_scale", 1, h, "fp32")
    rank = a.laurel_rank or 0
    yield Tensor("laurel.linear_left", rank // tp, h, "linear")
    yield Tensor("laurel.linear_right", h, rank // tp, "linear")
    yield _norms(h, 1)  # laurel.post_laurel_norm
    yield from _per_layer_input(a)


def minimax_m2_layer(a: ModelArchitecture, layer: int, layout: Layout) -> Iterator[Tensor]:
    """``MiniMaxM2DecoderLayer`` (vLLM 0.32.0 ``minimax_m2.py``): two RMSNorms; ``MiniMaxM2Attention`` (``qkv_proj``,
    ``o_proj``; ``q_norm`` = ``MiniMaxText01RMSNormTP(head_dim × heads)``, its weight split by TP; ``k_norm`` over
    ``head_dim × kv_heads`` split by TP, or by the KV heads when they are fewer than TP: ``max(1, kv / TP) × head_dim``
    per rank. vLLM before that split k_norm by TP alone, which differs only when KV heads < TP, by 64 elements per
    layer at TP 16: not modelled); ``MiniMaxM2MoE``: the router (``GateLinear``/``ReplicatedLinear``,
    ``params_dtype=torch.float32``, no quant config: float32 whatever the checkpoint), the float32
    ``e_score_correction_bias`` when ``use_routing_bias``, and ``FusedMoE`` of ``num_local_experts`` experts of
    width ``intermediate_size``."""
    h, tp, hd = a.hidden_size, layout.tp, a.attention_head_dim
    experts = a.num_local_experts or 0
    yield _norms(h, 2)
    yield from attention(h, a.num_attention_heads, a.kv_heads, hd, tp, bias=a.attention_bias)
    yield Tensor("q_norm+k_norm", 1, (a.num_attention_heads // tp + max(1, a.kv_heads // tp)) * hd, "float")
    yield Tensor("block_sparse_moe.gate (router)", experts, h, "fp32")
    if a.use_routing_bias:
        yield Tensor("block_sparse_moe.e_score_correction_bias", 1, experts, "fp32")
    yield from fused_experts(experts, a.layer_intermediate_size(layer), h, layout)


def first_stage_extras(a: ModelArchitecture, layout: Layout) -> Iterator[Tensor]:
    """Model-level tensors beside the embedding (Gemma-3n ``Gemma3nSelfDecoder`` / ``Gemma3nTextModel``): the
    per-layer embedding (``VocabParallelEmbedding`` of ``vocab_size_per_layer_input`` × layers × PLE width),
    ``per_layer_model_projection`` (column-parallel), ``per_layer_projection_norm`` and the ``altup_num_inputs - 1``
    ``altup_projections`` / ``altup_unembed_projections`` (column-parallel hidden × hidden; Gemma-3n only).
    Counted on the first PP stage (vLLM builds them outside the PP-partitioned layers)."""
    if a.model_type not in ("gemma3n_text", "gemma4_text") or not a.hidden_size_per_layer_input:
        return  # Gemma4Model builds the same PLE tensors (no AltUp) when hidden_size_per_layer_input > 0
    h, tp, ple = a.hidden_size, layout.tp, a.num_hidden_layers * a.hidden_size_per_layer_input
    vocab = a.vocab_size_per_layer_input or a.vocab_size
    yield Tensor("embed_tokens_per_layer", padded_vocab(vocab) // tp, ple, "float")
    yield Tensor("per_layer_model_projection", ple // tp, h, "linear")
    yield Tensor("per_layer_projection_norm", 1, a.hidden_size_per_layer_input, "float")
    if a.model_type == "gemma3n_text":
        altup = 2 * ((a.altup_num_inputs or 1) - 1)
        yield Tensor("altup_projections+altup_unembed_projections", altup * (h // tp), h, "linear")


#: model_type -> decoder-layer tensor list for the families above.
FAMILIES: dict[str, Callable[[ModelArchitecture, int, Layout], Iterator[Tensor]]] = {
    "qwen3_next": qwen3_next_layer,
    # Qwen3.5 (vLLM qwen3_5.py Qwen3_5DecoderLayer subclasses Qwen3NextDecoderLayer; the checkpoint's split
    # in_proj_qkv / in_proj_z / in_proj_b / in_proj_a load into the same merged in_proj_qkvz / in_proj_ba)
    "qwen3_5_text": qwen3_next_layer,
    "qwen3_5_moe_text": qwen3_next_layer,
    "granitemoehybrid": granite_hybrid_layer,
    "gpt_oss": gpt_oss_layer,
    "llama4_text": llama4_layer,
    "gemma4_text": gemma4_layer,
    "gemma3n_text": gemma3n_layer,
    "minimax_m2": minimax_m2_layer,
}

"""Weights pass: exact per-rank weight bytes from the architecture, the parallel layout and the quantization.

Each tensor vLLM allocates on a rank is enumerated with its sharded shape (vLLM's parallel layers):

* ``VocabParallelEmbedding`` / ``ParallelLMHead``: vocab padded to a multiple of 64 (``DEFAULT_VOCAB_PADDING_SIZE``,
  ``vllm/model_executor/layers/vocab_parallel_embedding.py``), rows split by TP; the first PP stage holds the
  embedding, the last the LM head (shared with the embedding when tied and PP = 1).
* ``QKVParallelLinear``: Q heads split by TP; KV heads split by TP, replicated (one head per rank) when
  ``num_key_value_heads < TP``. ``RowParallelLinear`` o_proj / down_proj: input split by TP.
* MLA (``DeepseekV2MLAAttention``): ``fused_qkv_a_proj`` (q_a + kv_a_with_mqa) and the q_a/kv_a layernorms are
  replicated; ``q_b_proj`` / ``q_proj``, ``kv_b_proj`` and ``o_proj`` are split by TP. ``kv_b_proj`` is always in the
  model dtype (:mod:`ascendflow.compiler.memory.mla_weights`).
* MoE (``FusedMoE``): ``FusedMoEParallelConfig.make`` (``vllm/model_executor/layers/fused_moe/config.py``, read at
  vLLM 0.11.0, 0.13.0, 0.18.0, 0.20.2, 0.23.0 and 0.32.0) flattens TP across DP (and PCP): with
  ``enable_expert_parallel`` the EP group is TP × DP and holds whole experts, ceil(experts / EP) on the fullest
  rank; without it every rank holds every expert with its intermediate size split by TP × DP, not TP alone. The
  router gate is replicated; shared experts are a TP-split MLP (``DeepseekV2MLP``).
* PP stages: ``vllm/distributed/utils.py`` ``get_pp_indices`` (remainder layers go to the stages before the last).
* Quantized checkpoints (msModelSlim): projections take the bytes of :func:`ascendflow.compiler.memory.quant_bytes.quant_bytes`
  (read from vllm-ascend's quant methods); embeddings, LM head, norms, router and biases stay in the model dtype
  (``FLOAT``). Attention projections use ``linear_scheme``; dense MLPs and shared experts ``mlp_scheme`` (msModelSlim's
  DeepSeek W8A8 recipe quantizes ``*mlp*`` W8A8_DYNAMIC and ``*self_attn*`` W8A8 static,
  ``lab_practice/deepseek_v3_2/deepseek_w8a8.yaml``); routed experts ``expert_scheme``.
* Decoder layers that are not attention + MLP (Qwen3-Next Gated-DeltaNet, Granite-4.0-H Mamba2, gpt-oss, Llama-4,
  Gemma-3n/4) take their tensor lists from :mod:`ascendflow.compiler.memory.weights_hybrid` (``FAMILIES``, by
  ``model_type``), Gemma-3n/4 per-layer embeddings from its ``first_stage_extras``.
* MTP draft layers (DeepSeek ``num_nextn_predict_layers``, Qwen3.5 ``mtp_num_hidden_layers``:
  ``ModelArchitecture.mtp_layer_count``) are loaded only with MTP speculative decoding: :class:`EngineWeightRules`
  ``mtp_layers``; Qwen3-Next / Qwen3.5 use their own predictor (:func:`_qwen_mtp_tensors`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from ascendflow.compiler.memory import weights_hybrid as hybrid
from ascendflow.compiler.memory.dtypes import DTYPE_BYTES
from ascendflow.compiler.memory.mla_weights import absorbed_bytes, mlapo_bytes
from ascendflow.compiler.memory.quant_bytes import quant_bytes
from ascendflow.compiler.memory.weight_tensors import (  # noqa: F401 (re-exported)
    VOCAB_PADDING, Layout, Tensor, padded_vocab)
from ascendflow.schema.architecture import ModelArchitecture

#: ``mlp_scheme`` default: the dense MLPs take ``linear_scheme``.
SAME_AS_LINEAR = "same_as_linear"


#: Model types whose decoder layers add pre- and post-feed-forward RMSNorms (vLLM ``gemma2.py``, ``gemma3.py``).
_SANDWICH_NORM_MODELS = ("gemma2", "gemma3", "gemma3_text")


@dataclass(frozen=True)
class EngineWeightRules:
    """What one engine release does to the weights after loading (values come from the per-release rule table).

    Attributes:
        mla_absorb_copies: MLA layers keep model-dtype ``W_UV``/``W_UK_T`` copies beside ``kv_b_proj`` (vllm-ascend
            ``mla_v1.py``: every tag v0.11.0 .. v0.25.1rc1).
        mlapo: MLAPO builds its fused int8 copies in W8A8-static MLA layers (A2/A3 kernel path).
        mlapo_frees_originals: MLAPO then drops the originals (v0.13.0+ on a KV consumer with
            ``max_num_batched_tokens <= 1024``: :func:`ascendflow.compiler.memory.mla_weights.mlapo_frees_originals`).
        mtp_layers: MTP draft layers loaded on the last PP stage (``ModelArchitecture.mtp_layer_count`` when
            speculative decoding with an MTP method is on, else 0). They stay in the model dtype: vllm-ascend's
            ``quant_config.py``/``modelslim_config.py`` note "The quantized MTP layer of deepseek on the NPU is not
            quantized" and asks for the layer to be described ``FLOAT`` (every tag).
        mtp_shares_vocab: the drafter drops its own embedding (PP = 1 only) and ``shared_head.head`` for the
            target's (vllm-ascend ``eagle_proposer.py`` / ``llm_base_proposer.py`` ``load_model`` from v0.13.0);
            False at v0.11.0 (``mtp_proposer.py`` builds ``DeepSeekMTP`` with its own of both).
    """

    mla_absorb_copies: bool = False
    mlapo: bool = False
    mlapo_frees_originals: bool = False
    mtp_layers: int = 0
    mtp_shares_vocab: bool = True


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
                     "float")
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


def _mlp(a: ModelArchitecture, layer: int, layout: Layout) -> Iterator[Tensor]:
    h, tp = a.hidden_size, layout.tp
    if not a.is_moe_layer(layer):
        inter = a.layer_intermediate_size(layer) // tp
        yield Tensor("gate_up_proj", 2 * inter, h, "mlp")
        yield Tensor("down_proj", h, inter, "mlp")
        return
    experts, inter = a.routed_experts, a.moe_intermediate_size or 0
    yield Tensor("gate (router)", experts, h, "float")
    if a.topk_method == "noaux_tc":  # vllm/model_executor/models/deepseek_v2.py: float32 parameter
        yield Tensor("gate.e_score_correction_bias", 1, experts, "fp32")
    yield from hybrid.fused_experts(experts, inter, h, layout)  # whole experts over EP, else split over TP × DP
    if a.n_shared_experts:
        shared = inter * a.n_shared_experts // tp
        yield Tensor("shared_experts.gate_up_proj", 2 * shared, h, "mlp")
        yield Tensor("shared_experts.down_proj", h, shared, "mlp")


def _decoder_layer(a: ModelArchitecture, layer: int, layout: Layout) -> Iterator[Tensor]:
    family = hybrid.FAMILIES.get(a.model_type)
    if family is not None:  # GDN / Mamba2 hybrids, gpt-oss, Llama-4, Gemma-3n/4: weights_hybrid.py
        yield from family(a, layer, layout)
        return
    yield Tensor("input_layernorm+post_attention_layernorm", 2, a.hidden_size, "float")
    if a.model_type in _SANDWICH_NORM_MODELS:  # gemma2.py / gemma3.py: pre_ and post_feedforward_layernorm
        yield Tensor("pre_feedforward_layernorm+post_feedforward_layernorm", 2, a.hidden_size, "float")
    yield from _attention(a, layout.tp)
    yield from _mlp(a, layer, layout)


#: Model types whose MTP predictor is Qwen's (vLLM ``qwen3_next_mtp.py`` / ``qwen3_5_mtp.py``).
QWEN_MTP_MODELS = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")


def _qwen_mtp_tensors(a: ModelArchitecture, layout: Layout, rules: EngineWeightRules) -> Iterator[Tensor]:
    """Qwen3-Next / Qwen3.5 MTP (vLLM 0.32.0 ``qwen3_5_mtp.py`` ``Qwen3_5MultiTokenPredictor``): ``fc``
    (``ColumnParallelLinear(2h, h)``, rows split by TP), ``norm``, ``pre_fc_norm_hidden``,
    ``pre_fc_norm_embedding`` and ``mtp_num_hidden_layers`` full-attention decoder layers; the embedding is the
    target's at PP = 1 and the LM head always (``_maybe_share_embeddings`` / ``_maybe_share_lm_head``: MTP model).
    In the model dtype, like the DeepSeek predictor (ESTIMATE for quantized checkpoints)."""
    if layout.pp > 1:
        yield Tensor("mtp.embed_tokens", padded_vocab(a.vocab_size) // layout.tp, a.hidden_size, "float")
    yield Tensor("mtp.fc", a.hidden_size // layout.tp, 2 * a.hidden_size, "float")
    yield Tensor("mtp.norm+pre_fc_norm_hidden+pre_fc_norm_embedding", 3, a.hidden_size, "float")
    for i in range(rules.mtp_layers):
        for t in _decoder_layer(a, a.num_hidden_layers + i, layout):
            yield Tensor("mtp." + t.name, t.rows, t.cols, "fp32" if t.kind == "fp32" else "float")


def _mtp_tensors(a: ModelArchitecture, layout: Layout, rules: EngineWeightRules) -> Iterator[Tensor]:
    """The DeepSeek MTP draft (vLLM ``deepseek_mtp.py`` ``DeepSeekMultiTokenPredictorLayer``): per layer ``enorm``,
    ``hnorm``, ``eh_proj`` (plain ``nn.Linear(2h, h)``, never quantized), ``shared_head.norm``, ``shared_head.head``
    and one ``DeepseekV2DecoderLayer`` (index ``num_hidden_layers + i``), all in the model dtype; one
    ``embed_tokens`` for the predictor. Loaded on the last PP stage (``load_model`` asserts it)."""
    vocab_rows = padded_vocab(a.vocab_size) // layout.tp
    if not (rules.mtp_shares_vocab and layout.pp == 1):
        yield Tensor("mtp.embed_tokens", vocab_rows, a.hidden_size, "float")
    for i in range(rules.mtp_layers):
        yield Tensor("mtp.enorm+hnorm+shared_head.norm", 3, a.hidden_size, "float")
        yield Tensor("mtp.eh_proj", a.hidden_size, 2 * a.hidden_size, "float")
        if not rules.mtp_shares_vocab:
            yield Tensor("mtp.shared_head.head", vocab_rows, a.hidden_size, "float")
        for t in _decoder_layer(a, a.num_hidden_layers + i, layout):
            yield Tensor("mtp." + t.name, t.rows, t.cols, "fp32" if t.kind == "fp32" else "float")


def rank_tensors(a: ModelArchitecture, layout: Layout,
                 rules: EngineWeightRules = EngineWeightRules()) -> Iterator[Tensor]:
    """Every weight tensor one rank holds, sharded as vLLM shards it (MTP draft tensors when ``rules`` loads them)."""
    vocab_rows = padded_vocab(a.vocab_size) // layout.tp
    if layout.first_stage:
        yield Tensor("embed_tokens", vocab_rows, a.hidden_size, "float")
        yield from hybrid.first_stage_extras(a, layout)
    if layout.last_stage and not (a.tie_word_embeddings and layout.first_stage):
        yield Tensor("lm_head", vocab_rows, a.hidden_size, "float")
    if layout.last_stage:
        yield Tensor("norm", 1, a.hidden_size, "float")
    for layer in layout.layers:
        yield from _decoder_layer(a, layer, layout)
    if layout.last_stage and rules.mtp_layers:
        yield from (_qwen_mtp_tensors if a.model_type in QWEN_MTP_MODELS else _mtp_tensors)(a, layout, rules)


def tensor_bytes(t: Tensor, dtype: str, linear_scheme: str | None, expert_scheme: str | None,
                 mlp_scheme: str | None = SAME_AS_LINEAR) -> int:
    """Bytes of one tensor: ``float`` tensors in ``dtype``; projections in their quantization scheme (``None``:
    ``dtype``), per :func:`ascendflow.compiler.memory.quant_bytes.quant_bytes`.

    Raises:
        ConfigError: a W8A8 static projection with a float32 model dtype.
    """
    if t.kind == "fp32":
        return t.rows * t.cols * 4
    mlp = linear_scheme if mlp_scheme == SAME_AS_LINEAR else mlp_scheme
    scheme = {"linear": linear_scheme, "mlp": mlp, "expert": expert_scheme, "expert_w2": expert_scheme}.get(t.kind)
    if scheme is None:
        return t.rows * t.cols * DTYPE_BYTES[dtype]
    return quant_bytes(t.rows, t.cols, scheme, dtype, DTYPE_BYTES[dtype], moe_w2=t.kind == "expert_w2",
                       moe=t.kind in ("expert", "expert_w2"))


def mla_post_load_bytes(a: ModelArchitecture, layout: Layout, dtype: str, linear_scheme: str | None,
                         rules: EngineWeightRules) -> int:
    """Bytes vllm-ascend adds after loading to the rank's MLA layers (target layers, then MTP layers on the last
    stage): ``W_UV``/``W_UK_T`` copies and MLAPO (only in W8A8-static layers; MTP layers are FLOAT).

    Raises:
        ConfigError: MLAPO with a float32 model dtype (W8A8 static needs bf16/fp16).
    """
    if not a.is_mla:
        return 0
    dtype_bytes = DTYPE_BYTES[dtype]
    mtp = rules.mtp_layers if layout.last_stage else 0
    total = 0
    if rules.mla_absorb_copies:
        total += (len(layout.layers) + mtp) * absorbed_bytes(a, layout.tp, dtype_bytes)
    if rules.mlapo and linear_scheme == "W8A8":  # MTP layers are FLOAT: MLAPO disables itself there
        total += len(layout.layers) * mlapo_bytes(a, layout.tp, dtype, dtype_bytes,
                                                  frees_originals=rules.mlapo_frees_originals)
    return total


def weight_bytes(a: ModelArchitecture, layout: Layout, *, dtype: str, linear_scheme: str | None = None,
                 expert_scheme: str | None = None, mlp_scheme: str | None = SAME_AS_LINEAR,
                 rules: EngineWeightRules = EngineWeightRules()) -> int:
    """Weight bytes resident on one rank after loading.

    Args:
        a: model architecture.
        layout: the rank's TP/EP/DP degrees and PP stage.
        dtype: model dtype (``bfloat16``...).
        linear_scheme: msModelSlim scheme of attention projections, or ``None`` for unquantized.
        expert_scheme: scheme of routed MoE experts, or ``None``.
        mlp_scheme: scheme of dense MLPs and shared experts; default: ``linear_scheme``.
        rules: the release's post-load behaviour (absorbed MLA copies, MLAPO, MTP draft).

    Returns:
        Bytes.

    Raises:
        ConfigError: a W8A8 static projection with a float32 model dtype.
    """
    tensors = sum(tensor_bytes(t, dtype, linear_scheme, expert_scheme, mlp_scheme)
                  for t in rank_tensors(a, layout, rules))
    return tensors + mla_post_load_bytes(a, layout, dtype, linear_scheme, rules)

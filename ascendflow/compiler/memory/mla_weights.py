"""Bytes vllm-ascend adds to (or frees from) an MLA layer after loading: absorbed ``W_UV``/``W_UK_T`` and MLAPO.

Read from ``vllm_ascend/attention/mla_v1.py`` ``AscendMLAImpl.process_weights_after_loading`` and
``_process_weights_for_fused_mlapo`` at v0.11.0, v0.13.0, v0.18.0, v0.19.1rc1, v0.20.2rc1, v0.21.0rc1, v0.22.1rc1,
v0.23.0, v0.24.0rc1 and v0.25.1rc1:

* ``kv_b_proj`` is never quantized: from v0.13.0 the method asserts ``UnquantizedLinearMethod``; msModelSlim's
  DeepSeek recipes exclude it (``lab_practice/deepseek_v3*/*.yaml``: ``exclude: "*kv_b_proj"``), so it is ``FLOAT``
  in the description and stays in the model dtype (at v0.11.0 a quantized one would be dequantized; no msModelSlim
  export has one). The weight is kept (prefill uses it).
* ``W_UV = W_UV.transpose(0, 1).contiguous()`` and ``W_UK_T = W_UK.permute(1, 2, 0).contiguous()`` are new
  model-dtype tensors holding together every element of the rank's ``kv_b_proj``: heads/TP × kv_lora_rank ×
  (qk_nope_head_dim + v_head_dim) elements, at every tag.
* MLAPO (A2/A3 kernel path ``_process_weights_for_fused_mlapo``), only when the layer's ``fused_qkv_a_proj`` is
  W8A8 static (``AscendW8A8LinearMethod``; otherwise disabled for that layer), builds: ``wd_qkv`` int8 (the
  ``fused_qkv_a_proj`` weight re-laid out by ``transdata`` to 16 × 32 blocks: round_up(q_lora_rank + kv_lora_rank +
  qk_rope_head_dim, 16) × round_up(hidden, 32)), ``deq_scale_qkv`` and ``quant_bias_qkv`` (per row of that weight:
  deq_scale dtype + int32), ``wu_q`` int8 (``q_proj`` re-laid out: round_up(heads/TP × qk_head_dim, 16) ×
  round_up(q_lora_rank, 32)), ``qb_deq_scl`` and ``qb_qt_bias`` (per ``q_proj`` row), ``beta1``
  (``zeros_like(q_a_layernorm.weight)`` from v0.13.0: q_lora_rank model-dtype elements; at v0.11.0 it is the
  norm's own bias) and two one-element scales. From v0.13.0, on a KV consumer with ``max_num_batched_tokens <=
  MLAPO_MAX_SUPPORTED_TOKENS`` (1024) it then drops ``fused_qkv_a_proj`` and ``q_proj`` ``weight``, ``deq_scale``
  and ``quant_bias``; v0.11.0 never drops them.
* Not modelled: the 950 (A5) path ``_process_weights_for_fused_mlapo_a5`` (W8A8MXFP8 copies), the FA-quant path.
"""

from __future__ import annotations

from ascendflow.compiler.memory.quant_bytes import deq_scale_bytes
from ascendflow.schema.architecture import ModelArchitecture

#: ``MLAPO_MAX_SUPPORTED_TOKENS`` in ``vllm_ascend/attention/mla_v1.py`` (v0.13.0 .. v0.25.1rc1).
MLAPO_MAX_SUPPORTED_TOKENS = 1024


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def mlapo_frees_originals(*, kv_consumer: bool, max_num_batched_tokens: int) -> bool:
    """Whether MLAPO drops the original ``fused_qkv_a_proj``/``q_proj`` tensors (v0.13.0 and later): only on a KV
    consumer (PD-disaggregation decode node) whose ``max_num_batched_tokens`` is at most 1024."""
    return kv_consumer and max_num_batched_tokens <= MLAPO_MAX_SUPPORTED_TOKENS


def absorbed_bytes(a: ModelArchitecture, tp: int, dtype_bytes: int) -> int:
    """Bytes of the ``W_UV`` + ``W_UK_T`` copies of one MLA layer on one rank (model dtype)."""
    heads = a.num_attention_heads // tp
    return heads * (a.kv_lora_rank or 0) * ((a.qk_nope_head_dim or 0) + (a.v_head_dim or 0)) * dtype_bytes


def mlapo_bytes(a: ModelArchitecture, tp: int, dtype: str, dtype_bytes: int, *, frees_originals: bool) -> int:
    """Net bytes MLAPO adds to one W8A8-static MLA layer on one rank (never negative: the copies are as large as
    what is dropped plus the block padding and ``beta1``).

    Args:
        a: an MLA architecture with ``q_lora_rank`` (without it there is no ``fused_qkv_a_proj`` and no MLAPO).
        tp: tensor-parallel size (``q_proj`` is split by it).
        dtype: model dtype name (``bfloat16`` or ``float16``: W8A8 static needs one of them).
        dtype_bytes: bytes per element of ``dtype``.
        frees_originals: the originals are dropped (:func:`mlapo_frees_originals` at v0.13.0 or later).

    Returns:
        Bytes (0 when the architecture has no ``q_lora_rank``).

    Raises:
        ConfigError: a model dtype other than bfloat16/float16.
    """
    if not a.q_lora_rank:
        return 0
    deq = deq_scale_bytes(dtype)
    q = a.q_lora_rank
    qkv_rows = q + (a.kv_lora_rank or 0) + (a.qk_rope_head_dim or 0)
    q_rows = a.num_attention_heads // tp * ((a.qk_nope_head_dim or 0) + (a.qk_rope_head_dim or 0))
    built = (_round_up(qkv_rows, 16) * _round_up(a.hidden_size, 32) + qkv_rows * (deq + 4)   # wd_qkv + scale/bias
             + _round_up(q_rows, 16) * _round_up(q, 32) + q_rows * (deq + 4)                # wu_q + scale/bias
             + q * dtype_bytes + 2 * dtype_bytes)                                            # beta1, 2 scalars
    if not frees_originals:
        return built
    dropped = qkv_rows * a.hidden_size + qkv_rows * (deq + 4) + q_rows * q + q_rows * (deq + 4)
    return built - dropped

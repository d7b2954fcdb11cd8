"""KV-cache budget: bytes per token, blocks, token capacity and concurrency.

Formulas (``shared/reference/vllm_ascend.md`` §3; vLLM ``vllm/v1/core/kv_cache_utils.py``):

* MHA/GQA, per layer per device: ``2 × max(1, kv_heads // TP) × head_dim × dtype_bytes``.
* MLA, per layer per device: ``(kv_lora_rank + qk_rope_head_dim) × dtype_bytes``, not split by TP.
* ``num_blocks = kv_cache_bytes // (block_size × bytes_per_token)`` (``get_kv_cache_config_from_groups``).
* logged capacity ``tokens = int(num_blocks / ceil(max_model_len / block_size) × max_model_len)``
  (``get_kv_cache_capacity`` and ``get_max_concurrency_for_kv_cache_config``).
"""

from __future__ import annotations

from ascendflow.compiler.dtypes import DTYPE_BYTES
from ascendflow.compiler.plan import KVCachePlan
from ascendflow.schema.architecture import ModelArchitecture


def kv_bytes_per_token_per_layer(arch: ModelArchitecture, tensor_parallel_size: int, kv_dtype: str) -> int:
    """KV bytes one token takes in one attention layer on one device.

    Args:
        arch: model architecture.
        tensor_parallel_size: TP degree (splits KV heads for MHA/GQA, not for MLA).
        kv_dtype: KV storage dtype name (``bfloat16``, ``fp8``...).

    Returns:
        Bytes per token per layer.
    """
    dtype_bytes = DTYPE_BYTES[kv_dtype]
    if arch.is_mla:
        return (arch.kv_lora_rank + (arch.qk_rope_head_dim or 0)) * dtype_bytes
    kv_heads_per_rank = max(1, arch.kv_heads // tensor_parallel_size)
    return 2 * kv_heads_per_rank * arch.attention_head_dim * dtype_bytes


def kv_cache_plan(
    arch: ModelArchitecture,
    *,
    kv_cache_bytes: int,
    layers_on_device: int,
    tensor_parallel_size: int,
    kv_dtype: str,
    block_size: int,
    max_model_len: int,
) -> KVCachePlan:
    """Blocks, tokens and max concurrency for a KV budget.

    Args:
        arch: model architecture.
        kv_cache_bytes: KV budget of the device in bytes (may be negative: then 0 blocks).
        layers_on_device: attention layers held by the device (its PP stage).
        tensor_parallel_size: TP degree.
        kv_dtype: KV storage dtype.
        block_size: tokens per block.
        max_model_len: context length in tokens.

    Returns:
        The :class:`KVCachePlan`; ``tokens`` is what vLLM logs as ``KV cache size: N tokens``.
    """
    bytes_per_token = layers_on_device * kv_bytes_per_token_per_layer(arch, tensor_parallel_size, kv_dtype)
    num_blocks = max(0, kv_cache_bytes) // (block_size * bytes_per_token)
    blocks_per_request = -(-max_model_len // block_size)
    max_concurrency = num_blocks / blocks_per_request
    return KVCachePlan(
        block_size=block_size,
        bytes_per_token=bytes_per_token,
        num_blocks=num_blocks,
        tokens=int(max_concurrency * max_model_len),
        max_concurrency=round(max_concurrency, 4),
        attention="mla" if arch.is_mla else "mha",
        dtype=kv_dtype,
    )

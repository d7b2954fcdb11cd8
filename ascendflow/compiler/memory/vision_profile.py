"""What a Qwen-VL checkpoint adds to device memory besides its weights: buffers built with the model, and the vision
encoder's share of the profile run (issue 27; errors in docs/kv_layouts.md, "Memory terms on large MoE and hybrid
deployments").

Load-time buffers (exact, counted where vllm-ascend measures them: in ``Loading model weights took``, which is the
device memory ``NPUModelRunner.load_model`` sees grow while ``get_model`` builds the model, v0.18.0
``worker/model_runner_v1.py``; vLLM builds the model under the model dtype, ``set_default_torch_dtype``):

- the M-RoPE cos/sin cache: vLLM ``model_executor/layers/rotary_embedding/mrope.py`` ``MRotaryEmbedding.__init__``
  builds it for ``max_position_embeddings × factor`` positions, rows of ``rotary_dim``
  (``RotaryEmbeddingBase.__init__``: ``cos_sin_cache`` of ``[positions, rotary_dim]`` cast to the model dtype, a
  non-persistent buffer). The factor differs by release (``EngineRules.qwen3_vl_mrope_positions_factor``): 4 at
  vLLM 0.18.0 (a literal ``* 4``, the Qwen2.5-VL video-position headroom), 1 for Qwen3-VL at vLLM 0.32.0
  (``models/qwen3_vl.py`` ``mrope_positions_factor``: 4 only with video pruning); Qwen2.5-VL keeps 4 (the
  ``positions_factor=4`` default). ``get_rope`` caches one instance for every layer (vLLM ``rotary_embedding/
  __init__.py`` ``_ROPE_DICT``); vllm-ascend v0.18.0 ``ops/rotary_embedding.py`` ``AscendMRotaryEmbedding`` keeps it
  and records no second copy;
- Qwen3-VL's vision rotary cache (``EngineRules.vision_rope_cache``): vLLM ``models/qwen3_vl.py``
  ``Qwen3_VisionTransformer.__init__`` ``get_rope(head_size=hidden_size / num_heads, max_position=8192,
  partial_rotary_factor=0.5)``, a plain ``RotaryEmbedding`` of ``[8192, rotary_dim]``; on vllm-ascend (v0.13.0 on)
  ``AscendRotaryEmbedding.__init__`` also keeps ``_record_cos_and_sin_cache_interleaved``'s ``[8192, 2, rotary_dim]``
  copy (``view(-1, 2, rotary_dim / 2).repeat(1, 1, 2)``: twice the cache). Qwen3-VL-8B (72-wide heads, rotary_dim
  36, bf16): 589,824 B + 1,179,648 B = 1,769,472 B on the NPU, 589,824 B on CPU;
- Qwen3-VL's deepstack buffers: vLLM ``models/qwen3_vl.py`` ``Qwen3VLForConditionalGeneration.__init__``, one
  ``torch.zeros(max_num_batched_tokens, text hidden_size)`` per ``deepstack_visual_indexes`` entry while the tower is
  built (``use_deepstack``).

Checked on N-01/N-02 (tests/calibrate/public_logs.py): Qwen3-VL-8B at 16,384 batched tokens plans 17,534,247,392 B of
parameters + 268,435,456 B of M-RoPE cache + 1,769,472 B of vision rotary cache + 402,653,184 B of deepstack =
18,207,105,504 B = 16.9567 GiB against the logged 16.9570 "GB" (GiB).

The encoder's profile-run share (:func:`ascendflow.compiler.memory.vision_weights.encoder_profile`, whose forward
peak is an *estimate*) needs the largest image the processor accepts: ``max_pixels`` (or ``size.longest_edge``) of a
``--mm-processor-kwargs`` in ``engine.extra_args``, else the checkpoint's ``preprocessor_config.json``
``size["longest_edge"]`` (else its ``max_pixels``), read by the model-resolution layer into
``ModelArchitecture.processor_max_pixels``; else the family default below (the public one). The plan's estimate
label names which.
"""

from __future__ import annotations

from ascendflow.compiler.memory.vision_weights import encoder_profile, max_image_tokens
from ascendflow.compiler.rules.engine_rules import EngineRules
from ascendflow.schema.architecture import ModelArchitecture

#: ``MRotaryEmbedding``'s default position headroom (``positions_factor=4``), what Qwen2.5-VL gets on every release.
MROPE_CACHE_POSITIONS_FACTOR = 4
#: The Qwen3-VL vision tower's rotary cache: ``get_rope(max_position=8192, partial_rotary_factor=0.5)`` (vLLM
#: ``models/qwen3_vl.py`` ``Qwen3_VisionTransformer.__init__``).
VISION_ROPE_POSITIONS = 8192
VISION_ROPE_PARTIAL_FACTOR = 0.5
#: Bytes the vision cache takes per cache byte (``EngineRules.vision_rope_cache``): the plain cache, plus
#: vllm-ascend's interleaved ``[positions, 2, rotary_dim]`` copy (``_record_cos_and_sin_cache_interleaved``).
VISION_ROPE_COPIES = {"none": 0, "plain": 1, "plain_and_interleaved": 3}

#: ``size["longest_edge"]`` (pixels) of the public Qwen/Qwen3-VL-*-Instruct ``preprocessor_config.json``
#: (``Qwen2VLImageProcessorFast``: longest_edge 16,777,216 = 4096², shortest_edge 65,536, patch 16, merge 2): one
#: 16,384-token image, the item N-02 logs ("profiled with 1 image items of the maximum feature size" at a 16,384
#: budget). Qwen2.5-VL is not planned here (no log to check its encoder term): it keeps the warning.
DEFAULT_MAX_PIXELS = {"qwen3_vl": 16_777_216, "qwen3_vl_moe": 16_777_216}


def vl_load_buffer_bytes(arch: ModelArchitecture, rules: EngineRules, *, max_num_batched_tokens: int,
                         dtype_bytes: int, tower: bool) -> int:
    """Bytes of the M-RoPE cache and (Qwen3-VL with its tower) the vision rotary cache and the deepstack buffers on
    one rank.

    Args:
        arch: the checkpoint's architecture (text fields flattened, ``vision_config`` kept).
        rules: the release's rules (M-RoPE factor, vision rotary cache copies).
        max_num_batched_tokens: the scheduler's token budget (the deepstack buffers' rows).
        dtype_bytes: bytes per element of the model dtype.
        tower: whether the vision tower is built (``--limit-mm-per-prompt`` not 0 for both image and video).
    """
    qwen3_vl = arch.outer_model_type in DEFAULT_MAX_PIXELS
    factor = rules.qwen3_vl_mrope_positions_factor if qwen3_vl else MROPE_CACHE_POSITIONS_FACTOR
    rope = factor * arch.max_position_embeddings * arch.attention_head_dim * dtype_bytes
    if not (tower and qwen3_vl):
        return rope
    c = arch.vision_config or {}
    deepstack = c.get("deepstack_visual_indexes", [8, 16, 24])  # transformers Qwen3VLVisionConfig default
    rotary_dim = int(c["hidden_size"] // c["num_heads"] * VISION_ROPE_PARTIAL_FACTOR)  # RotaryEmbedding rotary_dim
    vision_rope = VISION_ROPE_COPIES[rules.vision_rope_cache] * VISION_ROPE_POSITIONS * rotary_dim * dtype_bytes
    return rope + vision_rope + len(deepstack) * max_num_batched_tokens * arch.hidden_size * dtype_bytes


def max_pixels_and_source(arch: ModelArchitecture, mm_kwargs_pixels: int | None = None) -> tuple[int | None, str]:
    """The largest image (pixels) the processor accepts and where it came from: ``--mm-processor-kwargs``
    (:func:`ascendflow.compiler.checks.extra_args.mm_kwargs_max_pixels`), else the checkpoint's
    ``preprocessor_config.json`` (``ModelArchitecture.processor_max_pixels``), else the family default
    (:data:`DEFAULT_MAX_PIXELS`); ``(None, "")`` for families not planned here."""
    default = DEFAULT_MAX_PIXELS.get(arch.outer_model_type or "")
    if default is None:
        return None, ""
    if mm_kwargs_pixels is not None:
        return mm_kwargs_pixels, f"{mm_kwargs_pixels:,} px from --mm-processor-kwargs"
    if arch.processor_max_pixels is not None:
        return arch.processor_max_pixels, f"{arch.processor_max_pixels:,} px from preprocessor_config.json"
    return default, (f"the family default {default:,} px (no size.longest_edge / max_pixels in a "
                     f"preprocessor_config.json)")


def encoder_extra_bytes(arch: ModelArchitecture, *, text_activation_bytes: int, max_num_batched_tokens: int,
                        max_num_seqs: int, max_model_len: int, image_limit: int, enable_chunked_prefill: bool,
                        dtype_bytes: int, tp: int, mm_kwargs_pixels: int | None = None) -> int | None:
    """What the encoder's dummy images add to the profiled peak on one rank (an estimate), or ``None`` where the
    family's largest image is not known here (the caller then warns).

    Args:
        arch: the checkpoint's architecture.
        text_activation_bytes: the text dummy run's planned peak (bytes).
        max_num_batched_tokens: the encoder budget's default.
        max_num_seqs: ``max_num_seqs``.
        max_model_len: ``max_model_len``.
        image_limit: ``limit_mm_per_prompt["image"]`` (vLLM's default 999).
        enable_chunked_prefill: chunked prefill on.
        dtype_bytes: bytes per element of the model dtype.
        tp: the encoder's TP degree.
        mm_kwargs_pixels: the largest image given by ``--mm-processor-kwargs``
            (:func:`ascendflow.compiler.checks.extra_args.mm_kwargs_max_pixels`).
    """
    max_pixels = max_pixels_and_source(arch, mm_kwargs_pixels)[0]
    if max_pixels is None or not arch.vision_config:
        return None
    c = arch.vision_config
    tokens = max_image_tokens(max_pixels, c["patch_size"], c["spatial_merge_size"])
    profile = encoder_profile(c, arch.outer_model_type, max_tokens_per_item=tokens,
                              max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs,
                              max_model_len=max_model_len, limit_per_prompt=image_limit,
                              enable_chunked_prefill=enable_chunked_prefill, dtype_bytes=dtype_bytes, tp=tp)
    return profile.extra_peak_bytes(text_activation_bytes)

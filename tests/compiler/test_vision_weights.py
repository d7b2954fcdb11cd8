"""Vision-encoder weights and the encoder's share of vLLM's profile run (Qwen3-VL, Qwen2.5-VL)."""

from __future__ import annotations

import json

import pytest

from ascendflow.compiler.memory.vision_weights import (encoder_profile, max_image_tokens, vision_tensors,
                                                       vision_weight_bytes)
from ascendflow.schema.errors import ConfigError

#: Qwen3-VL-8B-Instruct config.json (public model card; shared/reference/configs/qwen3_vl_8b), the fields used here.
QWEN3_VL_8B = {
    "model_type": "qwen3_vl",
    "text_config": {"hidden_size": 4096, "num_hidden_layers": 36, "intermediate_size": 12288, "vocab_size": 151936,
                    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128},
    "vision_config": {"deepstack_visual_indexes": [8, 16, 24], "depth": 27, "hidden_size": 1152,
                      "intermediate_size": 4304, "model_type": "qwen3_vl", "num_heads": 16, "out_hidden_size": 4096,
                      "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2},
}
#: Qwen2.5-VL-7B-Instruct vision_config (public config.json).
QWEN2_5_VL_7B_VISION = {"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16,
                        "out_hidden_size": 3584, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2,
                        "window_size": 112, "fullatt_block_indexes": [7, 15, 23, 31]}


def _qwen3_vl_8b() -> dict:
    return json.loads(json.dumps(QWEN3_VL_8B))


def _params(vision: dict, model_type: str) -> int:
    return sum(t.rows * t.cols for t in vision_tensors(vision, model_type, 1))


def test_qwen3_vl_8b_vision_plus_text_equals_the_published_parameter_count():
    cfg = _qwen3_vl_8b()
    t = cfg["text_config"]
    h, layers, inter, vocab = t["hidden_size"], t["num_hidden_layers"], t["intermediate_size"], t["vocab_size"]
    per_layer = 2 * h + (32 + 2 * 8) * 128 * h + h * 32 * 128 + 2 * 128 + 3 * inter * h  # norms, qkv, o, q/k norm, MLP
    text = 2 * vocab * h + layers * per_layer + h  # untied embedding and LM head, final norm
    assert text == 8_190_735_360
    # Hugging Face Hub API for Qwen/Qwen3-VL-8B-Instruct: "safetensors": {"parameters": {"BF16": 8767123696}}.
    assert text + _params(cfg["vision_config"], "qwen3_vl") == 8_767_123_696


def test_qwen2_5_vl_7b_vision_equals_the_published_visual_parameter_count():
    # A public fine-tuning log prints "视觉模块 (visual) 总参数: 676550144" for Qwen2.5-VL-7B-Instruct
    # (total 8292166656).
    assert _params(QWEN2_5_VL_7B_VISION, "qwen2_5_vl") == 676_550_144


def test_qwen3_vl_vision_tp2_shards_by_hand():
    v = _qwen3_vl_8b()["vision_config"]
    h, inter, out, merged = 1152, 4304, 4096, 1152 * 4
    replicated = h * 3 * 2 * 16 * 16 + h + 2304 * h  # patch embed + bias, pos_embed
    block = 4 * h + 3 * h // 2 * h + 3 * h // 2 + h * h // 2 + h + inter // 2 * h + inter // 2 + h * inter // 2 + h
    merger = merged // 2 * merged + merged // 2 + out * merged // 2 + out
    expected = replicated + 27 * block + (2 * h + merger) + 3 * (2 * merged + merger)
    assert vision_weight_bytes(v, "qwen3_vl", tp=2, dtype_bytes=2) == expected * 2 == 581_046_128
    # mm_encoder_tp_mode=data: replicated on every rank.
    assert vision_weight_bytes(v, "qwen3_vl", tp=2, dtype_bytes=2, mm_encoder_tp_mode="data") == 576_388_336 * 2


def test_vision_refuses_widths_tp_does_not_divide_and_unknown_models():
    with pytest.raises(ConfigError, match="intermediate_size=3420 is not divisible"):
        vision_weight_bytes(QWEN2_5_VL_7B_VISION, "qwen2_5_vl", tp=8, dtype_bytes=2)
    with pytest.raises(ConfigError, match="num_heads=16 is not divisible"):
        vision_weight_bytes(QWEN2_5_VL_7B_VISION, "qwen2_5_vl", tp=3, dtype_bytes=2)
    with pytest.raises(ConfigError, match="no vision-encoder model"):
        vision_weight_bytes(QWEN2_5_VL_7B_VISION, "llava", tp=1, dtype_bytes=2)


def test_max_image_tokens_follows_get_image_size_with_most_features():
    assert max_image_tokens(16777216, 16, 2) == 16384     # 4096² pixels / 32²: 128 × 128
    assert max_image_tokens(28 * 28 * 1280, 14, 2) == 1280  # transformers' Qwen2-VL default max_pixels
    assert max_image_tokens(28 * 28 * 401, 14, 2) == 400    # 401 is prime: 1 × 401 exceeds aspect 200


def test_encoder_profile_items_and_cached_outputs():
    v = _qwen3_vl_8b()["vision_config"]
    # Budget max(8192, 16384) = 16384: one image; outputs 16384 × 4096 × (1 + 3 deepstack) bf16.
    p = encoder_profile(v, "qwen3_vl", max_tokens_per_item=16384, max_num_batched_tokens=8192, max_num_seqs=256,
                        max_model_len=32768, limit_per_prompt=999, enable_chunked_prefill=True, dtype_bytes=2, tp=2)
    assert (p.items, p.output_bytes) == (1, 16384 * 4096 * 4 * 2) == (1, 536_870_912)
    # The profiled peak: max(encoder forward, cached outputs + text dummy run).
    assert p.extra_peak_bytes(10**12) == 536_870_912
    assert p.extra_peak_bytes(0) == p.forward_peak_bytes
    # Qwen2.5-VL, 1280 tokens: budget 65536 // 1280 = 51 items, decoder side 4 requests × min(999, 4096 // 1280) = 12.
    q = encoder_profile(QWEN2_5_VL_7B_VISION, "qwen2_5_vl", max_tokens_per_item=1280, max_num_batched_tokens=65536,
                        max_num_seqs=4, max_model_len=4096, limit_per_prompt=999, enable_chunked_prefill=True,
                        dtype_bytes=2, tp=1)
    assert (q.items, q.output_bytes) == (12, 12 * 1280 * 3584 * 2) == (12, 110_100_480)
    # Chunked prefill off: requests capped at 2048 // 1280 = 1.
    r = encoder_profile(QWEN2_5_VL_7B_VISION, "qwen2_5_vl", max_tokens_per_item=1280, max_num_batched_tokens=2048,
                        max_num_seqs=4, max_model_len=4096, limit_per_prompt=999, enable_chunked_prefill=False,
                        dtype_bytes=2, tp=1)
    assert r.items == 1

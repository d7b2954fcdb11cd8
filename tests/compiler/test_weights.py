"""Per-rank weight bytes: exact against real checkpoints, and hand-computed sharding cases."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from ascendflow.compiler.memory.weights import (Layout, padded_vocab, pp_partition, rank_tensors, tensor_bytes,
                                                weight_bytes)
from ascendflow.models.gemma3_270m import ensure_gemma3_270m
from ascendflow.models.smollm2 import ensure_smollm2
from ascendflow.models.tiny_deepseek import TINY_DEEPSEEK_V3_CONFIG, ensure_tiny_deepseek
from ascendflow.models.zoo import ensure_zoo_model
from ascendflow.schema import ModelArchitecture

QWEN3_30B_A3B = ModelArchitecture(model_type="qwen3_moe", hidden_size=2048, num_hidden_layers=48,
                                  num_attention_heads=32, num_key_value_heads=4, head_dim=128, vocab_size=151936,
                                  max_position_embeddings=40960, num_experts=128, num_experts_per_tok=8,
                                  moe_intermediate_size=768)


def _checkpoint_bytes(model_dir: Path) -> int:
    """Sum of tensor sizes in the safetensors headers (8-byte little-endian header length, then JSON)."""
    total = 0
    for path in model_dir.glob("*.safetensors"):
        with open(path, "rb") as f:
            header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
        total += sum(v["data_offsets"][1] - v["data_offsets"][0] for k, v in header.items() if k != "__metadata__")
    return total


def _whole(a: ModelArchitecture) -> Layout:
    return Layout(tp=1, ep=1, first_stage=True, last_stage=True, layers=range(a.num_hidden_layers))


def _arch(model_dir: Path) -> ModelArchitecture:
    return ModelArchitecture.from_hf_config(json.loads((model_dir / "config.json").read_text()))


def test_smollm2_matches_its_checkpoint_byte_for_byte():
    path = ensure_smollm2()
    a = _arch(path)
    assert weight_bytes(a, _whole(a), dtype="bfloat16") == _checkpoint_bytes(path) == 269_030_016


def test_tiny_deepseek_matches_its_checkpoint_except_the_fp32_router_bias():
    path = ensure_tiny_deepseek()
    a = _arch(path)
    cfg = TINY_DEEPSEEK_V3_CONFIG
    moe_layers = cfg["num_hidden_layers"] - cfg["first_k_dense_replace"]
    # vLLM keeps e_score_correction_bias in float32; the checkpoint stores it in bf16.
    bias_upcast = moe_layers * cfg["n_routed_experts"] * (4 - 2)
    assert weight_bytes(a, _whole(a), dtype="bfloat16") == _checkpoint_bytes(path) + bias_upcast


def test_tp3_shards_smollm2_by_hand():
    a = _arch(ensure_smollm2())
    h, hd, inter = 576, 64, 1536
    per_layer = 2 * h + (9 // 3 + 2 * (3 // 3)) * hd * h + h * (9 // 3 * hd) + 3 * (inter // 3) * h
    expected = (49152 // 3 * h + 30 * per_layer + h) * 2  # tied embeddings: one vocab matrix
    layout = Layout(tp=3, ep=1, first_stage=True, last_stage=True, layers=range(30))
    assert weight_bytes(a, layout, dtype="bfloat16") == expected


def test_kv_heads_replicated_when_fewer_than_tp_and_experts_split_by_ep():
    layout = Layout(tp=8, ep=1, first_stage=True, last_stage=True, layers=range(48))
    qkv = next(t for t in rank_tensors(QWEN3_30B_A3B, layout) if t.name == "qkv_proj")
    assert qkv.rows == (32 // 8 + 2 * 1) * 128  # 4 KV heads over TP8: one replicated head per rank
    ep_layout = Layout(tp=4, ep=8, first_stage=True, last_stage=True, layers=range(48))
    w13 = next(t for t in rank_tensors(QWEN3_30B_A3B, ep_layout) if t.name == "experts.w13")
    assert w13.rows * w13.cols == (128 // 8) * 2 * 768 * 2048  # whole experts, 16 per rank
    tp_layout = Layout(tp=4, ep=1, first_stage=True, last_stage=True, layers=range(48))
    w13_tp = next(t for t in rank_tensors(QWEN3_30B_A3B, tp_layout) if t.name == "experts.w13")
    assert w13_tp.rows * w13_tp.cols == 128 * 2 * (768 // 4) * 2048  # every expert, intermediate split by TP


def test_pipeline_stages_follow_vllm_get_pp_indices():
    assert [len(r) for r in pp_partition(61, 4)] == [15, 15, 16, 15]
    assert [len(r) for r in pp_partition(30, 4)] == [7, 8, 8, 7]
    first = Layout(tp=1, ep=1, first_stage=True, last_stage=False, layers=range(0, 15))
    names = {t.name for t in rank_tensors(QWEN3_30B_A3B, first)}
    assert "embed_tokens" in names and "lm_head" not in names


def test_quantized_linear_bytes_and_vocab_padding():
    layout = Layout(tp=1, ep=1, first_stage=True, last_stage=True, layers=range(1))
    qkv = next(t for t in rank_tensors(QWEN3_30B_A3B, layout) if t.name == "qkv_proj")
    assert (qkv.rows, qkv.cols) == (5120, 2048)
    # W8A8 static (vllm_ascend quantization/methods/w8a8_static.py get_perchannel_param, v0.23.0), bf16 model: int8
    # weight; per output row quant_bias int32 + deq_scale float32 + weight_scale/offset bf16 = 12 B; per layer
    # input_scale bf16 + input_offset int8 and three bf16 aclnn_input_* copies over the 2048 input columns.
    assert tensor_bytes(qkv, "bfloat16", "W8A8", None) == 5120 * 2048 + 5120 * 12 + 2 + 1 + 3 * 2048 * 2 == 10_559_491
    # W8A8_DYNAMIC linear: scale + offset bf16 and the float32 weight_scale_fp32 copy = 8 B per row.
    assert tensor_bytes(qkv, "bfloat16", "W8A8_DYNAMIC", None) == 5120 * 2048 + 5120 * 8 == 10_526_720
    embed = next(t for t in rank_tensors(QWEN3_30B_A3B, layout) if t.name == "embed_tokens")
    assert tensor_bytes(embed, "bfloat16", "W8A8", "W8A8") == 151936 * 2048 * 2  # FLOAT layer
    assert padded_vocab(49155) == 49216 and padded_vocab(151936) == 151936


@pytest.mark.parametrize("name", ["mistral_sw256", "gemma2_1to1", "gemma3_5to1"])
def test_sliding_window_zoo_models_match_their_checkpoints(name):
    # Gemma-2/3 add pre/post feed-forward norms, Gemma-3 also per-head Q/K norms (vLLM gemma2.py, gemma3.py).
    path = ensure_zoo_model(name)
    a = _arch(path)
    assert weight_bytes(a, _whole(a), dtype="bfloat16") == _checkpoint_bytes(path)


def test_gemma3_270m_matches_its_checkpoint_byte_for_byte():
    path = ensure_gemma3_270m()
    a = _arch(path)
    assert weight_bytes(a, _whole(a), dtype="bfloat16") == _checkpoint_bytes(path) == 536_196_352

"""Every zoo model: weights counted from the architecture equal the bytes counted from its checkpoint's headers, at
TP1 and TP2 (every zoo model's Q, KV, GDN/Mamba heads, experts and Laurel rank divide by 2)."""

from __future__ import annotations

import json

import pytest

from ascendflow.compiler.memory.checkpoint_weights import checkpoint_bytes
from ascendflow.compiler.memory.weights import Layout, rank_tensors, weight_bytes
from ascendflow.models.checkpoint import read_inventory
from ascendflow.models.zoo import ZOO, ensure_zoo_model
from ascendflow.schema import ModelArchitecture

#: name -> (bytes stored in the safetensors files, per-rank bytes at TP1, at TP2), bf16, measured here. TP1 exceeds
#: the stored bytes by the float32 parameters vLLM 0.32.0 allocates whatever the checkpoint holds (2 extra bytes per
#: element): GDN ``A_log`` (3 layers x linear_num_value_heads), Mamba2 ``A`` (3 x 8 heads), Gemma-3n
#: ``altup.correct_output_scale`` (6 layers x hidden 256).
EXPECTED = {
    "mistral_sw256": (29_889_024, 29_889_024, 14_946_816),
    "gemma3_5to1": (33_832_448, 33_832_448, 17_317_376),
    "qwen3_next_3to1": (56_925_616, 56_925_616 + 3 * 4 * 2, 28_470_692),
    "gemma2_1to1": (29_893_120, 29_893_120, 14_950_912),
    "qwen3_next_bigstate": (61_693_792, 61_693_792 + 3 * 8 * 2, 30_854_984),
    "granite_hybrid": (56_465_808, 56_465_808 + 3 * 8 * 2, 28_335_456),
    "gpt_oss": (58_239_552, 58_239_552, 29_131_312),
    "llama4_chunked": (56_631_808, 56_631_808, 28_320_256),
    "gemma4_mixed_heads": (34_488_332, 34_488_332, 17_711_116),
    "gemma3n_kv_shared": (72_287_504, 72_287_504 + 6 * 256 * 2, 36_622_608),
}


def test_every_zoo_model_has_its_expected_bytes():
    assert sorted(EXPECTED) == sorted(ZOO)


@pytest.mark.parametrize("name", sorted(ZOO))
def test_zoo_architecture_count_equals_checkpoint_count(name):
    path = ensure_zoo_model(name)
    a = ModelArchitecture.from_hf_config(json.loads((path / "config.json").read_text()))
    inventory = read_inventory(path)
    stored, tp1, tp2 = EXPECTED[name]
    assert inventory.total_bytes == stored
    for tp, expected in ((1, tp1), (2, tp2)):
        layout = Layout(tp=tp, ep=1, first_stage=True, last_stage=True, layers=range(a.num_hidden_layers))
        assert (weight_bytes(a, layout, dtype="bfloat16"), checkpoint_bytes(inventory, a, layout, "bfloat16")) == (
            expected, expected)


def _tensors(name: str, tp: int, layer: int) -> dict[str, tuple[int, int, str]]:
    path = ensure_zoo_model(name)
    a = ModelArchitecture.from_hf_config(json.loads((path / "config.json").read_text()))
    layout = Layout(tp=tp, ep=1, first_stage=False, last_stage=False, layers=range(layer, layer + 1))
    return {t.name: (t.rows, t.cols, t.kind) for t in rank_tensors(a, layout)}


def test_mamba2_mixer_at_tp2_duplicates_its_single_group_as_vllm_cpu_loads_it():
    # Granite hybrid (hidden 256, expand 2, 1 group, state 64, 8 heads): vLLM pads the group to TP, conv dim
    # 512 + 2 x 2 x 64 = 768; rank 0 of a TP2 vllm-cpu engine holds in_proj [644, 256], conv1d [384, 1, 4] + bias
    # [384], A [4] float32, D and dt_bias [4], norm [256], out_proj [256, 256] (scripts/bench_zoo_weights.py).
    t = _tensors("granite_hybrid", 2, 0)
    assert {k: v for k, v in t.items() if k.startswith("mamba.")} == {
        "mamba.in_proj": (644, 256, "linear"), "mamba.conv1d": (384, 4, "float"),
        "mamba.conv1d.bias": (1, 384, "float"),
        "mamba.A": (1, 4, "fp32"), "mamba.D+dt_bias": (2, 4, "float"), "mamba.norm": (1, 256, "float"),
        "mamba.out_proj": (256, 256, "linear")}


def test_gated_deltanet_at_tp2_by_hand():
    # Qwen3-Next 3:1 (2 K heads x 64, 4 V heads x 64, kernel 4, hidden 256): qkvz (2 x 128 + 2 x 256) / 2 = 384 rows,
    # ba 2 x 4 / 2 = 4, conv (2 x 128 + 256) / 2 = 256, A_log / dt_bias 2 heads, norm over the V head dim (64, whole),
    # out_proj 256 / 2 input columns.
    t = _tensors("qwen3_next_3to1", 2, 0)
    assert {k: v for k, v in t.items() if k.startswith("linear_attn.")} == {
        "linear_attn.in_proj_qkvz": (384, 256, "linear"), "linear_attn.in_proj_ba": (4, 256, "linear"),
        "linear_attn.conv1d": (256, 4, "float"), "linear_attn.dt_bias": (1, 2, "float"),
        "linear_attn.A_log": (1, 2, "fp32"), "linear_attn.norm": (1, 64, "float"),
        "linear_attn.out_proj": (256, 128, "linear")}
    # The full-attention layer: Q doubled by the output gate (4 heads x 2 / 2 ranks) + 1 K + 1 V head of 128.
    assert _tensors("qwen3_next_3to1", 2, 3)["qkv_proj"] == ((4 + 2) * 128, 256, "linear")

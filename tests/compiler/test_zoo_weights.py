"""Every zoo model: weights counted from the architecture equal the bytes counted from its checkpoint's headers, at
TP1 and TP2 (every zoo model's Q, KV, GDN/Mamba heads, experts and Laurel rank divide by 2)."""

from __future__ import annotations

import json

import pytest

from ascendflow.compiler.checkpoint_weights import checkpoint_bytes
from ascendflow.compiler.weights import Layout, weight_bytes
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

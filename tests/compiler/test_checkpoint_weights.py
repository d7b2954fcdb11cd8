"""Weights counted from real checkpoints agree with the architecture-based count, for every layout."""

from __future__ import annotations

import json

import pytest

from ascendflow.compiler.checkpoint_weights import checkpoint_bytes
from ascendflow.compiler.weights import Layout, pp_partition, weight_bytes
from ascendflow.models.checkpoint import read_inventory
from ascendflow.models.smollm2 import ensure_smollm2
from ascendflow.models.tiny_deepseek import TINY_DEEPSEEK_V3_CONFIG, ensure_tiny_deepseek
from ascendflow.schema import ModelArchitecture


def _load(path):
    return ModelArchitecture.from_hf_config(json.loads((path / "config.json").read_text())), read_inventory(path)


@pytest.mark.parametrize("tp,pp", [(1, 1), (3, 1), (9, 1), (1, 2), (3, 4)])
def test_smollm2_checkpoint_count_equals_the_estimate(tp, pp):
    a, inv = _load(ensure_smollm2())
    assert inv.quant_description is None and inv.total_bytes == 269_030_016
    stages = pp_partition(a.num_hidden_layers, pp)
    for i, layers in enumerate(stages):
        layout = Layout(tp=tp, ep=1, first_stage=i == 0, last_stage=i == pp - 1, layers=layers, pp=pp)
        assert checkpoint_bytes(inv, a, layout, "bfloat16") == weight_bytes(a, layout, dtype="bfloat16")


@pytest.mark.parametrize("tp,ep", [(1, 1), (2, 1), (4, 1), (2, 4), (4, 8)])
def test_tiny_deepseek_checkpoint_count_equals_the_estimate(tp, ep):
    a, inv = _load(ensure_tiny_deepseek())
    layout = Layout(tp=tp, ep=ep, first_stage=True, last_stage=True, layers=range(a.num_hidden_layers))
    cfg = TINY_DEEPSEEK_V3_CONFIG
    bias_upcast = (cfg["num_hidden_layers"] - cfg["first_k_dense_replace"]) * cfg["n_routed_experts"] * 2
    assert checkpoint_bytes(inv, a, layout, "bfloat16") + bias_upcast == weight_bytes(a, layout, dtype="bfloat16")


@pytest.mark.parametrize("tp", [1, 3])
def test_msmodelslim_w8a8_checkpoint_count_equals_the_w8a8_estimate(tp):
    from ascendflow.models.msmodelslim_w8a8 import ensure_smollm2_w8a8

    a, inv = _load(ensure_smollm2_w8a8())
    assert inv.quant_type == "W8A8_DYNAMIC"
    assert inv.quant_description["model.layers.0.self_attn.q_proj.weight"] == "W8A8_DYNAMIC"
    assert inv.tensors["model.layers.0.self_attn.q_proj.weight"].dtype == "I8"
    layout = Layout(tp=tp, ep=1, first_stage=True, last_stage=True, layers=range(a.num_hidden_layers))
    counted = checkpoint_bytes(inv, a, layout, "bfloat16")
    assert counted == weight_bytes(a, layout, dtype="bfloat16", linear_scheme="W8A8_DYNAMIC")
    if tp == 1:
        # By hand: int8 weights and fp32 scale/offset as stored; FLOAT tensors (fp32 on disk) in bf16; the stored
        # lm_head copy of the tied embedding is not loaded.
        int8 = sum(t.nbytes for t in inv.tensors.values() if t.dtype == "I8")
        params = sum(t.nbytes for n, t in inv.tensors.items() if n.endswith(("weight_scale", "weight_offset")))
        floats = sum(t.nbytes // 2 for n, t in inv.tensors.items()
                     if inv.quant_description[n] == "FLOAT" and not n.startswith("lm_head"))
        assert counted == int8 + params + floats
        assert int8 == 106_168_320

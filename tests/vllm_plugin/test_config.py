"""The plugin's registration and its reading of quant_model_description.json (vLLM imported, no engine)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_entry_point_is_declared() -> None:
    text = (REPO / "pyproject.toml").read_text()
    section = text.split('[project.entry-points."vllm.general_plugins"]\n', 1)[1].split("\n\n", 1)[0]
    assert section == 'ascendflow_msmodelslim = "ascendflow.vllm_plugin:register"'


def test_register_is_idempotent_and_gives_the_ascend_method() -> None:
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS, get_quantization_config

    from ascendflow.vllm_plugin import register
    from ascendflow.vllm_plugin.config import MsModelSlimConfig

    register()
    register()
    assert QUANTIZATION_METHODS.count("ascend") == 1
    assert get_quantization_config("ascend") is MsModelSlimConfig
    assert MsModelSlimConfig.get_config_filenames() == ["quant_model_description.json"]


def test_layer_types_follow_the_description_with_fused_layers() -> None:
    from ascendflow.vllm_plugin.config import MsModelSlimConfig

    desc = {"model_quant_type": "W8A8_DYNAMIC", "model.layers.0.self_attn.q_proj.weight": "W8A8_DYNAMIC",
            "model.layers.0.self_attn.k_proj.weight": "W8A8_DYNAMIC",
            "model.layers.0.self_attn.v_proj.weight": "W8A8_DYNAMIC",
            "model.layers.0.self_attn.o_proj.weight": "W8A8", "model.layers.0.mlp.gate_proj.weight": "W8A8_DYNAMIC",
            "model.layers.0.mlp.up_proj.weight": "FLOAT", "model.layers.0.mlp.down_proj.weight": "W4A8_DYNAMIC",
            "lm_head.weight": "FLOAT"}
    config = MsModelSlimConfig.from_config(desc)
    config.packed_modules_mapping = {"qkv_proj": ["q_proj", "k_proj", "v_proj"], "gate_up_proj": ["gate_proj",
                                                                                                   "up_proj"]}
    assert [config.layer_type(p) for p in ("model.layers.0.self_attn.qkv_proj", "model.layers.0.self_attn.o_proj",
                                            "lm_head", "model.layers.1.self_attn.qkv_proj")] == [
        "W8A8_DYNAMIC", "W8A8", "FLOAT", "FLOAT"]
    with pytest.raises(ValueError, match=r"^model.layers.0.mlp.gate_up_proj: fused members have different msModelSlim "
                                         r"types \['FLOAT', 'W8A8_DYNAMIC'\]$"):
        config.layer_type("model.layers.0.mlp.gate_up_proj")
    with pytest.raises(ValueError, match="msModelSlim type W4A8_DYNAMIC is not served on CPU"):
        config.layer_type("model.layers.0.mlp.down_proj")

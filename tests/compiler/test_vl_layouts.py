"""Issue 26 item 4: a VL model plans with its vision tower whatever its config layout (flat, as Qwen2.5-VL-7B-Instruct
publishes it, or nested under ``text_config``), and the multimodal keys reach the script with their memory effect."""

from __future__ import annotations

import json

import pytest

from ascendflow.schema.architecture import ModelArchitecture
from tests.compiler.test_serve_argv import _vllm_server_parser
from tests.conftest import REPO, plan_for

CONFIG = REPO / "tests/data/configs/qwen2_5_vl_7b_instruct"
LOCAL = ["model=local", f"model.path={CONFIG}", "hardware=atlas_800i_a2", "engine.max_model_len=32768"]
#: Qwen2.5-VL-7B's visual parameters (a public fine-tuning log: "视觉模块 (visual) 总参数: 676550144";
#: tests/compiler/test_vision_weights.py), bf16, one rank at TP1.
VISION_BYTES_TP1 = 676_550_144 * 2


def _nested() -> dict:
    """The same checkpoint in transformers' nested layout (text fields under ``text_config``)."""
    flat = json.loads((CONFIG / "config.json").read_text())
    outer = {k: flat.pop(k) for k in ("architectures", "model_type", "vision_config", "torch_dtype",
                                      "tie_word_embeddings")}
    return {**outer, "text_config": {**flat, "model_type": "qwen2_5_vl_text"}}


def test_flat_config_keeps_its_vision_tower():
    arch = ModelArchitecture.from_hf_config(json.loads((CONFIG / "config.json").read_text()))
    assert (arch.outer_model_type, arch.model_type, arch.has_qkv_bias) == ("qwen2_5_vl", "qwen2_5_vl", True)
    assert arch.vision_config["depth"] == 32 and arch.max_position_embeddings == 128000
    nested = ModelArchitecture.from_hf_config(_nested())
    assert (nested.outer_model_type, nested.has_qkv_bias, nested.vision_config) == (
        "qwen2_5_vl", True, arch.vision_config)


def test_flat_qwen2_5_vl_plans_with_the_vision_tower_counted():
    _, plan = plan_for(LOCAL)
    assert not any("not counted" in w for w in plan.warnings), plan.warnings
    _, text_only = plan_for([*LOCAL, "model.limit_mm_per_prompt={image: 0, video: 0}"])
    assert plan.memory.weights_bytes - text_only.memory.weights_bytes == VISION_BYTES_TP1 == 1_353_100_288
    assert text_only.memory.kv_cache_bytes - plan.memory.kv_cache_bytes == VISION_BYTES_TP1


def test_multimodal_keys_reach_the_script_as_vllm_parses_them():
    _, plan = plan_for([*LOCAL, "model.limit_mm_per_prompt={image: 4, video: 0}", "model.mm_processor_cache_gb=8"])
    argv = plan.serve_command[2:]
    args = _vllm_server_parser().parse_args(argv)
    assert (args.limit_mm_per_prompt, args.mm_processor_cache_gb) == ({"image": 4, "video": 0}, 8.0)
    assert "model.mm_processor_cache_gb=8: 8 GiB of host memory per process × 2 (API server + 1 engine core(s)) = " \
           "16 GiB, not device memory" in plan.warnings


def test_multimodal_keys_on_a_text_model_are_said_to_be_ignored():
    _, plan = plan_for(["hardware=atlas_800i_a2", "model=qwen3_8b", "model.mm_processor_cache_gb=2"])
    assert "model.mm_processor_cache_gb is ignored: qwen3 is a text model (vLLM builds no multimodal config for it)" \
        in plan.warnings


@pytest.mark.parametrize("bad", ["model.mm_processor_cache_gb=-1"])
def test_a_negative_cache_is_refused(bad):
    from ascendflow.schema.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^model.mm_processor_cache_gb=-1"):
        plan_for([*LOCAL, bad])

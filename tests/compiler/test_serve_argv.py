"""Every serve command the compiler emits parses with the installed vLLM's own server argument parser."""

from __future__ import annotations

import pytest

from ascendflow.compiler import compile_plan
from ascendflow.compiler.rules.software import version_at_least
from ascendflow.models.resolve import resolve_model
from ascendflow.platforms import HostFacts, platform_for
from ascendflow.schema import load_spec
from tests.conftest import compose_config, recipe_names

CASES = [[f"+recipe={r}"] for r in recipe_names()] + [
    ["hardware=atlas_800i_a2", "model=qwen3_0_6b", "graph=compiled", "engine.enable_prefix_caching=false",
     "engine.enable_chunked_prefill=true"],
    ["+recipe=qwen3_32b_w8a8", "hardware.software=vllm-ascend-0.13.0"],
    ["+recipe=qwen3_235b_w8a8", "parallel.pipeline_parallel_size=2", "parallel.tensor_parallel_size=4"],
]
#: Values only the vllm-ascend plugin registers; checked against its rules instead of vLLM's parser choices.
ASCEND_ONLY = {("--quantization", "ascend")}


def _vllm_server_parser():
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return make_arg_parser(FlexibleArgumentParser())


@pytest.mark.parametrize("overrides", CASES, ids=[" ".join(c) for c in CASES])
def test_serve_command_parses_with_vllms_parser(overrides):
    raw = compose_config(overrides)
    raw.pop("hydra", None)
    spec = load_spec(raw)
    model = resolve_model(spec.model, need_weights=False)
    plan = compile_plan(spec, model.architecture, model_path=model.path or spec.model.path or spec.model.id,
                        host=HostFacts(cpu_memory_bytes=16 * 2**30))
    prefix = list(platform_for(plan.target.kind).serve_prefix)
    assert plan.serve_command[: len(prefix)] == prefix
    # The CPU route ends its prefix with "--model" (api_server module); `vllm serve` takes the model positionally.
    entry = len(prefix) - 1 if prefix[-1] == "--model" else len(prefix)
    argv = plan.serve_command[entry:]
    for flag, value in ASCEND_ONLY:
        if flag in argv and argv[argv.index(flag) + 1] == value:
            # vllm-ascend rule (reference §5): --quantization ascend only before v0.17.0rc1.
            assert plan.target.kind == "npu" and not version_at_least(plan.target.engine["vllm_ascend"], "0.17.0rc1")
            i = argv.index(flag)
            argv = argv[:i] + argv[i + 2:]
    args = _vllm_server_parser().parse_args(argv)
    model_arg = args.model if plan.target.kind == "cpu" else args.model_tag
    assert model_arg == plan.engine_args["model"]
    for key, value in plan.engine_args.items():
        if key in ("model", "compilation_config") or (key, value) == ("quantization", "ascend"):
            continue
        if key in plan.engine_defaults:  # planned with vLLM's default, not written: vLLM resolves it
            assert getattr(args, key) is None, key
            continue
        parsed = getattr(args, key)
        if key == "served_model_name":
            parsed = parsed[0]
        assert parsed == value, (key, parsed, value)
    if "compilation_config" in plan.engine_args:
        assert args.compilation_config.cudagraph_mode.name == plan.graph.cudagraph_mode


@pytest.mark.parametrize("recipe", [r for r in recipe_names() if "_pd_" in r])
def test_every_pd_worker_parses_with_vllms_parser(recipe):
    """Each role's every ``vllm serve`` (DP rank or node flags, ``--kv-transfer-config``) parses with vLLM's own parser
    into the role's engine arguments and the instance's KV-transfer config."""
    raw = compose_config([f"+recipe={recipe}"])
    raw.pop("hydra", None)
    spec = load_spec(raw)
    plan = compile_plan(spec, resolve_model(spec.model, need_weights=False).architecture, model_path="/m")
    parser = _vllm_server_parser()
    for name, role in plan.roles.items():
        # a role's max_num_seqs left to vLLM (neither pd.<role>.max_num_seqs nor engine.max_num_seqs set): not written
        defaulted = {"max_num_seqs"} if getattr(spec.pd, name).max_num_seqs is None and spec.engine.max_num_seqs is None else set()
        for worker in role.workers:
            argv = worker.command[2:]
            if "--quantization" in argv:
                i = argv.index("--quantization")
                argv = argv[:i] + argv[i + 2:]
            args = parser.parse_args(argv)
            for key in ("tensor_parallel_size", "data_parallel_size", "max_num_seqs", "max_num_batched_tokens",
                        "gpu_memory_utilization"):
                want = None if key in defaulted else role.engine_args[key]
                assert getattr(args, key) == want, (key, worker.node_rank, worker.dp_rank)
            kv = args.kv_transfer_config
            config = next(c for c in role.kv_transfer if c["engine_id"] == kv.engine_id)
            assert (kv.kv_connector, kv.kv_role, kv.kv_port, kv.kv_connector_extra_config) == (
                config["kv_connector"], config["kv_role"], config["kv_port"], config["kv_connector_extra_config"])
            if role.dp_launch == "external" and role.data_parallel_size > 1:
                assert args.data_parallel_rank == worker.dp_rank


def test_quantization_flag_follows_the_vllm_ascend_version():
    def plan_for(row):
        raw = compose_config(["+recipe=qwen3_32b_w8a8", f"hardware.software={row}"])
        raw.pop("hydra", None)
        spec = load_spec(raw)
        return compile_plan(spec, resolve_model(spec.model, need_weights=False).architecture, model_path="/m")

    assert plan_for("vllm-ascend-0.13.0").engine_args["quantization"] == "ascend"
    assert "quantization" not in plan_for("vllm-ascend-0.18.0").engine_args  # detected from the checkpoint

"""Every serve command the compiler emits parses with the installed vLLM's own server argument parser."""

from __future__ import annotations

import pytest

from ascendflow.compiler import compile_plan
from ascendflow.compiler.launch import SERVE_PREFIX
from ascendflow.models.resolve import resolve_model
from ascendflow.schema import load_spec
from tests.conftest import compose_config, recipe_names

CASES = [[f"+recipe={r}"] for r in recipe_names()] + [
    ["hardware=atlas_800i_a2", "model=qwen3_0_6b", "graph=compiled", "engine.enable_prefix_caching=false",
     "engine.enable_chunked_prefill=true"],
]


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
    plan = compile_plan(spec, model.architecture, model_path=model.path or spec.model.id,
                        host_memory_bytes=16 * 2**30)
    prefix = SERVE_PREFIX[plan.target.kind]
    assert plan.serve_command[: len(prefix)] == prefix
    # The CPU route ends its prefix with "--model" (api_server module); `vllm serve` takes the model positionally.
    entry = len(prefix) - 1 if prefix[-1] == "--model" else len(prefix)
    args = _vllm_server_parser().parse_args(plan.serve_command[entry:])
    model_arg = args.model if plan.target.kind == "cpu" else args.model_tag
    assert model_arg == plan.engine_args["model"]
    for key, value in plan.engine_args.items():
        if key in ("model", "compilation_config"):
            continue
        parsed = getattr(args, key)
        if key == "served_model_name":
            parsed = parsed[0]
        assert parsed == value, (key, parsed, value)
    if "compilation_config" in plan.engine_args:
        assert args.compilation_config.cudagraph_mode.name == plan.graph.cudagraph_mode

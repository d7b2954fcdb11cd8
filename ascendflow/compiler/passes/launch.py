"""Launch pass: the engine arguments, the environment every node exports and each node's worker (its environment and
the command its launcher runs), by the plan's launcher (:mod:`ascendflow.compiler.launch.registry`)."""

from __future__ import annotations

from typing import Any, NamedTuple

from ascendflow.compiler.checks.extra_args import check_extra_args, extra_argv
from ascendflow.compiler.launch.common import serve_args
from ascendflow.compiler.launch.engine_args import PROFILE_DIR, build_engine_args
from ascendflow.compiler.launch.environment import common_env, worker_env
from ascendflow.compiler.launch.registry import launcher_for
from ascendflow.compiler.passes.inputs import EngineInputs
from ascendflow.compiler.passes.placement import Placed
from ascendflow.compiler.plan import GraphPlan, MemoryPlan, WorkerPlan
from ascendflow.compiler.rules.engine_rules import EngineRules
from ascendflow.schema.spec import RunSpec
from ascendflow.platforms import platform_for


class Launch(NamedTuple):
    """Engine arguments (vLLM ``EngineArgs`` names), the common environment, one worker per node, the names left to
    vLLM's default (``Plan.engine_defaults``) and the ``engine.extra_args`` tokens (``Plan.extra_args``)."""

    engine_args: dict[str, Any]
    env: dict[str, str]
    workers: list[WorkerPlan]
    defaults: list[str]
    extra_args: list[str]


def vllm_defaults(spec: RunSpec) -> list[str]:
    """``engine_args`` names the config left to vLLM: ``max_num_seqs`` when ``engine.max_num_seqs`` is unset (vLLM
    0.32.0 ``EngineArgs._set_default_max_num_seqs_and_batched_tokens_args``: ``get_batch_defaults`` by usage context
    and device memory, as :func:`~ascendflow.compiler.checks.limits.server_batch_defaults` plans it)."""
    return ["max_num_seqs"] if spec.engine.max_num_seqs is None else []


def launch_pass(spec: RunSpec, rules: EngineRules, inputs: EngineInputs, graph: GraphPlan, memory: MemoryPlan,
                explicit_kv: int | None, placed: Placed, block_size: int) -> tuple[Launch, list[str]]:
    """Engine arguments (``--kv-cache-memory`` the explicit budget, or the planned one when pinned; ``block_size``
    the KV plan's), the launcher's executor backend and environment, and every node's worker; names left to vLLM's
    default (:func:`vllm_defaults`) are planned but not written, ``engine.extra_args`` tokens are written last.

    Returns:
        The :class:`Launch` and no warnings.

    Raises:
        ConfigError: see :func:`~ascendflow.compiler.launch.environment.common_env` and
            :func:`~ascendflow.compiler.checks.extra_args.check_extra_args`.
    """
    hw, eng, limits = spec.hardware, spec.engine, inputs.limits
    launcher = launcher_for(placed.launcher)
    engine_args = launcher.engine_args(build_engine_args(
        spec, rules, model_path=inputs.model_path, dtype=inputs.dtype, max_model_len=limits.max_model_len,
        max_num_seqs=limits.max_num_seqs, max_num_batched_tokens=limits.max_num_batched_tokens,
        block_size=block_size, graph=graph, extra_config=inputs.extra_config,
        pinned_kv=memory.kv_cache_bytes if eng.pin_kv_cache_memory and not explicit_kv else explicit_kv))
    extra = extra_argv(eng.extra_args)
    check_extra_args(extra, engine_args)
    defaults = vllm_defaults(spec)
    written = serve_args(engine_args, defaults, extra)
    env = common_env(spec, graphs_on=graph.cudagraph_mode != "NONE")
    if spec.run.profile and platform_for(hw.kind).profiler_in_scripts and rules.profiler_switch == "env":
        env["VLLM_TORCH_PROFILER_DIR"] = PROFILE_DIR  # vLLM 0.11 envs.py (the CPU runner adds its own switch)
    env.update(launcher.env(hw.kind))
    workers = [WorkerPlan(node_rank=node.node_rank, dp_rank=node.dp_ranks[0], devices=node.devices,
                          env=worker_env(spec, node.node_rank, node.devices),
                          command=launcher.argv(spec, written, node)) for node in placed.nodes]
    return Launch(engine_args, env, workers, defaults, extra), []

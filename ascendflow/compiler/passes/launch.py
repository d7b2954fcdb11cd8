"""Launch pass: the engine arguments, the environment every node exports and each node's worker (its environment and
the command its launcher runs), by the plan's launcher (:mod:`ascendflow.compiler.launch.registry`)."""

from __future__ import annotations

from typing import Any, NamedTuple

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
    """Engine arguments (vLLM ``EngineArgs`` names), the common environment and one worker per node."""

    engine_args: dict[str, Any]
    env: dict[str, str]
    workers: list[WorkerPlan]


def launch_pass(spec: RunSpec, rules: EngineRules, inputs: EngineInputs, graph: GraphPlan, memory: MemoryPlan,
                explicit_kv: int | None, placed: Placed) -> tuple[Launch, list[str]]:
    """Engine arguments (``--kv-cache-memory`` the explicit budget, or the planned one when pinned), the launcher's
    executor backend and environment, and every node's worker.

    Returns:
        The :class:`Launch` and no warnings.

    Raises:
        ConfigError: see :func:`~ascendflow.compiler.launch.environment.common_env`.
    """
    hw, eng, limits = spec.hardware, spec.engine, inputs.limits
    launcher = launcher_for(placed.launcher)
    engine_args = launcher.engine_args(build_engine_args(
        spec, rules, model_path=inputs.model_path, dtype=inputs.dtype, max_model_len=limits.max_model_len,
        max_num_seqs=limits.max_num_seqs, max_num_batched_tokens=limits.max_num_batched_tokens,
        block_size=limits.block_size, graph=graph, extra_config=inputs.extra_config,
        pinned_kv=memory.kv_cache_bytes if eng.pin_kv_cache_memory and not explicit_kv else explicit_kv))
    env = common_env(spec, graphs_on=graph.cudagraph_mode != "NONE")
    if spec.run.profile and platform_for(hw.kind).profiler_in_scripts and rules.profiler_switch == "env":
        env["VLLM_TORCH_PROFILER_DIR"] = PROFILE_DIR  # vLLM 0.11 envs.py (the CPU runner adds its own switch)
    env.update(launcher.env(hw.kind))
    workers = [WorkerPlan(node_rank=node.node_rank, dp_rank=node.dp_ranks[0], devices=node.devices,
                          env=worker_env(spec, node.node_rank, node.devices),
                          command=launcher.argv(spec, engine_args, node)) for node in placed.nodes]
    return Launch(engine_args, env, workers), []

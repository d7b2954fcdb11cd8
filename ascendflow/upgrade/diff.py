"""What changes when one deployment moves from one software row to another: a pure diff of two compiled plans.

Either side may be a refusal (the compiler's :class:`~ascendflow.schema.errors.ConfigError` text: key, value, rule
and fix) instead of a plan. No I/O; the CLI (:mod:`ascendflow.upgrade.__main__`) compiles and prints.
"""

from __future__ import annotations

from typing import Any

from ascendflow.compiler.launch.common import argument_units
from ascendflow.compiler.plan import Plan

#: Memory terms of the bottleneck device, bytes (:class:`ascendflow.compiler.plan.MemoryPlan`).
MEMORY_TERMS = ("requested_bytes", "weights_bytes", "activation_bytes", "non_torch_bytes", "graph_bytes",
                "kv_cache_bytes")
#: KV figures (:class:`ascendflow.compiler.plan.KVCachePlan`): tokens as vLLM logs them, requests of
#: ``max_model_len`` that fit at once, blocks and tokens per block.
KV_FIGURES = ("tokens", "max_concurrency", "num_blocks", "block_size")


def _changed(current: dict[str, Any], target: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{key: {"current": a, "target": b}}`` for every key whose value differs (absent: ``None``)."""
    return {k: {"current": current.get(k), "target": target.get(k)}
            for k in sorted(set(current) | set(target)) if current.get(k) != target.get(k)}


def _only(current: list, target: list) -> dict[str, list]:
    return {"removed": [x for x in current if x not in target], "added": [x for x in target if x not in current]}


def _figures(current: Any, target: Any, current_argv: list[str], target_argv: list[str]) -> dict[str, Any]:
    """The sections of one engine's figures that differ: ``current``/``target`` have ``graph``, ``kv_cache``,
    ``memory`` and ``engine_args`` (a :class:`Plan`, or one PD role's :class:`RolePlan`); ``*_argv`` its command."""
    return {
        "cudagraph_mode": _changed({"mode": current.graph.cudagraph_mode}, {"mode": target.graph.cudagraph_mode}),
        "capture_sizes": {"current": current.graph.capture_sizes, "target": target.graph.capture_sizes,
                          **_only(current.graph.capture_sizes, target.graph.capture_sizes)},
        "kv": _changed({k: getattr(current.kv_cache, k) for k in KV_FIGURES},
                       {k: getattr(target.kv_cache, k) for k in KV_FIGURES}),
        "memory": _changed({k: getattr(current.memory, k) for k in MEMORY_TERMS},
                           {k: getattr(target.memory, k) for k in MEMORY_TERMS}),
        "engine_args": _changed(current.engine_args, target.engine_args),
        "serve_command": _only(argument_units(current_argv), argument_units(target_argv)),
    }


#: The per-engine sections of :func:`_figures`, in the order the CLI prints them.
FIGURE_SECTIONS = ("cudagraph_mode", "capture_sizes", "kv", "memory", "engine_args", "serve_command")


def plan_diff(current: Plan | str, target: Plan | str, *, current_row: str, target_row: str) -> dict[str, Any]:
    """The differences between the plan on ``current_row`` and the plan on ``target_row`` (JSON-ready).

    Args:
        current: the plan compiled on the deployment's own row, or the refusal text.
        target: the plan compiled on the target row, or the refusal text.
        current_row, target_row: the software rows (``vllm-ascend-0.23.0``).

    Returns:
        ``rows`` (the two rows and their versions), ``refusals`` (``{"current": text|None, "target": text|None}``);
        when both sides compile also ``capture_sizes`` (both lists, ``added``, ``removed``), ``cudagraph_mode``,
        ``kv`` (:data:`KV_FIGURES` that differ), ``memory`` (:data:`MEMORY_TERMS` that differ, bytes),
        ``engine_args`` (keys whose values differ), ``rules`` (release rules that differ, ``source`` left out),
        ``warnings`` (``added``/``removed``) and ``serve_command`` (argument units ``added``/``removed``, see
        :func:`argument_units`). Unchanged sections are empty. A PD plan has the per-engine sections
        (:data:`FIGURE_SECTIONS`) under ``roles`` (``{"prefill": {...}, "decode": {...}}``, each role's first
        worker's command) and ``proxy_command``, instead of at the top level; ``rows``, ``rules`` and ``warnings``
        stay deployment-wide.
    """
    out: dict[str, Any] = {
        "rows": {"current": current_row, "target": target_row},
        "refusals": {"current": current if isinstance(current, str) else None,
                     "target": target if isinstance(target, str) else None},
    }
    if isinstance(current, str) or isinstance(target, str):
        return out
    out["rows"]["engine"] = _changed(current.target.engine, target.target.engine)
    out["rules"] = _changed({k: v for k, v in current.rules.items() if k != "source"},
                            {k: v for k, v in target.rules.items() if k != "source"})
    out["warnings"] = _only(current.warnings, target.warnings)
    if current.roles is not None and target.roles is not None:
        # A PD plan's top-level figures are the decode role's: each role is compared on its own (issue 25 row 6)
        out["roles"] = {name: _figures(role, target.roles[name], role.workers[0].command,
                                       target.roles[name].workers[0].command)
                        for name, role in current.roles.items()}
        out["proxy_command"] = _only(argument_units(current.proxy.command), argument_units(target.proxy.command))
        return out
    out.update(_figures(current, target, current.serve_command, target.serve_command))
    return out

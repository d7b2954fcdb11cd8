"""Is this engine log from the deployment this plan describes? One check between a log and a plan (pure).

A log of another deployment (another model, tensor/pipeline/data parallel size or context length) compared with a plan
gives errors that mean nothing, so calibration refuses it. The log side comes from the engine-config line and the
process prefixes (:data:`ascendflow.runner.log_formats.DEPLOYMENT_FIELDS`, ``RANK_INDEX``) and from the KV capacity
line's ``max_model_len``; the plan side from ``plan.json``'s ``engine_args`` and ``model``. An item the log does not
print is not compared.
"""

from __future__ import annotations

from typing import Any, Mapping

from ascendflow.runner.engine_facts import EngineLogFacts

#: Parallel sizes compared: plan.json ``engine_args`` key = the log's field name.
SIZES = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size")


def _names(*values: Any) -> set[str]:
    """Model names as compared: each name and its last path component, lower case (``/models/Qwen3-8B`` and
    ``Qwen/Qwen3-8B`` are the same model; a path and the served name of one run are too)."""
    out = set()
    for value in values:
        if isinstance(value, str) and value.strip("/ "):
            name = value.strip().rstrip("/").lower()
            out |= {name, name.rsplit("/", 1)[-1]}
    return out


def deployment_differences(plan: Mapping[str, Any], facts: EngineLogFacts) -> list[str]:
    """What differs between the deployment the log shows and the plan's, one ``"<field> <log> in the log, <plan> in
    the plan"`` per item; empty when nothing the log prints differs.

    Args:
        plan: ``plan.json`` as a dict.
        facts: the parsed engine log.
    """
    args = plan.get("engine_args") or {}
    model = plan.get("model") or {}
    dep = facts.deployment
    out: list[str] = []
    log_model = [dep[k] for k in ("served_model_name", "model") if k in dep]
    plan_model = [args.get("model"), args.get("served_model_name"), model.get("id"), model.get("name")]
    if log_model and _names(*plan_model) and not _names(*log_model) & _names(*plan_model):
        out.append(f"model {log_model[0]!r} in the log, {args.get('served_model_name') or model.get('id')!r} in the "
                   "plan")
    for name in SIZES:
        planned = args.get(name, 1)
        if name in dep and dep[name] != planned:
            out.append(f"{name} {dep[name]} in the log, {planned} in the plan")
        elif name not in dep and facts.min_sizes.get(name, 1) > planned:
            out.append(f"{name} at least {facts.min_sizes[name]} in the log (its process names), {planned} in the "
                       "plan")
    logged_len = dep.get("max_model_len", facts.value("max_model_len"))
    if logged_len is not None and args.get("max_model_len") is not None and int(logged_len) != args["max_model_len"]:
        out.append(f"max_model_len {int(logged_len)} in the log, {args['max_model_len']} in the plan")
    return out

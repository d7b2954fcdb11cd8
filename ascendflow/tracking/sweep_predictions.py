"""Predicted capacity of every job of a basic-sweeper capacity sweep, before any job runs (``slo.measure_top``).

Each job's config is composed the way Hydra's basic sweeper composes it (``hydra/_internal/core_plugins/
basic_sweeper.py`` ``BasicSweeper.split_arguments`` over ``hydra.sweeper.params`` + the command line, then
``ConfigLoader.load_sweep_config``, hydra-core 1.3), compiled by the pure compiler with the model's config only
(``resolve_model(need_weights=False)``), and priced by the performance model (:mod:`ascendflow.perfmodel`): about
0.3 s per config here. The engine is never started.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from ascendflow.tracking.run_names import job_run_name


def job_overrides(config: DictConfig) -> list[list[str]]:
    """Every job's override list, in launch order, as the basic sweeper builds it (``hydra.sweeper.params`` first,
    then the command line's ``hydra.overrides.task``; the same key on the command line wins)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    params = OmegaConf.select(config, "hydra.sweeper.params", default=None) or {}
    arguments = [f"{k}={v}" for k, v in params.items()]
    arguments += list(OmegaConf.select(config, "hydra.overrides.task", default=[]) or [])
    parsed = OverridesParser.create().parse_overrides(arguments)
    return [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]


def predict_job(job_config: DictConfig) -> tuple[float | None, str]:
    """Predicted capacity (req/s at the SLO) of one composed job config, and why not when ``None``: never raises
    (a job whose config is bad fails on its own, with its own message, when it runs)."""
    from ascendflow.models.resolve import resolve_model
    from ascendflow.perfmodel.attach import with_performance
    from ascendflow.runner.detect import compile_for_this_host
    from ascendflow.schema import load_spec

    try:
        task = job_config.copy()
        with open_dict(task):
            task.pop("hydra", None)
        spec = load_spec(OmegaConf.to_container(task, resolve=True, throw_on_missing=True))
        model = resolve_model(spec.model, need_weights=False)
        plan = compile_for_this_host(spec, model)  # the job's own plan, so its prediction is this one
        plan = with_performance(plan, spec, model.path or spec.model.path, Path.cwd())
    except Exception as exc:  # noqa: BLE001 - unpredicted configs are measured
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    perf = plan.performance or {}
    cap = perf.get("capacity") or {}
    if "capacity_rps" not in cap:
        return None, str(cap.get("reason") or perf.get("reason") or "the model gave no capacity")
    return float(cap["capacity_rps"]), ""


def predict_sweep(config: DictConfig, keys: list[str]) -> list[dict[str, Any]]:
    """``{"name", "predicted_capacity_rps", "reason"}`` per job of the multirun ``config``, in launch order; ``name``
    is the job's MLflow run name (:func:`ascendflow.tracking.run_names.job_run_name`)."""
    from hydra.core.global_hydra import GlobalHydra

    loader = GlobalHydra.instance().config_loader()
    out = []
    for overrides in job_overrides(config):
        job = loader.load_sweep_config(config, overrides)
        cap, reason = predict_job(job)
        out.append({"name": job_run_name(list(job.hydra.overrides.task), keys), "predicted_capacity_rps": cap,
                    "reason": reason})
    return out


def record_measured(tracked: Any, entry: dict[str, Any]) -> None:
    """Record why a pruning sweep measures this job: tag ``capacity.measure_reason`` (``measured: predicted 4.05
    req/s, rank 1 of 2``) and metric ``predicted_rank`` (absent for a config without a prediction), so a measured
    child carries its predicted rank beside its measured capacity."""
    tracked.set_tags({"capacity.measure_reason": entry["reason"][:500]})
    if entry.get("predicted_rank") is not None:
        tracked.log_metrics({"predicted_rank": float(entry["predicted_rank"])})


def record_pruned(tracked: Any, entry: dict[str, Any], run_dir: Path) -> None:
    """Record a job the sweep decided not to measure: tags ``capacity.pruned=true`` and ``capacity.pruned_reason``,
    metric ``predicted_rank``, ``pruned.json`` in the run directory; the caller ends the run FINISHED. (Its plan and
    ``predicted_capacity_rps`` are logged like every job's.)"""
    import json

    tracked.set_tags({"capacity.pruned": "true", "capacity.pruned_reason": entry["reason"][:500]})
    if entry.get("predicted_rank") is not None:
        tracked.log_metrics({"predicted_rank": float(entry["predicted_rank"])})
    (run_dir / "pruned.json").write_text(json.dumps(entry, indent=2))

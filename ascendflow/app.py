"""The job: config → spec → plan → run → record. Called by the Hydra task in ``__main__``."""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ascendflow import console
from ascendflow.compiler import Plan
from ascendflow.models.errors import ModelNotFoundError
from ascendflow.models.resolve import resolve_model
from ascendflow.report import kv_capacity_line, result_record, summary_rows
from ascendflow.perfmodel.attach import with_performance
from ascendflow.perfmodel.predict import predicted_metrics
from ascendflow.runner.artifacts import write_json, write_plan
from ascendflow.runner.detect import compile_for_this_host, hardware_present
from ascendflow.capacity.plot import plot_load_curve
from ascendflow.capacity.pruning import decision_entry
from ascendflow.capacity.search import load_range
from ascendflow.capacity.sweep_predictions import record_measured, record_pruned
from ascendflow.runner.capacity_run import serve_and_search
from ascendflow.runner.engine_metrics import summary_line
from ascendflow.runner.local import run_offline, serve_and_benchmark
from ascendflow.runner.neighbours import concurrency_warning
from ascendflow.runner.server import EngineStartError
from ascendflow.rehearsal.job import check_rehearsable, rehearsal_plan
from ascendflow.rehearsal.nodes import argv_diff, rehearse
from ascendflow.runner.versions import VersionMismatchError, verify_installed
from ascendflow.schema import ConfigError, RunSpec, load_spec
from ascendflow.schema.run import RunOptions
from ascendflow.schema.tracking import TrackingSpec
from ascendflow.schema.secrets import mask_env_config, mask_text, secret_values
from ascendflow.tracking import TrackedRun
from ascendflow.tracking.mlflow_run import bench_metrics
from ascendflow.tracking.pending import scrub_dir
from ascendflow.interrupts import Terminated, install_sigterm, restore_handlers
from ascendflow.tracking.objective import objective
from ascendflow.tracking.server import ServerStartError, TrackingServer, wants_server
from ascendflow.tracking.store import refuse_unusable_store, tracking_uri
from ascendflow.tracking.sweep import end_parent, job_run_name, read_sweep, refuse_parallel_engines


def _secrets(cfg: DictConfig) -> tuple[dict[str, str], list[str]]:
    """Secret values of this job, ``{name: value}``: secret ``ascend.env`` entries (``ascendflow.schema.secrets``) and
    the API key named by ``run.api_key_env`` when it is set in the environment; and the names marked secret."""
    env = OmegaConf.select(cfg, "ascend.env", default=None)
    marked = OmegaConf.select(cfg, "ascend.secret_env", default=None)
    try:
        env = OmegaConf.to_container(env, resolve=True) if env is not None else {}
        marked = [str(m) for m in OmegaConf.to_container(marked, resolve=True)] if marked is not None else []
    except Exception:  # unresolvable values are reported by load_spec
        env, marked = {}, []
    values = secret_values(env if isinstance(env, dict) else {}, marked)
    key_env = OmegaConf.select(cfg, "run.api_key_env", default=None)
    if isinstance(key_env, str) and os.environ.get(key_env):
        values[key_env] = os.environ[key_env]
    return values, marked


def _scrub_hydra_copies(run_dir: Path, sweep_dir: Path | None, values: list[str]) -> None:
    """Mask secret values in what Hydra wrote before the job started: ``.hydra/config.yaml``, ``overrides.yaml``,
    ``hydra.yaml`` and the sweep's ``multirun.yaml``."""
    if not values:
        return
    if (run_dir / ".hydra").exists():
        scrub_dir(run_dir / ".hydra", values)
    if sweep_dir is not None and (sweep_dir / "multirun.yaml").exists():
        path = sweep_dir / "multirun.yaml"
        path.write_text(mask_text(path.read_text(), values))


def _tracking_settings(cfg: DictConfig) -> TrackingSpec:
    """The tracking section alone, so a run is recorded even when the rest of the config is bad."""
    try:
        return TrackingSpec.model_validate(OmegaConf.to_container(cfg.tracking, resolve=True))
    except Exception:  # invalid tracking keys are reported by load_spec; record with defaults meanwhile
        return TrackingSpec()


def _store_uri(cfg: DictConfig) -> str:
    return str(OmegaConf.select(cfg, "tracking.tracking_uri", default=None) or os.environ.get("MLFLOW_TRACKING_URI"))


def _mode(spec: RunSpec) -> str:
    present = hardware_present(spec.hardware)
    if spec.run.mode == "rehearse":
        return "rehearse"  # runs on this machine's CPU engine whatever the plan's hardware
    if spec.run.mode == "auto":
        return "serve" if present else "plan"
    if spec.run.mode != "plan" and not present:
        raise ConfigError("run.mode", spec.run.mode, f"hardware={spec.hardware.name} ({spec.hardware.kind}) is not "
                                                     "on this machine; use run.mode=plan (or auto) to write the plan "
                                                     "and launch scripts for it")
    return spec.run.mode


def run_job(cfg: DictConfig) -> float | tuple[float, float] | None:
    """Run one Hydra job (:func:`_run_job`); a single run with ``tracking=server`` and no ``tracking_uri`` first
    starts its own MLflow tracking server and stops it when the run ends, however it ends (a sweep's server is
    started by the sweep callback instead, :mod:`ascendflow.tracking.cluster`)."""
    tracking = _tracking_settings(cfg)
    try:
        server = HydraConfig.get().mode != RunMode.MULTIRUN and wants_server(tracking)
    except ConfigError as exc:
        return _fail(None, Path(HydraConfig.get().runtime.output_dir), exc, False, _run_options(cfg))
    if not server:
        return _run_job(cfg, tracking)
    try:
        started = TrackingServer(tracking, Path.cwd() / "outputs")
        uri = started.start()
    except ServerStartError as exc:
        console.fail_line(str(exc))
        sys.exit(EXIT_RUN_FAILED)
    try:
        return _run_job(cfg, tracking.model_copy(update={"tracking_uri": uri}))
    finally:
        started.stop()
        print(f"the run's tracking server was stopped; serve its runs again with: {started.browse_command()}",
              file=sys.stderr)


def _run_job(cfg: DictConfig, tracking: TrackingSpec) -> float | tuple[float, float] | None:
    """Run one Hydra job end to end and return the sweep objective (see ``run.objective``), or ``None`` when
    plan-only.

    A single run exits with code 2 and one line on stderr for bad input (``HYDRA_FULL_ERROR=1`` re-raises it with its
    traceback) and code 1 for a failed engine; in a multirun the job is recorded FAILED and scores the penalty, so
    the sweep goes on. The MLflow run is ended FAILED with the run directory attached on any error, KILLED on
    Ctrl-C/SIGTERM (with the sweep's parent run).
    """
    hc = HydraConfig.get()
    run_dir = Path(hc.runtime.output_dir)
    multirun = hc.mode == RunMode.MULTIRUN
    sweep = read_sweep(Path(hc.sweep.dir).resolve()) if multirun else None
    choices = {k: v for k, v in hc.runtime.choices.items() if not k.startswith("hydra") and v is not None}
    recipe = choices.get("recipe")
    name = (job_run_name(list(hc.overrides.task), sweep.get("swept_keys", [])) if sweep and hc.overrides.task else
            "-".join(str(choices.get(g, "?")) for g in ("model", "hardware", "parallel")))
    secrets, marked = _secrets(cfg)
    # Jobs that differ only by a secret value would all be named "...=***" once masked: their job number tells them
    # apart (`name` itself stays the sweep's key for this job, e.g. in a capacity sweep's pruning decision).
    shown = name if not multirun or mask_text(name, secrets.values()) == name else f"{name} (job {hc.job.num})"
    _scrub_hydra_copies(run_dir, Path(hc.sweep.dir).resolve() if multirun else None, list(secrets.values()))
    try:
        if tracking.enabled:  # a path or a server nobody answers on: one line now, not minutes of MLflow retries
            refuse_unusable_store(tracking, tracking_uri(tracking, Path.cwd() / "outputs"))
        tracked = TrackedRun(
            tracking, Path.cwd() / "outputs", experiment=recipe or "ascendflow", run_name=shown[:250],
            tags={"recipe": recipe or "", **{f"choice.{k}": str(v) for k, v in choices.items()}}, sweep=sweep,
            run_dir=run_dir, secrets=list(secrets.values()))
    except ConfigError as exc:  # a deleted experiment: nothing was recorded, nothing started
        return _fail(None, run_dir, exc, multirun, _run_options(cfg))
    except Exception as exc:  # an unusable store: nothing was recorded, nothing started
        return _fail(None, run_dir, ConfigError("tracking.tracking_uri", _store_uri(cfg),
                                                f"cannot be used as an MLflow store ({type(exc).__name__}: "
                                                f"{str(exc).splitlines()[0][:200]}); use an absolute "
                                                f"sqlite:///<path>.db or an http(s) server"), multirun,
                     _run_options(cfg))
    previous = install_sigterm()
    spec = None
    try:
        try:
            raw = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
        except OmegaConfBaseException as exc:
            key = getattr(exc, "full_key", None) or "?"
            raise ConfigError(key, "???", f"is missing or cannot be resolved; set it on the command line "
                                          f"({key}=...)") from None
        spec = load_spec(raw)
        mode = _mode(spec)
        if mode == "capacity":
            load_range(spec.slo, spec.workload)  # a bad SLO is refused before anything starts
        if not multirun and spec.slo.measure_top is not None:
            raise ConfigError("slo.measure_top", spec.slo.measure_top,
                              "prunes the configs of a capacity sweep before they run, and this is a single run; run "
                              "a sweep (-m +sweep=capacity engine.max_num_seqs=8,16,32 ...) or drop slo.measure_top")
        if multirun:
            refuse_parallel_engines(hc.launcher, mode)
        tracked.set_tags({"run.mode": mode, "run_dir": str(run_dir)})
        if spec.run.profile and mode != "serve":
            console.warn_lines([f"run.profile=true: this {mode} run is not profiled here" + (
                "; the launch scripts carry vLLM's profiler switch (traces in ./vllm_profile on the node between "
                "/start_profile and /stop_profile, e.g. vllm bench serve --profile)"
                if spec.hardware.kind != "cpu" and mode == "plan" else "; only served runs are profiled")])
        tracked.log_params(mask_env_config(spec.model_dump(mode="json"), marked))
        _check_api_key(spec, mode)
        with console.step(f"model {spec.model.name}") as update:
            model = resolve_model(spec.model, need_weights=mode in ("serve", "offline", "capacity"), progress=update)
        plan = compile_for_this_host(spec, model)
        if mode == "rehearse":
            check_rehearsable(plan)  # before anything is written or started
        plan = with_performance(plan, spec, model.path or spec.model.path, Path.cwd())
        written = write_plan(plan, run_dir)
        tracked.set_tags({"plan_hash": plan.plan_hash})
        # A rehearsal measures its scaled-down plan: the target plan's predictions are kept apart (target_*) so no
        # measured value is set beside a prediction for another model and device.
        tracked.log_metrics({("target_" if mode == "rehearse" else "") + k: v for k, v in _plan_metrics(plan).items()})
        target = plan
        if mode == "capacity" and (entry := decision_entry(sweep, name)) is not None:
            if not entry["measure"]:
                return _pruned(tracked, entry, run_dir)  # slo.measure_top: the engine is never started
            record_measured(tracked, entry)
        if mode == "rehearse":
            with tracked.system_metrics():
                outcome, plan = _rehearse(raw, plan, recipe, run_dir, tracked)
        else:
            with tracked.system_metrics() if mode != "plan" else contextlib.nullcontext():
                outcome = _execute(mode, plan, spec, run_dir, secrets)
        record = result_record(plan, outcome)
        write_json(run_dir / "result.json", record)
        if "capacity" in outcome:
            plot_load_curve(outcome["capacity"], run_dir / "capacity" / "load_curve.png",
                            f"{name} · {spec.model.id}")
            tracked.set_tags({"capacity.slo_met": str(outcome["capacity"]["slo_met"]).lower(),
                              "capacity.variable": outcome["capacity"]["variable"]})
        # the plan's predictions were logged before the engine started; a rehearsal logs its own scaled plan's
        tracked.log_metrics({**(_plan_metrics(plan) if plan is not target else {}), **record["metrics"]})
        _check_requests(mode, record, spec.run, tracked)
        if others := outcome.get("concurrent_engines"):  # the machine was shared while it measured
            tracked.set_tags({"concurrent_engines": str(len(others))})
            console.warn_lines([concurrency_warning(set(others))])
        tracked.end("FINISHED", run_dir)
        console.memory_waterfall(plan.memory.model_dump(), kv_capacity_line(plan))
        console.summary(f"ascendflow · {mode} · plan {plan.plan_hash}", summary_rows(plan, record, written),
                        _footer(tracked, run_dir))
        console.warn_lines([("target plan: " if plan is not target else "") + w for w in target.warnings]
                           + [line for line in [summary_line(record["metrics"])] if line])
        return objective(spec.run, record["metrics"]) if mode != "plan" else None
    except (KeyboardInterrupt, Terminated):
        tracked.set_tags({"error": "interrupted"})
        tracked.end("KILLED", run_dir)
        if sweep:
            end_parent(sweep, "KILLED")
        console.fail_line("interrupted: every process of the run stopped, MLflow run ended KILLED")
        sys.exit(130)
    except Exception as exc:
        return _fail(tracked, run_dir, exc, multirun, spec.run if spec else _run_options(cfg))
    finally:
        restore_handlers(previous)


class RunFailedError(RuntimeError):
    """The engine ran but the workload did not: no request completed, or more failed than ``run.max_failed_fraction``
    allows."""


def _check_requests(mode: str, record: dict[str, Any], run: RunOptions, tracked: TrackedRun) -> None:
    """Failed benchmark requests never pass silently: tag ``failed_requests=<failed>/<total>``; fail the run above
    ``run.max_failed_fraction``, else warn.

    Raises:
        RunFailedError: no request completed, or the failed share exceeds ``run.max_failed_fraction``.
    """
    if mode == "plan":
        return
    bench = record["benchmark"]
    completed, failed = int(bench.get("completed") or 0), int(bench.get("failed") or 0)
    hint = ("see bench.log / engine.log in the run directory (requests longer than max_model_len are rejected)")
    if not completed:
        raise RunFailedError(f"no request completed ({bench.get('failed', '?')} failed); {hint}")
    if not failed:
        return
    total = completed + failed
    tracked.set_tags({"failed_requests": f"{failed}/{total}"})
    line = f"{failed} of {total} benchmark requests failed"
    if failed / total > run.max_failed_fraction:
        raise RunFailedError(f"{line} (above run.max_failed_fraction={run.max_failed_fraction:g}); {hint}; raise "
                             f"run.max_failed_fraction to accept it")
    console.warn_lines([f"{line} (within run.max_failed_fraction={run.max_failed_fraction:g}): throughput counts "
                        f"the completed ones; the sweep objective is scaled by {completed}/{total}"])


def _check_api_key(spec: RunSpec, mode: str) -> None:
    """Refuse to start an engine whose API key variable is unset.

    Raises:
        ConfigError: ``run.api_key_env`` names a variable that is not set (serve and offline modes).
    """
    name = spec.run.api_key_env
    if name and mode != "plan" and not os.environ.get(name):
        raise ConfigError("run.api_key_env", name, f"the variable is not set; export {name}=<key> before the run "
                                                   f"(its value is never written)")


#: Exit codes of a single run: bad input, and failures of the run itself (engine, model, versions).
EXIT_BAD_INPUT, EXIT_RUN_FAILED = 2, 1
KNOWN_FAILURES = (EngineStartError, ModelNotFoundError, VersionMismatchError, RunFailedError)


def _run_options(cfg: DictConfig) -> RunOptions:
    """The run section alone (for the objective of a job whose config is otherwise bad); defaults if it is bad too."""
    try:
        return RunOptions.model_validate(OmegaConf.to_container(cfg.run, resolve=True))
    except Exception:
        return RunOptions()


def _fail(tracked: TrackedRun | None, run_dir: Path, exc: Exception, multirun: bool, run: RunOptions):
    """End the run FAILED with ``error.txt``; print one line. Single run: exit (or re-raise an unexpected error);
    multirun: return the penalty objective so the sweep goes on."""
    known = isinstance(exc, (ConfigError, *KNOWN_FAILURES))
    message = str(exc) if known else f"{type(exc).__name__}: {exc}"
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "error.txt").write_text(message + "\n" + ("" if known else traceback.format_exc()))
    if tracked is not None:
        if getattr(exc, "benchmark", None):  # the engine died: the partial benchmark's counts and rates
            tracked.log_metrics(bench_metrics(exc.benchmark))
        tracked.set_tags({"error": message.splitlines()[0][:500] if message else type(exc).__name__,
                          **({"error.stage": exc.stage} if getattr(exc, "stage", None) else {})})
        tracked.end("FAILED", run_dir)
    if os.environ.get("HYDRA_FULL_ERROR") == "1" or (not known and not multirun):
        raise exc
    console.fail_line(message)
    if multirun:
        return objective(run, None)
    sys.exit(EXIT_BAD_INPUT if isinstance(exc, ConfigError) else EXIT_RUN_FAILED)


def _execute(mode: str, plan: Plan, spec: RunSpec, run_dir: Path, secrets: dict[str, str]) -> dict[str, Any]:
    if mode == "plan":
        return {}
    verify_installed(plan.target.engine)
    if mode == "serve":
        with console.step("serve + benchmark (vLLM server, vLLM's benchmark client)") as update:
            return serve_and_benchmark(plan, spec, run_dir, update, secrets)
    if mode == "capacity":
        with console.step("capacity search at the SLO (vLLM server, vLLM's benchmark client)") as update:
            return serve_and_search(plan, spec, run_dir, update, secrets)
    with console.step("offline generation (vllm.LLM)") as update:
        return run_offline(plan, spec, run_dir, update, secrets)


def _rehearse(raw: dict[str, Any], original: Plan, recipe: str | None, run_dir: Path,
              tracked: TrackedRun) -> tuple[dict[str, Any], Plan]:
    """Compile the rehearsal of ``original``, write it under ``run_dir/rehearsal`` with the argv diff, tag the run
    (``rehearsal_of``, ``rehearsal.recipe``, ``rehearsal.plan_hash``) and run it; returns the outcome and the
    rehearsed plan."""
    with console.step("rehearsal plan (tiny model, CPU engine)") as update:
        rspec, rplan = rehearsal_plan(raw, original, update)
    write_plan(rplan, run_dir / "rehearsal")
    (run_dir / "rehearsal" / "argv_diff.txt").write_text(argv_diff(original, rplan))
    tracked.set_tags({"rehearsal_of": original.plan_hash, "rehearsal.recipe": recipe or "",
                      "rehearsal.plan_hash": rplan.plan_hash, "rehearsal.launcher": rplan.launcher})
    verify_installed(rplan.target.engine)
    with console.step(f"rehearsal: {rplan.target.nodes} nodes ({rplan.launcher}) here, vLLM's benchmark client") as u:
        return rehearse(rplan, rspec, run_dir, u), rplan


def _pruned(tracked: TrackedRun, entry: dict[str, Any], run_dir: Path) -> None:
    """A capacity config the sweep does not measure (``slo.measure_top``): a FINISHED run with its plan and
    prediction, tagged ``capacity.pruned=true`` (:func:`ascendflow.capacity.sweep_predictions.record_pruned`)."""
    record_pruned(tracked, entry, run_dir)
    tracked.end("FINISHED", run_dir)
    console.warn_lines([f"config not measured (slo.measure_top): {entry['reason'].removeprefix('pruned: ')}"])
    return None


def _plan_metrics(plan: Plan) -> dict[str, float]:
    return {
        "predicted_kv_cache_tokens": plan.kv_cache.tokens,
        "predicted_kv_cache_blocks": plan.kv_cache.num_blocks,
        "predicted_max_concurrency": plan.kv_cache.max_concurrency,
        "predicted_kv_bytes_per_token": plan.kv_cache.bytes_per_token,
        **{f"predicted_{k}": v for k, v in plan.memory.model_dump().items()},
        **predicted_metrics(plan.performance or {}),
    }


def _footer(tracked: TrackedRun, run_dir: Path) -> list[str]:
    lines = [f"run directory: {run_dir}"]
    if tracked.ui_command():
        lines.append(f"MLflow run {tracked.run_id} (experiment {tracked.experiment_id}); see it with:")
        lines.append(f"  {tracked.ui_command()}")
    return lines

"""The job: config → spec → plan → run → record. Called by the Hydra task in ``__main__``.

The config becomes the job's typed inputs once (:func:`ascendflow.job_inputs.job_inputs`); what each ``run.mode``
does is its handler's (:mod:`ascendflow.modes`); this module keeps the order of things and the recording."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from ascendflow import console
from ascendflow.compiler import Plan
from ascendflow.interrupts import Terminated, install_sigterm, restore_handlers
from ascendflow.job_inputs import JobInputs, job_inputs
from ascendflow.models.errors import ModelNotFoundError
from ascendflow.models.resolve import resolve_model
from ascendflow.modes import Job, mode_for
from ascendflow.perfmodel.attach import with_performance
from ascendflow.perfmodel.predict import predicted_metrics
from ascendflow.report import kv_capacity_line, result_record, role_lines, summary_rows
from ascendflow.runner.artifacts import write_json, write_plan
from ascendflow.runner.engine_metrics import summary_line
from ascendflow.runner.server import EngineStartError
from ascendflow.runner.versions import VersionMismatchError
from ascendflow.schema import ConfigError, RunSpec
from ascendflow.schema.run import RunOptions
from ascendflow.schema.secrets import mask_env_config, mask_text
from ascendflow.schema.tracking import TrackingSpec
from ascendflow.secret_logging import mask
from ascendflow.tracking import TrackedRun
from ascendflow.tracking.mlflow_run import bench_metrics
from ascendflow.tracking.objective import objective
from ascendflow.tracking.pd_roles import role_metrics, role_params
from ascendflow.tracking.pending import scrub_dir
from ascendflow.tracking.run_dir import set_aside_earlier_outputs
from ascendflow.tracking.server import ServerStartError, TrackingServer, wants_server
from ascendflow.tracking.store import StoreFullError, refuse_unusable_store, tracking_uri, unusable_store
from ascendflow.tracking.run_names import job_run_name
from ascendflow.sweeps.checks import refuse_parallel_engines
from ascendflow.tracking.sweep import end_parent, read_sweep


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


def run_job(cfg: DictConfig) -> float | tuple[float, float] | None:
    """Run one Hydra job (:func:`_run_job`); a single run with ``tracking=server`` and no ``tracking_uri`` first
    starts its own MLflow tracking server and stops it when the run ends, however it ends (a sweep's server is
    started by the sweep callback instead, :mod:`ascendflow.tracking.cluster`).

    An earlier run's files in a reused run directory are first moved into ``previous/``
    (:func:`ascendflow.tracking.run_dir.set_aside_earlier_outputs`): the run records only what it wrote.
    """
    hc = HydraConfig.get()
    run_dir = Path(hc.runtime.output_dir)
    # a job directory that is the sweep directory itself (hydra.sweep.subdir=.) holds the sweep's own files
    sweep_root = hc.mode == RunMode.MULTIRUN and run_dir.resolve() == Path(hc.sweep.dir).resolve()
    keep = (str(hc.output_subdir), f"{hc.job.name}.log")
    previous = None if sweep_root else set_aside_earlier_outputs(run_dir, keep=keep)
    inputs = job_inputs(cfg)
    try:
        server = hc.mode != RunMode.MULTIRUN and wants_server(inputs.tracking)
    except ConfigError as exc:
        return _fail(None, run_dir, exc, False, inputs.run)
    if not server:
        return _run_job(inputs, inputs.tracking, previous)
    try:
        started = TrackingServer(inputs.tracking, Path.cwd() / "outputs")
        uri = started.start()
    except ServerStartError as exc:
        console.fail_line(str(exc))
        sys.exit(EXIT_RUN_FAILED)
    try:
        return _run_job(inputs, inputs.tracking.model_copy(update={"tracking_uri": uri}), previous)
    finally:
        started.stop()
        print(f"the run's tracking server was stopped; serve its runs again with: {started.browse_command()}",
              file=sys.stderr)


def _run_job(inputs: JobInputs, tracking: TrackingSpec, previous: Path | None) -> float | tuple[float, float] | None:
    """Run one Hydra job end to end and return the sweep objective (see ``run.objective``), or ``None`` when
    nothing was measured. The order of things: tracked run, spec, mode (:mod:`ascendflow.modes`), model, plan, the
    mode's run, its record, the summary.

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
            "-".join(str(choices.get(g, "?")) for g in ("model", "hardware"))
            + f"-{inputs.layout or choices.get('parallel', '?')}")
    secrets = inputs.secrets
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
        return _fail(None, run_dir, exc, multirun, inputs.run)
    except Exception as exc:  # an unusable store: nothing was recorded, nothing started
        return _fail(None, run_dir, unusable_store(tracking, tracking_uri(tracking, Path.cwd() / "outputs"), exc),
                     multirun, inputs.run)
    handlers = install_sigterm()
    try:
        spec = inputs.valid_spec()
        mode = mode_for(spec)
        mode.check(spec)  # e.g. a bad SLO, or a PD deployment in a mode that cannot run one
        if not multirun and spec.slo.measure_top is not None:
            raise ConfigError("slo.measure_top", spec.slo.measure_top,
                              "prunes the configs of a capacity sweep before they run, and this is a single run; run "
                              "a sweep (-m +sweep=capacity engine.max_num_seqs=8,16,32 ...) or drop slo.measure_top")
        if multirun:
            refuse_parallel_engines(hc.launcher, mode.name)
        tracked.set_tags({"run.mode": mode.name, "run_dir": str(run_dir)})
        console.warn_lines(mode.profile_warnings(spec))
        tracked.log_params(mask_env_config(spec.model_dump(mode="json"), inputs.marked))
        if mode.runs_engine:
            _check_api_key(spec)
        with console.step(f"model {spec.model.name}") as update:
            model = resolve_model(spec.model, need_weights=mode.needs_weights, progress=update)
        job = Job(spec=spec, raw=inputs.raw, name=name, recipe=recipe, run_dir=run_dir, sweep=sweep,
                  secrets=secrets, tracked=tracked)
        plan = mode.plan(spec, model, job)  # the spec compiled for this host; a search's top pick
        mode.prepare(plan, job)  # before anything is written or started
        if plan.performance is None:  # a search's top pick comes priced
            plan = with_performance(plan, spec, model.path or spec.model.path, Path.cwd())
        if (plan.performance or {}).get("calibration"):  # which NPU calibration priced the predictions
            tracked.log_params({"perf": {"calibration": plan.performance["calibration"]}})
        written = write_plan(plan, run_dir)
        tracked.set_tags({"plan_hash": plan.plan_hash})
        tracked.log_metrics({mode.predictions_prefix + k: v for k, v in _plan_metrics(plan).items()})
        if plan.roles:  # one run per PD deployment: each role's params and predictions beside the run's
            plan_dict = json.loads(plan.to_json())
            tracked.log_params(role_params(plan_dict))
            tracked.log_metrics({mode.predictions_prefix + k: v for k, v in role_metrics(plan_dict).items()})
        outcome = mode.run(plan, job)
        if outcome.result is None:  # the mode decided not to run (a pruned capacity config)
            tracked.end("FINISHED", run_dir)
            console.warn_lines(outcome.warnings)
            return None
        measured = outcome.plan  # a rehearsal measures its own scaled-down plan, not the target plan written above
        record = result_record(measured, outcome.result)
        write_json(run_dir / "result.json", record)
        if outcome.tags:
            tracked.set_tags(outcome.tags)
        # the plan's predictions were logged before the engine started; a plan measured in its place logs its own
        tracked.log_metrics({**(_plan_metrics(measured) if measured is not plan else {}), **record["metrics"]})
        if mode.runs_engine:
            _check_requests(record, spec.run, tracked)
        tracked.end("FINISHED", run_dir)
        console.memory_waterfall(measured.memory.model_dump(), kv_capacity_line(measured),
                                 title="decode role: memory per device" if measured.roles else
                                 "memory per device (bottleneck)")
        console.info_lines(role_lines(measured, plan))
        console.summary(f"ascendflow · {mode.name} · plan {measured.plan_hash}",
                        summary_rows(measured, record, written), _footer(tracked, run_dir, previous))
        console.warn_lines([("target plan: " if measured is not plan else "") + w for w in plan.warnings]
                           + outcome.warnings + [line for line in [summary_line(record["metrics"])] if line])
        return objective(spec.run, record["metrics"]) if mode.runs_engine else None
    except (KeyboardInterrupt, Terminated) as exc:
        tracked.set_tags({"error": "interrupted"})
        _write_interrupted(run_dir, exc)
        kept = _partial_benchmark(run_dir)
        if kept:  # Ctrl-C during the benchmark: its partial counts and rates, as a FAILED run's (engine death)
            tracked.log_metrics(bench_metrics(kept))
        tracked.end("KILLED", run_dir)
        if sweep:
            end_parent(sweep, "KILLED")
        console.fail_line("interrupted: every process of the run stopped, MLflow run ended KILLED"
                          + (f" ({kept.get('completed')} completed, {kept.get('failed')} failed, partial result "
                             f"kept in benchmark.json)" if kept else ""))
        sys.exit(130)
    except Exception as exc:
        return _fail(tracked, run_dir, exc, multirun, inputs.run)
    finally:
        restore_handlers(handlers)


def _partial_benchmark(run_dir: Path) -> dict[str, Any] | None:
    """The benchmark client's result written before an interrupt ended the run (``benchmark.json``: the client
    writes it once its requests returned, :func:`ascendflow.runner.local._partial_result_on_interrupt`), or
    ``None``. The run directory holds only this run's files (earlier ones are moved to ``previous/``)."""
    path = run_dir / "benchmark.json"
    with contextlib.suppress(OSError, ValueError):
        if path.is_file() and not (run_dir / "result.json").exists():
            data = json.loads(path.read_text())
            return data if isinstance(data, dict) else None
    return None


def _write_interrupted(run_dir: Path, exc: BaseException) -> None:
    """``error.txt`` of a KILLED run, as a FAILED one has (new-user trial of 2026-12-03): which signal ended it and that
    every process stopped. Skipped when the run directory cannot take it (a full or read-only disk: the run still
    ends KILLED)."""
    how = "SIGTERM" if isinstance(exc, Terminated) else "SIGINT (Ctrl-C)"
    with contextlib.suppress(OSError):
        if run_dir.is_dir():
            (run_dir / "error.txt").write_text(f"interrupted by {how}: every process of the run stopped, MLflow run "
                                               f"ended KILLED\n")


class RunFailedError(RuntimeError):
    """The engine ran but the workload did not: no request completed, or more failed than ``run.max_failed_fraction``
    allows."""


def _check_requests(record: dict[str, Any], run: RunOptions, tracked: TrackedRun) -> None:
    """Failed benchmark requests never pass silently: tag ``failed_requests=<failed>/<total>``; fail the run above
    ``run.max_failed_fraction``, else warn.

    Raises:
        RunFailedError: no request completed, or the failed share exceeds ``run.max_failed_fraction``.
    """
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


def _check_api_key(spec: RunSpec) -> None:
    """Refuse to start an engine whose API key variable is unset (modes that run an engine).

    Raises:
        ConfigError: ``run.api_key_env`` names a variable that is not set.
    """
    name = spec.run.api_key_env
    if name and not os.environ.get(name):
        raise ConfigError("run.api_key_env", name, f"the variable is not set; export {name}=<key> before the run "
                                                   f"(its value is never written)")


#: Exit codes of a single run: bad input, and failures of the run itself (engine, model, versions).
EXIT_BAD_INPUT, EXIT_RUN_FAILED = 2, 1
KNOWN_FAILURES = (EngineStartError, ModelNotFoundError, VersionMismatchError, RunFailedError, StoreFullError)


def _fail(tracked: TrackedRun | None, run_dir: Path, exc: Exception, multirun: bool, run: RunOptions):
    """End the run FAILED with ``error.txt``; print one line. Single run: exit (or re-raise an unexpected error);
    multirun: return the penalty objective so the sweep goes on."""
    known = isinstance(exc, (ConfigError, *KNOWN_FAILURES))
    message = mask(str(exc) if known else f"{type(exc).__name__}: {exc}")
    with contextlib.suppress(OSError):  # a full disk: the line below and the MLflow run still say it
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "error.txt").write_text(message + "\n" + ("" if known else mask(traceback.format_exc())))
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


def _plan_metrics(plan: Plan) -> dict[str, float]:
    return {
        "predicted_kv_cache_tokens": plan.kv_cache.tokens,
        "predicted_kv_cache_blocks": plan.kv_cache.num_blocks,
        "predicted_max_concurrency": plan.kv_cache.max_concurrency,
        "predicted_kv_bytes_per_token": plan.kv_cache.bytes_per_token,
        **{f"predicted_{k}": v for k, v in plan.memory.model_dump().items()},
        **predicted_metrics(plan.performance or {}),
    }


def _footer(tracked: TrackedRun, run_dir: Path, previous: Path | None) -> list[str]:
    """The summary's last lines: the run directory (and where an earlier run's files in it were moved), the MLflow
    run and the command that shows it."""
    lines = [f"run directory: {run_dir}"]
    if previous is not None:
        lines.append(f"an earlier run's files there were moved to {previous} (not recorded with this run)")
    if tracked.ui_command():
        lines.append(f"MLflow run {tracked.run_id} (experiment {tracked.experiment_id}); see it with:")
        lines.append(f"  {tracked.ui_command()}")
    return lines

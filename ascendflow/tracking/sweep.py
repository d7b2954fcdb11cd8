"""Sweeps in MLflow: one parent run per Hydra multirun, one nested child run per job.

:class:`MlflowSweepCallback` (a Hydra callback, configured in ``conf/config.yaml``) creates the experiment and the
parent run once, in the launching process, before any job starts, and writes its id to ``<sweep dir>/
mlflow_sweep.json``; jobs (in the same process, or in joblib workers) read it and nest their run under it
(``mlflow.parentRunId``). When the sweep returns, the parent records how many children finished and failed and ends
FINISHED; an interrupted sweep ends it KILLED (see :func:`end_parent`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from ascendflow.schema.errors import ConfigError
from ascendflow.schema.tracking import TrackingSpec
from ascendflow.tracking.store import artifact_root, ensure_experiment, tracking_uri
from ascendflow.tracking.versions import version_tags

SWEEP_FILE = "mlflow_sweep.json"


def read_sweep(sweep_dir: Path) -> dict[str, Any] | None:
    """``{"run_id", "experiment_id", "tracking_uri", "swept_keys"}`` of the sweep's parent run, or ``None`` outside a
    sweep (or when tracking is off)."""
    path = sweep_dir / SWEEP_FILE
    return json.loads(path.read_text()) if path.exists() else None


def swept_keys(config: DictConfig) -> list[str]:
    """Config keys a multirun varies: sweep overrides on the command line (``a=1,2``, ``range()``, ``glob()``...) and
    an Optuna sweeper's ``hydra.sweeper.params``."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    overrides = list(OmegaConf.select(config, "hydra.overrides.task", default=[]) or [])
    keys = [o.get_key_element().lstrip("+~") for o in OverridesParser.create().parse_overrides(overrides)
            if o.is_sweep_override()]
    params = OmegaConf.select(config, "hydra.sweeper.params", default=None)
    if params:
        keys += [k for k in params if k not in keys]
    return keys


def job_run_name(task_overrides: list[str], keys: list[str]) -> str:
    """A child run's name: its values of the swept keys (``engine.max_num_seqs=16``), else all its overrides."""
    chosen = [o for o in task_overrides if o.split("=", 1)[0].lstrip("+~") in keys]
    return " ".join(chosen or task_overrides)[:250]


def _client(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def sweep_counts(uri: str, experiment_id: str, parent_id: str) -> dict[str, int]:
    """Children of ``parent_id`` by status: ``{"FINISHED": n, "FAILED": m, ...}``."""
    runs = _client(uri).search_runs([experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent_id}'",
                                    max_results=10000)
    counts: dict[str, int] = {}
    for run in runs:
        counts[run.info.status] = counts.get(run.info.status, 0) + 1
    return counts


def end_parent(sweep: dict[str, str], status: str) -> None:
    """Log the children's counts on the parent run and end it with ``status`` (idempotent)."""
    client = _client(sweep["tracking_uri"])
    if client.get_run(sweep["run_id"]).info.status in ("FINISHED", "FAILED", "KILLED"):
        return
    counts = sweep_counts(sweep["tracking_uri"], sweep["experiment_id"], sweep["run_id"])
    for name, key in (("jobs_finished", "FINISHED"), ("jobs_failed", "FAILED"), ("jobs_killed", "KILLED")):
        client.log_metric(sweep["run_id"], name, counts.get(key, 0))
    client.set_terminated(sweep["run_id"], status=status)


def refuse_parallel_engines(launcher: DictConfig | None, mode: str) -> None:
    """Jobs that start engines on this machine share its devices: a parallel launcher may only plan.

    Raises:
        ConfigError: ``hydra/launcher=joblib`` with ``n_jobs != 1`` and a job that would serve or run offline.
    """
    target = str(OmegaConf.select(launcher, "_target_", default="")) if launcher is not None else ""
    n_jobs = OmegaConf.select(launcher, "n_jobs", default=1) if launcher is not None else 1
    if "joblib" in target and n_jobs != 1 and mode in ("serve", "offline"):
        raise ConfigError("hydra.launcher.n_jobs", n_jobs,
                          "parallel jobs would start engines on the same devices at once; use run.mode=plan for "
                          "parallel sweeps, or hydra.launcher.n_jobs=1")


class MlflowSweepCallback(Callback):
    """Hydra callback: the MLflow parent run of a multirun."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Refuse parallel engines (exit 2, before any job); create the experiment and the parent run; write
        ``mlflow_sweep.json`` into the sweep directory. (Hydra turns callback exceptions into warnings, so refusals
        exit with ``SystemExit``.)"""
        kind = OmegaConf.select(config, "hardware.kind", default="cpu")
        mode = OmegaConf.select(config, "run.mode", default="auto")
        engines = mode in ("serve", "offline") or (mode == "auto" and kind == "cpu")
        try:
            refuse_parallel_engines(OmegaConf.select(config, "hydra.launcher"), "serve" if engines else "plan")
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        tracking = TrackingSpec.model_validate(OmegaConf.to_container(config.tracking, resolve=True))
        if not tracking.enabled:
            return
        outputs = Path.cwd() / "outputs"
        uri = tracking_uri(tracking, outputs)
        client = _client(uri)
        choices = OmegaConf.select(config, "hydra.runtime.choices", default={}) or {}
        experiment = tracking.experiment_name or choices.get("recipe") or "ascendflow"
        experiment_id = ensure_experiment(client, experiment, artifact_root(tracking, outputs))
        sweep_dir = Path(str(config.hydra.sweep.dir)).resolve()
        overrides = " ".join(OmegaConf.select(config, "hydra.overrides.task", default=[]) or [])
        run = client.create_run(experiment_id, run_name=f"sweep {sweep_dir.parent.name}/{sweep_dir.name}",
                                tags={**version_tags(), "ascendflow.sweep": "parent", "sweep_dir": str(sweep_dir),
                                      "sweep.overrides": overrides[:5000],
                                      "sweep.keys": ",".join(swept_keys(config))[:5000],
                                      "sweeper": str(OmegaConf.select(config, "hydra.sweeper._target_", default=""))})
        sweep_dir.mkdir(parents=True, exist_ok=True)
        (sweep_dir / SWEEP_FILE).write_text(json.dumps(
            {"run_id": run.info.run_id, "experiment_id": experiment_id, "tracking_uri": uri,
             "swept_keys": swept_keys(config)}))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """End the parent FINISHED with the children's counts (failed children do not fail the sweep)."""
        sweep = read_sweep(Path(str(config.hydra.sweep.dir)).resolve())
        if sweep is None:
            return
        end_parent(sweep, "FINISHED")
        counts = sweep_counts(sweep["tracking_uri"], sweep["experiment_id"], sweep["run_id"])
        if counts and not counts.get("FINISHED"):
            print(f"error: no job of the sweep finished ({counts.get('FAILED', 0)} failed); see the FAILED child runs",
                  file=sys.stderr)
            raise SystemExit(1)

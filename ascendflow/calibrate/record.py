"""Where a calibration is recorded: the plan's MLflow run (found by its ``plan_hash`` tag), a named run, or a new run
in experiment ``calibration``; and ``calibration.json`` under ``outputs/calibration/<plan_hash>/``."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ascendflow.calibrate.compare import Calibration
from ascendflow.schema.errors import ConfigError
from ascendflow.schema.tracking import TrackingSpec
from ascendflow.tracking.mlflow_run import TrackedRun
from ascendflow.tracking.store import tracking_uri, with_retry

#: Experiment of the runs calibration creates when no run has the plan's hash.
EXPERIMENT = "calibration"


@dataclass
class Target:
    """The run to record on: an existing one, or ``None`` with ``create`` (a new run at record time)."""

    uri: str
    run: TrackedRun | None
    create: bool
    plan_hash: str | None


def store_uri(given: str | None) -> str:
    """``--tracking-uri``, else ``$MLFLOW_TRACKING_URI``, else the pipeline's default store
    ``sqlite:///<cwd>/outputs/mlflow/mlflow.db`` (:func:`ascendflow.tracking.store.tracking_uri`)."""
    return tracking_uri(TrackingSpec(tracking_uri=given), Path.cwd() / "outputs")


def _client(uri: str):
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def run_target(uri: str, run_id: str) -> Target:
    """The run named on the command line.

    Raises:
        ConfigError: no such run in the store, or the store cannot be opened.
    """
    from mlflow.exceptions import MlflowException

    try:
        run = TrackedRun.existing(uri, run_id)
    except MlflowException as exc:
        reason = str(exc).splitlines()[0][:160]
        raise ConfigError("--run", run_id, f"no such run in {uri} ({reason}); give a run id from the MLflow UI or "
                                           "`mlflow runs list`, or use --plan plan.json") from None
    except Exception as exc:  # an unusable store
        raise ConfigError("--tracking-uri", uri, f"cannot be used as an MLflow store ({type(exc).__name__}); use an "
                                                 "absolute sqlite:///<path>.db or an http(s) server") from None
    return Target(uri, run, False, None)


def plan_target(uri: str, plan_hash: str, run_dir: str | None = None) -> Target:
    """The run whose directory holds the plan (tag ``run_dir``, set on every pipeline run) when there is one, else the
    latest run tagged ``plan_hash`` (the pipeline tags every run with its plan's hash; identical configs share it),
    else a new run.

    Raises:
        ConfigError: the store cannot be opened.
    """
    try:
        client = _client(uri)
        experiments = [e.experiment_id for e in with_retry(client.search_experiments)]
        runs = with_retry(lambda: client.search_runs(
            experiments, filter_string=f"tags.plan_hash = '{plan_hash}'", order_by=["attributes.start_time DESC"],
            max_results=200)) if experiments else []
        same_dir = [r for r in runs if run_dir and r.data.tags.get("run_dir") == run_dir]
        runs = same_dir or runs[:1]
    except Exception as exc:
        raise ConfigError("--tracking-uri", uri, f"cannot be used as an MLflow store ({type(exc).__name__}); use an "
                                                 "absolute sqlite:///<path>.db or an http(s) server") from None
    if runs:
        return Target(uri, TrackedRun.existing(uri, runs[0].info.run_id), False, plan_hash)
    return Target(uri, None, True, plan_hash)


def plan_from_run(run: TrackedRun) -> dict[str, Any] | None:
    """The ``plan.json`` the pipeline uploaded with the run, or ``None`` when the run has none."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            path = run.client.download_artifacts(run.run_id, "plan.json", tmp)
            return json.loads(Path(path).read_text())
        except Exception:  # no plan.json among the run's artifacts
            return None


def write_json(calibration: Calibration, out_dir: Path) -> Path:
    """Write ``calibration.json`` into ``out_dir`` (created) and return its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "calibration.json"
    path.write_text(json.dumps(calibration.to_json(), indent=2) + "\n")
    return path


def record(target: Target, calibration: Calibration, log_path: Path, json_path: Path) -> str:
    """Log ``calib.*`` metrics, tags, the engine log and ``calibration.json`` (under ``calibration/``) on the target
    run, creating it in experiment ``calibration`` when needed (ended FINISHED). Returns the run id."""
    run = target.run
    if target.create:
        run = TrackedRun(TrackingSpec(tracking_uri=target.uri), Path.cwd() / "outputs", experiment=EXPERIMENT,
                         run_name=f"calibrate {target.plan_hash or log_path.name}"[:250],
                         tags={"plan_hash": target.plan_hash or "", "ascendflow.calibration": "new run"})
    assert run is not None
    run.log_metrics(calibration.metrics())
    capture = calibration.capture_sizes
    run.set_tags({"calibration.log": str(log_path.resolve())[:5000],
                  **({"calibration.capture_sizes_equal": str(capture["equal"])} if capture["equal"] is not None
                     else {})})
    run.log_artifact(log_path, "calibration")
    run.log_artifact(json_path, "calibration")
    if target.create:
        run.end("FINISHED", None)
    return str(run.run_id)

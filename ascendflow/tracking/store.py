"""Where runs are recorded: the tracking URI, the artifact root and the experiment."""

from __future__ import annotations

import os
import time
from pathlib import Path

from ascendflow.schema.tracking import TrackingSpec


def tracking_uri(tracking: TrackingSpec, outputs_dir: Path) -> str:
    """``tracking.tracking_uri``, else ``$MLFLOW_TRACKING_URI``, else SQLite at the absolute path of
    ``<outputs>/mlflow/mlflow.db`` (MLflow >= 3.13 refuses the old ``./mlruns`` file store, DESIGN.md §4)."""
    if tracking.tracking_uri:
        return tracking.tracking_uri
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    db = outputs_dir.resolve() / "mlflow" / "mlflow.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{db}"


def artifact_root(tracking: TrackingSpec, outputs_dir: Path) -> str:
    """``tracking.artifact_location``, else ``file://<abs outputs>/mlflow/artifacts``."""
    if tracking.artifact_location:
        return tracking.artifact_location
    return (outputs_dir.resolve() / "mlflow" / "artifacts").as_uri()


def with_retry(call, attempts: int = 8):
    """Run an MLflow call, retrying with back-off on ``MlflowException`` (SQLite "database is locked" under parallel
    writers, DESIGN.md §4); the last failure is raised."""
    from mlflow.exceptions import MlflowException

    for attempt in range(attempts):
        try:
            return call()
        except MlflowException:
            if attempt == attempts - 1:
                raise
            time.sleep(0.25 * (attempt + 1))
    raise AssertionError("unreachable")


def ensure_experiment(client, name: str, artifact_location: str) -> str:
    """The id of experiment ``name``, created with ``artifact_location/<name>`` if missing; parallel jobs racing to
    create it are retried (:func:`with_retry`)."""

    def get_or_create() -> str:
        exp = client.get_experiment_by_name(name)
        if exp is not None:
            return exp.experiment_id
        return client.create_experiment(name, artifact_location=f"{artifact_location}/{name}")

    return with_retry(get_or_create)

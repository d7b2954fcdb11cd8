"""Run tracking glue: MLflow store resolution, params/metrics/tags/artifacts of one run."""

from ascendflow.tracking.mlflow_run import TrackedRun

__all__ = ["TrackedRun"]

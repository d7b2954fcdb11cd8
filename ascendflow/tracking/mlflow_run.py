"""One MLflow run per job: started before validation, always ended (FINISHED, or FAILED with its logs)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from ascendflow.schema.tracking import TrackingSpec
from ascendflow.tracking.flatten import flatten_params, numeric_metrics
from ascendflow.tracking.store import artifact_root, ensure_experiment, tracking_uri, with_retry
from ascendflow.tracking.versions import version_tags

#: Benchmark keys logged as metrics (vllm/benchmarks/serve.py result dict): throughput in req/s and tokens/s,
#: latencies in ms, request counts.
BENCH_METRICS = (
    "completed", "failed", "request_throughput", "output_throughput", "total_token_throughput", "duration",
    "total_input_tokens", "total_output_tokens",
    *(f"{stat}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el") for stat in ("mean", "median", "p90", "p99")),
)


class TrackedRun:
    """An MLflow run (or a no-op when ``tracking.enabled`` is false).

    Args:
        tracking: tracking settings.
        outputs_dir: the ``outputs/`` directory (store and artifacts default under it).
        experiment: experiment name (recipe name, or ``ascendflow``).
        run_name: readable run name, e.g. ``smollm2_135m-cpu-single``.
        tags: extra tags (``run.mode``, Hydra choices...).
        sweep: the multirun's parent (``{"run_id", "experiment_id", "tracking_uri"}``): the run is created in its
            experiment and store, nested under it (``mlflow.parentRunId``).
    """

    def __init__(self, tracking: TrackingSpec, outputs_dir: Path, experiment: str, run_name: str,
                 tags: Mapping[str, str], sweep: Mapping[str, str] | None = None) -> None:
        self.enabled = tracking.enabled
        self.run_id: str | None = None
        self.experiment_id: str | None = None
        self.uri: str | None = None
        if not self.enabled:
            return
        # An unreachable tracking server fails in seconds instead of retrying for minutes.
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
        from mlflow.tracking import MlflowClient

        tags = {**version_tags(), **tags}
        if sweep:
            self.uri, self.experiment_id = sweep["tracking_uri"], sweep["experiment_id"]
            tags["mlflow.parentRunId"] = sweep["run_id"]
        else:
            self.uri = tracking_uri(tracking, outputs_dir)
        self.client = MlflowClient(tracking_uri=self.uri)
        if self.experiment_id is None:
            name = tracking.experiment_name or experiment
            self.experiment_id = ensure_experiment(self.client, name, artifact_root(tracking, outputs_dir))
        run = with_retry(lambda: self.client.create_run(self.experiment_id, run_name=run_name, tags=tags))
        self.run_id = run.info.run_id

    @classmethod
    def existing(cls, uri: str, run_id: str) -> "TrackedRun":
        """An MLflow run that already exists (e.g. a pipeline run that calibration adds metrics to).

        Raises:
            mlflow.exceptions.MlflowException: no run ``run_id`` in the store ``uri``.
        """
        from mlflow.tracking import MlflowClient

        self = cls.__new__(cls)
        self.enabled, self.uri, self.run_id = True, uri, run_id
        self.client = MlflowClient(tracking_uri=uri)
        self.experiment_id = self.client.get_run(run_id).info.experiment_id
        return self

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        """Upload one file under ``artifact_path``."""
        if self.enabled and self.run_id is not None:
            with_retry(lambda: self.client.log_artifact(self.run_id, str(path), artifact_path=artifact_path))

    def log_params(self, config: Mapping[str, Any]) -> None:
        """Log the flattened config as params (batches of 100, MLflow's limit per call)."""
        if not self.enabled:
            return
        from mlflow.entities import Param

        params = [Param(k, v) for k, v in sorted(flatten_params(config).items())]
        for i in range(0, len(params), 100):
            batch = params[i:i + 100]
            with_retry(lambda: self.client.log_batch(self.run_id, params=batch))

    def log_metrics(self, metrics: Mapping[str, float]) -> None:
        """Log finite numeric metrics."""
        if not self.enabled or not metrics:
            return
        import time

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(k, v, now, 0) for k, v in numeric_metrics(metrics).items()]
        for i in range(0, len(items), 500):
            batch = items[i:i + 500]
            with_retry(lambda: self.client.log_batch(self.run_id, metrics=batch))

    def set_tags(self, tags: Mapping[str, str]) -> None:
        """Set string tags."""
        if self.enabled:
            from mlflow.entities import RunTag

            batch = [RunTag(k, str(v)) for k, v in tags.items()]
            with_retry(lambda: self.client.log_batch(self.run_id, tags=batch))

    def end(self, status: str, run_dir: Path | None) -> None:
        """Upload ``run_dir`` (plan, launch scripts, ``.hydra/``, logs, benchmark JSON) and end the run.

        Args:
            status: ``FINISHED``, ``FAILED`` or ``KILLED``.
            run_dir: the Hydra job directory; uploaded whole as the run's artifacts.
        """
        if not self.enabled or self.run_id is None:
            return
        try:
            if run_dir is not None and run_dir.exists():
                self.client.log_artifacts(self.run_id, str(run_dir))
        finally:
            with_retry(lambda: self.client.set_terminated(self.run_id, status=status))

    def ui_command(self) -> str | None:
        """The ``mlflow ui`` command that shows this run's store."""
        return f"mlflow ui --backend-store-uri {self.uri}" if self.uri else None


def bench_metrics(benchmark: Mapping[str, Any]) -> dict[str, float]:
    """The benchmark result's metrics of :data:`BENCH_METRICS` that are present."""
    return numeric_metrics({k: benchmark[k] for k in BENCH_METRICS if k in benchmark})

"""One MLflow run per job: started before validation, always ended (FINISHED, or FAILED with its logs).

If the store becomes unreachable after the run was created, the run goes on: what could not be recorded is kept in
``<run_dir>/mlflow_pending.json`` beside the results, and ``python -m ascendflow.sync`` (or the next run on this
store) uploads it (:mod:`ascendflow.tracking.pending`).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from ascendflow.interrupts import store_call
from ascendflow.schema.secrets import MASK, mask_credentials, mask_text
from ascendflow.schema.tracking import TrackingSpec
from ascendflow.tracking.flatten import flatten_params, numeric_metrics
from ascendflow.tracking.outage import outage_reason, quiet_server_outage
from ascendflow.tracking.pending import PendingRecord, scrub_dir, sync_pending_under
from ascendflow.tracking.run_dir import upload_run_dir
from ascendflow.tracking.stale import end_stale_runs, process_tags
from ascendflow.tracking.store import (DiskReserve, GuardedClient, artifact_root, disk_full, ensure_experiment,
                                       open_client, store_full, tracking_uri, with_retry)
from ascendflow.tracking.versions import version_tags

#: Benchmark keys logged as metrics (vllm/benchmarks/serve.py result dict): throughput in req/s and tokens/s,
#: latencies in ms, request counts.
BENCH_METRICS = (
    "completed", "failed", "request_throughput", "output_throughput", "total_token_throughput", "duration",
    "total_input_tokens", "total_output_tokens",
    *(f"{stat}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el") for stat in ("mean", "median", "p90", "p99")),
)


#: Runs this process created and has not ended yet (run id -> client): :func:`end_open_runs` ends them when a
#: signal lands where no ``finally`` of theirs runs (e.g. right after ``create_run``, before the job's handler).
OPEN_RUNS: dict[str, Any] = {}


def end_open_runs(status: str) -> list[str]:
    """End every run in :data:`OPEN_RUNS` with ``status`` (tag ``error=interrupted``); returns their ids. Store
    errors are skipped (the next start ends such runs as stale)."""
    ended = []
    for run_id, client in list(OPEN_RUNS.items()):
        try:
            client.set_tag(run_id, "error", "interrupted")
            client.set_terminated(run_id, status=status)
            ended.append(run_id)
        except Exception:
            pass
        OPEN_RUNS.pop(run_id, None)
    return ended


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
        run_dir: the job's directory (pending records and artifacts).
        secrets: secret values, masked in tags and scrubbed from every file before upload.

    Raises:
        ConfigError: the experiment was deleted. Other store errors propagate (nothing was recorded).
    """

    def __init__(self, tracking: TrackingSpec, outputs_dir: Path, experiment: str, run_name: str,
                 tags: Mapping[str, str], sweep: Mapping[str, str] | None = None, run_dir: Path | None = None,
                 secrets: Iterable[str] = ()) -> None:
        self.enabled = tracking.enabled
        self.run_id: str | None = None
        self.experiment_id: str | None = None
        self.uri: str | None = None
        self.run_dir = run_dir
        self.secrets = [s for s in secrets if s]
        self.pending: PendingRecord | None = None
        self.outage: str | None = None
        self.outage_words = ""  # the outage in a few words (outage_reason), for the terminal
        if not self.enabled:
            return
        # An unreachable tracking server fails in seconds instead of retrying for minutes.
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")

        tags = {**version_tags(), **process_tags(), **{k: self._mask(str(v)) for k, v in tags.items()}}
        if sweep:
            self.uri, self.experiment_id = sweep["tracking_uri"], sweep["experiment_id"]
            tags["mlflow.parentRunId"] = sweep["run_id"]
        else:
            self.uri = tracking_uri(tracking, outputs_dir)
        quiet_server_outage(self.uri)  # a server that stops answering is one line at the end, no retry warnings
        self.client = open_client(self.uri)
        self.reserve = DiskReserve(self.uri)  # room to end FAILED if the disk fills during the run
        if self.experiment_id is None:
            name = tracking.experiment_name or experiment
            self.experiment_id = ensure_experiment(self.client, name, artifact_root(tracking, outputs_dir, self.uri))
            try:  # housekeeping of earlier runs never stops this one
                end_stale_runs(self.client)
                sync_pending_under(outputs_dir, self.uri, self.client)
            except Exception:
                pass
        with store_call():  # a signal now is raised only once the run is registered for end_open_runs
            run = with_retry(lambda: self.client.create_run(self.experiment_id, run_name=self._mask(run_name),
                                                            tags=tags))
            self.run_id = run.info.run_id
            OPEN_RUNS[self.run_id] = self.client

    @classmethod
    def existing(cls, uri: str, run_id: str) -> "TrackedRun":
        """An MLflow run that already exists (e.g. a pipeline run that calibration adds metrics to).

        Raises:
            mlflow.exceptions.MlflowException: no run ``run_id`` in the store ``uri``.
        """
        from mlflow.tracking import MlflowClient

        self = cls.__new__(cls)
        self.enabled, self.uri, self.run_id = True, uri, run_id
        self.run_dir, self.secrets, self.pending, self.outage, self.reserve = None, [], None, None, None
        self.outage_words = ""
        self.client = GuardedClient(MlflowClient(tracking_uri=uri))
        self.experiment_id = self.client.get_run(run_id).info.experiment_id
        return self

    @contextlib.contextmanager
    def system_metrics(self, sampling_interval_s: float = 5) -> Iterator[None]:
        """MLflow's system metrics (``system/cpu_utilization_percentage``, ``system/system_memory_usage_megabytes``,
        disk, network; GPU when present) sampled every ``sampling_interval_s`` seconds into this run while the
        block runs (``mlflow.system_metrics.system_metrics_monitor.SystemMetricsMonitor``, a daemon thread)."""
        if not self.enabled or self.run_id is None or self.pending is not None:
            yield
            return
        import logging

        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

        logging.getLogger("mlflow.system_metrics").setLevel(logging.WARNING)  # no INFO lines on the terminal
        monitor = SystemMetricsMonitor(self.run_id, sampling_interval=sampling_interval_s, tracking_uri=self.uri)
        monitor.start()
        try:
            yield
        finally:
            monitor.finish()

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        """Upload one file under ``artifact_path``."""
        if self.enabled and self.run_id is not None:
            with_retry(lambda: self.client.log_artifact(self.run_id, str(path), artifact_path=artifact_path))

    def _mask(self, text: str) -> str:
        return mask_credentials(text, self.secrets)

    def _record(self, kind: str, values: Mapping[str, Any], call) -> None:
        """Make a store call; after the first failure, keep ``values`` in the pending record instead."""
        if self.pending is None:
            try:
                call()
                return
            except Exception as exc:  # the store is unreachable or broken: keep the results locally
                if disk_full(exc) and getattr(self, "reserve", None) is not None:
                    full = store_full(self.uri)  # the MiB free before the reserve is given back
                    if self.reserve.release():  # room to end the run FAILED with its error (app._fail)
                        raise full from None
                self.outage = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
                self.outage_words = outage_reason(str(exc))
                try:
                    self.pending = PendingRecord.start(self.run_dir, self.uri, self.run_id, self.outage)
                except OSError:  # no room for the record either: the next start ends the run (stale)
                    return
        self.pending.add(kind, values)

    def log_params(self, config: Mapping[str, Any]) -> None:
        """Log the flattened config as params (batches of 100, MLflow's limit per call); secret values masked."""
        if not self.enabled:
            return
        from mlflow.entities import Param

        flat = {k: self._mask(v) for k, v in sorted(flatten_params(config).items())}
        params = [Param(k, v) for k, v in flat.items()]

        def call() -> None:
            for i in range(0, len(params), 100):
                batch = params[i:i + 100]
                with_retry(lambda: self.client.log_batch(self.run_id, params=batch))

        self._record("params", flat, call)

    def log_metrics(self, metrics: Mapping[str, float]) -> None:
        """Log finite numeric metrics."""
        if not self.enabled or not metrics:
            return
        import time

        from mlflow.entities import Metric

        values = numeric_metrics(metrics)
        now = int(time.time() * 1000)
        items = [Metric(k, v, now, 0) for k, v in values.items()]

        def call() -> None:
            for i in range(0, len(items), 500):
                batch = items[i:i + 500]
                with_retry(lambda: self.client.log_batch(self.run_id, metrics=batch))

        self._record("metrics", values, call)

    def set_tags(self, tags: Mapping[str, str]) -> None:
        """Set string tags (secret values masked)."""
        if self.enabled:
            from mlflow.entities import RunTag

            values = {k: self._mask(str(v)) for k, v in tags.items()}
            batch = [RunTag(k, v) for k, v in values.items()]
            self._record("tags", values, lambda: with_retry(lambda: self.client.log_batch(self.run_id, tags=batch)))

    def end(self, status: str, run_dir: Path | None) -> None:
        """Scrub secret values from ``run_dir``, upload it (plan, launch scripts, ``.hydra/``, logs, benchmark JSON;
        not ``previous/``, an earlier run's files, :mod:`ascendflow.tracking.run_dir`) and end the run. A failed upload or end keeps everything in ``mlflow_pending.json`` for
        ``python -m ascendflow.sync`` and prints one line; it never raises for a store error.

        Args:
            status: ``FINISHED``, ``FAILED`` or ``KILLED``.
            run_dir: the Hydra job directory; uploaded whole as the run's artifacts.
        """
        if run_dir is not None and run_dir.exists():
            scrub_dir(run_dir, self.secrets)
        if not self.enabled or self.run_id is None:
            return
        self.run_dir = self.run_dir or run_dir

        upload_error = None
        if self.pending is None and run_dir is not None and run_dir.exists():
            try:
                upload_run_dir(self.client, self.run_id, run_dir)
            except Exception as exc:  # e.g. an unwritable artifact location: end the run, keep the files
                upload_error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"

        def finish() -> None:
            if upload_error:
                with_retry(lambda: self.client.set_tag(self.run_id, "ascendflow.artifacts_error", upload_error))
            with_retry(lambda: self.client.set_terminated(self.run_id, status=status))

        self._record("end", {"status": status}, finish)
        OPEN_RUNS.pop(self.run_id, None)
        from ascendflow import console

        if self.pending is not None and self.uri and self.uri.startswith(("http://", "https://")):
            console.warn_err(f"the MLflow server {self._mask(self.uri)} stopped answering "
                             f"({self.outage_words or self.outage}): run {self.run_id} is kept in {self.run_dir}; "
                             f"upload it with `python -m ascendflow.sync {self.run_dir}` once the server answers "
                             "(or the next run does)")
        elif self.pending is not None:
            console.fail_line(f"MLflow store not reachable ({self.outage}): run {self.run_id} is kept in {self.run_dir}"
                              f"; upload it with `python -m ascendflow.sync {self.run_dir}` (or the next run does)")
        elif upload_error:
            PendingRecord.start(self.run_dir, self.uri, self.run_id, upload_error).add("end", {"status": status})
            console.fail_line(f"the run's files were not uploaded to MLflow ({upload_error}); run {self.run_id} ended "
                              f"{status} and its files stay in {self.run_dir}; upload them with `python -m "
                              f"ascendflow.sync {self.run_dir}` once the artifact location is writable")

    def ui_command(self) -> str | None:
        """The command that shows this run's store: ``mlflow ui`` on a database, or the server's address (a server
        the run started itself is stopped with it: ``server_browse_command`` in :mod:`ascendflow.tracking.server`)."""
        if self.uri and self.uri.startswith(("http://", "https://")):
            return f"open {self.uri}/#/experiments/{self.experiment_id}/runs/{self.run_id}"
        return f"mlflow ui --backend-store-uri {self.uri}" if self.uri else None


def bench_metrics(benchmark: Mapping[str, Any]) -> dict[str, float]:
    """The benchmark result's metrics of :data:`BENCH_METRICS` that are present."""
    return numeric_metrics({k: benchmark[k] for k in BENCH_METRICS if k in benchmark})


__all__ = ["BENCH_METRICS", "MASK", "TrackedRun", "bench_metrics"]

"""Where runs are recorded: the tracking URI, the artifact root and the experiment.

(``Terminated``, ``install_sigterm`` and ``restore_handlers`` are re-exported from :mod:`ascendflow.interrupts`.)
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path
from typing import Any, Iterator

from ascendflow.interrupts import Terminated, install_sigterm, restore_handlers, stopping, store_call
from ascendflow.schema.errors import ConfigError
from ascendflow.schema.tracking import TrackingSpec

__all__ = ["GuardedClient", "Terminated", "artifact_root", "ensure_experiment", "install_sigterm", "open_client",
           "refuse_unusable_store", "restore_handlers", "store_lock", "tracking_uri", "with_retry"]

#: Seconds to wait for a tracking server's ``/health`` before a run or sweep is refused (MLflow's own client would
#: retry for minutes, printing a urllib3 warning per attempt).
HEALTH_TIMEOUT_S = 5.0


class GuardedClient:
    """An ``MlflowClient`` whose every method runs inside :func:`store_call` (attributes pass through)."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        def guarded(*args: Any, **kwargs: Any) -> Any:
            with store_call():
                return attr(*args, **kwargs)

        return guarded


@contextlib.contextmanager
def store_lock(uri: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``<db>.lock`` for a SQLite store (no-op for other stores).

    MLflow creates and migrates a new SQLite store's schema on first use; three processes doing it at once corrupted
    the schema for good here (measured: every later run failed), so first use is serialised.
    """
    if not uri.startswith("sqlite:///"):
        yield
        return
    db = Path(uri.removeprefix("sqlite:///"))
    db.parent.mkdir(parents=True, exist_ok=True)
    with open(db.with_name(db.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def refuse_unusable_store(tracking: TrackingSpec, uri: str) -> None:
    """Refuse, before anything is recorded or started, a store MLflow cannot use: a plain path (MLflow reads it as
    a file store, which MLflow >= 3.13 refuses, DESIGN.md §4) and an http(s) server whose ``/health`` (MLflow's
    server answers ``OK`` there, ``mlflow/server/handlers.py`` ``health``) does not answer within
    :data:`HEALTH_TIMEOUT_S`. Other stores (``sqlite:``, ``postgresql:``, ``databricks``...) are left to MLflow.
    ``uri`` is :func:`tracking_uri` of ``tracking``; the message names ``tracking.tracking_uri`` when the config set
    it, else ``MLFLOW_TRACKING_URI``.

    Raises:
        ConfigError: one line with the URI, why, and the fix.
    """
    import urllib.error
    import urllib.request

    key = "tracking.tracking_uri" if tracking.tracking_uri else "MLFLOW_TRACKING_URI"

    if "://" not in uri and not uri.startswith(("sqlite:", "databricks")) or uri.startswith("file:"):
        raise ConfigError(key, uri, "is a path, which MLflow reads as a file store and MLflow >= 3.13 refuses; use "
                                    f"sqlite:///{Path(uri.removeprefix('file://')).resolve()}.db or an http(s) "
                                    "tracking server")
    if not uri.startswith(("http://", "https://")):
        return
    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=HEALTH_TIMEOUT_S):
            return
    except urllib.error.HTTPError as exc:  # the server answers: MLflow's errors will be about the request, not reach
        if exc.code < 500:
            return
        why = f"/health answered {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        why = f"{type(reason).__name__}: {reason}" if not isinstance(reason, str) else reason
    also = "; or unset MLFLOW_TRACKING_URI (the local store under outputs/)" if key == "MLFLOW_TRACKING_URI" else ""
    raise ConfigError(key, uri, f"no MLflow server answers there ({str(why)[:120]}); start it (mlflow server --host "
                                f"HOST --port PORT), or use tracking=server to have ascendflow start one, or a "
                                f"sqlite:///<path>.db store{also}")


def open_client(uri: str):
    """An ``MlflowClient`` on ``uri`` (a :class:`GuardedClient`) whose store exists and is migrated (first use under
    :func:`store_lock`, SIGTERM/Ctrl-C held back until it is done: :func:`store_call`)."""
    from mlflow.tracking import MlflowClient

    with store_lock(uri):
        with store_call():  # the constructor opens the store: a new SQLite store is created and migrated here
            client = GuardedClient(MlflowClient(tracking_uri=uri))
        with_retry(lambda: client.search_experiments(max_results=1))
    return client


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


def artifact_root(tracking: TrackingSpec, outputs_dir: Path, uri: str | None = None) -> str | None:
    """``tracking.artifact_location``, else ``None`` for an ``http(s)`` tracking server ``uri`` (the server's own
    default: ``mlflow-artifacts:/`` when it serves artifacts, so files go through it and not into this machine's file
    system), else ``file://<abs outputs>/mlflow/artifacts``."""
    if tracking.artifact_location:
        return tracking.artifact_location
    if uri is not None and uri.startswith(("http://", "https://")):
        return None
    return (outputs_dir.resolve() / "mlflow" / "artifacts").as_uri()


def with_retry(call, attempts: int = 8):
    """Run an MLflow call, retrying with back-off on ``MlflowException`` (SQLite "database is locked" under parallel
    writers, DESIGN.md §4); the last failure is raised."""
    from mlflow.exceptions import MlflowException

    for attempt in range(attempts):
        try:
            return call()
        except MlflowException:
            if attempt == attempts - 1 or stopping():
                raise
            time.sleep(0.25 * (attempt + 1))
    raise AssertionError("unreachable")


def ensure_experiment(client, name: str, artifact_location: str | None) -> str:
    """The id of experiment ``name``, created with ``artifact_location/<name>`` (the store's default when ``None``)
    if missing; parallel jobs racing to create it are retried (:func:`with_retry`).

    Raises:
        ConfigError: the experiment was deleted (MLflow keeps it in its trash and refuses new runs in it).
    """

    def get_or_create() -> str:
        exp = client.get_experiment_by_name(name)
        if exp is not None and exp.lifecycle_stage == "deleted":
            raise ConfigError("tracking.experiment_name", name,
                              f"experiment {exp.experiment_id} was deleted (it is in the MLflow trash); restore it "
                              f"with `mlflow experiments restore --experiment-id {exp.experiment_id}` or choose "
                              f"another tracking.experiment_name")
        if exp is not None:
            return exp.experiment_id
        return client.create_experiment(name, artifact_location=f"{artifact_location}/{name}" if artifact_location
                                        else None)

    return with_retry(get_or_create)

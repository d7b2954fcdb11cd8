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
from ascendflow.schema.secrets import mask_uris
from ascendflow.schema.tracking import TrackingSpec

__all__ = ["DiskReserve", "GuardedClient", "StoreFullError", "Terminated", "artifact_root", "disk_full",
           "ensure_experiment", "existing_store", "install_sigterm", "open_client", "refuse_unusable_store",
           "restore_handlers", "store_full", "store_lock", "tracking_uri", "unusable_store", "uri_source", "with_retry"]

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

    key = uri_source(tracking)
    shown = mask_uris(uri)

    if "://" not in uri and not uri.startswith(("sqlite:", "databricks")) or uri.startswith("file:"):
        raise ConfigError(key, shown, "is a path, which MLflow reads as a file store and MLflow >= 3.13 refuses; use "
                                    f"sqlite:///{Path(uri.removeprefix('file://')).resolve()}.db or an http(s) "
                                    "tracking server")
    also = "; or unset MLFLOW_TRACKING_URI (the local store under outputs/)" if key == "MLFLOW_TRACKING_URI" else ""
    if uri.split(":", 1)[0] in ("databricks", "databricks-uc", "uc") and (why := _databricks_unusable()):
        raise ConfigError(key, shown, f"is a Databricks store, and {why}: MLflow would retry for ~40 s and fail; "
                                    f"configure Databricks auth, or use an absolute sqlite:///<path>.db or an http(s) "
                                    f"server{also}")
    if not uri.startswith(("http://", "https://")):
        return
    try:
        with urllib.request.urlopen(health_request(uri), timeout=HEALTH_TIMEOUT_S):
            return
    except urllib.error.HTTPError as exc:  # the server answers: MLflow's errors will be about the request, not reach
        if exc.code < 500:
            return
        why = f"/health answered {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        why = f"{type(reason).__name__}: {reason}" if not isinstance(reason, str) else reason
    raise ConfigError(key, shown, f"no MLflow server answers there ({str(why)[:120]}); start it (mlflow server --host "
                                f"HOST --port PORT), or use tracking=server to have ascendflow start one, or a "
                                f"sqlite:///<path>.db store{also}")


def _databricks_unusable() -> str | None:
    """Why a ``databricks`` tracking URI cannot work here, or ``None``: MLflow needs the ``databricks-sdk`` package
    and credentials, which the SDK's unified authentication reads from ``DATABRICKS_HOST`` (with a token or other
    auth variables) or a profile in ``~/.databrickscfg`` (``DATABRICKS_CONFIG_FILE``) — docs.databricks.com
    dev-tools/auth, the page MLflow's own error names (``mlflow/utils/databricks_utils.py``)."""
    import importlib.util

    if importlib.util.find_spec("databricks") is None or importlib.util.find_spec("databricks.sdk") is None:
        return "the databricks-sdk package is not installed (pip install databricks-sdk)"
    config = Path(os.environ.get("DATABRICKS_CONFIG_FILE", Path.home() / ".databrickscfg"))
    if not os.environ.get("DATABRICKS_HOST") and not config.is_file():
        return f"no Databricks credentials are configured (DATABRICKS_HOST is unset and there is no {config})"
    return None


def uri_source(tracking: TrackingSpec) -> str:
    """Where the store's URI came from, as a message names it: ``tracking.tracking_uri`` when the config set it,
    else the environment variable ``MLFLOW_TRACKING_URI`` (:func:`tracking_uri`'s order)."""
    return "tracking.tracking_uri" if tracking.tracking_uri else "MLFLOW_TRACKING_URI"


def health_request(uri: str):
    """The ``GET <uri>/health`` request for a tracking server URI: a ``user:password@`` in the URI is taken out of
    the host and sent as HTTP basic auth (RFC 7617), as MLflow's own client does with
    ``MLFLOW_TRACKING_USERNAME``/``MLFLOW_TRACKING_PASSWORD`` (``mlflow/utils/rest_utils.py``); ``urlopen`` would
    otherwise read ``user:password@host`` as the host name."""
    import base64
    import urllib.parse
    import urllib.request

    parts = urllib.parse.urlsplit(uri.rstrip("/"))
    netloc = parts.hostname or ""
    netloc = f"[{netloc}]" if ":" in netloc else netloc
    netloc += f":{parts.port}" if parts.port else ""
    request = urllib.request.Request(urllib.parse.urlunsplit(parts._replace(netloc=netloc)) + "/health")
    if parts.username is not None:
        user = urllib.parse.unquote(parts.username)
        password = urllib.parse.unquote(parts.password or "")
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    return request


class StoreFullError(OSError):
    """The MLflow store's disk is full (SQLite: "database or disk is full"; ``ENOSPC`` writing its files)."""


def disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` or anything in its cause/context chain is a full disk."""
    import errno

    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if (isinstance(exc, OSError) and exc.errno == errno.ENOSPC) or "database or disk is full" in str(exc) \
                or "No space left on device" in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI, else ``None``."""
    return Path(uri.removeprefix("sqlite:///")) if uri.startswith("sqlite:///") else None


def unusable_store(tracking: TrackingSpec, uri: str, exc: BaseException) -> Exception:
    """The one-line error for a store MLflow could not open or write: :class:`StoreFullError` naming the real
    store path and the MiB left when the disk is full, else a :class:`ConfigError` naming where the URI came from
    (:func:`uri_source`), the URI with its password masked, MLflow's first line, and the fix."""
    if disk_full(exc):
        return store_full(uri)
    first = mask_uris(str(exc).splitlines()[0][:200]) if str(exc) else ""
    return ConfigError(uri_source(tracking), mask_uris(uri),
                       f"cannot be used as an MLflow store ({type(exc).__name__}: {first}); use an absolute "
                       f"sqlite:///<path>.db or an http(s) server"
                       + ("; or unset MLFLOW_TRACKING_URI (the local store under outputs/)"
                          if uri_source(tracking) == "MLFLOW_TRACKING_URI" else ""))


def store_full(uri: str) -> StoreFullError:
    """:class:`StoreFullError` for the store ``uri``: its real path and the MiB free on its file system."""
    path = sqlite_path(uri)
    where = path.parent if path is not None else Path.cwd()
    while not where.exists() and where != where.parent:
        where = where.parent
    st = os.statvfs(where)
    free = st.f_bavail * st.f_frsize / (1 << 20)
    return StoreFullError(f"the MLflow store {path or mask_uris(uri)} cannot be written: disk full ({free:.1f} MiB "
                          f"free at {where}); free space there, or record elsewhere (tracking.tracking_uri=sqlite:///"
                          f"<path on another disk>.db)")


#: Bytes each run holds in reserve beside a SQLite store (``<db>.reserve-<pid>``), given back the moment the disk
#: fills: ending a run FAILED with its tags, ``error.txt`` and the run directory's artifacts needs less than this
#: (a plan run's directory is ~40 KiB, SQLite's rollback journal a few pages).
RESERVE_BYTES = 1 << 20


class DiskReserve:
    """Room held on a SQLite store's file system so that a run can still end FAILED when the disk fills under it
    (without it the run stayed RUNNING, issue 20 row 4). A no-op for other stores and when even the reserve does
    not fit. Reserves left by processes that no longer exist (SIGKILL) are removed by the next one.

    Args:
        uri: the store's URI.
    """

    def __init__(self, uri: str) -> None:
        db = sqlite_path(uri)
        self.path = db.with_name(f"{db.name}.reserve-{os.getpid()}") if db is not None else None
        if self.path is None:
            return
        for old in self.path.parent.glob(f"{db.name}.reserve-*"):
            pid = old.name.rsplit("-", 1)[-1]
            if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
                old.unlink(missing_ok=True)
        try:
            with open(self.path, "wb") as f:
                os.posix_fallocate(f.fileno(), 0, RESERVE_BYTES)
        except OSError:
            self.release()
            self.path = None
            return
        import atexit

        atexit.register(self.release)

    def release(self) -> bool:
        """Give the reserve back; True when there was one."""
        if self.path is None or not self.path.exists():
            return False
        self.path.unlink(missing_ok=True)
        return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def existing_store(uri: str) -> str:
    """``uri`` for a command that only reads the store (``compare``): a SQLite store whose file does not exist is
    refused instead of opened, since MLflow creates and migrates the database on first use (read-only commands
    create nothing). Other stores are returned as they are.

    Raises:
        FileNotFoundError: the SQLite file does not exist (the message names its path and the fix).
    """
    path = sqlite_path(uri)
    if path is not None and not path.is_file():
        raise FileNotFoundError(f"no MLflow store at {path} (nothing was recorded here yet): run `python -m "
                                f"ascendflow` first, or pass --tracking-uri / set MLFLOW_TRACKING_URI to the store")
    return uri


def open_client(uri: str):
    """An ``MlflowClient`` on ``uri`` (a :class:`GuardedClient`) whose store exists and is migrated (first use under
    :func:`store_lock`, SIGTERM/Ctrl-C held back until it is done: :func:`store_call`)."""
    import logging

    from mlflow.tracking import MlflowClient

    # MLflow logs every SQLAlchemy error with its traceback before raising it (mlflow/store/db/utils.py
    # make_managed_session, ~85 lines each, 8 retries on a full disk): the error is raised and reported on one line.
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)
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
    writers, DESIGN.md §4); the last failure is raised. A tracking server that does not answer is not tried again
    (MLflow's client already retried; :func:`ascendflow.tracking.outage.unreachable`)."""
    from mlflow.exceptions import MlflowException

    from ascendflow.tracking.outage import unreachable

    for attempt in range(attempts):
        try:
            return call()
        except MlflowException as exc:
            if attempt == attempts - 1 or stopping() or disk_full(exc) or unreachable(exc):  # a full disk stays full
                raise
            time.sleep(0.25 * (attempt + 1))
    raise AssertionError("unreachable")


#: Experiment tag that picks the MLflow UI's view, and the value for the runs table. MLflow 3.17 has no Python
#: constant for either: the UI's ``ExperimentKind.CUSTOM_MODEL_DEVELOPMENT`` (mlflow/server/js/build, the experiment
#: type selector) is ``"custom_model_development"``; without the tag the UI opens the GenAI view ("Evaluation runs").
EXPERIMENT_KIND_TAG, EXPERIMENT_KIND = "mlflow.experimentKind", "custom_model_development"


def ensure_experiment(client, name: str, artifact_location: str | None) -> str:
    """The id of experiment ``name``, created with ``artifact_location/<name>`` (the store's default when ``None``)
    if missing; parallel jobs racing to create it are retried (:func:`with_retry`). An experiment without
    ``mlflow.experimentKind`` gets ``custom_model_development``, so the MLflow UI opens its runs table.

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
            if EXPERIMENT_KIND_TAG not in exp.tags:
                client.set_experiment_tag(exp.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
            return exp.experiment_id
        return client.create_experiment(name, artifact_location=f"{artifact_location}/{name}" if artifact_location
                                        else None, tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND})

    return with_retry(get_or_create)

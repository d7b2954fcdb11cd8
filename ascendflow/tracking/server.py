"""A local MLflow tracking server for one run or one sweep (``tracking=server``), stopped with it.

Jobs that run in other processes or on other nodes (Ray, Slurm) cannot share a SQLite file, but they can all talk to
one ``mlflow server``: it keeps the runs in SQLite under ``outputs/mlflow/server/`` and, with ``--serve-artifacts``,
receives every job's files itself (experiments get ``mlflow-artifacts:/`` locations), so no job writes into another
machine's file system. The server is a :class:`~ascendflow.runner.process.ManagedProcess`: its process group is
stopped when the run or sweep ends, raises, or is interrupted, and it gets SIGTERM if the launching process dies.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import time
import urllib.request
from pathlib import Path

from ascendflow.runner.process import ManagedProcess
from ascendflow.schema.errors import ConfigError
from ascendflow.schema.tracking import TrackingSpec
from ascendflow.tracking.store import open_client, store_lock

#: Seconds to wait for ``/health`` of a starting server (measured here: about 6 s on 2 cores, mlflow 3.17.2).
START_TIMEOUT_S = 90


#: A Python exception line in a log: ``sqlalchemy.exc.OperationalError: (sqlite3.OperationalError) table ...``.
_EXCEPTION_LINE = re.compile(r"^\(?[A-Za-z_][\w.]*(Error|Exception|Exit)\)?\b.*\S")


def error_line(text: str) -> str:
    """The line of ``text`` (a server log, an exception's message) that says what went wrong, at most 200
    characters: the last Python exception line, else the last line that is not SQLAlchemy's
    "(Background on this error at: …)" footer or a ``[SQL: …]`` echo, else ``(empty log)``."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    useful = [ln for ln in lines if not ln.startswith(("(Background on this error", "[SQL:", "[parameters:"))]
    found = [ln for ln in useful if _EXCEPTION_LINE.match(ln)]
    return ((found or useful or ["(empty log)"])[-1])[:200]


class ServerStartError(RuntimeError):
    """The tracking server exited or did not answer ``/health`` within :data:`START_TIMEOUT_S`."""


def wants_server(tracking: TrackingSpec) -> bool:
    """Whether this run or sweep starts its own server: ``start_server=true``, or ``start_server`` unset (the
    ``tracking=server`` option) with no ``tracking_uri``.

    Raises:
        ConfigError: ``start_server=true`` together with a ``tracking_uri`` (which of the two would be used?).
    """
    if not tracking.enabled:
        return False
    if tracking.start_server and tracking.tracking_uri:
        raise ConfigError("tracking.start_server", True,
                          f"starts a new server, but tracking.tracking_uri={tracking.tracking_uri} names one; "
                          f"drop tracking.tracking_uri, or set tracking.start_server=false to use that server")
    return bool(tracking.start_server) or (tracking.start_server is None and not tracking.tracking_uri)


def free_port(host: str) -> int:
    """A TCP port nobody listens on at ``host`` now (the kernel's choice for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _healthy(uri: str) -> bool:
    try:
        with urllib.request.urlopen(f"{uri}/health", timeout=2) as reply:
            return reply.status == 200
    except OSError:
        return False


class TrackingServer:
    """``mlflow server`` on SQLite ``<outputs>/mlflow/server/mlflow.db`` with ``--serve-artifacts`` into
    ``<outputs>/mlflow/server/artifacts``, bound to ``tracking.server_host``:``tracking.server_port`` (a free port
    when unset), one worker. A context manager; :attr:`uri` is what clients use (``server_host=0.0.0.0`` is
    advertised as this machine's host name so that jobs on other nodes reach it).

    Args:
        tracking: the tracking option (host and port).
        outputs_dir: the ``outputs/`` directory.
    """

    def __init__(self, tracking: TrackingSpec, outputs_dir: Path) -> None:
        self.root = outputs_dir.resolve() / "mlflow" / "server"
        self.host = tracking.server_host
        self.port = tracking.server_port or free_port(self.host)
        shown = socket.gethostname() if self.host in ("0.0.0.0", "::") else self.host
        self.uri = f"http://{shown}:{self.port}"
        self.log_path = self.root / "logs" / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{self.port}.log"
        self.process: ManagedProcess | None = None

    def argv(self) -> list[str]:
        """The server's command line (``mlflow server --help``, mlflow 3.17.2)."""
        return [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{self.root}/mlflow.db",
                "--serve-artifacts", "--artifacts-destination", str(self.root / "artifacts"), "--host", self.host,
                "--port", str(self.port), "--workers", "1",
                # Bound beyond loopback on purpose (jobs on other nodes): MLflow's middleware would otherwise accept
                # only localhost Host headers (mlflow/server/security.py, 3.17.2). Keep such a server on a private
                # network (docs/cluster.md).
                *(["--allowed-hosts", "*"] if self.host not in ("127.0.0.1", "localhost", "::1") else [])]

    def start(self) -> str:
        """Create and migrate the SQLite store in this process (:func:`~ascendflow.tracking.store.open_client`: under
        the store's ``flock``, SIGTERM/Ctrl-C held back until it is done), then start the server and wait until
        ``/health`` answers; returns :attr:`uri`. The server thus never migrates: a server stopped during its
        first migration (Ctrl-C 2-5 s into a ``tracking=server`` run) left a half-migrated store that every later
        run refused ("table _alembic_tmp_experiments already exists", issue 20 row 12a). The server is stopped if
        anything, a signal included, interrupts the start.

        Raises:
            ServerStartError: the store cannot be opened, or the server exited or did not answer in time (it is
                stopped); the message quotes the error line (:func:`error_line`) and names the log.
        """
        from mlflow.exceptions import MlflowException
        from sqlalchemy.exc import SQLAlchemyError

        self.root.mkdir(parents=True, exist_ok=True)
        store = f"sqlite:///{self.root}/mlflow.db"
        try:
            open_client(store)
        except (MlflowException, SQLAlchemyError) as exc:
            raise ServerStartError(f"the MLflow store {self.root / 'mlflow.db'} cannot be opened "
                                   f"({error_line(str(exc))}); move it aside to start a new one") from None
        env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_TRACKING_")}
        # MLflow's job execution (GenAI judge/optimization jobs, huey consumers: seven extra Python processes that
        # each import mlflow at start, mlflow/server/__init__.py, 3.17.2) serves nothing ascendflow records; off
        # unless the user turned it on, so the server starts in about a third of the CPU time on 2 cores.
        env.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
        try:
            with store_lock(store):
                self.process = ManagedProcess(self.argv(), env, self.log_path, grace_s=10).__enter__()
                deadline = time.monotonic() + START_TIMEOUT_S
                while not _healthy(self.uri):
                    if self.process.returncode is not None or time.monotonic() > deadline:
                        self.stop()
                        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
                        raise ServerStartError(f"the MLflow tracking server did not start on {self.host}:{self.port} "
                                               f"({error_line(text)}); see {self.log_path}")
                    time.sleep(0.3)
        except BaseException:
            self.stop()
            raise
        return self.uri

    def browse_command(self) -> str:
        """The command that serves this server's runs again once it is stopped (on 127.0.0.1:5000)."""
        return (f"mlflow server --backend-store-uri sqlite:///{self.root}/mlflow.db --serve-artifacts "
                f"--artifacts-destination {self.root / 'artifacts'}")

    def stop(self) -> None:
        """Stop the server's process group (idempotent)."""
        if self.process is not None:
            self.process.stop()
            self.process = None

    def __enter__(self) -> "TrackingServer":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

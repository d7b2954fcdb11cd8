"""Ctrl-C while a ``tracking=server`` run starts its own MLflow server (issue 20, row 12a): the server's new SQLite
store must never be left half-migrated, and the next run in that directory must record. Real ``python -m ascendflow``
processes, a real ``mlflow server``, real SQLite."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import run_ascendflow
from tests.helpers import mlflow_runs, wait_for

pytestmark = pytest.mark.no_vllm  # tracking server and UI, no vLLM engine


def _server_processes(root: Path) -> list[str]:
    """Live ``mlflow server`` processes (and their workers) on the store under ``root``."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            line = " ".join(proc.info["cmdline"] or [])
            if proc.info["status"] != psutil.STATUS_ZOMBIE and str(root) in line and "mlflow" in line:
                found.append(f"{proc.pid} {line}")
        except psutil.NoSuchProcess:
            continue
    return found


def _interrupt_when(cwd: Path, ready, what: str) -> int:
    """Start a plan-only ``tracking=server`` run, SIGINT it once ``ready()`` holds; returns its exit code."""
    proc = subprocess.Popen([sys.executable, "-m", "ascendflow", "tracking=server", "run.mode=plan"], cwd=cwd,
                            env=dict(os.environ), stdout=subprocess.DEVNULL, stderr=open(cwd / "stderr.txt", "a"))
    try:
        wait_for(ready, 120, what, 0.02)
        proc.send_signal(signal.SIGINT)
        return proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()


def _new_log_for(logs: Path, seconds: float):
    """A readiness check: a server log that was not there at the call has existed for ``seconds``."""
    before, seen = set(logs.glob("*.log")), []

    def ready() -> bool:
        if not seen and set(logs.glob("*.log")) - before:
            seen.append(time.monotonic())
        return bool(seen) and time.monotonic() - seen[0] >= seconds

    return ready


def test_ctrl_c_while_the_run_s_server_starts_never_breaks_its_store(tmp_path):
    root = tmp_path / "outputs" / "mlflow" / "server"
    logs = root / "logs"
    codes = {"store created": _interrupt_when(tmp_path, lambda: (root / "mlflow.db").exists(), "the store file")}
    # the server process just started (importing MLflow), and 1.5 s into its start (opening the store)
    for what, after_s in (("server started", 0.0), ("server starting", 1.5)):
        codes[what] = _interrupt_when(tmp_path, _new_log_for(logs, after_s), what)
    assert set(codes.values()) <= {130}, (codes, (tmp_path / "stderr.txt").read_text()[-3000:])
    wait_for(lambda: not _server_processes(root), 10, "no MLflow server left", 0.2)

    done = run_ascendflow(["tracking=server", "run.mode=plan"], tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    runs = mlflow_runs(f"sqlite:///{root / 'mlflow.db'}")
    assert [r.info.status for r in runs if r.info.status != "KILLED"] == ["FINISHED"], [r.info for r in runs]
    assert not _server_processes(root)

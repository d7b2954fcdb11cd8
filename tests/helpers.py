"""Helpers for runs in every tier: locate the run directory, read its MLflow run, check for leftover processes."""

from __future__ import annotations

import json
from pathlib import Path
from importlib.metadata import entry_points
from typing import Any

import psutil


def single_run_dir(cwd: Path) -> Path:
    """The one Hydra run directory a single ``python -m ascendflow`` in ``cwd`` created."""
    runs = list(cwd.glob("outputs/runs/*/*"))
    assert len(runs) == 1, runs
    return runs[0]


def read_json(path: Path) -> dict[str, Any]:
    """Parse a JSON file."""
    return json.loads(path.read_text())


def mlflow_runs(uri: str) -> list:
    """Every run in the store at ``uri`` (all experiments)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    return client.search_runs([e.experiment_id for e in client.search_experiments()])


def artifact_paths(uri: str, run_id: str, path: str = "") -> set[str]:
    """Every artifact path of a run, recursively."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    out: set[str] = set()
    for info in client.list_artifacts(run_id, path or None):
        if info.is_dir:
            out |= artifact_paths(uri, run_id, info.path)
        else:
            out.add(info.path)
    return out


def leftover_engine_processes(run_dir: Path) -> list[str]:
    """Command lines of live processes started for ``run_dir`` (marked by ``ASCENDFLOW_RUN_DIR`` in their
    environment, which vLLM's engine-core and worker processes inherit)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get("ASCENDFLOW_RUN_DIR") == str(run_dir):
                found.append(" ".join(proc.info["cmdline"] or []))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found



def descendants(pid: int) -> list[psutil.Process]:
    """Every live descendant process of ``pid`` (vLLM's engine core rewrites its title with setproctitle, which also
    overwrites what ``/proc/<pid>/environ`` shows, so the process tree is the reliable way to find it)."""
    try:
        return [p for p in psutil.Process(pid).children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE]
    except psutil.NoSuchProcess:
        return []


def engine_core_pids(runner_pid: int) -> list[int]:
    """Pids of vLLM engine-core processes under ``runner_pid`` (title ``VLLM::EngineCore``, set by
    ``vllm/v1/engine/core.py`` ``run_engine_core`` through ``set_process_title``)."""
    found = []
    for proc in descendants(runner_pid):
        try:
            if "EngineCore" in " ".join(proc.cmdline()) + proc.name():
                found.append(proc.pid)
        except psutil.NoSuchProcess:
            continue
    return found


def still_alive(procs: list[psutil.Process]) -> list[str]:
    """Those of ``procs`` (snapshotted earlier) that still run, as ``pid cmdline``."""
    alive = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(f"{proc.pid} {' '.join(proc.cmdline())}")
        except psutil.NoSuchProcess:
            continue
    return alive


def wait_for(predicate, timeout: float, what: str, poll_s: float = 0.5):
    """Poll ``predicate`` until it returns a truthy value (returned) or ``timeout`` seconds pass.

    Raises:
        AssertionError: timed out, naming ``what``.
    """
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out waiting for {what}")


def http_status(url: str, key: str | None = None) -> int:
    """HTTP status of a GET to ``url`` (with ``Bearer key`` when given); 0 when nothing answers (not listening)."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError):
        return 0


#: The vLLM plugin entry point ``pip install -e .`` declares (pyproject.toml ``[project.entry-points]``).
PLUGIN_ENTRY = "ascendflow_msmodelslim = ascendflow.vllm_plugin:register"


def plugin_path(tmp_path: Path) -> list[str]:
    """``PYTHONPATH`` entries that let vLLM find ascendflow's plugin: none where the entry point is installed, else a
    one-line ``.dist-info`` under ``tmp_path`` declaring it (what ``pip install -e .`` writes)."""
    if any(ep.value == "ascendflow.vllm_plugin:register" for ep in entry_points(group="vllm.general_plugins")):
        return []
    info = tmp_path / "site" / "ascendflow_vllm_plugin_entry-0.0.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ascendflow-vllm-plugin-entry\nVersion: 0.0.0\n")
    (info / "entry_points.txt").write_text(f"[vllm.general_plugins]\n{PLUGIN_ENTRY}\n")
    return [str(tmp_path / "site")]

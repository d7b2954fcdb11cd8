"""A real MLflow tracking server stopped while a run serves and benchmarks: the run finishes, its results stay in the
run directory with a pending record, and ``python -m ascendflow.sync`` uploads them once the server is back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from ascendflow.runner.server import free_port
from tests.helpers import artifact_paths, descendants, mlflow_runs, read_json, still_alive


class TrackingServer:
    """``mlflow server`` on a SQLite backend and a local artifact root, in its own process group."""

    def __init__(self, root: Path, port: int) -> None:
        self.root, self.port, self.proc = root, port, None
        self.uri = f"http://127.0.0.1:{port}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{self.root / 'db.sqlite'}",
             "--default-artifact-root", (self.root / "artifacts").as_uri(), "--host", "127.0.0.1", "--port",
             str(self.port), "--workers", "1"],
            stdout=open(self.root / "server.log", "a"), stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.uri}/health", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        raise AssertionError("mlflow server did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


def test_a_run_survives_a_store_outage_and_sync_uploads_it(tmp_path):
    root = tmp_path / "server"
    root.mkdir()
    server = TrackingServer(root, free_port())
    work = tmp_path / "work"
    work.mkdir()
    server.start()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "ascendflow", "run.mode=serve", "workload.num_prompts=2"],
                                cwd=work, env={**os.environ, "MLFLOW_TRACKING_URI": server.uri},
                                stdout=open(work / "stdout.txt", "w"), stderr=open(work / "stderr.txt", "w"))
        try:
            deadline = time.monotonic() + 300
            while not list(work.glob("outputs/runs/*/*/serve_command.txt")) and time.monotonic() < deadline:
                time.sleep(0.5)
            server.stop()  # the store goes away while the engine starts
            tree = descendants(proc.pid)
            proc.wait(timeout=600)
        finally:
            if proc.poll() is None:
                proc.kill()
        stderr = (work / "stderr.txt").read_text()
        assert proc.returncode == 0, stderr[-3000:]
        (run_dir,) = list(work.glob("outputs/runs/*/*"))
        run_id = read_json(run_dir / "mlflow_pending.json")["run_id"]
        # Issue 25 row 12: one line saying the server is unreachable and the run is kept locally; before, nine
        # urllib3 "Retrying (Retry(total=0, …)) after connection broken by …" warnings and MLflow's system-metrics
        # thread's "Failed to get mlflow run: …" filled the terminal, and the line was an `error:` quoting a
        # truncated urllib3 message.
        assert stderr.splitlines() == [
            f"warning: the MLflow server {server.uri} stopped answering (Connection refused): run {run_id} is kept in "
            f"{run_dir}; upload it with `python -m ascendflow.sync {run_dir}` once the server answers (or the next "
            "run does)"]
        stdout = (work / "stdout.txt").read_text()
        assert "urllib3" not in stdout and "Retrying" not in stdout and "Failed to" not in stdout, stdout[-3000:]
        assert still_alive(tree) == []
        pending = read_json(run_dir / "mlflow_pending.json")
        result = read_json(run_dir / "result.json")
        assert pending["status"] == "FINISHED" and pending["metrics"]["completed"] == 2
        assert result["benchmark"]["completed"] == 2

        server.start()
        sync = subprocess.run([sys.executable, "-m", "ascendflow.sync"], cwd=work, capture_output=True, text=True,
                              timeout=300)
        assert sync.returncode == 0, sync.stderr[-2000:]
        (run,) = mlflow_runs(server.uri)
        assert sync.stdout.endswith(f"uploaded {run_dir} as MLflow run {run.info.run_id}\n")  # after MLflow's links
        assert run.info.status == "FINISHED"
        assert (run.data.metrics["completed"], run.data.metrics["failed"]) == (2, 0)
        assert run.data.tags["ascendflow.synced_after_outage"] == pending["reason"]
        assert {"result.json", "benchmark.json", "plan.json", "mlflow_pending.json"} <= artifact_paths(server.uri,
                                                                                                     run.info.run_id)
        assert not (run_dir / "mlflow_pending.json").exists() and (run_dir / "mlflow_synced.json").exists()
    finally:
        server.stop()

"""A real vLLM engine core killed with SIGKILL in the two stages between start and the benchmark's end: the warm-up
(the benchmark client has started, no request answered yet) and the shutdown stage (every request answered, the
engine dead before the runner stops it). Exit codes, the stage and cause in the MLflow run, the kept files and
leftover processes are counted on the real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from tests.helpers import (
    artifact_paths,
    descendants,
    engine_core_pids,
    http_status,
    mlflow_runs,
    read_json,
    still_alive,
    wait_for,
)


def _start(args: list[str], cwd: Path, uri: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ascendflow", "run.mode=serve", *args], cwd=cwd,
                            env={**os.environ, "MLFLOW_TRACKING_URI": uri},
                            stdout=open(cwd / "stdout.txt", "w"), stderr=open(cwd / "stderr.txt", "w"))


def _health(run_dir: Path) -> int:
    argv = (run_dir / "serve_command.txt").read_text().split()
    return http_status(f"http://127.0.0.1:{argv[argv.index('--port') + 1]}/health", None)


def _healthy_seen(cwd: Path) -> bool:
    """The runner printed that the engine is healthy (it is then watching the benchmark client)."""
    return "engine healthy after" in (cwd / "stdout.txt").read_text()


def _bench_client(runner_pid: int) -> list[psutil.Process]:
    return [p for p in descendants(runner_pid) if "ascendflow.runner.bench" in " ".join(p.cmdline())]


def _finish(proc: subprocess.Popen, tree: list[psutil.Process], cwd: Path) -> str:
    try:
        proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = (cwd / "stderr.txt").read_text()
    assert proc.returncode == 1, stderr[-3000:]
    wait_for(lambda: not still_alive(tree), 30, "every process of the run to stop", poll_s=0.5)
    return stderr


def test_engine_killed_during_the_warm_up_fails_the_run_in_that_stage(tmp_path, mlflow_uri):
    proc = _start(["workload.num_prompts=4"], tmp_path, mlflow_uri)
    client = None
    try:
        # The client starts with the engine and waits for /health; hold it still until the engine is healthy and
        # its core is killed, so no request can have been sent.
        (client,) = wait_for(lambda: _bench_client(proc.pid), 600, "the benchmark client", poll_s=0.2)
        client.suspend()
        wait_for(lambda: _healthy_seen(tmp_path), 600, "the runner to see the engine healthy", poll_s=0.2)
        tree = descendants(proc.pid)
        (core,) = engine_core_pids(proc.pid)
        run_dir = next(iter(tmp_path.glob("outputs/runs/*/*")))
        assert not (run_dir / "benchmark.json").exists()
        os.kill(core, signal.SIGKILL)
        client.resume()
    except BaseException:
        if client is not None and client.is_running():
            client.resume()
        proc.kill()
        raise
    stderr = _finish(proc, tree, tmp_path)
    assert "engine died during the warm-up (" in stderr, stderr[-3000:]
    (run,) = mlflow_runs(mlflow_uri)
    assert run.info.status == "FAILED"
    assert run.data.tags["error"].startswith("engine died during the warm-up (")
    assert "engine core process EngineCore was killed by SIGKILL" in run.data.tags["error"] or \
        "the engine core process exited unexpectedly" in run.data.tags["error"], run.data.tags["error"]
    assert run.data.tags["error.stage"] == "warm-up"
    assert run.data.metrics.get("completed", 0) == 0
    assert {"engine.log", "bench.log", "error.txt", "plan.json"} <= artifact_paths(mlflow_uri, run.info.run_id)


def test_engine_dead_after_the_last_request_fails_the_run_in_the_shutdown_stage(tmp_path, mlflow_uri):
    proc = _start(["workload.num_prompts=4"], tmp_path, mlflow_uri)
    try:
        (client,) = wait_for(lambda: _bench_client(proc.pid), 600, "the benchmark client", poll_s=0.2)
        wait_for(lambda: _healthy_seen(tmp_path), 600, "the runner to see the engine healthy", poll_s=0.2)
        tree = descendants(proc.pid)
        (core,) = engine_core_pids(proc.pid)
        run_dir = next(iter(tmp_path.glob("outputs/runs/*/*")))
        # Hold the runner still (SIGSTOP) so the death falls between the last answer and its stopping the engine.
        os.kill(proc.pid, signal.SIGSTOP)
        wait_for(lambda: (run_dir / "benchmark.json").exists() and client.status() == psutil.STATUS_ZOMBIE, 600,
                 "the benchmark client to finish")
        os.kill(core, signal.SIGKILL)
        wait_for(lambda: _health(run_dir) != 200, 60, "the API server to see its engine core dead")
        os.kill(proc.pid, signal.SIGCONT)
    except BaseException:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        raise
    stderr = _finish(proc, tree, tmp_path)
    assert "engine died after the benchmark (" in stderr, stderr[-3000:]
    bench = read_json(run_dir / "benchmark.json")
    assert (bench["completed"], bench["failed"]) == (4, 0)
    (run,) = mlflow_runs(mlflow_uri)
    assert run.info.status == "FAILED"
    assert run.data.tags["error"].startswith("engine died after the benchmark (")
    assert run.data.tags["error.stage"] == "shutdown"
    assert (run.data.metrics["completed"], run.data.metrics["failed"]) == (4, 0)
    assert {"benchmark.json", "engine.log", "error.txt"} <= artifact_paths(mlflow_uri, run.info.run_id)
    assert "result.json" not in artifact_paths(mlflow_uri, run.info.run_id)

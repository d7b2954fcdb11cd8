"""A real vLLM engine core killed with SIGKILL: during the benchmark (single run, with an API key) and during start
(first job of a sweep, whose second job then fails 1 of 8 requests). Exit codes, MLflow statuses, the cause from the
engine log, the partial benchmark and leftover processes are counted on the real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ascendflow.runner.bench import progress_from_log
from tests.helpers import (
    artifact_paths,
    descendants,
    engine_core_pids,
    http_status,
    leftover_engine_processes,
    mlflow_runs,
    read_json,
    still_alive,
    wait_for,
)


API_KEY = "sk-engine-death-test-7f3a"


def _start(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen:
    """``python -m ascendflow ARGS`` with output to files (a full pipe would block it)."""
    return subprocess.Popen([sys.executable, "-m", "ascendflow", *args], cwd=cwd, env={**os.environ, **env},
                            stdout=open(cwd / "stdout.txt", "w"), stderr=open(cwd / "stderr.txt", "w"))


def test_engine_killed_mid_benchmark_fails_the_run_keeps_the_partial_result_and_leaves_nothing(tmp_path, mlflow_uri):
    proc = _start(["run.mode=serve", "run.api_key_env=AF_TEST_API_KEY", "workload.num_prompts=60"], tmp_path,
                  {"MLFLOW_TRACKING_URI": mlflow_uri, "AF_TEST_API_KEY": API_KEY})
    try:
        run_dir = wait_for(lambda: next(iter(tmp_path.glob("outputs/runs/*/*")), None), 120, "the run directory")
        argv = wait_for(lambda: (run_dir / "serve_command.txt").exists() and
                         (run_dir / "serve_command.txt").read_text().split(), 300, "the serve command")
        base = f"http://127.0.0.1:{argv[argv.index('--port') + 1]}"
        assert argv[argv.index("--host") + 1] == "127.0.0.1" and API_KEY not in " ".join(argv)
        wait_for(lambda: http_status(f"{base}/health") == 200, 400, "a healthy engine")
        # The API key is enforced: vLLM answers 401 without it, 200 with it.
        assert (http_status(f"{base}/v1/models"), http_status(f"{base}/v1/models", API_KEY)) == (401, 200)
        bench_log = run_dir / "bench.log"
        wait_for(lambda: bench_log.exists() and (progress_from_log(bench_log.read_text(errors="replace")) or
                                                  (0, 0))[0] >= 5, 300, "5 completed requests")
        tree = descendants(proc.pid)
        (core,) = engine_core_pids(proc.pid)
        os.kill(core, signal.SIGKILL)
        proc.wait(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = (tmp_path / "stderr.txt").read_text()
    assert proc.returncode == 1, stderr[-3000:]
    assert "engine died during the benchmark" in stderr
    assert "the engine core process exited unexpectedly" in stderr, stderr[-3000:]
    # The error is the last thing printed: no interpreter teardown noise ("nanobind: leaked …") after it.
    assert "nanobind" not in stderr and stderr.rstrip().endswith(
        (run_dir / "error.txt").read_text().rstrip().splitlines()[-1]), stderr[-3000:]
    time.sleep(1)
    assert len(tree) >= 3  # API server, engine core, benchmark client (and helpers)
    assert still_alive(tree) == [] and leftover_engine_processes(run_dir) == []
    bench = read_json(run_dir / "benchmark.json")
    assert bench["completed"] + bench["failed"] == 60 and 5 <= bench["completed"] < 60, bench
    (run,) = mlflow_runs(mlflow_uri)
    assert run.info.status == "FAILED"
    assert run.data.tags["error"].startswith("engine died during the benchmark (")
    assert (run.data.metrics["completed"], run.data.metrics["failed"]) == (bench["completed"], bench["failed"])
    assert {"benchmark.json", "engine.log", "bench.log", "error.txt"} <= artifact_paths(mlflow_uri, run.info.run_id)
    assert "result.json" not in artifact_paths(mlflow_uri, run.info.run_id)
    assert [p for p in tmp_path.rglob("*") if p.is_file() and API_KEY.encode() in p.read_bytes()] == []


def test_sweep_engine_killed_at_start_fails_that_job_and_the_sweep_goes_on(tmp_path, mlflow_uri):
    proc = _start(["-m", "run.mode=serve", "workload.num_prompts=4", "engine.seed=0,1"], tmp_path,
                  {"MLFLOW_TRACKING_URI": mlflow_uri})
    try:
        job0 = wait_for(lambda: next(iter(tmp_path.glob("outputs/multirun/*/*/0")), None), 120, "job 0")
        core = wait_for(lambda: engine_core_pids(proc.pid), 300, "job 0's engine core")
        tree = descendants(proc.pid)
        assert "engine healthy after" not in (tmp_path / "stdout.txt").read_text()  # still starting
        os.kill(core[0], signal.SIGKILL)
        proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = (tmp_path / "stderr.txt").read_text()
    assert proc.returncode == 0, stderr[-3000:]
    jobs = sorted(tmp_path.glob("outputs/multirun/*/*/[0-9]"))
    assert still_alive(tree) == [] and [leftover_engine_processes(j) for j in jobs] == [[], []]
    runs = {r.data.tags.get("mlflow.runName"): r for r in mlflow_runs(mlflow_uri)}
    killed, ok = runs["engine.seed=0"], runs["engine.seed=1"]
    assert (killed.info.status, ok.info.status) == ("FAILED", "FINISHED")
    assert killed.data.tags["error"].startswith("engine exited with code"), killed.data.tags["error"]
    # Which cause the engine log carries depends on whether vLLM's process monitor saw the signal before the API
    # server gave up; both name the killed core (measured: either appears on this machine).
    assert ("the engine core process died during start-up without reporting an error" in killed.data.tags["error"]
            or "engine core process EngineCore was killed by SIGKILL" in killed.data.tags["error"]), \
        killed.data.tags["error"]
    assert "error.txt" in artifact_paths(mlflow_uri, killed.info.run_id)
    assert (ok.data.metrics["completed"], ok.data.metrics["failed"]) == (4, 0)
    assert json.loads((jobs[1] / "benchmark.json").read_text())["completed"] == 4
    parent = next(r for r in runs.values() if r.data.tags.get("ascendflow.sweep") == "parent")
    assert parent.info.status == "FINISHED"
    assert (parent.data.metrics["jobs_failed"], parent.data.metrics["jobs_finished"]) == (1, 1)

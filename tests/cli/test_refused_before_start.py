"""Runs of the engine modes refused in one line, exit 2, before any engine, rehearsal node or Ray cluster starts.

Moved from the engine tier (``tests/engine/test_attach.py``, ``test_rehearsal.py``, ``test_cluster_sweeps.py``; issue
24 item 4): nothing here starts one. Single runs run in-process (:func:`tests.cli.inprocess.run_in_process`); the Ray
sweep is a real ``python -m ascendflow -m`` process (the sweep callback refuses it).
"""

from __future__ import annotations

from ascendflow.runner.server import free_port
from tests.cli.inprocess import run_in_process
from tests.conftest import run_ascendflow
from tests.helpers import mlflow_runs


def test_attach_to_no_server_is_one_line(tmp_path, mlflow_uri):
    url = f"http://127.0.0.1:{free_port()}"
    proc = run_in_process(["run.mode=attach", f"run.server_url={url}", "run.api_key_env=ATTACH_TEST_KEY",
                           "workload.num_prompts=4", "workload.max_concurrency=4"], cwd=tmp_path,
                          env={"MLFLOW_TRACKING_URI": mlflow_uri, "ATTACH_TEST_KEY": "attach-key-7f3c9e"})
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines() == [
        f"error: run.server_url='{url}': no vLLM server answers there ([Errno 111] Connection refused); start the "
        "deployment with the plan's launch/node0.sh (or fix the URL)"]
    (run,) = mlflow_runs(mlflow_uri)
    assert run.info.status == "FAILED"


def test_rehearse_single_node_plan_is_refused(tmp_path, mlflow_uri):
    proc = run_in_process(["+recipe=qwen3_0_6b", "run.mode=rehearse", f"hydra.run.dir={tmp_path / 'run'}"],
                          cwd=tmp_path, env={"MLFLOW_TRACKING_URI": mlflow_uri})
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines[-1] == ("error: run.mode='rehearse': the plan runs on 1 node(s); a rehearsal runs a multi-node "
                         "plan's launch scripts (use run.mode=serve for one node, or a parallel option with nodes: 2)")
    assert not (tmp_path / "run" / "rehearsal").exists() and not (tmp_path / "run" / "plan.json").exists()


def test_ray_sweep_on_a_local_sqlite_store_is_refused_before_anything_starts(tmp_path):
    proc = run_ascendflow(["-m", "hydra/launcher=ray_local", "run.mode=plan", "engine.seed=0,1"], cwd=tmp_path,
                          timeout=120)
    assert proc.returncode == 2
    db = (tmp_path / "outputs" / "mlflow" / "mlflow.db").resolve()
    assert proc.stderr.strip().splitlines()[-1] == (
        f"error: tracking.tracking_uri='sqlite:///{db}': ray jobs run in other processes and on other nodes that "
        f"cannot write this machine's local store; use tracking=server (the sweep starts an MLflow server) or "
        f"tracking=server tracking.tracking_uri=http://<host>:<port>")
    assert "Ray" not in proc.stderr and not list(tmp_path.glob("outputs/multirun/*/*/0"))

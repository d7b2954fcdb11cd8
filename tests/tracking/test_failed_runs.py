"""Failed runs end FAILED in MLflow with their logs attached; plan mode works from any directory."""

from __future__ import annotations

from tests.conftest import run_ascendflow
from tests.helpers import artifact_paths, mlflow_runs, read_json, single_run_dir


def test_bad_input_ends_the_mlflow_run_failed_with_its_logs(tmp_path, mlflow_uri):
    proc = run_ascendflow(["parallel.tensor_parallel_size=2"], cwd=tmp_path, env={"MLFLOW_TRACKING_URI": mlflow_uri})
    assert proc.returncode == 2
    (run,) = mlflow_runs(mlflow_uri)
    assert run.info.status == "FAILED"
    assert "parallel.tensor_parallel_size=2" in run.data.tags["error"]
    artifacts = artifact_paths(mlflow_uri, run.info.run_id)
    assert {"error.txt", ".hydra/config.yaml"} <= artifacts, artifacts
    assert "plan.json" not in artifacts


def test_full_error_shows_the_traceback(tmp_path):
    proc = run_ascendflow(["parallel.tensor_parallel_size=2", "tracking=none"], cwd=tmp_path,
                          env={"HYDRA_FULL_ERROR": "1"})
    assert proc.returncode != 0
    assert "Traceback" in proc.stderr and "ConfigError" in proc.stderr


def test_plan_mode_recipe_from_another_directory_records_a_plan_run(tmp_path, mlflow_uri):
    proc = run_ascendflow(["+recipe=smollm2_cpu", "run.mode=plan"], cwd=tmp_path,
                          env={"MLFLOW_TRACKING_URI": mlflow_uri})
    assert proc.returncode == 0, proc.stderr[-2000:]
    run_dir = single_run_dir(tmp_path)
    plan = read_json(run_dir / "plan.json")
    script = (run_dir / "launch" / "node0.sh").read_text()
    assert "vllm.entrypoints.openai.api_server" in script and "--kv-cache-memory-bytes 1073741824" in script
    (run,) = mlflow_runs(mlflow_uri)
    assert run.info.status == "FINISHED"
    assert run.data.tags["run.mode"] == "plan"
    assert run.data.tags["recipe"] == "smollm2_cpu"
    assert run.data.metrics["predicted_kv_cache_tokens"] == plan["kv_cache"]["tokens"]
    assert "reported_kv_cache_tokens" not in run.data.metrics


def test_auto_mode_plans_only_when_the_hardware_is_absent(tmp_path, mlflow_uri):
    proc = run_ascendflow(["hardware=atlas_800i_a2", "model=qwen3_0_6b", "graph=compiled"], cwd=tmp_path,
                          env={"MLFLOW_TRACKING_URI": mlflow_uri})
    assert proc.returncode == 0, proc.stderr[-2000:]
    run_dir = single_run_dir(tmp_path)
    plan = read_json(run_dir / "plan.json")
    assert plan["serve_command"][:3] == ["vllm", "serve", "Qwen/Qwen3-0.6B"]
    assert plan["kv_cache"]["block_size"] == 128
    assert plan["workers"][0]["env"] == {"ASCEND_RT_VISIBLE_DEVICES": "0"}
    (run,) = mlflow_runs(mlflow_uri)
    assert run.data.tags["run.mode"] == "plan"


def test_a_missing_value_still_records_a_failed_run(tmp_path, mlflow_uri):
    proc = run_ascendflow(["model=local"], cwd=tmp_path, env={"MLFLOW_TRACKING_URI": mlflow_uri})
    assert proc.returncode == 2 and "model.path='???': is missing" in proc.stderr
    (run,) = mlflow_runs(mlflow_uri)
    assert run.info.status == "FAILED" and "model.path" in run.data.tags["error"]
    assert "error.txt" in artifact_paths(mlflow_uri, run.info.run_id)


def test_sweep_exit_codes_refused_launcher_and_nothing_finished(tmp_path, mlflow_uri):
    env = {"MLFLOW_TRACKING_URI": mlflow_uri}
    refused = run_ascendflow(["-m", "engine.max_num_seqs=4,8", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
                             cwd=tmp_path, env=env)
    assert refused.returncode == 2
    assert "error: hydra.launcher.n_jobs=2: parallel jobs would start engines" in refused.stderr
    assert not list(tmp_path.glob("outputs/multirun/*/*/*/plan.json"))
    failed = run_ascendflow(["-m", "engine.max_model_len=9000,9999", "run.mode=plan"], cwd=tmp_path, env=env)
    assert failed.returncode == 1
    assert "no job of the sweep finished (2 failed)" in failed.stderr
    parents = [r for r in mlflow_runs(mlflow_uri) if r.data.tags.get("ascendflow.sweep") == "parent"]
    assert [p.info.status for p in parents if p.data.metrics.get("jobs_failed") == 2] == ["FINISHED"]

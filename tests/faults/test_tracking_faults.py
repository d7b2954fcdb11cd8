"""The tracking store and sweeps under faults, with real processes and real MLflow stores: SIGTERM/Ctrl-C to a
sweep, Optuna on plan-only jobs, a deleted experiment, three processes opening a new SQLite store at once, an
unwritable artifact location. A SIGKILLed runner's RUNNING run (a served run) is
``tests/engine/faults/test_stale_run.py``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO, run_ascendflow
from tests.helpers import artifact_paths, mlflow_runs, single_run_dir, wait_for

PLAN_SWEEP = ["-m", "+recipe=glob(*)", "engine.seed=0,1,2", "run.mode=plan"]


def _popen(args: list[str], cwd: Path, uri: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    return subprocess.Popen([sys.executable, "-m", "ascendflow", *args], cwd=cwd,
                            env={**env, "MLFLOW_TRACKING_URI": uri}, text=True,
                            stdout=open(cwd / "stdout.txt", "w"), stderr=subprocess.PIPE)


def _interrupt_sweep(tmp_path: Path, uri: str, sig: int) -> tuple[int, str]:
    """Start a plan-only sweep, signal it once its first job wrote its plan, return (exit code, stderr)."""
    proc = _popen(PLAN_SWEEP, tmp_path, uri)
    try:
        wait_for(lambda: list(tmp_path.glob("outputs/multirun/*/*/0/plan.json")), 120, "the first job's plan",
                 poll_s=0.2)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err


def test_sigterm_and_ctrl_c_between_jobs_end_the_sweep_killed(tmp_path, mlflow_uri):
    for sig in (signal.SIGTERM, signal.SIGINT):
        work = tmp_path / sig.name
        work.mkdir()
        uri = f"sqlite:///{work / 'mlflow.db'}"
        code, err = _interrupt_sweep(work, uri, sig)
        assert code == 130, err[-2000:]
        assert "interrupted" in err and "Traceback" not in err
        runs = mlflow_runs(uri)
        jobs = len(list(work.glob("outputs/multirun/*/*/[0-9]*")))
        total = len(list((REPO / "recipes" / "recipe").glob("*.yaml"))) * 3
        assert 1 <= jobs < total  # the sweep stopped part-way
        assert [r.info.status for r in runs if r.info.status == "RUNNING"] == []
        parent = [r for r in runs if r.data.tags.get("ascendflow.sweep") == "parent"]
        assert [p.info.status for p in parent] == ["KILLED"]
        assert len(runs) - 1 in (jobs - 1, jobs)  # every started job recorded (the last one maybe before its run)


def test_optuna_on_plan_only_jobs_is_refused_before_any_job(tmp_path, mlflow_uri):
    proc = run_ascendflow(["-m", "+sweep=tune_throughput", "run.mode=plan"], cwd=tmp_path,
                          env={"MLFLOW_TRACKING_URI": mlflow_uri})
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith(
        "error: run.mode='plan': an Optuna search needs measured jobs, and these only write plans")
    assert not list(tmp_path.glob("outputs/multirun/*/*/0"))
    assert mlflow_runs(mlflow_uri) == []


def test_a_deleted_experiment_is_one_line_and_a_non_zero_exit(tmp_path, mlflow_uri):
    from mlflow.tracking import MlflowClient

    first = run_ascendflow(["run.mode=plan"], cwd=tmp_path, env={"MLFLOW_TRACKING_URI": mlflow_uri})
    assert first.returncode == 0, first.stderr[-2000:]
    client = MlflowClient(tracking_uri=mlflow_uri)
    exp = client.get_experiment_by_name("ascendflow")
    client.delete_experiment(exp.experiment_id)
    line = (f"error: tracking.experiment_name='ascendflow': experiment {exp.experiment_id} was deleted (it is in the "
            f"MLflow trash); restore it with `mlflow experiments restore --experiment-id {exp.experiment_id}` or "
            f"choose another tracking.experiment_name")
    single = run_ascendflow(["run.mode=plan"], cwd=tmp_path, env={"MLFLOW_TRACKING_URI": mlflow_uri})
    assert (single.returncode, single.stderr.strip().splitlines()[-1]) == (2, line)
    sweep = run_ascendflow(["-m", "run.mode=plan", "engine.seed=0,1"], cwd=tmp_path,
                           env={"MLFLOW_TRACKING_URI": mlflow_uri})
    assert (sweep.returncode, sweep.stderr.strip().splitlines()[-1]) == (2, line)
    assert not list(tmp_path.glob("outputs/multirun/*/*/0"))


def test_three_processes_open_a_new_sqlite_store_at_once(tmp_path):
    uri = f"sqlite:///{tmp_path / 'new.db'}"
    procs = []
    for i in range(3):
        work = tmp_path / f"p{i}"
        work.mkdir()
        procs.append(subprocess.Popen([sys.executable, "-m", "ascendflow", "run.mode=plan"], cwd=work,
                                      env={**os.environ, "MLFLOW_TRACKING_URI": uri}, text=True,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    errors = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [e[-1500:] for e in errors]
    assert not any("database is locked" in e for e in errors)
    assert sorted(r.info.status for r in mlflow_runs(uri)) == ["FINISHED"] * 3


def test_an_unwritable_artifact_location_is_one_line_and_the_next_run_uploads_the_files(tmp_path, mlflow_uri):
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where the artifact folder should be\n")
    proc = run_ascendflow(["run.mode=plan", f"tracking.artifact_location={(blocker / 'sub').as_uri()}"], cwd=tmp_path,
                          env={"MLFLOW_TRACKING_URI": mlflow_uri})
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "the run's files were not uploaded to MLflow (" in proc.stderr
    run_dir = single_run_dir(tmp_path)
    assert (run_dir / "plan.json").exists() and (run_dir / "mlflow_pending.json").exists()
    (run,) = mlflow_runs(mlflow_uri)
    assert run.info.status == "FINISHED"
    assert run.data.tags["ascendflow.artifacts_error"].startswith(("NotADirectoryError", "FileExistsError"))
    assert "plan.json" not in artifact_paths(mlflow_uri, run.info.run_id)

    # The location becomes writable: the next run on this store uploads the kept files before its own.
    blocker.unlink()
    nxt = run_ascendflow(["run.mode=plan", f"tracking.artifact_location={(blocker / 'sub').as_uri()}"], cwd=tmp_path,
                         env={"MLFLOW_TRACKING_URI": mlflow_uri})
    assert nxt.returncode == 0 and "not uploaded" not in nxt.stderr, nxt.stderr[-2000:]
    assert not (run_dir / "mlflow_pending.json").exists() and (run_dir / "mlflow_synced.json").exists()
    assert {"plan.json", "mlflow_pending.json"} <= artifact_paths(mlflow_uri, run.info.run_id)
    assert sorted(r.info.status for r in mlflow_runs(mlflow_uri)) == ["FINISHED", "FINISHED"]


def test_a_sweep_that_raises_ends_its_parent_failed(tmp_path, mlflow_uri):
    # HYDRA_FULL_ERROR=1 re-raises a job's error out of the sweep (Hydra raises it once the jobs returned); the parent
    # is still ended.
    proc = run_ascendflow(["-m", "run.mode=plan", "engine.max_model_len=9000,9999"], cwd=tmp_path,
                          env={"MLFLOW_TRACKING_URI": mlflow_uri, "HYDRA_FULL_ERROR": "1"})
    assert proc.returncode == 1 and "ConfigError" in proc.stderr
    runs = mlflow_runs(mlflow_uri)
    assert sorted((r.data.tags.get("ascendflow.sweep", "child"), r.info.status) for r in runs) == [
        ("child", "FAILED"), ("child", "FAILED"), ("parent", "FAILED")]

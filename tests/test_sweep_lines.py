"""A plan sweep's own first and last lines (issue 25 row 8): how many jobs and the parent run at the start; the
children's counts, the parent and a compare command that works at the end. A real 2-job sweep (one job refused by
the compiler); the 200-job sweep the issue timed is ``benchmarks/sweep_lines_200.py`` (7 minutes here)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import run_ascendflow


def test_a_plan_sweep_says_how_many_jobs_and_ends_on_its_counts_and_the_compare_command(tmp_path):
    proc = run_ascendflow(["-m", "engine.kv_cache_memory_bytes=1,1073741824", "run.mode=plan"], cwd=tmp_path,
                          env={"MLFLOW_TRACKING_URI": ""}, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (sweep_dir,) = tmp_path.glob("outputs/multirun/*/*")
    parent = json.loads((sweep_dir / "mlflow_sweep.json").read_text())["run_id"]
    lines = proc.stdout.splitlines()
    assert lines[0] == (f"sweep: 2 jobs (engine.kv_cache_memory_bytes) in {sweep_dir}; MLflow parent run {parent} "
                        "(experiment 1)")
    assert lines[-1] == (f"sweep done: 2 jobs, 1 finished, 1 failed; MLflow parent run {parent} FINISHED; compare "
                         f"them with: python -m ascendflow.compare {parent}")
    compare = subprocess.run([sys.executable, "-m", "ascendflow.compare", parent], cwd=tmp_path, capture_output=True,
                             text=True, timeout=300)
    assert compare.returncode == 0, compare.stderr[-2000:]


def test_the_compare_command_names_a_store_other_than_the_default(tmp_path, monkeypatch):
    from ascendflow.sweeps.announce import compare_command, end_line

    monkeypatch.chdir(tmp_path)
    default = f"sqlite:///{tmp_path / 'outputs' / 'mlflow' / 'mlflow.db'}"
    assert compare_command({"run_id": "p1", "tracking_uri": default}) == "python -m ascendflow.compare p1"
    assert compare_command({"run_id": "p1", "tracking_uri": "http://u:pw@host:5000"}) == (
        "python -m ascendflow.compare p1 --tracking-uri http://u:***@host:5000")
    assert end_line({"run_id": "p1", "tracking_uri": default}, {"FINISHED": 1, "KILLED": 2}) == (
        "sweep done: 3 jobs, 1 finished, 0 failed, 2 killed; MLflow parent run p1 FINISHED; compare them with: "
        "python -m ascendflow.compare p1")

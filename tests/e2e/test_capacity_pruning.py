"""``slo.measure_top`` used wrongly is refused before anything starts (the pruning itself, on the real engine, is
tested with the capacity sweep in ``tests/e2e/test_capacity.py``)."""

from __future__ import annotations

import pytest

from tests.conftest import run_ascendflow
from tests.e2e.helpers import mlflow_runs

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("args, line", [
    (["-m", "+sweep=capacity", "slo.measure_top=0"], "error: slo.measure_top=0: must be an integer ≥ 1"),
    (["-m", "engine.max_num_seqs=4,8", "run.mode=plan", "slo.measure_top=1"],
     "error: slo.measure_top=1: prunes a capacity sweep, and this is run.mode=plan"),
    (["-m", "+sweep=tune_throughput", "run.mode=capacity", "slo.measure_top=1"],
     "error: slo.measure_top=1: prunes a basic-sweeper grid before any job runs, and an Optuna sweeper"),
])
def test_bad_measure_top_is_one_line_and_starts_nothing(tmp_path, mlflow_uri, args, line):
    proc = run_ascendflow(args, cwd=tmp_path, env={"MLFLOW_TRACKING_URI": mlflow_uri})
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1].startswith(line), proc.stderr[-1000:]
    assert not list(tmp_path.rglob("engine.log")) and not list(tmp_path.rglob("plan.json"))
    assert mlflow_runs(mlflow_uri) == []

"""Capacity searches and ``slo.measure_top`` used wrongly are refused in one line, exit 2, before anything starts
(the search and the pruning themselves, on the real engine, are ``tests/engine/test_capacity.py``). Sweeps (``-m``) are
real ``python -m ascendflow`` processes (the sweep callback refuses them); single runs run in-process."""

from __future__ import annotations

import pytest

from tests.cli.inprocess import run_in_process
from tests.conftest import run_ascendflow
from tests.helpers import mlflow_runs


def _run(args: list[str], cwd, uri: str):
    run = run_ascendflow if "-m" in args else run_in_process
    return run(args, cwd=cwd, env={"MLFLOW_TRACKING_URI": uri})


@pytest.mark.parametrize("args, line", [
    (["-m", "+sweep=capacity", "slo.measure_top=0"], "error: slo.measure_top=0: must be an integer ≥ 1"),
    (["-m", "engine.max_num_seqs=4,8", "run.mode=plan", "slo.measure_top=1"],
     "error: slo.measure_top=1: prunes a capacity sweep, and this is run.mode=plan"),
    (["-m", "+sweep=tune_throughput", "run.mode=capacity", "slo.measure_top=1"],
     "error: slo.measure_top=1: prunes a basic-sweeper grid before any job runs, and an Optuna sweeper"),
])
def test_bad_measure_top_is_one_line_and_starts_nothing(tmp_path, mlflow_uri, args, line):
    proc = _run(args, tmp_path, mlflow_uri)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1].startswith(line), proc.stderr[-1000:]
    assert not list(tmp_path.rglob("engine.log")) and not list(tmp_path.rglob("plan.json"))
    assert mlflow_runs(mlflow_uri) == []


@pytest.mark.parametrize("args, line", [
    (["-m", "+sweep=capacity", "engine.max_num_seq=4,8"],
     "error: engine.max_num_seq='4,8': is not a config key, so no job could use it"),
    (["-m", "+sweep=capacity", "workload.num_prompts=8,16"],
     "error: workload.num_prompts=32: a capacity search varies the load itself and holds the workload and SLO fixed"),
    (["-m", "+sweep=capacity", "hydra.sweeper.params=null"],
     "error: hydra.sweeper.params='{}': a capacity sweep needs at least one server knob to vary"),
    (["run.mode=capacity", "slo.p99_ttft_ms=0"], "error: slo.p99_ttft_ms=0: Input should be greater than 0"),
    (["-m", "+sweep=capacity", "slo.p99_ttft_ms=0"],
     "error: slo.p99_ttft_ms=0: Input should be greater than 0; set slo.p99_ttft_ms above 0"),
    (["run.mode=capacity", "slo.p99_ttft_ms=null", "slo.p99_tpot_ms=null"],
     "error: slo.p99_ttft_ms=None: a capacity search needs a latency target"),
    (["run.mode=capacity", "slo.max_load=100"], "error: slo.max_load=100.0: exceeds workload.num_prompts (32)"),
    # New-user trial of 2026-12-03: job 0 served for 2 minutes, then job 1 failed and the sweep exited 0.
    (["-m", "engine.max_num_seqs=4,abc"],
     "error: engine.max_num_seqs='abc': Input should be a valid integer, unable to parse string as an integer; give a "
     "whole number (a swept value no job could use: fix or drop it; nothing was run)"),
    (["-m", "run.mode=plan", "engine.max_num_seqs=4,-1"],
     "error: engine.max_num_seqs=-1: Input should be greater than or equal to 1; set engine.max_num_seqs to 1 or more "
     "(a swept value no job could use: fix or drop it; nothing was run)"),
])
def test_bad_capacity_input_is_one_line_and_starts_nothing(tmp_path, mlflow_uri, args, line):
    # Moved from tests/engine/test_capacity.py (issue 24 item 4): nothing here starts an engine.
    proc = _run(args, tmp_path, mlflow_uri)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1].startswith(line), proc.stderr[-1000:]
    assert not list(tmp_path.rglob("engine.log")) and not list(tmp_path.rglob("serve_command.txt"))

"""SLO capacity search on the real engine: a three-config ``+sweep=capacity`` with ``slo.measure_top=2`` (the lowest
prediction pruned; one engine start per measured config, load points each) with its MLflow children, load curves and
the parent's ranking; a single run whose SLO no load can
meet; bad search spaces refused before anything starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import run_ascendflow
from tests.e2e.helpers import artifact_paths, mlflow_runs, read_json

pytestmark = pytest.mark.e2e

SMALL = ["workload.num_prompts=8", "slo.max_points=3"]


def test_capacity_sweep_prunes_by_prediction_then_ranks_the_measured_configs(tmp_path, mlflow_uri):
    """Three server configs, ``slo.measure_top=2``: the lowest predicted capacity is recorded as a pruned child that
    never started an engine; the other two are measured (one engine each) and ranked on the parent."""
    proc = run_ascendflow(["-m", "+sweep=capacity", "engine.max_num_seqs=1,2,8", "slo.measure_top=2", *SMALL,
                           "slo.p99_ttft_ms=20000", "slo.p99_tpot_ms=2000"], cwd=tmp_path,
                          env={"MLFLOW_TRACKING_URI": mlflow_uri}, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = mlflow_runs(mlflow_uri)
    parent = next(r for r in runs if r.data.tags.get("ascendflow.sweep") == "parent")
    kids = {r.data.tags["mlflow.runName"]: r for r in runs if r is not parent}
    assert sorted(kids) == ["engine.max_num_seqs=1", "engine.max_num_seqs=2", "engine.max_num_seqs=8"]
    pruned, children = kids["engine.max_num_seqs=1"], [kids["engine.max_num_seqs=2"], kids["engine.max_num_seqs=8"]]
    predicted = [k.data.metrics["predicted_capacity_rps"] for k in (pruned, *children)]
    assert predicted == sorted(predicted) and predicted[0] < predicted[1]
    # The decision, on one line before any job runs: the measured configs in sweep order.
    assert ("capacity sweep: measuring 2 of 3 configs (slo.measure_top=2, by predicted capacity): "
            f"engine.max_num_seqs=2 ({predicted[1]:.2f} req/s); engine.max_num_seqs=8 ({predicted[2]:.2f} req/s)"
            ) in proc.stderr
    # The pruned config: its plan and prediction, no engine, no measurement.
    assert pruned.info.status == "FINISHED" and pruned.data.tags["capacity.pruned"] == "true"
    assert pruned.data.tags["capacity.pruned_reason"] == (
        f"pruned: predicted {pruned.data.metrics['predicted_capacity_rps']:.2f} req/s, rank 3 of 3; "
        f"slo.measure_top=2 measures the top 2 only")
    assert pruned.data.metrics["predicted_rank"] == 3 and "capacity_rps" not in pruned.data.metrics
    pruned_dir = tmp_path / pruned.data.tags["run_dir"]
    assert (pruned_dir / "plan.json").exists() and not (pruned_dir / "engine.log").exists()
    assert read_json(pruned_dir / "pruned.json")["predicted_rank"] == 3
    # The measured configs: load curves and capacity.
    for child, rank in zip(children, (2, 1)):
        m = child.data.metrics
        assert child.info.status == "FINISHED" and child.data.tags["capacity.slo_met"] == "true"
        assert "capacity.pruned" not in child.data.tags and m["predicted_rank"] == rank
        assert child.data.tags["capacity.measure_reason"] == (
            f"measured: predicted {m['predicted_capacity_rps']:.2f} req/s, rank {rank} of 3")
        # Generous SLO: the highest load (all 8 prompts in flight) meets it after one point.
        assert (m["slo_met"], m["capacity_load"], m["load_points"], m["capacity_at_range_max"]) == (1, 8, 1, 1)
        assert m["capacity_rps"] == m["request_throughput"] > 0
        assert m["engine_preemptions"] == 0 and 0 < m["engine_kv_cache_usage_peak"] <= 1
        paths = artifact_paths(mlflow_uri, child.info.run_id)
        assert {"capacity/load_curve.png", "capacity/points.json", "capacity/point_0.json"} <= paths
    # The parent: best of the measured, the pruned one listed as pruned, predicted against measured.
    sweep_dir = next(tmp_path.glob("outputs/multirun/*/*"))
    ranking = read_json(sweep_dir / "capacity_ranking.json")
    best = max(children, key=lambda c: c.data.metrics["capacity_rps"])
    other = next(c for c in children if c is not best)
    assert [(r["name"], r["rank"], r["pruned"]) for r in ranking] == [
        (best.data.tags["mlflow.runName"], 1, False), (other.data.tags["mlflow.runName"], 2, False),
        ("engine.max_num_seqs=1", None, True)]
    assert parent.data.tags["best_config"] == best.data.tags["mlflow.runName"]
    assert parent.data.metrics["best_capacity_rps"] == best.data.metrics["capacity_rps"]
    assert parent.data.metrics["configs_meeting_slo"] == 2 and parent.data.tags["capacity.measure_top"] == "2"
    assert (parent.data.metrics["configs_pruned"], parent.data.metrics["jobs_finished"]) == (1, 3)
    table = read_json(sweep_dir / "capacity_predictions.json")
    assert [(r["name"], r["predicted_rank"], r["measured"], r["pruned"], r["measured_capacity_rps"]) for r in table] \
        == [("engine.max_num_seqs=8", 1, True, False, children[1].data.metrics["capacity_rps"]),
            ("engine.max_num_seqs=2", 2, True, False, children[0].data.metrics["capacity_rps"]),
            ("engine.max_num_seqs=1", 3, False, True, None)]
    assert {"capacity_ranking.json", "capacity_pareto.png", "capacity_predictions.json"} <= artifact_paths(
        mlflow_uri, parent.info.run_id)
    published = json.loads((sweep_dir / "mlflow_sweep.json").read_text())["capacity_pruning"]
    assert [(c["name"], c["measure"]) for c in published["configs"]] == [
        ("engine.max_num_seqs=1", False), ("engine.max_num_seqs=2", True), ("engine.max_num_seqs=8", True)]
    compare = subprocess.run([sys.executable, "-m", "ascendflow.compare"], cwd=tmp_path, capture_output=True,
                             text=True, env={**os.environ, "MLFLOW_TRACKING_URI": mlflow_uri}, timeout=300)
    assert compare.returncode == 0, compare.stderr[-2000:]
    header = (tmp_path / "outputs" / "compare" / parent.info.run_id / "comparison.csv").read_text().splitlines()[0]
    assert {"engine.max_num_seqs", "capacity_rps", "capacity_load", "slo_met"} <= set(header.split(",")), header


def test_an_slo_no_load_can_meet_is_recorded_not_crashed(tmp_path, mlflow_uri):
    proc = run_ascendflow(["run.mode=capacity", *SMALL, "slo.p99_ttft_ms=1"], cwd=tmp_path,
                          env={"MLFLOW_TRACKING_URI": mlflow_uri}, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "SLO not met at any load (p99_ttft_ms ≤ 1" in proc.stdout
    (run,) = mlflow_runs(mlflow_uri)
    assert run.info.status == "FINISHED" and run.data.tags["capacity.slo_met"] == "false"
    assert (run.data.metrics["slo_met"], run.data.metrics["capacity_rps"], run.data.metrics["load_points"]) == (0, 0, 2)
    points = json.loads(next(tmp_path.glob("outputs/runs/*/*/capacity/points.json")).read_text())
    assert [(p["load"], p["meets_slo"]) for p in points["points"]] == [(1.0, False), (8.0, False)]
    assert points["order"] == [8.0, 1.0]  # serve_sla's order: the maximum first, then the minimum


@pytest.mark.parametrize("args, line", [
    (["-m", "+sweep=capacity", "engine.max_num_seq=4,8"],
     "error: engine.max_num_seq='4,8': is not a config key, so no job could use it"),
    (["-m", "+sweep=capacity", "workload.num_prompts=8,16"],
     "error: workload.num_prompts=32: a capacity search varies the load itself and holds the workload and SLO fixed"),
    (["-m", "+sweep=capacity", "hydra.sweeper.params=null"],
     "error: hydra.sweeper.params='{}': a capacity sweep needs at least one server knob to vary"),
    (["run.mode=capacity", "slo.p99_ttft_ms=0"], "error: slo.p99_ttft_ms=0: Input should be greater than 0"),
    (["-m", "+sweep=capacity", "slo.p99_ttft_ms=0"],
     "error: slo.p99_ttft_ms=0: Input should be greater than 0; set slo.p99_ttft_ms above 0.0"),
    (["run.mode=capacity", "slo.p99_ttft_ms=null", "slo.p99_tpot_ms=null"],
     "error: slo.p99_ttft_ms=None: a capacity search needs a latency target"),
    (["run.mode=capacity", "slo.max_load=100"], "error: slo.max_load=100.0: exceeds workload.num_prompts (32)"),
])
def test_bad_capacity_input_is_one_line_and_starts_nothing(tmp_path, mlflow_uri, args, line):
    proc = run_ascendflow(args, cwd=tmp_path, env={"MLFLOW_TRACKING_URI": mlflow_uri})
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1].startswith(line), proc.stderr[-1000:]
    assert not list(tmp_path.rglob("engine.log")) and not list(tmp_path.rglob("serve_command.txt"))

"""SLO capacity search on the real engine: a three-config ``+sweep=capacity`` with ``slo.measure_top=2`` (the lowest
prediction pruned; one engine start per measured config, load points each) with its MLflow children, load curves and
the parent's ranking. A search whose SLO no load can meet is ``tests/engine/test_attach.py`` (on its shared
deployment), bad search spaces refused before anything starts ``tests/cli/test_bad_sweep_inputs.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import run_ascendflow
from tests.helpers import artifact_paths, mlflow_runs, read_json


SMALL = ["workload.num_prompts=8", "slo.max_points=3"]


def test_capacity_sweep_prunes_by_prediction_then_ranks_the_measured_configs(tmp_path, mlflow_uri):
    """Three server configs, ``slo.measure_top=2``: the lowest predicted capacity is recorded as a pruned child that
    never started an engine; the other two are measured (one engine each) and ranked on the parent."""
    proc = run_ascendflow(["-m", "+sweep=capacity", "engine.max_num_seqs=1,2,8", "slo.measure_top=2", *SMALL,
                           "slo.p99_ttft_ms=300000", "slo.p99_tpot_ms=20000"], cwd=tmp_path,
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

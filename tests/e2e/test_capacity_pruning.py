"""``slo.measure_top`` on the real engine: a two-config capacity sweep that measures one config (the higher
predicted capacity) and records the other as a pruned child that never started an engine; bad use refused before
anything starts."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_ascendflow
from tests.e2e.helpers import artifact_paths, mlflow_runs, read_json

pytestmark = pytest.mark.e2e

SMALL = ["workload.num_prompts=8", "slo.max_points=2", "slo.p99_ttft_ms=20000", "slo.p99_tpot_ms=2000"]


def test_measure_top_one_measures_the_higher_prediction_and_prunes_the_other(tmp_path, mlflow_uri):
    proc = run_ascendflow(["-m", "+sweep=capacity", "engine.max_num_seqs=2,8", "slo.measure_top=1", *SMALL],
                          cwd=tmp_path, env={"MLFLOW_TRACKING_URI": mlflow_uri}, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert ("capacity sweep: measuring 1 of 2 configs (slo.measure_top=1, by predicted capacity): "
            "engine.max_num_seqs=8 (") in proc.stderr
    runs = mlflow_runs(mlflow_uri)
    parent = next(r for r in runs if r.data.tags.get("ascendflow.sweep") == "parent")
    kids = {r.data.tags["mlflow.runName"]: r for r in runs if r is not parent}
    pruned, measured = kids["engine.max_num_seqs=2"], kids["engine.max_num_seqs=8"]
    assert pruned.info.status == measured.info.status == "FINISHED"
    assert pruned.data.metrics["predicted_capacity_rps"] < measured.data.metrics["predicted_capacity_rps"]
    # The pruned config: its plan and prediction, no engine, no measurement.
    assert pruned.data.tags["capacity.pruned"] == "true"
    assert pruned.data.tags["capacity.pruned_reason"] == (
        f"pruned: predicted {pruned.data.metrics['predicted_capacity_rps']:.2f} req/s, rank 2 of 2; "
        f"slo.measure_top=1 measures the top 1 only")
    assert pruned.data.metrics["predicted_rank"] == 2 and "capacity_rps" not in pruned.data.metrics
    pruned_dir = tmp_path / pruned.data.tags["run_dir"]
    assert (pruned_dir / "plan.json").exists() and not (pruned_dir / "engine.log").exists()
    assert read_json(pruned_dir / "pruned.json")["predicted_rank"] == 2
    # The measured config: as in any capacity sweep.
    assert "capacity.pruned" not in measured.data.tags and measured.data.metrics["predicted_rank"] == 1
    assert measured.data.tags["capacity.measure_reason"] == (
        f"measured: predicted {measured.data.metrics['predicted_capacity_rps']:.2f} req/s, rank 1 of 2")
    assert (tmp_path / measured.data.tags["run_dir"] / "engine.log").exists()
    assert measured.data.metrics["capacity_rps"] > 0 and measured.data.metrics["slo_met"] == 1
    # The parent: best of the measured, the pruned one listed as pruned, predicted against measured.
    assert parent.data.tags["best_config"] == "engine.max_num_seqs=8"
    assert parent.data.tags["capacity.measure_top"] == "1"
    assert (parent.data.metrics["configs_pruned"], parent.data.metrics["jobs_finished"]) == (1, 2)
    sweep_dir = next(tmp_path.glob("outputs/multirun/*/*"))
    ranking = read_json(sweep_dir / "capacity_ranking.json")
    assert [(r["name"], r["rank"], r["pruned"]) for r in ranking] == [
        ("engine.max_num_seqs=8", 1, False), ("engine.max_num_seqs=2", None, True)]
    table = read_json(sweep_dir / "capacity_predictions.json")
    assert [(r["name"], r["predicted_rank"], r["measured"], r["pruned"], r["measured_capacity_rps"]) for r in table] \
        == [("engine.max_num_seqs=8", 1, True, False, measured.data.metrics["capacity_rps"]),
            ("engine.max_num_seqs=2", 2, False, True, None)]
    assert [r["predicted_capacity_rps"] for r in table] == [measured.data.metrics["predicted_capacity_rps"],
                                                           pruned.data.metrics["predicted_capacity_rps"]]
    assert {"capacity_predictions.json", "capacity_ranking.json"} <= artifact_paths(mlflow_uri, parent.info.run_id)
    published = json.loads((sweep_dir / "mlflow_sweep.json").read_text())["capacity_pruning"]
    assert [(c["name"], c["measure"]) for c in published["configs"]] == [
        ("engine.max_num_seqs=2", False), ("engine.max_num_seqs=8", True)]


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

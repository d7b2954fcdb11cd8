"""End to end sweeps on the CPU engine: real multiruns, an Optuna preset and the comparison command."""

from __future__ import annotations

import csv

from ascendflow.compare import main as compare_main
from tests.conftest import run_ascendflow
from tests.helpers import artifact_paths, mlflow_runs


#: A small workload: every job starts a real vLLM server and benchmarks it with vLLM's client.
TINY = ["workload.num_prompts=4", "workload.max_output_tokens=16"]


def _split(runs):
    parents = [r for r in runs if r.data.tags.get("ascendflow.sweep") == "parent"]
    assert len(parents) == 1, [r.info.run_name for r in runs]
    parent = parents[0]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    return parent, children


def test_failed_job_is_a_failed_child_and_the_sweep_goes_on_then_compare(tmp_path, mlflow_uri):
    proc = run_ascendflow(["-m", "engine.max_model_len=2048,9000", *TINY], cwd=tmp_path,
                          env={"MLFLOW_TRACKING_URI": mlflow_uri})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert ("error: engine.max_model_len=9000: exceeds the model's maximum length 8192 = max_position_embeddings 8192 "
            "(vLLM _get_and_verify_max_len refuses it at start); lower it, or lengthen the model with "
            "model.hf_overrides (rope scaling, max_position_embeddings), written as --hf-overrides") in proc.stderr
    parent, children = _split(mlflow_runs(mlflow_uri))
    status = {c.info.run_name: c.info.status for c in children}
    assert status == {"engine.max_model_len=2048": "FINISHED", "engine.max_model_len=9000": "FAILED"}
    failed = next(c for c in children if c.info.status == "FAILED")
    assert "max_position_embeddings" in failed.data.tags["error"]
    assert "error.txt" in artifact_paths(mlflow_uri, failed.info.run_id)
    assert parent.info.status == "FINISHED"
    assert parent.data.metrics["jobs_finished"] == 1 and parent.data.metrics["jobs_failed"] == 1

    out = tmp_path / "compare"
    assert compare_main([parent.info.run_id, "--tracking-uri", mlflow_uri, "--out", str(out)]) == 0
    rows = list(csv.DictReader((out / "comparison.csv").open()))
    assert {r["engine.max_model_len"] for r in rows} == {"2048", "9000"}
    ok = next(r for r in rows if r["status"] == "FINISHED")
    assert float(ok["output_throughput"]) > 0 and float(ok["p99_ttft_ms"]) > 0
    assert float(ok["predicted_kv_cache_tokens"]) == float(ok["reported_kv_cache_tokens"])
    assert ok["pareto"] == "True"
    assert (out / "pareto.png").stat().st_size > 5000
    assert {"comparison/comparison.csv", "comparison/pareto.png"} <= artifact_paths(mlflow_uri, parent.info.run_id)


def test_optuna_preset_runs_two_trials(tmp_path, mlflow_uri):
    proc = run_ascendflow(["-m", "+sweep=tune_throughput", "hydra.sweeper.n_trials=2", *TINY,
                           "run.slo_p99_ttft_ms=60000"], cwd=tmp_path, env={"MLFLOW_TRACKING_URI": mlflow_uri})
    assert proc.returncode == 0, proc.stderr[-3000:]
    parent, children = _split(mlflow_runs(mlflow_uri))
    # Two jobs, each a real server benchmarked, nested under one parent (this also covers a plain two-job multirun:
    # the basic sweeper's nesting is the same callback, tested with a failing job below).
    assert len(children) == 2 and all(c.info.status == "FINISHED" for c in children)
    assert parent.info.status == "FINISHED"
    assert parent.data.metrics["jobs_finished"] == 2 and parent.data.metrics["jobs_failed"] == 0
    assert all(c.data.metrics["output_throughput"] > 0 for c in children)
    assert all(c.data.metrics["kv_cache_tokens_rel_error"] <= 0.01 for c in children)
    assert "OptunaSweeper" in parent.data.tags["sweeper"]
    assert all(c.info.run_name.startswith("engine.max_num_seqs=") for c in children)
    best = list(tmp_path.glob("outputs/multirun/*/*/optimization_results.yaml"))
    assert best and "best_value" in best[0].read_text()

"""Issue 20 row 13: the performance model timed one TP replica, so a DP2 or PP2 plan got DP1/PP1's figures and
``slo.measure_top`` ranked them equal. DP ranks are now simulated one by one (issue 18, ``simulate_dp``); PP plans
are "not predicted" until PP is modelled."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ascendflow.capacity.pruning import decide
from ascendflow.compiler import compile_plan
from ascendflow.models.resolve import resolve_model
from ascendflow.perfmodel.attach import with_performance
from ascendflow.perfmodel.predict import PREDICTED, predicted_metrics
from ascendflow.schema import load_spec
from tests.conftest import compose_config, run_ascendflow

QWEN3_32B = ["+recipe=qwen3_32b_w8a8", "workload=random", "slo=default"]


def _performance(*overrides: str) -> dict:
    raw = compose_config([*QWEN3_32B, *overrides])
    raw.pop("hydra", None)
    spec = load_spec(raw)
    plan = compile_plan(spec, resolve_model(spec.model, need_weights=False).architecture, model_path="/models/x")
    return with_performance(plan, spec, None, Path.cwd()).performance


def test_dp_plans_are_predicted_per_rank_pp_plans_are_not_and_measure_top_measures_them_unranked():
    base = _performance()
    dp2 = _performance("parallel.data_parallel_size=2")
    pp2 = _performance("parallel.pipeline_parallel_size=2")
    assert base["status"] == "estimate" and predicted_metrics(base)["predicted_output_throughput"] > 0
    # DP2: two ranks, each with the plan's own max_num_seqs and KV: not DP1's figures, and at least its capacity.
    assert dp2["status"] == "estimate" and predicted_metrics(dp2) != predicted_metrics(base)
    assert dp2["capacity"]["capacity_rps"] >= base["capacity"]["capacity_rps"]
    assert pp2 == {"status": "not predicted", "reason": "PP not modelled (pipeline_parallel_size=2): the step model "
                                                        "times one replica's whole forward pass"}
    assert predicted_metrics(pp2) == {}
    # slo.measure_top=1 over the three: the best predicted one takes rank 1, PP2 is measured as unpredicted.
    decision = decide([{"name": "dp1", "predicted_capacity_rps": base["capacity"].get("capacity_rps"), "reason": ""},
                       {"name": "dp2", "predicted_capacity_rps": dp2["capacity"].get("capacity_rps"), "reason": ""},
                       {"name": "pp2", "predicted_capacity_rps": None, "reason": pp2["reason"]}], 1)
    by_name = {d["name"]: (d["predicted_rank"], d["measure"]) for d in decision}
    assert by_name["pp2"] == (None, True) and sorted(by_name[n][0] for n in ("dp1", "dp2")) == [1, 2]
    assert next(d for d in decision if d["name"] == "pp2")["reason"].startswith(
        "measured: not predicted (PP not modelled (pipeline_parallel_size=2)")


def test_a_pp2_plan_run_records_no_predicted_performance(tmp_path, mlflow_uri):
    proc = run_ascendflow([*QWEN3_32B, "parallel.pipeline_parallel_size=2", "run.mode=plan",
                           f"tracking.tracking_uri={mlflow_uri}"], cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    client = MlflowClient(tracking_uri=mlflow_uri)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    performance = {f"predicted_{k}" for k in PREDICTED} | {"predicted_capacity_rps", "predicted_capacity_load"}
    assert performance & set(run.data.metrics) == set()
    assert run.data.metrics["predicted_kv_cache_tokens"] > 0  # the memory plan is still predicted
    assert "perf model" in proc.stdout and "PP not modelled" in proc.stdout

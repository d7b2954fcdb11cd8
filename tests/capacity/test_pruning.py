"""``slo.measure_top``: the pure ranking decision, the published entry a job looks itself up in, the predictions
table, and every job of a sweep predicted from the config Hydra's basic sweeper would compose for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascendflow.capacity.pruning import KEY, decide, decision_entry, predictions_table

PRED = [{"name": "s=4", "predicted_capacity_rps": 1.9}, {"name": "s=8", "predicted_capacity_rps": 3.1},
        {"name": "s=16", "predicted_capacity_rps": None, "reason": "no op table"},
        {"name": "s=32", "predicted_capacity_rps": 5.4}]


def test_the_top_k_predicted_are_measured_and_unpredicted_configs_always_are():
    out = decide(PRED, 1)
    assert [(d["name"], d["predicted_rank"], d["measure"]) for d in out] == [
        ("s=4", 3, False), ("s=8", 2, False), ("s=16", None, True), ("s=32", 1, True)]
    assert out[0]["reason"] == "pruned: predicted 1.90 req/s, rank 3 of 3; slo.measure_top=1 measures the top 1 only"
    assert out[2]["reason"] == "measured: not predicted (no op table)"
    assert out[3]["reason"] == "measured: predicted 5.40 req/s, rank 1 of 3"


def test_measure_all_and_ties_keep_sweep_order():
    assert all(d["measure"] for d in decide(PRED, None))
    tied = decide([{"name": "a", "predicted_capacity_rps": 2.0}, {"name": "b", "predicted_capacity_rps": 2.0}], 1)
    assert [(d["name"], d["predicted_rank"], d["measure"]) for d in tied] == [("a", 1, True), ("b", 2, False)]


def test_a_job_finds_its_own_entry_by_run_name():
    sweep = {"run_id": "r", KEY: {"measure_top": 1, "configs": decide(PRED, 1)}}
    pruned = decision_entry(sweep, "s=8")
    assert pruned["predicted_rank"] == 2 and pruned["measure"] is False
    assert decision_entry(sweep, "s=32")["measure"] is True and decision_entry(sweep, "s=16")["measure"] is True
    assert decision_entry(sweep, "other") is None and decision_entry({"run_id": "r"}, "s=8") is None
    assert decision_entry(None, "s=8") is None


def test_predictions_table_pairs_prediction_and_measurement():
    decision = {"measure_top": 1, "configs": decide(PRED, 1)}
    kids = [{"name": "s=32", "run_id": "a", "capacity_rps": 4.6, "slo_met": True},
            {"name": "s=16", "run_id": "b", "capacity_rps": 4.1, "slo_met": True},
            {"name": "s=8", "run_id": "c", "capacity_rps": None, "slo_met": None}]
    rows = predictions_table(decision, kids)
    assert [(r["name"], r["predicted_rank"], r["measured"], r["pruned"], r["measured_capacity_rps"], r["run_id"])
            for r in rows] == [("s=32", 1, True, False, 4.6, "a"), ("s=8", 2, False, True, None, "c"),
                               ("s=4", 3, False, True, None, None), ("s=16", None, True, False, 4.1, "b")]
    # Without pruning the ranks come from the children's own predictions.
    plain = predictions_table(None, [{"name": "x", "predicted_capacity_rps": 1.0, "capacity_rps": 2.0},
                                     {"name": "y", "predicted_capacity_rps": 3.0, "capacity_rps": 1.5}])
    assert [(r["name"], r["predicted_rank"], r["pruned"], r["measured_capacity_rps"]) for r in plain] == [
        ("y", 1, False, 1.5), ("x", 2, False, 2.0)]


@pytest.fixture
def multirun_config():
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    conf = Path(__file__).resolve().parents[2] / "conf"

    def load(overrides):
        return GlobalHydra.instance().config_loader().load_configuration("config", overrides,
                                                                         run_mode=RunMode.MULTIRUN)
    with initialize_config_dir(config_dir=str(conf), version_base=None):
        yield load


def test_every_job_is_predicted_under_its_run_name(multirun_config):
    from ascendflow.tracking.sweep_predictions import job_overrides, predict_sweep
    from ascendflow.tracking.sweep import swept_keys

    cfg = multirun_config(["+sweep=capacity", "engine.max_num_seqs=4,32", "graph=eager", "slo.measure_top=1"])
    assert job_overrides(cfg) == [["engine.max_num_seqs=4", "+sweep=capacity", "graph=eager", "slo.measure_top=1"],
                                  ["engine.max_num_seqs=32", "+sweep=capacity", "graph=eager", "slo.measure_top=1"]]
    got = predict_sweep(cfg, swept_keys(cfg))
    assert [g["name"] for g in got] == ["engine.max_num_seqs=4", "engine.max_num_seqs=32"]
    assert got[0]["predicted_capacity_rps"] < got[1]["predicted_capacity_rps"]
    # The preset's own space when the command line gives none (hydra.sweeper.params: engine.max_num_seqs 4,16).
    preset = multirun_config(["+sweep=capacity"])
    assert [o[0] for o in job_overrides(preset)] == ["engine.max_num_seqs=4", "engine.max_num_seqs=16"]


def test_a_config_the_model_cannot_price_is_not_predicted_with_its_reason(multirun_config):
    from ascendflow.tracking.sweep_predictions import predict_sweep

    cfg = multirun_config(["+sweep=capacity", "engine.max_num_seqs=4,8", "slo.p99_ttft_ms=null",
                           "slo.p99_tpot_ms=null"])
    got = predict_sweep(cfg, ["engine.max_num_seqs"])
    assert [(g["name"], g["predicted_capacity_rps"]) for g in got] == [("engine.max_num_seqs=4", None),
                                                                       ("engine.max_num_seqs=8", None)]
    assert [g["reason"] for g in got] == ["the model gave no capacity"] * 2  # no SLO target: no capacity to predict

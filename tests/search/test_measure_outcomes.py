"""``search.measure_top`` when a pick is not measured (new-user trial of 2026-12-03): the top pick's engine core
SIGKILLed during its benchmark was reported as "predicted best: <rank 2> ... measured best: the same" with
``search_best_held=1``, and a Ctrl-C while the top pick's engine started left both pick children FINISHED with no
sign that neither was measured. The decisions are driven here with real rows, the runner's real
:class:`EngineDiedError` message and a real SQLite MLflow store; the engine kill itself:
``tests/engine/test_search_measure.py::test_the_top_pick_s_engine_killed_mid_benchmark_is_not_measured``."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascendflow.search.measure import measure, summary_lines
from ascendflow.search.pick import verdict
from ascendflow.search.record import parent_fields, record_children, record_measured
from ascendflow.runner.server import EngineDiedError
from tests.helpers import mlflow_runs

#: The first line of the runner's error for an engine core killed mid-benchmark (runner/local.py, as printed in the
#: trial), its log path at the end.
DIED = ("engine died during the benchmark (/health refused the connection; 3 completed, 5 failed, partial result "
        "kept in benchmark.json): the engine core process exited unexpectedly (log: {log})")


def picks() -> list[tuple[dict, str]]:
    """The trial's two ranked picks (search.measure_top=1, one random control)."""
    top = {"id": 0, "kind": "colocated", "status": "ranked", "label": "TP1xDP1 eager s16 t2048 ×1 [none]", "rank": 1,
           "rps_per_device": 5.2, "capacity_rps": 5.2, "replicas": 1}
    control = {"id": 1, "kind": "colocated", "status": "ranked", "label": "TP1xDP1 eager s2 t2048 ×1 [none]",
               "rank": 2, "rps_per_device": 1.55, "capacity_rps": 1.55, "replicas": 1}
    return [(top, "top"), (control, "random")]


CAPACITY = {"capacity_rps": 1.41, "capacity_rps_per_device": 1.41, "capacity_load": 8.0,
            "capacity_p99_ttft_ms": 2100.0, "capacity_p99_tpot_ms": 180.0, "slo_met": True, "load_points": 1}


def test_an_unmeasured_predicted_best_is_not_reported_as_held(tmp_path: Path) -> None:
    chosen = picks()

    def serve(plan, spec, run_dir, status, secrets):  # the top pick's engine dies, the control's serves
        if run_dir.name.startswith("1_top"):
            raise EngineDiedError(DIED.format(log=run_dir / "engine.log") + "\nlast lines of the log", "benchmark")
        return {"capacity": CAPACITY}

    measured, warnings = measure(chosen, {0: None, 1: None}, {0: None, 1: None}, tmp_path, lambda m: None, {},
                                 serve=serve)
    top, control = (r for r, _ in chosen)
    log = tmp_path / "1_top_tp1xdp1_eager_s16_t2048_1_none" / "engine.log"
    assert [r["label"] for r in measured] == [control["label"]]
    assert (top["measure_state"], control["measure_state"]) == ("failed", "measured")
    # the log path once (it was "(log: X) (see X)")
    assert warnings == [f"TP1xDP1 eager s16 t2048 ×1 \\[none]: not measured, {DIED.format(log=log)}"]
    rows = [top, control]
    v = verdict(rows)
    assert (v["n"], v["picks"], v["failed"], v["rho"], v["held"]) == (1, 2, 1, None, None)
    assert v["predicted_best"] is top and v["measured_best"] is control
    assert summary_lines(rows, 2, 0) == [
        "measured 1 of 2 picks on this host (0 top, 1 random with search.measure_seed=0), capacity at the SLO in "
        "req/s per device, predicted → measured:",
        f"  top    rank 1   TP1xDP1 eager s16 t2048 ×1 [none]: 5.20 → not measured ({DIED.format(log=log)})",
        "  random rank 2   TP1xDP1 eager s2 t2048 ×1 [none]: 1.55 → 1.41",
        "rank correlation (Spearman) of predicted against measured capacity over 1: undefined (fewer than two "
        "measured, or all equal)",
        "predicted best: TP1xDP1 eager s16 t2048 ×1 [none] (rank 1) was not measured, so whether it held is unknown; "
        "best of the measured: TP1xDP1 eager s2 t2048 ×1 [none] (rank 2, measured 1.41)"]
    metrics, tags = parent_fields(v, 2)
    assert metrics == {"search_measured": 1.0, "search_measure_picks": 2.0, "search_measure_failed": 1.0,
                       "search_measured_best_rps": 1.41}  # no search_best_held, no rank correlation
    assert tags == {"search.predicted_best": top["label"], "search.measured_best": control["label"],
                    "search.predicted_best_error": DIED.format(log=log)}


def test_a_measured_predicted_best_keeps_its_verdict() -> None:
    top, control = (r for r, _ in picks())
    top.update(measured_rps_per_device=3.06, measured_slo_met=True, measure="top")
    control.update(measured_rps_per_device=1.41, measured_slo_met=True, measure="random")
    metrics, tags = parent_fields(verdict([top, control]), 2)
    assert metrics == {"search_measured": 2.0, "search_measure_picks": 2.0, "search_measure_failed": 0.0,
                       "search_rank_correlation": 1.0, "search_measured_best_rps": 3.06,
                       "search_predicted_best_measured_rps": 3.06, "search_best_held": 1.0}
    assert tags == {"search.predicted_best": top["label"], "search.measured_best": top["label"]}


def _children(uri: str, rows: list[dict]) -> dict[int, str]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("search")
    parent = client.create_run(exp, tags={"ascendflow.sweep": "parent"})
    return record_children(client, exp, parent.info.run_id, rows, "all")


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
def test_ctrl_c_while_the_top_pick_is_served_kills_its_child_and_marks_the_rest(tmp_path: Path, mlflow_uri: str,
                                                                                interrupt) -> None:
    from mlflow.tracking import MlflowClient

    from ascendflow.interrupts import Terminated

    exc = KeyboardInterrupt if interrupt is KeyboardInterrupt else Terminated
    chosen = picks()
    rows = [r for r, _ in chosen]
    for row, why in chosen:
        row["measure"] = why
    children = _children(mlflow_uri, rows)

    def serve(plan, spec, run_dir, status, secrets):  # Ctrl-C (or SIGTERM) lands while the first engine starts
        raise exc()

    with pytest.raises(exc):
        measure(chosen, {0: None, 1: None}, {0: None, 1: None}, tmp_path, lambda m: None, {}, serve=serve)
    assert [r["measure_state"] for r in rows] == ["interrupted", "not_measured"]
    assert record_measured(MlflowClient(tracking_uri=mlflow_uri), children, rows) == 0
    runs = {r.info.run_id: r for r in mlflow_runs(mlflow_uri)}
    top, control = runs[children[0]], runs[children[1]]
    assert (top.info.status, top.data.tags["error"], top.data.tags["search.measure"]) == ("KILLED", "interrupted",
                                                                                         "top")
    assert (control.info.status, control.data.tags["search.measure"], control.data.tags["search.measure_pick"]) == (
        "FINISHED", "not_measured", "random")
    assert not [k for r in (top, control) for k in r.data.metrics if k.startswith("measured_")]


def test_a_pick_whose_engine_failed_ends_failed_as_a_sweep_job(tmp_path: Path, mlflow_uri: str) -> None:
    from mlflow.tracking import MlflowClient

    chosen = picks()
    rows = [r for r, _ in chosen]

    def serve(plan, spec, run_dir, status, secrets):
        if run_dir.name.startswith("1_top"):
            raise EngineDiedError(DIED.format(log=run_dir / "engine.log"), "benchmark")
        return {"capacity": CAPACITY}

    measure(chosen, {0: None, 1: None}, {0: None, 1: None}, tmp_path, lambda m: None, {}, serve=serve)
    children = _children(mlflow_uri, rows)
    assert record_measured(MlflowClient(tracking_uri=mlflow_uri), children, rows) == 1
    runs = {r.info.run_id: r for r in mlflow_runs(mlflow_uri)}
    top, control = runs[children[0]], runs[children[1]]
    assert (top.info.status, top.data.tags["search.measure_error"]) == ("FAILED", rows[0]["measure_error"])
    assert control.info.status == "FINISHED" and control.data.metrics["measured_rps_per_device"] == 1.41

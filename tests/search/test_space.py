"""The search space, the refusal classes, the ranking (ties by interval), the Pareto front and the interval contract."""

from __future__ import annotations

import pytest

from ascendflow.modes.search import interval_ratio
from ascendflow.schema import ConfigError
from ascendflow.schema.search import SearchSpec
from ascendflow.search.evaluate import refusal_reason
from ascendflow.search.rank import margin_percent, nearest_slo, pareto_front, rank_rows
from ascendflow.search.space import Counts, Layout, colocated_layouts, knob_grid, pd_counts, role_layouts


def test_colocated_layouts_fill_whole_nodes_once_per_instance_size() -> None:
    search = SearchSpec(tensor_parallel_sizes=(8, 16), pipeline_parallel_sizes=(1, 2), expert_parallel=(False, True))
    assert colocated_layouts(search, nodes=2, devices_per_node=16, moe=True) == [
        Layout(1, 8, 1, 2, False), Layout(1, 8, 1, 2, True), Layout(1, 8, 2, 1, False), Layout(1, 8, 2, 1, True),
        Layout(1, 16, 1, 1, False), Layout(1, 16, 1, 1, True),
        Layout(2, 8, 1, 4, False), Layout(2, 8, 1, 4, True), Layout(2, 8, 2, 2, False), Layout(2, 8, 2, 2, True),
        Layout(2, 16, 1, 2, False), Layout(2, 16, 1, 2, True), Layout(2, 16, 2, 1, False), Layout(2, 16, 2, 1, True)]
    # a dense model: no EP; 3 nodes: instances of 1 and 3 nodes only (2 does not divide 3)
    assert [(x.nodes, x.tensor_parallel_size, x.data_parallel_size, x.enable_expert_parallel) for x in
            colocated_layouts(SearchSpec(tensor_parallel_sizes=(8,), pipeline_parallel_sizes=(1,)), 3, 8, False)] == [
        (1, 8, 1, False), (3, 8, 3, False)]


def test_role_layouts_and_pd_counts() -> None:
    search = SearchSpec(tensor_parallel_sizes=(4, 32), expert_parallel=(True,))
    # TP above one node's devices is not a PD role layout; an instance leaves a node for the other role
    assert role_layouts(search, nodes=2, devices_per_node=16, moe=True) == [Layout(1, 4, 1, 4, True)]
    assert pd_counts(4, 1, 1) == [(1, 1), (1, 2), (1, 3), (2, 1), (3, 1)]
    assert pd_counts(4, 1, 2) == [(1, 1), (2, 1)]
    assert pd_counts(4, 2, 3) == []


def test_knob_grid_and_counts_line() -> None:
    grid = knob_grid(SearchSpec(graph_modes=("NONE", "FULL_DECODE_ONLY"), max_num_seqs=(16,),
                                max_num_batched_tokens=(4096, 8192)))
    assert [k.label() for k in grid] == ["eager s16 t4096", "eager s16 t8192", "FDO s16 t4096", "FDO s16 t8192"]
    counts = Counts()
    counts.refuse("weights do not fit", 240)
    counts.refuse("KV below one max_model_len request", 72)
    assert counts.line() == "312 infeasible: 240 weights do not fit, 72 KV below one max_model_len request"
    assert Counts().line() == "0 infeasible"


@pytest.mark.parametrize("error, reason", [
    (ConfigError("engine.gpu_memory_utilization", 0.9, "leaves a negative KV budget on the bottleneck device: "
                 "requested 55.15 GiB − weights 59.16 − activation 0.70 − non-torch 0.94 GiB"), "weights do not fit"),
    (ConfigError("engine.gpu_memory_utilization", 0.9, "leaves a negative KV budget on the bottleneck device: "
                 "requested 55.15 GiB − weights 54.00 − activation 0.70 − non-torch 0.94 GiB"),
     "no KV budget after weights and overheads"),
    (ConfigError("parallel.data_parallel_size", 2, "a DP rank spanning nodes (TP×PP = 32 > 16) is planned with "
                 "data_parallel_size=1 only"), "a DP rank spanning nodes takes data_parallel_size=1"),
    (ConfigError("pd.decode.max_num_seqs", 64, "decode KV per DP rank holds 10 requests of 5000 tokens"),
     "decode KV below max_num_seqs requests"),
    (ConfigError("parallel.nic_name", "x", "something else"), "parallel.nic_name refused"),
])
def test_refusal_reason(error: ConfigError, reason: str) -> None:
    assert refusal_reason(error) == reason


def _row(label: str, tps: float, low: float | None = None, high: float | None = None, **extra) -> dict:
    row = {"label": label, "status": "ranked", "tps_per_device": tps, "tps_per_user": extra.pop("user", 20.0),
           "p99_tpot_ms": 40.0, "kind": "colocated", **extra}
    if low is not None:
        row["tps_low"], row["tps_high"] = low, high
    return row


def test_ties_by_interval_overlap() -> None:
    rows = [_row("c", 80.0, 70.0, 90.0), _row("a", 100.0, 91.0, 109.0), _row("b", 95.0, 85.0, 104.0),
            _row("d", 50.0, 45.0, 55.0), {"label": "x", "status": "infeasible"}]
    ranked = rank_rows(rows)
    assert [(r["label"], r["rank"], r["tie"]) for r in ranked] == [
        ("a", 1, False), ("b", 1, True), ("c", 3, False), ("d", 4, False)]
    # without intervals only an equal figure ties
    plain = rank_rows([_row("a", 100.0), _row("b", 100.0), _row("c", 99.0)])
    assert [(r["label"], r["rank"], r["tie"]) for r in plain] == [("a", 1, False), ("b", 1, True), ("c", 3, False)]


def test_pareto_front_margin_and_nearest_slo() -> None:
    rows = [_row("a", 100.0, user=10.0), _row("b", 80.0, user=30.0), _row("c", 70.0, user=20.0),
            _row("d", 100.0, user=10.0)]
    assert pareto_front(rows) == [0, 1, 3]
    assert margin_percent({"p99_ttft_ms": 1500.0, "p99_tpot_ms": 45.0}, {"p99_ttft_ms": 2000, "p99_tpot_ms": 50}) \
        == pytest.approx(10.0)
    near = nearest_slo([{"lowest": {"p99_ttft_ms": 2500.0, "p99_tpot_ms": 40.0}},
                        {"lowest": {"p99_ttft_ms": 900.0, "p99_tpot_ms": 70.0}}], {"p99_ttft_ms": 2000, "p99_tpot_ms": 50})
    assert near == {"p99_ttft_ms": 2500.0, "p99_tpot_ms": 40.0}


def test_interval_contract() -> None:
    assert interval_ratio({"capacity": {"capacity_rps": 2.0, "capacity_rps_low": 1.5, "capacity_rps_high": 2.5}}) \
        == (0.75, 1.25)
    assert interval_ratio({"predicted": {"output_throughput": 100.0}, "predicted_low": {"output_throughput": 80.0},
                           "predicted_high": {"output_throughput": 120.0}, "capacity": {"capacity_rps": 2.0}}) \
        == (0.8, 1.2)
    assert interval_ratio({"predicted": {"output_throughput": 100.0}, "interval": {"status": "no measured error"}}) \
        is None


def test_table_shows_labels_verbatim() -> None:
    """A quantization in brackets is text, not rich markup."""
    from rich.console import Console

    from ascendflow.search.output import table

    row = {**_row("TP2xDP4 FDO s16 t4096 ×2 [none]", 305.4), "rank": 1, "devices": 16, "capacity_rps": 19.09,
           "p99_ttft_ms": 875.0, "margin_percent": 48.7}
    console = Console(width=200, record=True)
    console.print(table([row], "t"))
    assert "TP2xDP4 FDO s16 t4096 ×2 [none]" in console.export_text()

"""The terminal table of ``python -m ascendflow.compare``: empty columns dropped, a capacity sweep shows its
capacity columns (the CSV keeps every column)."""

from __future__ import annotations

import math

import pandas as pd

from ascendflow.compare import terminal_view


def test_capacity_sweep_view_keeps_run_swept_keys_and_capacity_columns():
    table = pd.DataFrame({
        "run": ["engine.max_num_seqs=4", "engine.max_num_seqs=16"], "status": ["FINISHED", "FINISHED"],
        "measured": [False, True], "engine.max_num_seqs": ["4", "16"],
        "capacity_rps": [math.nan, 4.0], "predicted_capacity_rps": [1.93, 4.05], "capacity_load": [math.nan, 18.0],
        "slo_met": [math.nan, 1.0], "output_throughput": [math.nan, 512.0], "p99_ttft_ms": [math.nan, 1900.0],
        "kv_cache_tokens_rel_error": [math.nan, math.nan],
    })
    assert list(terminal_view(table).columns) == ["run", "status", "engine.max_num_seqs", "measured", "capacity_rps",
                                                  "predicted_capacity_rps", "capacity_load", "slo_met"]


def test_serve_sweep_view_drops_only_empty_columns():
    table = pd.DataFrame({"run": ["a", "b"], "status": ["FINISHED", "FAILED"], "engine.seed": ["0", "1"],
                          "output_throughput": [100.0, math.nan], "p99_ttft_ms": [50.0, math.nan],
                          "kv_cache_tokens_rel_error": [math.nan, math.nan]})
    assert list(terminal_view(table).columns) == ["run", "status", "engine.seed", "output_throughput", "p99_ttft_ms"]


def test_cells_show_whole_numbers_whole_and_missing_values_as_a_dash():
    from ascendflow.compare import cell

    assert [cell(v) for v in (46592.0, 3.3812, math.nan, 0.0, 1.0, "FINISHED", 0.5, True)] == [
        "46,592", "3.38", "—", "0", "1", "FINISHED", "0.50", "True"]

"""Top operators by self time from a Chrome trace with nested operators on two threads."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from ascendflow.profiling import find_traces, format_table, top_ops


def _op(name: str, ts: float, dur: float, tid: int = 1) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": dur, "pid": 7, "tid": tid}


def test_self_time_subtracts_direct_children(tmp_path: Path) -> None:
    events = [_op("aten::linear", 0, 100), _op("aten::matmul", 10, 30), _op("aten::mm", 15, 10),
              _op("aten::add", 50, 20), _op("aten::linear", 200, 10), _op("aten::mm", 0, 30, tid=2),
              {"ph": "X", "cat": "kernel", "name": "ignored", "ts": 0, "dur": 999, "pid": 7, "tid": 3}]
    trace = tmp_path / "worker0.pt.trace.json.gz"
    with gzip.open(trace, "wt") as f:
        json.dump({"traceEvents": events}, f)
    assert find_traces(tmp_path) == [trace]
    assert top_ops(trace) == [
        {"name": "aten::linear", "calls": 2, "total_ms": 0.06, "share": round(60 / 140, 4)},
        {"name": "aten::mm", "calls": 2, "total_ms": 0.04, "share": round(40 / 140, 4)},
        {"name": "aten::matmul", "calls": 1, "total_ms": 0.02, "share": round(20 / 140, 4)},
        {"name": "aten::add", "calls": 1, "total_ms": 0.02, "share": round(20 / 140, 4)},
    ]
    assert format_table(top_ops(trace, n=1)).splitlines() == [
        f"{'operator':<48} {'calls':>8} {'self ms':>10} {'share':>7}",
        f"{'aten::linear':<48} {2:>8} {0.06:>10.2f} {42.9:>6.1f}%"]


def test_traces_without_operators_are_skipped(tmp_path: Path) -> None:
    from ascendflow.profiling import summarize_profile

    (tmp_path / "profile").mkdir()
    front = {"ph": "X", "cat": "python_function", "name": "f", "ts": 0, "dur": 5, "pid": 1, "tid": 1}
    with gzip.open(tmp_path / "profile" / "api.async_llm.1.pt.trace.json.gz", "wt") as f:
        json.dump({"traceEvents": [front]}, f)
    assert summarize_profile(tmp_path) == {
        "traces": ["api.async_llm.1.pt.trace.json.gz"], "top_ops": {},
        "error": f"no trace in {tmp_path / 'profile'} has operator (cpu_op) events"}
    with gzip.open(tmp_path / "profile" / "rank0.2.pt.trace.json.gz", "wt") as f:
        json.dump({"traceEvents": [_op("aten::mm", 0, 10)]}, f)
    result = summarize_profile(tmp_path, n=5)
    assert result == {"traces": ["api.async_llm.1.pt.trace.json.gz", "rank0.2.pt.trace.json.gz"],
                      "top_ops": {"rank0.2.pt.trace.json.gz": [{"name": "aten::mm", "calls": 1, "total_ms": 0.01,
                                                                "share": 1.0}]}}
    assert json.loads((tmp_path / "profile" / "top_ops.json").read_text()) == result["top_ops"]

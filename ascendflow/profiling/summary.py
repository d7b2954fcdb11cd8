"""After a profiled run: the top operators of each worker's trace, written beside it and printed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .ops import find_traces, format_table, top_ops
from .switches import PROFILE_DIR

#: Operators listed per trace.
TOP_N = 20


def summarize_profile(run_dir: Path, n: int = TOP_N) -> dict[str, Any]:
    """Rank the operators of every trace in ``<run_dir>/profile`` by self time; write ``top_ops.json`` and
    ``top_ops.txt`` there, print the table, and return ``{"traces": [names], "top_ops": {trace: rows}}``.

    A run whose profiler wrote no trace returns ``{"traces": [], "top_ops": {}, "error": <one line>}`` instead of
    failing the run (the benchmark itself completed).
    """
    profile_dir = run_dir / PROFILE_DIR
    traces = find_traces(profile_dir) if profile_dir.is_dir() else []
    if not traces:
        return {"traces": [], "top_ops": {}, "error": f"vLLM's profiler wrote no trace into {profile_dir}"}
    tables = {}
    for trace in traces:
        try:
            tables[trace.name] = top_ops(trace, n)
        except ValueError:
            continue  # the API server's own trace (async_llm) records Python functions only, no operators
    if not tables:
        return {"traces": [t.name for t in traces], "top_ops": {},
                "error": f"no trace in {profile_dir} has operator (cpu_op) events"}
    (profile_dir / "top_ops.json").write_text(json.dumps(tables, indent=1) + "\n")
    text = "\n\n".join(f"{name}: top {n} operators by self time\n{format_table(rows)}" for name, rows in tables.items())
    (profile_dir / "top_ops.txt").write_text(text + "\n")
    print(text, flush=True)
    return {"traces": [t.name for t in traces], "top_ops": tables}

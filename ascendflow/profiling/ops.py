"""Top operators by self time from a torch profiler Chrome trace (``*.pt.trace.json[.gz]``).

Self time of a CPU operator (``"ph": "X"``, ``"cat": "cpu_op"``) is its duration minus the durations of the
operators directly nested in it on the same thread (the definition of torch's ``key_averages`` ``self_cpu_time``).
Operators are grouped by name; ``share`` is the group's self time over the sum of all self times.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any


def find_traces(profile_dir: Path) -> list[Path]:
    """Chrome traces written by vLLM's workers into ``profile_dir`` (sorted by name)."""
    return sorted([*profile_dir.glob("*.pt.trace.json.gz"), *profile_dir.glob("*.pt.trace.json")])


def _events(trace: Path) -> list[dict[str, Any]]:
    opener = gzip.open if trace.suffix == ".gz" else open
    with opener(trace, "rt") as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    return [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op" and "dur" in e]


def top_ops(trace: Path, n: int = 15) -> list[dict[str, Any]]:
    """The ``n`` operators with the most self time: ``[{"name", "calls", "total_ms", "share"}]``, largest first.

    Raises:
        ValueError: the trace has no CPU operator events.
    """
    events = _events(trace)
    if not events:
        raise ValueError(f"{trace} has no cpu_op events")
    by_thread: dict[tuple, list[dict[str, Any]]] = {}
    for e in events:
        by_thread.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    self_us: dict[str, float] = {}
    calls: dict[str, int] = {}
    for evs in by_thread.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: list[list] = []  # [end_ts, name, child_us]
        for e in evs:
            while stack and stack[-1][0] <= e["ts"]:
                end, name, child = stack.pop()
                self_us[name] = self_us.get(name, 0.0) - child
            if stack:
                stack[-1][2] += e["dur"]
            self_us[e["name"]] = self_us.get(e["name"], 0.0) + e["dur"]
            calls[e["name"]] = calls.get(e["name"], 0) + 1
            stack.append([e["ts"] + e["dur"], e["name"], 0.0])
        for _end, name, child in stack:
            self_us[name] = self_us.get(name, 0.0) - child
    total = sum(self_us.values())
    ranked = sorted(self_us.items(), key=lambda kv: -kv[1])[:n]
    return [{"name": name, "calls": calls[name], "total_ms": round(us / 1000, 3),
             "share": round(us / total, 4) if total else 0.0} for name, us in ranked]


def format_table(rows: list[dict[str, Any]]) -> str:
    """A fixed-width text table of :func:`top_ops` rows (operator, calls, self ms, share %)."""
    lines = [f"{'operator':<48} {'calls':>8} {'self ms':>10} {'share':>7}"]
    for r in rows:
        lines.append(f"{r['name'][:48]:<48} {r['calls']:>8} {r['total_ms']:>10.2f} {100 * r['share']:>6.1f}%")
    return "\n".join(lines)

"""Time ``run.mode=search`` on the acceptance searches; writes ``outputs/bench/search_speed.json``.

Each search is one ``python -m ascendflow run.mode=search ...`` subprocess (imports, the search, the table, the
Pareto PNG, the top-k recipes and the MLflow children in a fresh SQLite store), timed wall and CPU (the child's
user + system time: the machine may be shared, and CPU time is what 2 idle cores would take at most). Reported per
search: wall and CPU seconds of the whole command, the search's own seconds (``candidates.json``), candidates
enumerated, infeasible by reason, pruned, ranked, and the top pick.

Usage: ``python benchmarks/search_speed.py [--only NAME]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMON = ["run.mode=search", "hardware=atlas_800i_a3", "quantization=w8a8_ascend", "workload=random",
          "workload.random_input_len=3500", "workload.random_output_len=1500", "slo.p99_ttft_ms=2000",
          "slo.p99_tpot_ms=50", "engine.max_model_len=8192"]
#: The issue's acceptance searches: name -> overrides.
SEARCHES = {
    "qwen3_235b_w8a8_2xa3": ["model=qwen3_235b_a22b", "search.nodes=2"],
    "qwen3_235b_w8a8_4xa3": ["model=qwen3_235b_a22b", "search.nodes=4"],
    "deepseek_r1_w8a8_4xa3": ["model=deepseek_r1", "search.nodes=4"],
}


def run_one(name: str, overrides: list[str], work: Path) -> dict:
    """One search in ``work`` (its own outputs/ and MLflow store)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "ascendflow", *COMMON, *overrides], cwd=work, env=env, text=True,
                          capture_output=True, timeout=1800)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    found = sorted(work.glob("outputs/runs/*/*/search/candidates.json"))
    out = {"name": name, "overrides": overrides, "returncode": proc.returncode, "wall_s": round(wall, 1),
           "cpu_s": round(cpu, 1)}
    if proc.returncode or not found:
        out["stderr_tail"] = proc.stderr[-2000:]
        return out
    data = json.loads(found[-1].read_text())
    rows = data["candidates"]
    ranked = [r for r in rows if r.get("rank")]
    top = min(ranked, key=lambda r: r["rank"]) if ranked else None
    out.update({"search_s": round(data["seconds"], 1), "search_cpu_s": round(data.get("cpu_seconds", 0.0), 1),
                "enumerated": data["counts"]["enumerated"],
                "infeasible": data["counts"]["infeasible"], "pruned": data["counts"]["pruned"],
                "ranked": len(ranked), "recipes": sorted(r["recipe"] for r in rows if r.get("recipe")),
                "top": None if top is None else {k: top.get(k) for k in ("label", "tps_per_device", "tps_low",
                                                                         "tps_high", "capacity_rps", "devices")}})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(SEARCHES))
    args = parser.parse_args()
    results = []
    for name, overrides in SEARCHES.items():
        if args.only and name != args.only:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            results.append(run_one(name, overrides, Path(tmp)))
        print(json.dumps(results[-1], indent=1))
    dest = ROOT / "outputs" / "bench" / "search_speed.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M"), "cores": os.cpu_count(),
                                "loadavg_1m": os.getloadavg()[0], "searches": results}, indent=1))
    print(f"wrote {dest}")
    return 0 if all(r["returncode"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())

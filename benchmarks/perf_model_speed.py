"""Prediction time of the performance model against workload size; writes ``outputs/bench/perf_model_speed.json``.

One prediction is :func:`ascendflow.perfmodel.predict.predict_metrics` (the scheduler simulation over every DP rank,
priced by the plan's step model) on a plan compiled from the public rows of
``../shared/reference/ascend_perf_training.md`` (plan mode, no engine). Measured: a grid of requests (100 … 3,000) ×
tokens per request (1k … 10k, 70 % prompt) on the Qwen3-32B W8A8 TP4 A2 plan (row M2) at concurrency 256, the
issue's case of 1,000 requests of 4k in / 1.5k out, and the large public workloads (rows M2, M12, L3, L7) as
published. Printed: seconds per prediction and how they grow with requests × tokens (the log-log slope).
``--old PATH`` also times a scheduler module at PATH (e.g. the token-by-token one from git history) on the cases
of ``--old-cases`` (the old one takes minutes each). Usage: ``python benchmarks/perf_model_speed.py [--quick]
[--old PATH [--old-cases a,b]]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hydra import compose, initialize_config_dir  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from ascendflow.models.resolve import resolve_model  # noqa: E402
from ascendflow.perfmodel import predict as P  # noqa: E402
from ascendflow.runner.detect import compile_for_this_host  # noqa: E402
from ascendflow.schema.spec import load_spec  # noqa: E402

OUT = ROOT / "outputs" / "bench" / "perf_model_speed.json"
COMMON = ("run.mode=plan tracking=none slo.p99_ttft_ms=null slo.p99_tpot_ms=null workload=random "
          "workload.ignore_eos=true engine.block_size=128 engine.enable_prefix_caching=false")
#: The public rows' commands (``ascend_perf_training.md`` section 2), less ``COMMON``.
ROWS = {
    "M2": "hardware=atlas_800i_a2 hardware.software=vllm-ascend-0.25.1rc1 model=qwen3_32b quantization=w8a8_ascend "
          "parallel=tp4 graph=full_decode_only engine.max_model_len=40960 engine.max_num_batched_tokens=40960 "
          "engine.max_num_seqs=null workload.random_input_len=3500 workload.random_output_len=1500 "
          "workload.num_prompts=288 workload.max_concurrency=72",
    "M12": "hardware=atlas_800i_a3 hardware.software=vllm-ascend-0.13.0 model=qwen3_235b_a22b quantization=w8a8_ascend "
           "parallel=tp4_dp4_ep graph=full_decode_only engine.max_model_len=40960 engine.max_num_batched_tokens=16384 "
           "engine.max_num_seqs=128 engine.gpu_memory_utilization=0.9 workload.random_input_len=3584 "
           "workload.random_output_len=1536 workload.num_prompts=720 workload.max_concurrency=144 "
           "workload.request_rate=24",
    "L3": "hardware=atlas_800i_a2 hardware.software=vllm-ascend-0.25.1rc1 model=qwen3_235b_a22b "
          "parallel=tp8_dp2_ep_2nodes graph=full_and_piecewise engine.max_model_len=40960 "
          "engine.max_num_batched_tokens=2048 engine.max_num_seqs=128 engine.gpu_memory_utilization=0.9 "
          "workload.random_input_len=3500 workload.random_output_len=1500 workload.num_prompts=2800 "
          "workload.max_concurrency=256 workload.request_rate=4.8",
    "L7": "hardware=atlas_800i_a3 hardware.software=vllm-ascend-0.25.1rc1 model=deepseek_r1 "
          "parallel.tensor_parallel_size=8 parallel.data_parallel_size=4 parallel.enable_expert_parallel=true "
          "parallel.nodes=2 graph=eager engine.max_model_len=8192 engine.max_num_batched_tokens=4096 "
          "engine.max_num_seqs=16 engine.num_speculative_tokens=1 engine.speculative_method=deepseek_mtp "
          "engine.gpu_memory_utilization=0.95 workload.random_input_len=3500 workload.random_output_len=512 "
          "workload.num_prompts=512 workload.max_concurrency=700 workload.request_rate=11.2",
}
#: The issue's case on the M2 plan: 1,000 requests of 4k in / 1.5k out, all at once, 256 in flight.
ISSUE_CASE = ("M2", "workload.random_input_len=4096 workload.random_output_len=1536 workload.num_prompts=1000 "
                    "workload.max_concurrency=256 engine.max_num_seqs=256")


def build(row: str, extra: str = ""):
    """``(plan dict, workload spec, step model)`` of a row's command with ``extra`` overrides."""
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=f"{COMMON} {ROWS[row]} {extra}".split())
    spec = load_spec(OmegaConf.to_container(cfg, resolve=True))
    plan = json.loads(compile_for_this_host(spec, resolve_model(spec.model, need_weights=False)).to_json())
    step, _ = P.step_model(plan, spec.hardware.model_dump(), None)
    return plan, spec.workload, step


def timed(fn, repeat: int = 1) -> tuple[float, dict, float]:
    """Best wall time (s) of ``repeat`` calls of ``fn``, its last result and the best process CPU time (s): on a
    shared machine the wall time counts other processes' turns, the CPU time does not."""
    best, out, cpu = math.inf, {}, math.inf
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        best, cpu = min(best, time.perf_counter() - t), min(cpu, time.process_time() - c)
    return best, out, cpu


def old_predict(module, plan, workload, step) -> dict:
    """One prediction with another scheduler module (DP ignored, as before the DP split)."""
    req = P.workload_requests(workload, None)
    return module.simulate(req, P.limits_of(plan), step, max_concurrency=workload.max_concurrency,
                           request_rate=workload.request_rate, seed=workload.seed).metrics()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a 3 × 3 grid instead of 4 × 4")
    ap.add_argument("--old", type=Path, help="also time this scheduler module on the cases of --old-cases")
    ap.add_argument("--old-cases", default="issue_1000x4k_1.5k,M2", help="comma-separated named cases for --old")
    args = ap.parse_args()
    old = None
    if args.old:
        spec = importlib.util.spec_from_file_location("old_scheduler", args.old)
        old = importlib.util.module_from_spec(spec)
        sys.modules["old_scheduler"] = old  # dataclasses look their module up
        spec.loader.exec_module(old)
    grid_req = [100, 300, 1000] if args.quick else [100, 300, 1000, 3000]
    grid_tok = [1000, 4000, 10000] if args.quick else [1000, 2500, 5500, 10000]
    plan, base, step = build("M2", "workload.max_concurrency=256 engine.max_num_seqs=256")
    grid = []
    for n in grid_req:
        for tok in grid_tok:
            w = base.model_copy(update={"num_prompts": n, "random_input_len": int(tok * 0.7),
                                        "random_output_len": tok - int(tok * 0.7)})
            s, m, c = timed(lambda: P.predict_metrics(plan, w, step))
            grid.append({"requests": n, "tokens": tok, "seconds": round(s, 4), "cpu_seconds": round(c, 4),
                         "steps": m["steps"]})
            print(f"grid {n:5d} req × {tok:5d} tok: {s:7.3f} s wall, {c:7.3f} s CPU ({m['steps']} steps)", flush=True)
    xs = [math.log(g["requests"] * g["tokens"]) for g in grid]
    ys = [math.log(max(g["cpu_seconds"], 1e-4)) for g in grid]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    named = {}
    for name, (row, extra) in {"issue_1000x4k_1.5k": ISSUE_CASE, **{r: (r, "") for r in ROWS}}.items():
        plan_r, w, step_r = build(row, extra)
        s, m, c = timed(lambda: P.predict_metrics(plan_r, w, step_r), repeat=2)
        entry = {"requests": w.num_prompts, "input": w.random_input_len, "output": w.random_output_len,
                 "dp": int(plan_r["engine_args"].get("data_parallel_size") or 1),
                 "max_num_seqs": plan_r["engine_args"]["max_num_seqs"], "seconds": round(s, 4),
                 "cpu_seconds": round(c, 4), "steps": m["steps"], "output_throughput": round(m["output_throughput"], 2)}
        if old is not None and name in args.old_cases.split(","):
            s_old, m_old, c_old = timed(lambda: old_predict(old, plan_r, w, step_r))
            entry["old_seconds_dp_ignored"], entry["old_cpu_seconds_dp_ignored"] = round(s_old, 3), round(c_old, 3)
            entry["old_output_throughput_dp_ignored"] = round(m_old["output_throughput"], 2)
        named[name] = entry
        print(f"{name:20s} {entry}", flush=True)
    out = {"what": "seconds per prediction (predict_metrics: scheduler simulation x step model), wall and CPU, "
                   "2 cores shared with other jobs (load average in 'load')", "load": list(os.getloadavg()),
           "date": time.strftime("%Y-%m-%d"), "grid": grid,
           "growth_loglog_slope_cpu_seconds_vs_requests_x_tokens": round(slope, 3), "named": named}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(f"growth: CPU seconds ∝ (requests × tokens)^{slope:.2f}; written {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

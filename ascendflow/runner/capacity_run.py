"""``run.mode=capacity``: one engine start, then the load points of an SLO capacity search against it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ascendflow.capacity.search import History, LoadRange, capacity_summary, load_range
from ascendflow.compiler import Plan
from ascendflow.runner.bench import bench_argv, tokenizer_for
from ascendflow.runner.engine_log import parse_engine_log_file
from ascendflow.runner.engine_metrics import WindowMetrics
from ascendflow.runner.contention import HostWindow
from ascendflow.runner.local import Serving, Status, check_alive_after, run_bench_client, serving
from ascendflow.schema.spec import RunSpec

#: Per-point fields kept in ``capacity/points.json`` and the load curve (vLLM result keys).
POINT_KEYS = ("completed", "failed", "duration", "request_throughput", "request_goodput", "output_throughput",
              "median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms", "p99_itl_ms", "p99_e2el_ms")


def _workload_at(spec: RunSpec, load: float):
    """The run's workload with the searched load set (concurrency with all requests sent at once, or a rate)."""
    if spec.slo.variable == "max_concurrency":
        return spec.workload.model_copy(update={"max_concurrency": int(load), "request_rate": math.inf})
    return spec.workload.model_copy(update={"request_rate": float(load), "max_concurrency": None})


def serve_and_search(plan: Plan, spec: RunSpec, run_dir: Path, status: Status,
                     secrets: dict[str, str] | None = None) -> dict[str, Any]:
    """Start the server once, measure load points until the SLO capacity is bracketed (:mod:`ascendflow.capacity.
    search`), stop the server.

    Each point is one run of vLLM's benchmark client with the same workload (``workload.num_prompts`` requests) at
    one load; its result is ``capacity/point_<n>.json`` (log ``capacity/point_<n>.log``), the engine's ``/metrics``
    over it included. ``capacity/points.json`` holds every point with its margin.

    Returns:
        ``{"benchmark": <the result at the capacity point, else the lowest load's>, "capacity": <capacity_summary +
        "variable", "targets", "points">, "engine": ..., "engine_start_s": s, "port": int, "engine_metrics": ...,
        "contention": <the host over every point, :meth:`ascendflow.runner.contention.Contention.to_json`>}``.

    Raises:
        ConfigError: the SLO or its load range is unusable (before the engine starts).
        EngineStartError / EngineDiedError: as :func:`ascendflow.runner.local.serve_and_benchmark`; the points
            measured so far stay in ``capacity/``.
    """
    load_range(spec.slo, spec.workload)  # a bad SLO is refused before the engine starts
    host = HostWindow()  # the engine and every point's client are this process's children
    host.before()
    with serving(plan, spec, run_dir, status, secrets) as srv:
        status(f"engine healthy after {srv.start_s:.0f} s")
        host.begin()
        result = search_capacity(plan, spec, run_dir, status, srv)
        contention = host.end()
    return {**result, "engine": parse_engine_log_file(srv.log_path), "engine_start_s": srv.start_s,
            "contention": contention.to_json()}


def search_capacity(plan: Plan, spec: RunSpec, run_dir: Path, status: Status, srv: Serving) -> dict[str, Any]:
    """Measure load points against the healthy server ``srv`` (local, or a running deployment for
    ``run.mode=attach``) until the SLO capacity is bracketed; see :func:`serve_and_search` for the files written.

    Returns:
        ``{"benchmark", "capacity", "port", "engine_metrics"}`` as :func:`serve_and_search` (without the engine's
        log facts and start time).

    Raises:
        ConfigError: the SLO or its load range is unusable.
        EngineDiedError / EngineStartError: the server died, or the client failed, during a point.
    """
    loads: LoadRange = load_range(spec.slo, spec.workload)
    targets = spec.slo.targets
    goodput = {k.removeprefix("p99_").removesuffix("_ms"): v for k, v in targets.items()}
    out = run_dir / "capacity"
    out.mkdir(parents=True, exist_ok=True)
    history = History(loads)
    metrics_by_load: dict[float, dict[str, float]] = {}
    status(f"capacity search over {loads.variable} {loads.low:g}…{loads.high:g}")
    while (load := history.next_load(spec.slo.max_points)) is not None:
        n = len(history.margins)
        args = bench_argv(_workload_at(spec, load), base_url=srv.base_url, served_model_name=spec.model.served_name,
                          tokenizer=tokenizer_for(plan), run_dir=run_dir,
                          result_filename=f"capacity/point_{n}.json", goodput=goodput)
        window = WindowMetrics(srv.base_url, srv.api_key)
        status(f"load point {n + 1}: {loads.variable}={load:g}")
        result = run_bench_client(args, run_dir, spec, lambda m, n=n, load=load: status(
            f"load point {n + 1} ({loads.variable}={load:g}): {m}"), srv.server, srv.health_url, srv.api_key,
            result_path=out / f"point_{n}.json", log_path=out / f"point_{n}.log", window=window)
        metrics_by_load[load] = window.finish()
        m = history.add(load, result, targets)
        _write_points(out / "points.json", history, metrics_by_load, loads, targets)
        status(f"{loads.variable}={load:g}: " + ", ".join(f"{k} {result.get(k, 0):.0f} ms" for k in targets)
               + (" meets the SLO" if m <= 0 else " misses the SLO"))
    best = history.best_passing()
    shown = best if best is not None else min(history.points)
    check_alive_after(srv, history.points[shown])
    status("capacity search done")
    summary = {**capacity_summary(history, spec.parallel.world_size),
               "variable": loads.variable, "targets": targets,
               "points": json.loads((out / "points.json").read_text())}
    return {"benchmark": history.points[shown], "capacity": summary, "port": srv.port,
            "engine_metrics": metrics_by_load.get(shown, {})}


def _write_points(path: Path, history: History, metrics: dict[float, dict[str, float]], loads: LoadRange,
                  targets: dict[str, float]) -> None:
    rows = [{"load": x, "margin": history.margins[x], "meets_slo": history.margins[x] <= 0,
             **{k: history.points[x].get(k) for k in POINT_KEYS}, **metrics.get(x, {})}
            for x in sorted(history.margins)]
    path.write_text(json.dumps({"variable": loads.variable, "targets": targets, "order": list(history.margins),
                                "points": rows}, indent=2, default=str))

"""The value a job returns to Hydra sweepers (Optuna), from its measured metrics and the run's SLO."""

from __future__ import annotations

from typing import Mapping

from ascendflow.schema.run import RunOptions

#: p99 TTFT (ms) reported for a failed job in two-objective searches: worse than any real measurement.
FAILED_TTFT_MS = 1e9


def objective(run: RunOptions, metrics: Mapping[str, float] | None) -> float | tuple[float, float]:
    """``output_throughput`` (tokens/s), ``(output_throughput, p99_ttft_ms)`` for ``throughput_and_p99_ttft``, or
    ``capacity_rps`` (requests/s at the SLO; 0 for a failed job or one whose lowest load missed the SLO).

    A failed job (``metrics`` is ``None`` or nothing completed) scores 0 tokens/s (and :data:`FAILED_TTFT_MS`); a job
    whose p99 TTFT exceeds ``run.slo_p99_ttft_ms`` scores 0 tokens/s, so a search moves away from both. A job with
    some failed requests (at most ``run.max_failed_fraction`` of them; more fail the job) scores its throughput
    times ``completed / (completed + failed)``: vLLM's ``output_throughput`` counts only completed requests' tokens
    over the whole duration, so without the factor a configuration that drops requests could outrank one that
    serves them all.
    """
    if run.objective == "capacity_rps":
        return float((metrics or {}).get("capacity_rps", 0.0))
    ok = bool(metrics) and metrics.get("completed", 0) > 0
    throughput = float(metrics.get("output_throughput", 0.0)) if ok else 0.0
    if ok and metrics.get("failed", 0) > 0:
        completed, failed = float(metrics["completed"]), float(metrics["failed"])
        throughput *= completed / (completed + failed)
    p99_ttft = float(metrics.get("p99_ttft_ms", FAILED_TTFT_MS)) if ok else FAILED_TTFT_MS
    if run.slo_p99_ttft_ms is not None and p99_ttft > run.slo_p99_ttft_ms:
        throughput = 0.0
    if run.objective == "throughput_and_p99_ttft":
        return throughput, p99_ttft
    return throughput

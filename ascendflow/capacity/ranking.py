"""The sweep's answer: server configs ranked by capacity at the SLO (pure; :mod:`ascendflow.tracking.capacity_ranking`
writes it, with the Pareto front of capacity against p99 TTFT, on the sweep's parent MLflow run)."""

from __future__ import annotations

from typing import Any, Sequence


def rank(children: Sequence[Any]) -> list[dict[str, Any]]:
    """Rank finished capacity-search children (MLflow ``Run`` objects with a ``capacity_rps`` metric).

    Order: configs that met the SLO by capacity (req/s) descending, ties by lower p99 TTFT; then those that met it
    at no load. ``pareto`` marks configs no other config beats on both capacity (higher) and p99 TTFT at capacity
    (lower).

    Returns:
        ``{"rank", "name", "run_id", "capacity_rps", "capacity_rps_per_device", "capacity_load",
        "capacity_goodput_rps", "capacity_p99_ttft_ms", "capacity_p99_tpot_ms", "slo_met", "pareto"}`` per config.
    """
    rows = []
    for run in children:
        m = run.data.metrics
        if "capacity_rps" not in m:
            continue
        rows.append({"name": run.data.tags.get("mlflow.runName", run.info.run_id), "run_id": run.info.run_id,
                     **{k: float(m.get(k, 0.0)) for k in ("capacity_rps", "capacity_rps_per_device",
                                                          "capacity_load", "capacity_goodput_rps",
                                                          "capacity_p99_ttft_ms", "capacity_p99_tpot_ms")},
                     "slo_met": bool(m.get("slo_met", 0.0))})
    met = [r for r in rows if r["slo_met"]]
    for r in rows:
        r["pareto"] = r["slo_met"] and not any(
            o is not r and o["capacity_rps"] >= r["capacity_rps"] and o["capacity_p99_ttft_ms"] <=
            r["capacity_p99_ttft_ms"] and (o["capacity_rps"], -o["capacity_p99_ttft_ms"]) !=
            (r["capacity_rps"], -r["capacity_p99_ttft_ms"]) for o in met)
    ordered = (sorted(met, key=lambda r: (-r["capacity_rps"], r["capacity_p99_ttft_ms"]))
               + sorted((r for r in rows if not r["slo_met"]), key=lambda r: r["name"]))
    for i, r in enumerate(ordered, 1):
        r["rank"] = i
    return ordered


def pruned_rows(children: Sequence[Any]) -> list[dict[str, Any]]:
    """Children a ``slo.measure_top`` sweep did not measure (tag ``capacity.pruned=true``), for the ranking:
    ``{"rank": None, "name", "run_id", "pruned": True, "predicted_capacity_rps", "predicted_rank", "reason"}``, by
    predicted rank."""
    rows = [{"rank": None, "name": run.data.tags.get("mlflow.runName", run.info.run_id), "run_id": run.info.run_id,
             "pruned": True, "predicted_capacity_rps": run.data.metrics.get("predicted_capacity_rps"),
             "predicted_rank": run.data.metrics.get("predicted_rank"),
             "reason": run.data.tags.get("capacity.pruned_reason", "")}
            for run in children if run.data.tags.get("capacity.pruned") == "true"]
    return sorted(rows, key=lambda r: (r["predicted_rank"] is None, r["predicted_rank"] or 0))

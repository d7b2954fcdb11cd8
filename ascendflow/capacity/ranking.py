"""The sweep's answer: server configs ranked by capacity at the SLO, with the Pareto front of capacity against
p99 TTFT, written on the sweep's parent MLflow run."""

from __future__ import annotations

import json
from pathlib import Path
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


def record_on_parent(client: Any, parent_id: str, children: Sequence[Any], work_dir: Path,
                     pruning: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Write ``capacity_ranking.json`` (measured configs ranked, ``"pruned": false``; then the pruned ones,
    ``"pruned": true``, rank ``None``), ``capacity_predictions.json`` (:func:`ascendflow.capacity.pruning.
    predictions_table`: predicted against measured capacity per config) and ``capacity_pareto.png`` (measured
    configs) into ``work_dir`` and onto the parent run, with metrics ``best_capacity_rps`` / ``configs_meeting_slo``
    / ``configs_pruned`` and tag ``best_config``; returns the ranking (empty when no child was a capacity search:
    nothing is written). ``pruning``: the sweep's ``slo.measure_top`` decision, ``None`` when all were measured."""
    from ascendflow.capacity.plot import plot_pareto
    from ascendflow.capacity.pruning import predictions_table

    measured = rank(children)
    if not measured:
        return measured
    pruned = pruned_rows(children)
    rows = [{**r, "pruned": False} for r in measured] + pruned
    work_dir.mkdir(parents=True, exist_ok=True)
    ranking = work_dir / "capacity_ranking.json"
    ranking.write_text(json.dumps(rows, indent=2))
    table = predictions_table(pruning, [
        {"name": run.data.tags.get("mlflow.runName", run.info.run_id), "run_id": run.info.run_id,
         "predicted_capacity_rps": run.data.metrics.get("predicted_capacity_rps"),
         "capacity_rps": run.data.metrics.get("capacity_rps"),
         "slo_met": bool(run.data.metrics["slo_met"]) if "slo_met" in run.data.metrics else None}
        for run in children])
    predictions = work_dir / "capacity_predictions.json"
    predictions.write_text(json.dumps(table, indent=2))
    png = plot_pareto(measured, work_dir / "capacity_pareto.png",
                      "capacity at the SLO vs p99 TTFT, per server config")
    for path in (ranking, predictions, png):
        client.log_artifact(parent_id, str(path))
    client.log_metric(parent_id, "configs_pruned", len(pruned))
    client.log_metric(parent_id, "configs_meeting_slo", sum(r["slo_met"] for r in measured))
    top = measured[0]
    client.log_metric(parent_id, "best_capacity_rps", top["capacity_rps"] if top["slo_met"] else 0.0)
    client.set_tag(parent_id, "best_config", top["name"] if top["slo_met"] else "none met the SLO")
    return rows

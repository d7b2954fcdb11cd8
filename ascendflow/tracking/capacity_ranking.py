"""The sweep's answer recorded: the capacity ranking, predicted against measured capacity and the Pareto plot, as
files and on the sweep's parent MLflow run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from ascendflow.capacity.plot import plot_pareto
from ascendflow.capacity.pruning import predictions_table
from ascendflow.capacity.ranking import pruned_rows, rank


def record_on_parent(client: Any, parent_id: str, children: Sequence[Any], work_dir: Path,
                     pruning: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Write ``capacity_ranking.json`` (measured configs ranked, ``"pruned": false``; then the pruned ones,
    ``"pruned": true``, rank ``None``), ``capacity_predictions.json`` (:func:`ascendflow.capacity.pruning.
    predictions_table`: predicted against measured capacity per config) and ``capacity_pareto.png`` (measured
    configs) into ``work_dir`` and onto the parent run, with metrics ``best_capacity_rps`` / ``configs_meeting_slo``
    / ``configs_pruned`` and tag ``best_config``; returns the ranking (empty when no child was a capacity search:
    nothing is written). ``pruning``: the sweep's ``slo.measure_top`` decision, ``None`` when all were measured."""
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

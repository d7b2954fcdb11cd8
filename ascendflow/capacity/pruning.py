"""Which server configs of a capacity sweep are measured (``slo.measure_top``): rank every config by the
performance model's predicted capacity and measure only the top k. Pure: the predictions come in as data.

The sweep callback (:mod:`ascendflow.tracking.sweep`) predicts every job before any runs and publishes the decision
in the sweep dict (``capacity_pruning``, :data:`KEY`); each job looks itself up by its run name
(:func:`ascendflow.tracking.run_names.job_run_name`) with :func:`decision_entry`.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

#: Key of the decision in the published sweep dict (``mlflow_sweep.json``, ``$ASCENDFLOW_SWEEP``).
KEY = "capacity_pruning"


def decide(predictions: Sequence[Mapping[str, Any]], measure_top: int | None) -> list[dict[str, Any]]:
    """Rank configs by predicted capacity and mark which are measured.

    Args:
        predictions: ``{"name": run name, "predicted_capacity_rps": req/s or None, "reason": why not predicted}``
            per config, in sweep order.
        measure_top: configs to measure (the highest predicted); ``None``: all.

    Returns:
        One ``{"name", "predicted_capacity_rps", "predicted_rank", "measure", "reason"}`` per config, in sweep order.
        Ranks count predicted configs only (highest capacity first, ties in sweep order); a config without a
        prediction has rank ``None`` and is always measured (nothing says it is worse). ``reason`` says why a config
        is pruned or measured.
    """
    predicted = [p for p in predictions if p.get("predicted_capacity_rps") is not None]
    order = sorted(range(len(predicted)), key=lambda i: -float(predicted[i]["predicted_capacity_rps"]))
    rank = {predicted[i]["name"]: r for r, i in enumerate(order, 1)}
    top = len(predictions) if measure_top is None else measure_top
    out = []
    for p in predictions:
        r = rank.get(p["name"])
        cap = p.get("predicted_capacity_rps")
        if r is None:
            measure, why = True, f"measured: not predicted ({p.get('reason') or 'no prediction'})"
        elif r <= top:
            measure, why = True, f"measured: predicted {cap:.2f} req/s, rank {r} of {len(rank)}"
        else:
            measure, why = False, (f"pruned: predicted {cap:.2f} req/s, rank {r} of {len(rank)}; slo.measure_top="
                                   f"{measure_top} measures the top {measure_top} only")
        out.append({"name": p["name"], "predicted_capacity_rps": None if cap is None else float(cap),
                    "predicted_rank": r, "measure": measure, "reason": why})
    return out


def decision_entry(sweep: Mapping[str, Any] | None, name: str) -> dict[str, Any] | None:
    """This job's entry in the sweep's pruning decision (by run ``name``), measured or not; ``None`` when the sweep
    did not prune (no ``slo.measure_top``) or its decision does not name this job."""
    decision = (sweep or {}).get(KEY) or {}
    for entry in decision.get("configs", []):
        if entry["name"] == name:
            return dict(entry)
    return None


def predictions_table(decision: Mapping[str, Any] | None, children: Sequence[Mapping[str, Any]]) -> list[dict]:
    """``capacity_predictions.json``: every config with its predicted capacity, predicted rank, whether it was
    measured or pruned, and the measured capacity.

    Args:
        decision: the sweep's ``capacity_pruning`` dict (``{"measure_top", "configs": decide(...)}``), or ``None``
            when the sweep measured everything (ranks then come from the children's own predictions).
        children: ``{"name", "run_id", "predicted_capacity_rps", "capacity_rps", "slo_met", "pruned"}`` per finished
            child run (``capacity_rps`` ``None`` when not measured).

    Returns:
        Rows ``{"name", "run_id", "predicted_capacity_rps", "predicted_rank", "measured", "pruned",
        "measured_capacity_rps", "slo_met", "reason"}``, by predicted rank (unpredicted last).
    """
    by_name = {c["name"]: c for c in children}
    configs = (list(decision["configs"]) if decision else
               decide([{"name": c["name"], "predicted_capacity_rps": c.get("predicted_capacity_rps")}
                       for c in children], None))
    rows = []
    for entry in configs:
        child = by_name.get(entry["name"], {})
        measured = child.get("capacity_rps") is not None
        rows.append({"name": entry["name"], "run_id": child.get("run_id"),
                     "predicted_capacity_rps": entry["predicted_capacity_rps"],
                     "predicted_rank": entry["predicted_rank"], "measured": measured,
                     "pruned": not entry["measure"], "measured_capacity_rps": child.get("capacity_rps"),
                     "slo_met": child.get("slo_met"), "reason": entry["reason"]})
    return sorted(rows, key=lambda r: (r["predicted_rank"] is None, r["predicted_rank"] or 0))

"""The search in MLflow: the job's run becomes a sweep parent (tag ``ascendflow.sweep=parent``) with one child per
candidate: its layout and knobs as params, its predicted figures as ``predicted_*`` metrics, its status and
feasibility reason as tags, so ``python -m ascendflow.compare`` lists them like a sweep's children."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Mapping, Sequence

#: Row fields logged as params of a child.
PARAMS = ("kind", "quantization", "layout", "replicas", "devices", "tensor_parallel_size", "pipeline_parallel_size",
          "data_parallel_size", "enable_expert_parallel", "cudagraph_mode", "max_num_seqs", "max_num_batched_tokens",
          "prefill_instances", "decode_instances")
#: Row fields logged as metrics (``predicted_`` + name; ``capacity_rps`` also as ``predicted_capacity_rps``, the name
#: the compare table reads).
METRICS = ("capacity_rps", "rps_per_device", "tps_per_device", "tps_per_user", "p99_ttft_ms", "p99_tpot_ms",
           "margin_percent", "tps_low", "tps_high", "rank")
BATCH = 900  # MLflow's log_batch takes at most 1000 metrics/params/tags together


def child_fields(row: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, float], dict[str, str]]:
    """``(params, metrics, tags)`` of one candidate's child run."""
    params = {k: str(row[k]) for k in PARAMS if row.get(k) is not None}
    params.update({k: str(v) for k, v in row.items() if k.startswith(("prefill.", "decode.")) and v is not None})
    metrics = {("predicted_" + k if k != "rank" else "predicted_rank"): float(row[k]) for k in METRICS
               if isinstance(row.get(k), (int, float)) and not isinstance(row.get(k), bool)}
    tags = {"search.status": row["status"], "search.label": row["label"][:500],
            "search.reason": (row.get("reason") or row.get("note") or "")[:500],
            "search.error": (row.get("error") or "")[:4900]}
    if row.get("tie"):
        tags["search.tie"] = "true"
    if row.get("measure"):
        tags["search.measure"] = row["measure"]
    return params, metrics, tags


def record_children(client: Any, experiment_id: str, parent_id: str, rows: Sequence[Mapping[str, Any]],
                    which: str) -> dict[int, str]:
    """Create the children (``which``: ``all``, ``feasible``, ``ranked``, ``none``) of ``rows`` under ``parent_id``;
    returns each child's run id by its row's ``id``."""
    from mlflow.entities import Metric, Param, RunTag

    if which == "none":
        return {}
    ids = {}
    now = int(time.time() * 1000)
    for row in rows:
        if (which == "feasible" and row["status"] == "infeasible") or (which == "ranked" and not row.get("rank")):
            continue
        params, metrics, tags = child_fields(row)
        run = client.create_run(experiment_id, run_name=row["label"][:250],
                                tags={"mlflow.parentRunId": parent_id, "run.mode": "search-candidate"})
        client.log_batch(run.info.run_id, metrics=[Metric(k, v, now, 0) for k, v in metrics.items()],
                         params=[Param(k, v) for k, v in params.items()],
                         tags=[RunTag(k, v) for k, v in tags.items()])
        client.set_terminated(run.info.run_id, "FINISHED")
        ids[row["id"]] = run.info.run_id
    return ids


#: Measured row fields logged as metrics of a measured child (:func:`ascendflow.search.measure.measure`).
MEASURED = ("measured_capacity_rps", "measured_rps_per_device", "measured_capacity_load", "measured_p99_ttft_ms",
            "measured_p99_tpot_ms", "measured_slo_met", "measured_load_points")


def measured_fields(row: Mapping[str, Any]) -> dict[str, float]:
    """A measured row's metrics: :data:`MEASURED`, and ``measured_over_predicted`` (measured / predicted capacity
    per device) where the prediction is not zero."""
    out = {k: float(row[k]) for k in MEASURED if row.get(k) is not None}
    if row.get("measured_rps_per_device") is not None and row.get("rps_per_device"):
        out["measured_over_predicted"] = float(row["measured_rps_per_device"]) / float(row["rps_per_device"])
    return out


def parent_fields(verdict: Mapping[str, Any], picks: int) -> tuple[dict[str, float], dict[str, str]]:
    """The parent's ``(metrics, tags)`` of a measured search (:func:`ascendflow.search.pick.verdict`):
    ``search_measured``, ``search_measure_picks``, ``search_measure_failed`` (picks whose engine failed),
    ``search_rank_correlation`` (Spearman's rho over the measured picks; absent when undefined),
    ``search_measured_best_rps`` (req/s per device); ``search_predicted_best_measured_rps`` and ``search_best_held``
    (1 when the predicted best measured best) only when the predicted best was measured; tags
    ``search.predicted_best`` and ``search.measured_best`` (labels), and ``search.predicted_best_error`` (why it was
    not measured) when it was not."""
    metrics = {"search_measured": float(verdict["n"]), "search_measure_picks": float(picks),
               "search_measure_failed": float(verdict.get("failed", 0))}
    tags: dict[str, str] = {}
    if verdict["rho"] is not None:
        metrics["search_rank_correlation"] = float(verdict["rho"])
    pb, mb = verdict["predicted_best"], verdict["measured_best"]
    if pb is not None:
        tags["search.predicted_best"] = pb["label"][:500]
    if mb is not None:
        metrics["search_measured_best_rps"] = float(mb["measured_rps_per_device"])
        tags["search.measured_best"] = mb["label"][:500]
    if verdict["held"] is not None:
        metrics.update({"search_predicted_best_measured_rps": float(pb["measured_rps_per_device"]),
                        "search_best_held": float(verdict["held"])})
    elif pb is not None:
        tags["search.predicted_best_error"] = (pb.get("measure_error") or "not measured")[:500]
    return metrics, tags


#: How a pick's child ends (``measure_state`` of :func:`ascendflow.search.measure.measure`), as a sweep's jobs end:
#: measured FINISHED, an engine that failed FAILED, the pick being measured at Ctrl-C/SIGTERM KILLED; the picks not
#: reached stay the FINISHED candidate records they are, tagged ``search.measure=not_measured``.
END_STATUS = {"measured": "FINISHED", "failed": "FAILED", "interrupted": "KILLED"}


def record_measured(client: Any, children: Mapping[int, str], rows: Sequence[Mapping[str, Any]]) -> int:
    """Log each pick's outcome on its child run: a measured row's :func:`measured_fields` with its
    ``capacity/points.json`` as an artifact; ``search.measure_error`` and ``error`` (status FAILED) when its engine
    failed; ``error=interrupted`` (status KILLED) for the pick being measured when the run was interrupted; tag
    ``search.measure=not_measured`` (``search.measure_pick``: ``top``/``random``) for those not reached. Returns how
    many children got a measurement."""
    from mlflow.entities import Metric, RunTag

    now, n = int(time.time() * 1000), 0
    for row in rows:
        run_id = children.get(row["id"])
        if run_id is None:
            continue
        state = row.get("measure_state", "measured" if row.get("measured_rps_per_device") is not None else "")
        metrics = measured_fields(row)
        tags = {"search.measure_error": row["measure_error"], "error": row["measure_error"]} \
            if row.get("measure_error") else {}
        if state == "interrupted":
            tags["error"] = "interrupted"
        elif state == "not_measured":
            tags.update({"search.measure": "not_measured", "search.measure_pick": str(row.get("measure"))})
        client.log_batch(run_id, metrics=[Metric(k, v, now, 0) for k, v in metrics.items()],
                         tags=[RunTag(k, v) for k, v in tags.items()])
        points = Path(row.get("measured_dir") or ".") / "capacity" / "points.json"
        if points.is_file() and state != "not_measured":
            client.log_artifact(run_id, str(points), "capacity")
        if state in END_STATUS and END_STATUS[state] != "FINISHED":
            client.set_terminated(run_id, END_STATUS[state])
        n += bool(metrics)
    return n

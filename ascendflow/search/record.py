"""The search in MLflow: the job's run becomes a sweep parent (tag ``ascendflow.sweep=parent``) with one child per
candidate: its layout and knobs as params, its predicted figures as ``predicted_*`` metrics, its status and
feasibility reason as tags, so ``python -m ascendflow.compare`` lists them like a sweep's children."""

from __future__ import annotations

import time
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
    return params, metrics, tags


def record_children(client: Any, experiment_id: str, parent_id: str, rows: Sequence[Mapping[str, Any]],
                    which: str) -> int:
    """Create the children (``which``: ``all``, ``feasible``, ``ranked``, ``none``) of ``rows`` under ``parent_id``;
    returns how many."""
    from mlflow.entities import Metric, Param, RunTag

    if which == "none":
        return 0
    n = 0
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
        n += 1
    return n

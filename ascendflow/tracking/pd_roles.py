"""What one MLflow run records per role of a PD deployment (``plan.json`` ``roles``, ``performance.pd_ratio``): params
``prefill.*`` / ``decode.*`` (each role's resolved layout, engine knobs, KV tokens, capture sizes) and predicted metrics
``predicted.prefill.*`` / ``predicted.decode.*`` / ``predicted.pd.*``. Pure; the app logs them on the run."""

from __future__ import annotations

from typing import Any, Mapping

ROLES = ("prefill", "decode")
#: Engine knobs per role, vLLM names (``roles.<role>.engine_args``).
ENGINE_KNOBS = ("max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization", "kv_cache_memory_bytes",
                "max_model_len")


def role_params(plan: Mapping[str, Any]) -> dict[str, str]:
    """``{"<role>.<key>": value}`` for both roles of a PD plan dict; ``{}`` for a co-located plan.

    Keys: ``kv_role``, ``instances``, ``nodes`` (nodes of the role, all instances), ``tensor_parallel_size``,
    ``data_parallel_size``, ``enable_expert_parallel``, ``dp_launch``, the :data:`ENGINE_KNOBS` set on the role,
    ``num_speculative_tokens``, ``cudagraph_mode``, ``enforce_eager``, ``cudagraph_capture_sizes`` (comma-joined),
    ``kv_cache_tokens`` and ``kv_cache_blocks`` (per DP rank), and ``pd.recommended_ratio`` / ``pd.ratio_basis``.
    """
    out: dict[str, str] = {}
    for role in ROLES if plan.get("roles") else ():
        r = plan["roles"][role]
        ea, graph, kv = r["engine_args"], r["graph"], r["kv_cache"]
        values: dict[str, Any] = {
            "kv_role": r["kv_role"], "instances": r["instances"], "nodes": len(r["nodes"]),
            "tensor_parallel_size": r["tensor_parallel_size"], "data_parallel_size": r["data_parallel_size"],
            "enable_expert_parallel": bool(ea.get("enable_expert_parallel")), "dp_launch": r["dp_launch"],
            **{k: ea[k] for k in ENGINE_KNOBS if ea.get(k) is not None},
            "num_speculative_tokens": (ea.get("speculative_config") or {}).get("num_speculative_tokens", 0),
            "cudagraph_mode": graph["cudagraph_mode"], "enforce_eager": graph["enforce_eager"],
            "cudagraph_capture_sizes": ",".join(str(x) for x in graph.get("capture_sizes") or []) or "none",
            "kv_cache_tokens": kv["tokens"], "kv_cache_blocks": kv["num_blocks"]}
        out.update({f"{role}.{k}": str(v) for k, v in values.items()})
    ratio = ((plan.get("performance") or {}).get("pd_ratio") or {}) if plan.get("roles") else {}
    if ratio.get("status") == "estimate":
        out["pd.recommended_ratio"] = ratio["ratio"]
        out["pd.ratio_basis"] = ratio["basis"][:500]
    return out


def role_metrics(plan: Mapping[str, Any]) -> dict[str, float]:
    """Predicted metrics per role from ``performance.pd_ratio`` (each role's rate per instance within its target and
    the role's simulated latencies there), and the recommendation; ``{}`` when not estimated.

    ``predicted.<role>.capacity_rps`` (req/s per instance), ``predicted.<role>.{median,p99}_{ttft,tpot}_ms`` at that
    rate (prefill: TTFT only; one output token has no TPOT), ``predicted.decode.output_throughput`` (tok/s per
    instance), ``predicted.pd.{prefill,decode}_instances`` and ``predicted.pd.planned_throughput_rps`` (the plan's
    own counts: the smaller of ``instances × rate`` of the two roles).
    """
    ratio = (plan.get("performance") or {}).get("pd_ratio") or {}
    if ratio.get("status") != "estimate":
        return {}
    out: dict[str, float] = {}
    for role, keys in (("prefill", ("median_ttft_ms", "p99_ttft_ms")),
                       ("decode", ("median_tpot_ms", "p99_tpot_ms"))):
        r = ratio[role]
        out[f"predicted.{role}.capacity_rps"] = float(r["rps_per_instance"])
        at = r.get("at") or {}  # absent when the role's rate was measured
        out.update({f"predicted.{role}.{k}": float(at[k]) for k in keys if k in at})
    dp = int(plan["roles"]["decode"]["data_parallel_size"])
    if "output_throughput" in (ratio["decode"].get("at") or {}):
        out["predicted.decode.output_throughput"] = round(float(ratio["decode"]["at"]["output_throughput"]) * dp, 3)
    out["predicted.pd.prefill_instances"] = float(ratio["prefill_instances"])
    out["predicted.pd.decode_instances"] = float(ratio["decode_instances"])
    out["predicted.pd.planned_throughput_rps"] = float(ratio["planned"]["throughput_rps"])
    return out

"""The run's record (``result.json``) and its summary rows: measured metrics beside the plan's predictions."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from ascendflow.compiler import Plan
from ascendflow.compiler.memory.overheads import GIB
from ascendflow.perfmodel.predict import format_interval
from ascendflow.tracking.mlflow_run import bench_metrics


def result_record(plan: Plan, outcome: Mapping[str, Any]) -> dict[str, Any]:
    """Build ``result.json``: benchmark metrics, engine-log facts and the KV prediction check.

    ``kv_cache_tokens_rel_error = |predicted − reported| / reported`` (the plan's ``kv_cache.tokens`` against vLLM's
    ``KV cache size: N tokens`` line).

    Returns:
        ``{"plan_hash", "metrics": {name: float}, "engine": {...}, "benchmark": {...}, "reported_kv_cache_tokens"}``.
    """
    engine = dict(outcome.get("engine", {}))
    benchmark = dict(outcome.get("benchmark", {}))
    metrics = bench_metrics(benchmark)
    reported = engine.get("reported_kv_cache_tokens")
    if reported:
        metrics["reported_kv_cache_tokens"] = float(reported)
        metrics["kv_cache_tokens_rel_error"] = abs(plan.kv_cache.tokens - reported) / reported
    if "model_load_gib" in engine:
        metrics["reported_weights_gib"] = engine["model_load_gib"]
        metrics["weights_rel_error"] = abs(plan.memory.weights_bytes / GIB - engine["model_load_gib"]) / max(
            engine["model_load_gib"], 1e-9)
    if "engine_start_s" in outcome:
        metrics["engine_start_s"] = float(outcome["engine_start_s"])
    metrics.update({k: float(v) for k, v in outcome.get("engine_metrics", {}).items()})
    capacity = outcome.get("capacity")
    if capacity:  # the benchmark is the capacity point's, not the workload's load: compare capacities instead
        metrics.update({k: float(v) for k, v in capacity.items() if isinstance(v, (int, float))})
        predicted = ((plan.performance or {}).get("capacity") or {}).get("capacity_rps")
        if predicted is not None and capacity["capacity_rps"]:
            metrics["predicted_capacity_rps"] = float(predicted)
            metrics["capacity_rps_rel_error"] = (float(predicted) - capacity["capacity_rps"]) / capacity["capacity_rps"]
    else:
        metrics.update(performance_errors(plan.performance or {}, metrics))
    contention = outcome.get("contention")
    if contention:
        metrics.update(host_metrics(contention))
        if contention["contended"]:
            metrics = not_comparable(metrics)
    # Large per-request lists stay in benchmark.json; result.json keeps the summary.
    summary = {k: v for k, v in benchmark.items() if not isinstance(v, list)}
    return {"plan_hash": plan.plan_hash, "metrics": metrics, "engine": engine, "benchmark": summary,
            "reported_kv_cache_tokens": reported, "predicted_kv_cache_tokens": plan.kv_cache.tokens,
            **({"capacity": capacity} if capacity else {}), **({"contention": contention} if contention else {})}


#: Errors against the plan that contention on the host does not move: memory the engine allocated, not timing.
MEMORY_ERRORS = ("kv_cache_tokens_rel_error", "weights_rel_error")
#: Suffix a timing error against the performance model gets when it was measured under contention (issue 25 row 9).
CONTENDED_SUFFIX = "_contended"


def host_metrics(contention: Mapping[str, Any]) -> dict[str, float]:
    """The host's figures over the benchmark window as metrics (``ascendflow.runner.contention.Contention``):
    ``host.other_cpu_cores``, ``host.busy_percent``, ``host.load1_end``, ``host.load1_before``, ``host.cores``,
    ``host.other_engines``."""
    out = {"host.other_cpu_cores": float(contention["other_cpu_cores"]),
           "host.busy_percent": float(contention["host_busy_percent"]),
           "host.load1_end": float(contention["load_end"]), "host.cores": float(contention["cores"]),
           "host.other_engines": float(len(contention["other_engines"]))}
    if contention.get("load_before") is not None:
        out["host.load1_before"] = float(contention["load_before"])
    return out


def not_comparable(metrics: Mapping[str, float]) -> dict[str, float]:
    """``metrics`` with each timing error against the performance model (``<m>_rel_error``, not
    :data:`MEMORY_ERRORS`) renamed ``<m>_rel_error_contended``: the raw figure is kept, but nothing that reads
    ``*_rel_error`` as the model's error (``ascendflow.compare``, an MLflow chart, a fit) finds it."""
    return {(k + CONTENDED_SUFFIX if k.endswith("_rel_error") and k not in MEMORY_ERRORS else k): v
            for k, v in metrics.items()}


def performance_errors(performance: Mapping[str, Any], measured: Mapping[str, float]) -> dict[str, float]:
    """``predicted_<m>`` and ``<m>_rel_error = (predicted − measured) / measured`` (signed) for each metric the
    performance model predicted (``plan.performance.predicted``) and the benchmark measured."""
    out = {}
    for key, value in (performance.get("predicted") or {}).items():
        if measured.get(key):
            out[f"predicted_{key}"] = float(value)
            out[f"{key}_rel_error"] = (float(value) - measured[key]) / measured[key]
    return out


def summary_rows(plan: Plan, record: Mapping[str, Any], written: Mapping[str, Path]) -> dict[str, str]:
    """Rows of the end-of-run table: target, KV plan vs report, throughput and latencies."""
    m = record["metrics"]
    kv = plan.kv_cache
    rows = {
        "target": f"{plan.target.hardware} × {plan.target.nodes} node(s), model {plan.model['id']}, "
                  f"{plan.target.engine['row']}",
        "KV cache (plan)": f"{kv.tokens:,} tokens ({kv.bytes_per_token:,} B/token, {kv.attention})",
        "graph": f"{plan.graph.cudagraph_mode}, {len(plan.graph.capture_sizes)} capture sizes"
                 + (f" ({plan.graph.capture_sizes[0]}…{plan.graph.capture_sizes[-1]})" if plan.graph.capture_sizes
                    else ""),
    }
    rows.update(engine_arg_rows(plan))
    pred = (plan.performance or {}).get("predicted")
    if pred and "output_throughput_rel_error" not in m:
        low = plan.performance.get("predicted_low") or {}
        high = plan.performance.get("predicted_high") or {}

        def fig(key: str, fmt: str, unit: str) -> str:
            return format_interval(pred[key], low.get(key), high.get(key), fmt, unit)
        iv = plan.performance.get("interval") or {}
        label = (f"; 80 % interval of class {iv['class']}" if "coverage" in iv else
                 "; no measured error" if iv.get("status") == "no measured error" else "")
        rows["perf model"] = (f"predicted {fig('output_throughput', ',.0f', 'tok/s')}, TPOT median "
                              f"{fig('median_tpot_ms', ',.1f', 'ms')}, TTFT median {fig('median_ttft_ms', ',.0f', 'ms')} "
                              f"({plan.performance['source']}{label})")
    if (plan.performance or {}).get("status") == "not predicted":
        rows["perf model"] = f"not predicted ({plan.performance.get('reason', '?')})"
    compared = [(label, key, unit, fmt) for label, key, unit, fmt in (
        ("", "output_throughput", "tok/s", ".0f"), ("TPOT median ", "median_tpot_ms", "ms", ".1f"),
        ("TTFT median ", "median_ttft_ms", "ms", ".0f")) if f"{key}_rel_error" in m]
    if compared:  # whichever the run measured (offline runs have no per-token latencies)
        rows["perf model"] = "predicted " + ", ".join(
            f"{label}{m[f'predicted_{key}']:{fmt}} {unit} ({100 * m[f'{key}_rel_error']:+.0f} %)"
            for label, key, unit, fmt in compared)
    if plan.roles and "perf model" in rows and not compared:
        rows = {**{k: v for k, v in rows.items() if k != "perf model"}, **pd_prediction_rows(plan, rows["perf model"])}
    if "capacity_rps_rel_error" in m:
        rows["perf model"] = (f"predicted capacity {m['predicted_capacity_rps']:.2f} req/s at the SLO "
                              f"({100 * m['capacity_rps_rel_error']:+.0f} % against the measured)")
    if "capacity_rps_rel_error" + CONTENDED_SUFFIX in m:  # a contended capacity search: the prediction alone
        rows["perf model"] = f"predicted capacity {m['predicted_capacity_rps']:.2f} req/s at the SLO"
    contention = record.get("contention")
    if contention:
        rows.update(contention_rows(contention, rows.get("perf model")))
    if "reported_kv_cache_tokens" in m:
        rows["KV cache (engine)"] = (f"{int(m['reported_kv_cache_tokens']):,} tokens "
                                     f"(prediction error {100 * m['kv_cache_tokens_rel_error']:.2f} %)")
    if "completed" in m:
        rows["requests"] = f"{int(m['completed'])} completed, {int(m.get('failed', 0))} failed"
        rows["throughput"] = (f"{m.get('request_throughput', 0):.2f} req/s, {m.get('output_throughput', 0):.1f} "
                              f"output tok/s, {m.get('total_token_throughput', 0):.1f} total tok/s")
    for name in ("ttft", "tpot", "itl", "e2el"):
        if f"mean_{name}_ms" in m:
            rows[name.upper() + " (ms)"] = (f"mean {m[f'mean_{name}_ms']:.1f}, median {m[f'median_{name}_ms']:.1f}, "
                                            f"p99 {m[f'p99_{name}_ms']:.1f}")
    if "engine_preemptions" in m:
        rows["engine (/metrics)"] = ", ".join(
            [f"{int(m['engine_preemptions'])} preemptions"]
            + ([f"KV cache peak {100 * m['engine_kv_cache_usage_peak']:.0f} %"]
               if "engine_kv_cache_usage_peak" in m else [])
            + ([f"prefix-cache hit rate {100 * m['engine_prefix_cache_hit_rate']:.0f} %"]
               if "engine_prefix_cache_hit_rate" in m else [])
            + ([f"mean queue time {m['engine_queue_time_mean_ms']:.0f} ms"] if "engine_queue_time_mean_ms" in m
               else []))
    if "pd.prefill_requests" in m:  # a PD rehearsal's evidence that KV moved (rehearsal/pd_evidence.py)
        rows["PD KV transfer"] = (f"{int(m['pd.prefill_requests'])} prefill requests, {int(m['pd.decode_requests'])} "
                                  f"decode requests, {int(m['pd.decode_connector_hits'])} decode connector hits, "
                                  f"{int(m['pd.decode_kv_transfer_tokens']):,} KV tokens transferred "
                                  f"({int(m['pd.decode_connector_injected_tokens']):,} injected)")
    capacity = record.get("capacity")
    if capacity:
        targets = ", ".join(f"{k} ≤ {v:g}" for k, v in capacity["targets"].items())
        rows["capacity at SLO"] = (
            f"{capacity['capacity_rps']:.2f} req/s at {capacity['variable']}={capacity['capacity_load']:g} "
            f"({capacity['capacity_rps_per_device']:.2f} req/s per device, goodput "
            f"{capacity['capacity_goodput_rps']:.2f} req/s; SLO {targets}; {capacity['load_points']} load "
            f"point{'s' if capacity['load_points'] != 1 else ''})"
            + (" — at least: the highest load tried met the SLO (raise slo.max_load / workload.num_prompts)"
               if capacity["capacity_at_range_max"] else "")
            if capacity["slo_met"] else
            f"SLO not met at any load ({targets}; lowest {capacity['variable']} tried missed it; "
            f"{capacity['load_points']} load points)")
    rows["plan"] = str(written["plan"])
    rows["launch"] = ", ".join(p.name for k, p in written.items() if k != "plan") + " in " + str(
        written["plan"].parent / "launch")
    return rows


def contention_rows(contention: Mapping[str, Any], perf_row: str | None) -> dict[str, str]:
    """The ``host`` row (the figures of the benchmark window and the verdict) and, when contended, the ``perf
    model`` row ``perf_row`` (the predictions alone: their errors were renamed, :func:`not_comparable`) marked not
    compared."""
    verdict = ("contended: prediction error not comparable" if contention["contended"] else
               "not contended")
    rows = {"host (benchmark)": f"{contention['figures']} — {verdict}"}
    if contention["contended"] and perf_row:
        rows["perf model"] = f"{perf_row} — not compared: measured under contention"
    return rows


def engine_arg_rows(plan: Plan) -> dict[str, str]:
    """Summary rows of the engine arguments the config did not spell out: the values left to vLLM's default
    (planned, not written: ``Plan.engine_defaults``) and the ``engine.extra_args`` every ``vllm serve`` gets."""
    rows = {}
    if plan.engine_defaults:
        rows["vLLM defaults"] = ", ".join(f"{k}={plan.engine_args[k]}" for k in plan.engine_defaults) + \
            " (planned; not written, vLLM picks it)"
    if plan.extra_args:
        rows["extra args"] = " ".join(plan.extra_args) + " (engine.extra_args, on every vllm serve)"
    return rows


#: What a PD plan's top-level prediction is: ``predict`` runs on the plan's top-level engine (the decode role's
#: engine arguments, memory and KV, :func:`ascendflow.compiler.deployment.compile_plan`) serving the whole workload.
COLOCATED_LABEL = "the decode role's engine alone serving prefill and decode (not this PD deployment)"


def pd_prediction_rows(plan: Plan, colocated: str) -> dict[str, str]:
    """A PD plan's prediction rows, each labelled (issue 25 row 7: the co-located prediction sat beside the P:D line
    with nothing saying which was which): ``perf model (co-located)`` (``colocated``, the top-level prediction, see
    :data:`COLOCATED_LABEL`), then per role from ``performance.pd_ratio``: requests/s per instance within its latency
    target and the latencies there, and the planned P:D's throughput."""
    rows = {"perf model (co-located)": f"{COLOCATED_LABEL}: {colocated}"}
    ratio = (plan.performance or {}).get("pd_ratio") or {}
    if ratio.get("status") != "estimate":
        rows["perf model (PD)"] = f"P:D ratio not estimated: {ratio.get('reason', 'no performance section')}"
        return rows
    for name, short, key in (("prefill", "TTFT", "ttft"), ("decode", "TPOT", "tpot")):
        role, at = ratio[name], ratio[name].get("at") or {}
        bound = (f"within p99 {short} ≤ {role['target_ms']:g} ms" if role.get("target_ms") is not None
                 else "saturated (no latency target)")
        figures = ", ".join(f"{stat} {short} {at[f'{stat}_{key}_ms']:.0f} ms" for stat in ("median", "p99")
                            if f"{stat}_{key}_ms" in at)
        rows[f"perf model ({name})"] = (f"{role['rps_per_instance']:.2f} req/s per {name} instance {bound}"
                                        + (f" ({figures})" if figures else ""))
    planned = ratio["planned"]
    bound = "balanced" if planned["bottleneck"] == "balanced" else f"{planned['bottleneck']}-bound"
    rows["perf model (P:D)"] = (f"planned {planned['ratio']} ({plan.roles['prefill'].instances} prefill, "
                                f"{plan.roles['decode'].instances} decode instance(s)): {planned['throughput_rps']:.2f} "
                                f"req/s, {bound}; recommended {ratio['ratio']}")
    return rows


def kv_capacity_line(plan: Plan) -> str:
    """``KV capacity: <blocks> blocks × <block> = <tokens> tokens; max concurrency <x> at max_model_len=<L>``."""
    kv = plan.kv_cache
    kinds = sorted({g.get("kind", "full") for g in kv.groups})
    if len(kv.groups) > 1 or set(kinds) - {"full", "mla"}:  # hybrid pool: blocks are shared by the groups
        return (f"KV capacity: {kv.num_blocks:,} blocks of {kv.block_size} tokens shared by {len(kv.groups)} groups "
                f"({', '.join(kinds)}) = {kv.tokens:,} tokens as vLLM logs it; max concurrency "
                f"{kv.max_concurrency:.2f} at max_model_len={plan.engine_args['max_model_len']:,}")
    return (f"KV capacity: {kv.num_blocks:,} blocks × {kv.block_size} tokens = {kv.num_blocks * kv.block_size:,} "
            f"tokens (as vLLM logs it: {kv.tokens:,}); max concurrency {kv.max_concurrency:.2f} at "
            f"max_model_len={plan.engine_args['max_model_len']:,}")


def role_lines(plan: Plan, target: Plan | None = None) -> list[str]:
    """A PD plan's per-role lines (one device of one DP rank of each role): memory, then KV capacity and the
    requests of ``max_model_len`` that fit, and the P:D recommendation (``performance.pd_ratio``) of ``target``
    (a rehearsal's target plan, prefixed ``target plan:``; the rehearsed plan has no performance section) or of
    ``plan``; ``[]`` for a co-located plan."""
    lines = []
    gib = 2**30
    for name, role in (plan.roles or {}).items():
        m, kv = role.memory, role.kv_cache
        lines.append(f"{name} ({role.kv_role}, {role.instances} × TP{role.tensor_parallel_size} × "
                     f"DP{role.data_parallel_size}, {role.graph.cudagraph_mode}): weights {m.weights_bytes / gib:.2f} "
                     f"GiB, activation {m.activation_bytes / gib:.2f} GiB, non-torch {m.non_torch_bytes / gib:.2f} GiB, "
                     f"KV {m.kv_cache_bytes / gib:.2f} GiB per device; KV {kv.num_blocks:,} blocks × {kv.block_size} = "
                     f"{kv.num_blocks * kv.block_size:,} tokens per DP rank, max concurrency {kv.max_concurrency:.2f} "
                     f"at max_model_len={role.engine_args['max_model_len']:,}")
    if plan.roles:
        of = target if target is not None and target is not plan else plan
        ratio = (of.performance or {}).get("pd_ratio") or {}
        lines.append(("target plan: " if of is not plan else "") +
                     (ratio["line"] if ratio.get("status") == "estimate" else
                      f"P:D ratio not estimated: {ratio.get('reason', 'no performance section')}"))
    return lines

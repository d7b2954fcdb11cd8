"""Prefill and decode instance counts of a PD deployment by rate matching. Pure.

Each role's capacity is the request rate one instance sustains within its latency target:

* **prefill** (KV producer): requests of ``ISL`` prompt tokens and one output token (the proxy sends the prefill
  instance ``max_tokens=1``: vllm-ascend v0.25.1rc1 ``examples/disaggregated_prefill_v1/
  load_balance_proxy_server_example.py``), at the highest Poisson rate whose p99 TTFT stays within
  ``slo.p99_ttft_ms``;
* **decode** (KV consumer): requests whose ``ISL`` prompt KV arrives from the prefill instance (only the last prompt
  token is computed, :func:`~ascendflow.perfmodel.scheduler.simulate` ``received_tokens``) and ``OSL`` output tokens,
  at the highest rate whose p99 TPOT stays within ``slo.p99_tpot_ms`` (the decode queue's wait is not in this target; the utilization cap keeps it finite).

A role without a target gets its saturated rate (all requests at once). One DP rank of one instance is simulated
(:func:`~ascendflow.perfmodel.scheduler.simulate` with the role's ``max_num_seqs`` and KV blocks per rank) at
``rate / DP``, at most ``UTILIZATION_CAP`` of its saturated rate; the instance's rate is ``DP ×`` the rank's (ranks are identical; the round-robin split of a Poisson
stream is more regular than Poisson, so the per-rank Poisson arrivals are the pessimistic side). The rate is found by
bisection (``BISECTION_STEPS`` halvings of ``[0, UTILIZATION_CAP × saturated rate]``, p99 latency taken monotone in the rate).

Rate matching (the sizing rule of DistServe, Zhong et al., OSDI 2024, §4: replicate each phase until its goodput meets
the rate): for a workload rate ``R`` (``workload.request_rate``), ``P = ceil(R / prefill rate)``, ``D = ceil(R /
decode rate)``; for ``request_rate=inf`` the smallest ``P:D`` (at most ``MAX_INSTANCES`` each) whose capacities
``P × prefill`` and ``D × decode`` are closest to equal (ratio of the smaller to the larger highest; ties: fewer
instances). End-to-end TTFT in PD is the prefill's plus the KV transfer plus the decode's first step: the whole TTFT
target is given to prefill, and the KV transfer is not priced.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

from ascendflow.perfmodel.predict import calibration_error, interval_class, interval_of, limits_of, step_model
from ascendflow.perfmodel.scheduler import simulate
from ascendflow.perfmodel.steptime import StepModel
from ascendflow.schema.slo import SloSpec
from ascendflow.schema.workload import WorkloadSpec

#: Halvings of the rate interval (the found rate is within saturated / 2**12 of the boundary).
BISECTION_STEPS = 12
#: Highest offered rate as a fraction of the saturated rate (all requests at once): at 100 % a queue grows without
#: bound; at 0.9 an M/D/1 queue's mean wait is rho / (2 (1 - rho)) = 4.5 service times (Kleinrock, *Queueing Systems*
#: vol. 1, 1975, §5.6, Pollaczek-Khinchine with deterministic service).
UTILIZATION_CAP = 0.9
#: Most instances of a role the ``request_rate=inf`` balance considers.
MAX_INSTANCES = 8
#: Requests simulated on one DP rank per rate point: enough to fill ``max_num_seqs`` many times over, so that a rate
#: above what the rank serves shows as a growing queue (TTFT) rather than a short burst.
MIN_REQUESTS, REQUESTS_PER_SEQ = 256, 8


def role_plan(plan: Mapping[str, Any], role: str) -> dict[str, Any]:
    """The plan dict a step model and the scheduler read for one instance of ``role``: the role's ``engine_args``,
    ``kv_cache`` and ``graph``, with ``target.nodes`` the nodes of one instance (the role's nodes / instances)."""
    r = plan["roles"][role]
    nodes = max(len(r["nodes"]) // max(int(r["instances"]), 1), 1)
    return {**plan, "engine_args": r["engine_args"], "kv_cache": r["kv_cache"], "graph": r["graph"],
            "target": {**plan["target"], "nodes": nodes}}


def _rank_metrics(rplan: Mapping[str, Any], step: StepModel, prompt: int, output: int, received: int,
                  rate: float, seed: int) -> dict[str, float]:
    limits = limits_of(rplan)
    n = max(MIN_REQUESTS, REQUESTS_PER_SEQ * limits.max_num_seqs)
    return simulate([(prompt, output)] * n, limits, step, max_concurrency=None, request_rate=rate, seed=seed,
                    received_tokens=received).metrics()


def rate_within(run: Callable[[float], Mapping[str, float]], metric: str, target_ms: float | None,
                steps: int) -> tuple[float, Mapping[str, float]]:
    """The highest Poisson rate (req/s of one DP rank) whose ``run(rate)`` metrics keep ``metric`` within
    ``target_ms``: ``UTILIZATION_CAP`` of the saturated rate when that passes (or when ``target_ms`` is ``None``),
    else ``steps`` halvings of ``[0, cap]``; with the metrics at that rate (the lowest rate tried when none passes,
    rate 0). Shared by :func:`role_capacity` and the deployment search (``ascendflow/search/evaluate.py``)."""
    saturated = run(math.inf)
    top = UTILIZATION_CAP * float(saturated["request_throughput"])
    best, at = 0.0, saturated
    if target_ms is None:
        return top, at
    first = run(top)
    if first[metric] <= target_ms:
        return top, first
    lo, hi = 0.0, top
    for _ in range(steps):
        mid = (lo + hi) / 2
        m = run(mid)
        if m[metric] <= target_ms:
            lo, best, at = mid, mid, m
        else:
            hi = mid
            if not best:  # nothing passed yet: the lowest rate tried so far
                at = m
    return best, at


def role_capacity(rplan: Mapping[str, Any], step: StepModel, prompt: int, output: int, received: int,
                  metric: str, target_ms: float | None, seed: int = 0) -> dict[str, Any]:
    """Requests/s one instance of a role sustains with ``metric`` (``p99_ttft_ms`` or ``p99_tpot_ms``) within
    ``target_ms`` (``None``: saturated), with the simulated metrics at that rate (see the module docstring).

    Returns:
        ``{"rps_per_instance", "metric", "target_ms", "met", "at": {median/p99 TTFT and TPOT (ms), output tok/s
        and req/s of one DP rank}}``; ``met`` is false (rate 0, ``at`` the lowest rate tried) when even the lowest
        rate misses the target.
    """
    dp = int(rplan["engine_args"].get("data_parallel_size") or 1)

    def run(rate: float) -> dict[str, float]:
        return _rank_metrics(rplan, step, prompt, output, received, rate, seed)

    best, at = rate_within(run, metric, target_ms, BISECTION_STEPS)
    keep = ("median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms", "output_throughput",
            "request_throughput")
    return {"rps_per_instance": round(best * dp, 4), "metric": metric, "target_ms": target_ms,
            "met": best > 0, "at": {k: round(float(at[k]), 3) for k in keep}}


def match_rates(prefill_rps: float, decode_rps: float, request_rate: float) -> dict[str, Any]:
    """Instance counts ``(P, D)`` by rate matching (module docstring): ``ceil(R / rate)`` per role for a finite
    ``request_rate`` ``R``, else the most balanced ``P:D`` up to ``MAX_INSTANCES`` each.

    Raises:
        ValueError: a role's rate is not positive.
    """
    if prefill_rps <= 0 or decode_rps <= 0:
        raise ValueError(f"rates must be positive (prefill {prefill_rps}, decode {decode_rps} req/s)")
    if math.isfinite(request_rate):
        p, d = max(math.ceil(request_rate / prefill_rps), 1), max(math.ceil(request_rate / decode_rps), 1)
        return {"prefill_instances": p, "decode_instances": d, "sizing": f"request_rate={request_rate:g} req/s"}
    best = None
    for p in range(1, MAX_INSTANCES + 1):
        for d in range(1, MAX_INSTANCES + 1):
            a, b = p * prefill_rps, d * decode_rps
            key = (round(min(a, b) / max(a, b), 6), -(p + d))
            if best is None or key > best[0]:
                best = (key, p, d)
    assert best is not None
    return {"prefill_instances": best[1], "decode_instances": best[2],
            "sizing": f"request_rate=inf: capacities balanced (at most {MAX_INSTANCES} instances per role)"}


def pd_ratio(plan: Mapping[str, Any], hardware: Mapping[str, Any], workload: WorkloadSpec, slo: SloSpec,
             calibration: Mapping[str, Any] | None, quantization: Mapping[str, Any] | None,
             measured: Mapping[str, float | None] | None = None,
             step_for: Callable[[Mapping[str, Any]], tuple[StepModel | None, str]] | None = None) -> dict[str, Any]:
    """The P:D recommendation of a PD plan (dict with ``roles``) for ``workload`` and ``slo``.

    ``measured``: ``{"prefill": req/s, "decode": req/s}`` of one instance measured by the user
    (``pd.<role>.measured_capacity_rps``); a role with a measured rate uses it, the other the performance model.
    ``step_for``: the step model of a role plan (default: :func:`~ascendflow.perfmodel.predict.step_model` with the
    hardware's ``calibration``).

    Returns:
        ``{"status": "estimate", "ratio": "P:D", "prefill_instances", "decode_instances", "sizing", "basis",
        "prefill": {...}, "decode": {...}, "planned": {...}, "measured_error", "line"}``, or ``{"status":
        "not estimated", "reason"}`` (chat workload, no step model, a target no rate meets).
    """
    if workload.dataset == "chat":
        return {"status": "not estimated", "reason": "chat dataset has no fixed ISL/OSL; use workload=random"}
    isl = workload.random_input_len + (workload.prefix_suffix_len if workload.dataset == "prefix_repetition" else 0)
    osl = workload.random_output_len
    measured = measured or {}
    step_for = step_for or (lambda rp: step_model(rp, hardware, None, calibration=calibration,
                                                  quantization=quantization))
    roles: dict[str, Any] = {}
    sources = set()
    for role, metric, target, output, received in (
            ("prefill", "p99_ttft_ms", slo.p99_ttft_ms, 1, 0),
            ("decode", "p99_tpot_ms", slo.p99_tpot_ms, osl, isl)):
        if measured.get(role):
            roles[role] = {"rps_per_instance": float(measured[role]), "metric": metric, "target_ms": target,
                           "met": True, "source": f"measured (pd.{role}.measured_capacity_rps)"}
            sources.add("measured")
            continue
        rp = role_plan(plan, role)
        step, source = step_for(rp)
        if step is None:
            return {"status": "not estimated", "reason": f"{role}: {source}"}
        cap = role_capacity(rp, step, isl, output, received, metric, target, seed=workload.seed)
        if not cap["met"]:
            return {"status": "not estimated",
                    "reason": f"{role}: {metric} <= {target:g} ms is not met at any rate by one instance "
                              f"(predicted {cap['at'][metric]:.1f} ms at the lowest); relax slo.{metric}"}
        roles[role] = {**cap, "source": source}
        sources.add(source)
    counts = match_rates(roles["prefill"]["rps_per_instance"], roles["decode"]["rps_per_instance"],
                         workload.request_rate)
    planned = {r: int(plan["roles"][r]["instances"]) for r in ("prefill", "decode")}
    caps = {r: planned[r] * roles[r]["rps_per_instance"] for r in planned}
    modelled = any(not s == "measured" for s in sources)
    error = calibration_error(calibration, plan["model"]["architecture"]) if modelled and calibration else (
        "unmeasured (roofline or op-table step model)" if modelled else "measured per-role capacity")
    out = {"status": "estimate", "ratio": f"{counts['prefill_instances']}:{counts['decode_instances']}", **counts,
           "isl": isl, "osl": osl, "basis": "; ".join(sorted(sources)), "prefill": roles["prefill"],
           "decode": roles["decode"],
           "planned": {"ratio": f"{planned['prefill']}:{planned['decode']}",
                       "throughput_rps": round(min(caps.values()), 4),
                       "bottleneck": ("balanced" if math.isclose(caps["prefill"], caps["decode"]) else
                                      min(caps, key=lambda r: caps[r]))},
           "measured_error": error}
    out.update(_pd_interval(out, roles, planned, plan, hardware, calibration))
    out["line"] = ratio_line(out)
    return out


def _pd_interval(out: Mapping[str, Any], roles: dict[str, Any], planned: Mapping[str, int], plan: Mapping[str, Any],
                 hardware: Mapping[str, Any], calibration: Mapping[str, Any] | None) -> dict[str, Any]:
    """80 % interval of each modelled role's ``rps_per_instance`` (``_low``/``_high``) and of the planned
    throughput, from the request-throughput residuals of the plan's class (:func:`~ascendflow.perfmodel.predict.
    interval_of`; a measured role keeps its figure); ``{"interval": {"status": "no measured error", ...}}`` when
    the class has none."""
    intervals = (calibration or {}).get("intervals")
    cls = interval_class(plan["model"]["architecture"], hardware.get("name"))
    low, high, info = interval_of({"request_throughput": 1.0}, intervals, cls)
    if low is None:
        return {"interval": info}
    caps_low, caps_high = {}, {}
    for r, x in roles.items():
        rps = x["rps_per_instance"]
        if str(x.get("source", "")).startswith("measured"):
            lo, hi = rps, rps
        else:
            lo_d, hi_d, _ = interval_of({"request_throughput": rps}, intervals, cls)
            lo, hi = lo_d["request_throughput"], hi_d["request_throughput"]
        x["rps_per_instance_low"], x["rps_per_instance_high"] = lo, hi
        caps_low[r], caps_high[r] = planned[r] * lo, planned[r] * hi
    out["planned"]["throughput_rps_low"] = round(min(caps_low.values()), 4)
    out["planned"]["throughput_rps_high"] = round(min(caps_high.values()), 4)
    return {"interval": info}


def _error_text(error: Any) -> str:
    if isinstance(error, Mapping):
        cls = error.get("class_error")
        if isinstance(cls, Mapping):
            names = {"output_throughput": "tok/s", "median_tpot_ms": "TPOT", "median_ttft_ms": "TTFT"}
            parts = [f"{names.get(k, k)} ±{v['mape_percent']:g}%" for k, v in cls.items()
                     if isinstance(v, Mapping) and "mape_percent" in v]
            return f"model error (LOO, {error.get('class')}): " + ", ".join(parts)
    return f"model error: {error}"


def ratio_line(r: Mapping[str, Any]) -> str:
    """The one line plan mode prints, e.g. ``P:D = 2:1 (basis: ...; prefill 3.1 req/s per instance at
    TTFT<=2000 ms, decode 6.3 req/s at TPOT<=150 ms; model error ...)``."""
    def role(name: str, short: str) -> str:
        x = r[name]
        bound = f"{short}<={x['target_ms']:g} ms" if x["target_ms"] is not None else "saturated (no target)"
        return f"{name} {x['rps_per_instance']:.2f} req/s per instance at {bound}"
    return (f"P:D = {r['ratio']} (basis: {r['basis']}; ISL {r['isl']} / OSL {r['osl']}, {r['sizing']}; "
            f"{role('prefill', 'TTFT')}, {role('decode', 'TPOT')}; {_error_text(r['measured_error'])}); "
            f"planned {r['planned']['ratio']}: {r['planned']['throughput_rps']:.2f} req/s, "
            + ("balanced" if r['planned']['bottleneck'] == "balanced" else f"{r['planned']['bottleneck']}-bound"))

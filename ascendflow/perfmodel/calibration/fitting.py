"""Fitting the NPU step model's constants (:class:`~ascendflow.perfmodel.npu.NpuConstants`) to measured runs, and
the calibration file that holds them. Pure: rows in, constants, errors and file text out (the callers read runs and
write files: ``benchmarks/fit_npu_perf.py`` on public rows, ``python -m ascendflow.perfmodel.fit`` on MLflow runs).

Fit: least squares on ``log(predicted / measured)`` over every measured figure of every row
(``scipy.optimize.least_squares``, trust-region reflective), in the log of each fitted constant, within the
physical bounds of :data:`FITTED`; the rest of the constants stay as given. With a prior (``prior_strength`` > 0),
a maximum-a-posteriori (ridge) fit: each fitted constant's log is drawn toward its start value, whose physical
source is in :data:`MEANING` / :data:`START_SOURCES`, by the added residuals
``sqrt(prior_strength * n_rows) * (log c - log c_start)`` (a Gaussian prior on ``log c``, Tikhonov / ridge
regression: Hoerl & Kennard, Technometrics 12(1), 1970); ``prior_strength`` = infinity returns the start constants.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable, Mapping, Sequence

from ascendflow.perfmodel.npu import NpuConstants, npu_step_model
from ascendflow.perfmodel.predict import predict_metrics
from ascendflow.schema.workload import WorkloadSpec

#: Measured figures a row may carry (vLLM benchmark names): output tokens/s, median TPOT and TTFT (ms).
METRICS = ("output_throughput", "median_tpot_ms", "median_ttft_ms")
#: Fitted constants and their bounds (physical: efficiencies in (0, 1], overheads of µs to 100s of ms).
FITTED: dict[str, tuple[float, float]] = {
    "gemm_efficiency": (0.05, 1.0), "memory_efficiency": (0.05, 1.0), "step_overhead_s": (1e-4, 0.2),
    "eager_layer_overhead_s": (1e-6, 5e-3), "collective_latency_s": (1e-6, 2e-3)}
#: Where a fit of the public rows starts (``benchmarks/fit_npu_perf.py``); the fixed constants' sources are in
#: :data:`MEANING`.
START = NpuConstants(gemm_efficiency=0.6, memory_efficiency=0.6, step_overhead_s=0.01, eager_layer_overhead_s=3e-4,
                     collective_latency_s=5e-5, hccs_bandwidth_gbps=126.0, internode_bandwidth_gbps=25.0,
                     mtp_accept_length=1.85)
#: Where each fitted constant's start value (the prior's centre) comes from (``ascend_perf_training.md`` is
#: ``shared/reference/ascend_perf_training.md``).
START_SOURCES = {
    "gemm_efficiency": "0.6: between the 91 % measured for large bf16 GEMMs on 910B and the lower efficiency of "
                       "the small decode GEMMs (ascend_perf_training.md s3)",
    "memory_efficiency": "0.6: a typical achieved fraction of HBM bandwidth for streaming kernels (roofline "
                         "practice, Williams et al., CACM 2009); not a measured 910B figure",
    "step_overhead_s": "0.01: vLLM V1 per-step host time of ~10 ms (scheduler, input preparation, sampling) "
                       "(assumed order of magnitude)",
    "eager_layer_overhead_s": "3e-4: host launch time per decoder layer without graph replay (assumed order of "
                              "magnitude for eager mode)",
    "collective_latency_s": "5e-5: tens of microseconds of fixed HCCL collective latency (assumed order of "
                            "magnitude)",
}
#: Default prior strength of :func:`fit_constants` (× number of rows), as chosen by exact leave-one-out over
#: :data:`PRIOR_GRID` on the public rows by ``benchmarks/fit_npu_perf.py`` (see docs/performance_model.md).
DEFAULT_PRIOR_STRENGTH = 3.0
#: Prior strengths (× number of rows) that ``benchmarks/fit_npu_perf.py`` compares by exact leave-one-out.
PRIOR_GRID = (0.0, 0.1, 0.3, 1.0, 3.0, 10.0, math.inf)
#: Meaning (and source, for the fixed ones) of each constant, written beside it in a calibration file.
MEANING = {
    "gemm_efficiency": "fitted: achieved fraction of the cube peak (hardware peak_tflops_bf16; x2 for int8 "
                       "activations) by GEMMs, grouped MoE GEMMs and prefill attention when compute-bound",
    "memory_efficiency": "fitted: achieved fraction of HBM bandwidth (memory_bandwidth_gbps) streaming weights, "
                         "KV cache and activations",
    "step_overhead_s": "fitted: per-step host time (s): scheduling, input preparation, sampling, output processing",
    "eager_layer_overhead_s": "fitted: host launch time per decoder layer (s) of a step not replayed as a full graph",
    "collective_latency_s": "fitted: fixed latency (s) of one HCCL collective (all-reduce, dispatch, combine)",
    "hccs_bandwidth_gbps": "fixed: HCCS bus bandwidth per device (GB/s) for ring collectives inside a node; 72 GB/s "
                           "algorithm bandwidth of an 8-card HCCL all_reduce on 910B (gameofdimension/limulidae "
                           "README, CANN 8.0.0.beta1) x 2(n-1)/n = 126 (inferred: the README does not say algbw)",
    "internode_bandwidth_gbps": "fixed: RoCE bandwidth per device across nodes (GB/s): one 200 Gb/s port per NPU "
                                "(Atlas 800I A2 / A3 server specifications), 25 GB/s",
    "mtp_accept_length": "fixed default: mean tokens emitted per decode step with one MTP token; DeepSeek-V3 "
                         "report (arXiv 2412.19437 s5.4.3): 85-90 % acceptance of the second token -> 1.85",
    "prefill_efficiency": "chosen by grouped leave-one-family-out on the corpus (benchmarks/perf_corpus_eval.py): "
                          "multiplier on gemm_efficiency for a step holding a prefill chunk (1.0: none)",
    "eager_full_factor": "chosen by grouped leave-one-family-out on the corpus (benchmarks/perf_corpus_eval.py): "
                         "multiplier on eager_layer_overhead_s for a PIECEWISE model's step beyond its largest "
                         "capture size (no graph replayed; 1.0: none)",
    "eagle3_accept_length": "fixed default, ESTIMATE: mean tokens per decode step with one EAGLE-3 token, 1 + a for "
                            "the acceptance a = 0.717 that gives vLLM's tests/v1/spec_decode/test_acceptance_length.py "
                            "2.60 tokens at 3 (Llama-3.1-8B, MT-Bench); not fitted",
}


@dataclass(frozen=True)
class Row:
    """One measured run: its plan (``plan.json`` data), hardware option (peak figures), workload, quantization
    option, and measured figures (a subset of :data:`METRICS`)."""

    id: str
    plan: Mapping[str, Any]
    hardware: Mapping[str, Any]
    workload: WorkloadSpec
    quantization: Mapping[str, Any] | None
    measured: Mapping[str, float]


def predicted(row: Row, constants: NpuConstants) -> dict[str, float]:
    """The row's workload simulated on its plan with the NPU step model at ``constants`` (vLLM benchmark names;
    :func:`~ascendflow.perfmodel.predict.predict_metrics`, every DP rank simulated)."""
    step = npu_step_model(row.plan, row.hardware, constants, row.quantization)
    return predict_metrics(row.plan, row.workload, step)


def with_values(base: NpuConstants, values: Sequence[float]) -> NpuConstants:
    """``base`` with the :data:`FITTED` constants set to ``exp(values)`` (the fit works in their logs)."""
    return replace(base, **{k: float(math.exp(v)) for k, v in zip(FITTED, values)})


def log_residuals(rows: Sequence[Row], constants: NpuConstants) -> list[float]:
    """``log(predicted / measured)`` for every measured figure of every row (predictions floored at 1e-9)."""
    out = []
    for row in rows:
        pred = predicted(row, constants)
        out += [math.log(max(pred[m], 1e-9) / v) for m, v in row.measured.items()]
    return out


def fit_log_constants(residuals: Callable[[NpuConstants], Sequence[float]], start: NpuConstants = START,
                      n_rows: int = 1, prior_strength: float = 0.0, max_nfev: int = 60,
                      x0: NpuConstants | None = None) -> NpuConstants:
    """The :data:`FITTED` constants minimising ``sum(residuals(c)**2) + prior_strength * n_rows *
    sum((log c - log c_start)**2)`` from ``x0`` (default ``start``; clipped into the bounds), within the bounds of
    :data:`FITTED` (``scipy.optimize.least_squares``, trust-region reflective, forward differences of 5 % in log
    space, at most ``max_nfev`` iterations: the Jacobian's evaluations are not counted); the other constants stay
    ``start``'s. ``prior_strength`` 0: no prior (the plain least-squares fit); infinity: ``start`` itself.

    Raises:
        ValueError: ``prior_strength`` is negative or NaN.
    """
    import numpy as np
    from scipy.optimize import least_squares

    if not prior_strength >= 0:
        raise ValueError(f"prior_strength must be >= 0, got {prior_strength}")
    if math.isinf(prior_strength):
        return start
    lo = np.log([b[0] for b in FITTED.values()])
    hi = np.log([b[1] for b in FITTED.values()])
    centre = np.log([getattr(start, k) for k in FITTED])
    weight = math.sqrt(prior_strength * n_rows)

    def fun(x: Any) -> Any:
        r = np.array(residuals(with_values(start, x)), dtype=float)
        return np.concatenate([r, weight * (x - centre)]) if weight else r

    first = np.log([getattr(x0 or start, k) for k in FITTED])
    res = least_squares(fun, np.clip(first, lo + 1e-6, hi - 1e-6), bounds=(lo, hi), diff_step=0.05,
                        max_nfev=max_nfev, x_scale=1.0)
    return with_values(start, res.x)


def fit_constants(rows: Sequence[Row], start: NpuConstants = START, max_nfev: int = 60,
                  prior_strength: float = 0.0, x0: NpuConstants | None = None) -> NpuConstants:
    """The :data:`FITTED` constants that minimise the squared log errors over ``rows`` (plus the prior toward
    ``start`` of :func:`fit_log_constants`, ``prior_strength`` × number of rows), from ``x0`` (default ``start``);
    the other constants stay ``start``'s.

    Raises:
        ValueError: no row has a measured figure; ``prior_strength`` is negative.
    """
    if not any(row.measured for row in rows):
        raise ValueError("no measured figure to fit")
    return fit_log_constants(lambda c: log_residuals(rows, c), start, len(rows), prior_strength, max_nfev, x0)


def errors(pairs: Mapping[str, Sequence[tuple[float, float]]]) -> dict[str, Any]:
    """Per metric of ``pairs`` (``{metric: [(predicted, measured)]}``): MAPE (%), median signed error (%) and row
    count; with 3 or more output-throughput pairs, their Spearman rank correlation."""
    import numpy as np
    from scipy.stats import spearmanr

    out: dict[str, Any] = {}
    for m, ps in pairs.items():
        if ps:
            e = [(p - v) / v * 100 for p, v in ps]
            out[m] = {"mape_percent": round(float(np.mean(np.abs(e))), 1),
                      "median_signed_percent": round(float(np.median(e)), 1), "rows": len(ps)}
    tput = pairs.get("output_throughput") or []
    if len(tput) >= 3:
        out["spearman_output_throughput"] = round(float(spearmanr([p for p, _ in tput], [v for _, v in tput])[0]), 3)
    return out


def error_table(rows: Sequence[Row], constants: NpuConstants) -> dict[str, Any]:
    """:func:`errors` of the rows' predictions at ``constants`` against their measurements."""
    preds = {row.id: predicted(row, constants) for row in rows}
    return errors({m: [(preds[r.id][m], r.measured[m]) for r in rows if m in r.measured] for m in METRICS})


def calibration_text(hardware: str, constants: NpuConstants, header: Sequence[str], fit: Mapping[str, Any],
                     measured_error: Mapping[str, Any], meaning: Mapping[str, str] | None = None) -> str:
    """A calibration file (:mod:`ascendflow.perfmodel.calibration`): ``header`` comment lines, ``hardware``, the
    constants with their :data:`MEANING`, the ``fit`` facts and the ``measured_error`` tables (per model class, or
    ``all``) that label predictions; ``meaning`` overrides :data:`MEANING`'s comments."""
    meaning = meaning or MEANING
    lines = [f"# {h}" for h in header] + [f"hardware: {hardware}", "constants:"]
    lines += [f"  {k}: {v:.6g}   # {meaning[k]}" for k, v in asdict(constants).items()]
    lines.append("fit:")
    lines += [f"  {k}: {json.dumps(v)}" for k, v in fit.items()]
    lines.append("measured_error:")
    lines += [f"  {cls}: {json.dumps(table)}" for cls, table in measured_error.items()]
    return "\n".join(lines) + "\n"

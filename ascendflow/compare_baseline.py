"""The source deployment's figures beside a run's (issue 30 "baseline first"), for ``python -m ascendflow.compare``.

A migrated plan carries the figures measured on the source hardware (``run.baseline``: :mod:`ascendflow.schema.baseline`),
logged with the run's params (``run.baseline.metrics.<name>``, ``run.baseline.source``, ``run.baseline.hardware``,
``run.baseline.contention``: the source run was measured on a shared host).
:func:`baseline_table` sets them beside the run's own metrics of the same names (``vllm bench serve`` result keys,
recorded by every benchmark run, attach mode included): one row per figure, the relative difference
``(run − source) / source`` and whether that is better (latencies lower, throughputs higher).
"""

from __future__ import annotations

import math

from ascendflow.schema.baseline import BASELINE_METRICS

PREFIX = "params.run.baseline.metrics."
#: Row labels (units: ms, tokens/s, requests/s).
LABELS = {"median_ttft_ms": "TTFT p50 (ms)", "p99_ttft_ms": "TTFT p99 (ms)", "median_tpot_ms": "TPOT p50 (ms)",
          "p99_tpot_ms": "TPOT p99 (ms)", "median_itl_ms": "ITL p50 (ms)", "p99_itl_ms": "ITL p99 (ms)",
          "median_e2el_ms": "E2EL p50 (ms)", "p99_e2el_ms": "E2EL p99 (ms)",
          "output_throughput": "output throughput (tok/s)", "request_throughput": "request throughput (req/s)",
          "total_token_throughput": "total token throughput (tok/s)"}


def has_baseline(params: dict[str, str]) -> bool:
    """Whether a run's params (MLflow ``run.data.params``) carry a baseline figure."""
    return any(k.startswith(PREFIX.removeprefix("params.")) for k in params)


def _number(value: object) -> float | None:
    try:
        number = float(value)  # params are text; metrics floats (NaN where a run lacks one)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def baseline_table(runs):
    """``(DataFrame, source label)`` of the runs (``mlflow.search_runs`` rows) that carry a baseline: one row per
    figure of :data:`BASELINE_METRICS` the baseline has, columns ``figure``, ``source`` (the baseline's value), and per
    run its value and ``Δ`` (relative difference, a fraction; ``None`` where the run lacks the figure); ``None``
    without a baseline. The source label names the hardware and where the figures were read, and says when the source
    was measured under contention."""
    import pandas as pd

    columns = [c for c in runs.columns if c.startswith(PREFIX)]
    if not columns:
        return None
    with_base = runs[runs[columns].notna().any(axis=1)]
    if with_base.empty:
        return None
    first = with_base.iloc[0]
    hardware = first.get("params.run.baseline.hardware")
    source = first.get("params.run.baseline.source")
    label = f"source ({hardware})" if hardware not in (None, "null") else "source"
    rows = []
    for name in BASELINE_METRICS:
        base = _number(first.get(PREFIX + name))
        if base is None:
            continue
        row = {"figure": LABELS[name], "metric": name, label: base}
        for _, run in with_base.iterrows():
            mine = _number(run.get(f"metrics.{name}"))
            key = str(run["tags.mlflow.runName"])
            row[key] = mine
            row[f"Δ {key}"] = (mine - base) / base if mine is not None and base else None
        rows.append(row)
    title = f"{label}{' from ' + source if source not in (None, 'null') else ''}"
    if first.get("params.run.baseline.contention") == "True":  # the source run's measurement.contention tag
        reason = first.get("params.run.baseline.contention_reason")
        title += (", measured under contention" + (f" ({reason})" if reason not in (None, "null") else "")
                  + ": not the source deployment's figures alone")
    return pd.DataFrame(rows), title


def better(metric: str, delta: float) -> bool:
    """Whether a relative difference is an improvement: lower latency (``*_ms``), higher throughput."""
    return delta < 0 if metric.endswith("_ms") else delta > 0


def delta_cell(metric: str, delta: float | None) -> str:
    """``+25.0% (worse)``; ``—`` without a value."""
    if delta is None or (isinstance(delta, float) and math.isnan(delta)):
        return "—"
    return f"{delta:+.1%} ({'better' if better(metric, delta) else 'worse'})" if delta else "+0.0% (same)"

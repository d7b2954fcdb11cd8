"""The source deployment's measured figures (baseline first, before tuning on Ascend).

A baseline is read from a ``vllm bench serve --save-result`` JSON (``vllm/benchmarks/serve.py``: the result dict it
writes, keys ``output_throughput``, ``median_ttft_ms``...) or from an MLflow run of the store (its metrics of the same
names, as ascendflow records a benchmark). :func:`compare_baseline` sets it beside an Ascend measurement (an
``run.mode=attach`` run's metrics): the metric, the source, Ascend, and Ascend / source. A migrated plan carries
the figures itself (``run.baseline``), so ``python -m ascendflow.compare RUN_ID`` shows them beside the run's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ascendflow.schema.baseline import BASELINE_METRICS
from ascendflow.schema.errors import ConfigError

#: Figures a baseline keeps (``vllm bench serve`` result keys; the names ascendflow's benchmark runs record): the
#: plan's ``run.baseline.metrics`` keys, one table (:mod:`ascendflow.schema.baseline`).
METRICS = BASELINE_METRICS
#: Lower is better for these (latencies); higher for the throughputs.
LOWER_IS_BETTER = {m for m in METRICS if m.endswith("_ms")}
RUN_ID = re.compile(r"[0-9a-f]{32}")


def read_baseline(source: str, tracking_uri: str | None = None) -> dict[str, float]:
    """The figures of ``source``: a bench result JSON path, or an MLflow run id (``tracking_uri``: the store; default
    ``$MLFLOW_TRACKING_URI`` or ``outputs/mlflow/mlflow.db``, as ``python -m ascendflow.compare``).

    Raises:
        ConfigError: no such file or run, not JSON, or none of :data:`METRICS` in it.
    """
    if RUN_ID.fullmatch(source) and not Path(source).exists():
        return _run_metrics(source, tracking_uri)
    path = Path(source)
    if not path.is_file():
        raise ConfigError("--baseline", source, "is neither a vllm bench serve result file nor an MLflow run id")
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ConfigError("--baseline", source, f"is not JSON ({error.msg}); give vllm bench serve --save-result's "
                                                "file") from None
    return _pick(raw, "--baseline", source)


def baseline_source(source: str) -> str:
    """Where a ``--baseline`` was read, as ``run.baseline.source`` records it: the file path, or ``mlflow:<run id>``."""
    return f"mlflow:{source}" if RUN_ID.fullmatch(source) and not Path(source).exists() else source


def _pick(raw: Any, key: str, source: str) -> dict[str, float]:
    if not isinstance(raw, dict):
        raise ConfigError(key, source, "holds no result object")
    out = {m: float(raw[m]) for m in METRICS if isinstance(raw.get(m), (int, float)) and not isinstance(raw[m], bool)}
    if not out:
        raise ConfigError(key, source, f"has none of {', '.join(METRICS[:4])}, ... (vllm bench serve result keys)")
    return out


def _run_metrics(run_id: str, tracking_uri: str | None) -> dict[str, float]:
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    from ascendflow.compare import default_tracking_uri

    client = MlflowClient(tracking_uri or default_tracking_uri())
    try:
        run = client.get_run(run_id)
    except MlflowException:
        raise ConfigError("--baseline", run_id, "no such run in this MLflow store") from None
    return _pick(dict(run.data.metrics), "--baseline", run_id)


def compare_baseline(baseline: dict[str, float], measured: dict[str, float]) -> list[tuple[str, float, float, float]]:
    """``(metric, source, Ascend, Ascend / source)`` for every metric both have, in :data:`METRICS` order."""
    return [(m, baseline[m], measured[m], measured[m] / baseline[m] if baseline[m] else float("nan"))
            for m in METRICS if m in baseline and m in measured]


def render_comparison(rows: list[tuple[str, float, float, float]]) -> str:
    """The comparison as text, one metric a line (``better`` / ``worse`` by the metric's direction)."""
    if not rows:
        return "no metric in common between the baseline and the Ascend measurement"
    width = max(len(r[0]) for r in rows)
    lines = [f"{'metric':{width}}  {'source':>12}  {'Ascend':>12}  Ascend/source"]
    for name, a, b, ratio in rows:
        better = (ratio < 1) if name in LOWER_IS_BETTER else (ratio > 1)
        lines.append(f"{name:{width}}  {a:12.2f}  {b:12.2f}  {ratio:.3f} ({'better' if better else 'worse'})")
    return "\n".join(lines)

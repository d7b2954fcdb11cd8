"""The source deployment's measured figures (baseline first, before tuning on Ascend).

A baseline is read from a ``vllm bench serve --save-result`` JSON (``vllm/benchmarks/serve.py``: the result dict it
writes, keys ``output_throughput``, ``median_ttft_ms``...) or from an MLflow run of the store (its metrics of the same
names, as ascendflow records a benchmark). :func:`compare_baseline` sets it beside an Ascend measurement (an
``run.mode=attach`` run's metrics): the metric, the source, Ascend, and Ascend / source. A migrated plan carries
the figures itself (``run.baseline``), so ``python -m ascendflow.compare RUN_ID`` shows them beside the run's.

:func:`read_record` keeps what the figures were measured with beside them (:class:`Baseline`): the model (a result
file's ``model_id``, vLLM's ``--model`` of the benchmark; a run's ``model.id`` param), the hardware option and the
contention verdict of an ascendflow run (params ``hardware.name``, tag ``measurement.contention``), and where they
were read (the file, or ``mlflow:<run id>`` and its store, password masked). :func:`check_model` refuses figures of
another model than the deployment imported (new-user trial of 2026-12-04: they were carried without a word).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
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
#: MLflow's run URI (``runs:/<run id>``, as ``mlflow.artifacts`` and the UI write it) is taken as the run id.
RUNS_URI = re.compile(r"runs:/([0-9a-f]{32})/?")
#: Params of a run that name its model, in order (ascendflow's config: ``model.id``; other recorders: ``model``...).
MODEL_PARAMS = ("model.id", "model", "model_id", "model_name")


@dataclass
class Baseline:
    """The source's figures and what they were measured with.

    Attributes:
        metrics: ``{name: value}`` of :data:`METRICS`.
        source: where they were read: the file path as given, or ``mlflow:<run id>``.
        model: the model they were measured with (``None``: the source does not say); ``model_from``: where that was
            read (``model_id``, ``params model.id``).
        hardware: the hardware option of an ascendflow run (param ``hardware.name``); ``None``: not recorded.
        tracking_uri: the MLflow store of a run, its password masked; ``None`` for a file.
        contention: the run's ``measurement.contention`` tag (``None``: not judged); ``contention_reason`` its
            ``measurement.contention_reason``.
    """

    metrics: dict[str, float]
    source: str
    model: str | None = None
    model_from: str | None = None
    hardware: str | None = None
    tracking_uri: str | None = None
    contention: bool | None = None
    contention_reason: str | None = None

    def spec(self, hardware: str) -> dict[str, Any]:
        """The ``run.baseline`` block (:class:`ascendflow.schema.baseline.BaselineSpec`); ``hardware``: the source
        side's option, where the figures do not record their own. Keys the source does not give are left out (the
        run option's ``null``)."""
        block = {"source": self.source, "tracking_uri": self.tracking_uri, "model": self.model,
                 "hardware": self.hardware or hardware, "contention": self.contention,
                 "contention_reason": self.contention_reason}
        return {**{k: v for k, v in block.items() if v is not None}, "metrics": dict(self.metrics)}


def run_id_of(source: str) -> str | None:
    """The MLflow run id ``source`` names (``<32 hex>`` that is no file, or ``runs:/<32 hex>``), else ``None``."""
    uri = RUNS_URI.fullmatch(source)
    if uri:
        return uri.group(1)
    return source if RUN_ID.fullmatch(source) and not Path(source).exists() else None


def read_baseline(source: str, tracking_uri: str | None = None) -> dict[str, float]:
    """The figures of ``source``: a bench result JSON path, or an MLflow run id (``tracking_uri``: the store; default
    ``$MLFLOW_TRACKING_URI`` or ``outputs/mlflow/mlflow.db``, as ``python -m ascendflow.compare``).

    Raises:
        ConfigError: no such file or run, not JSON, or none of :data:`METRICS` in it.
    """
    return read_record(source, tracking_uri).metrics


def read_record(source: str, tracking_uri: str | None = None) -> Baseline:
    """:func:`read_baseline`'s figures with what they were measured with (:class:`Baseline`).

    Raises:
        ConfigError: as :func:`read_baseline`.
    """
    run_id = run_id_of(source)
    if run_id:
        return _run_record(run_id, tracking_uri)
    path = Path(source)
    if not path.is_file():
        raise ConfigError("--baseline", source, "is neither a vllm bench serve result file nor an MLflow run id")
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ConfigError("--baseline", source, f"is not JSON ({error.msg}); give vllm bench serve --save-result's "
                                                "file") from None
    metrics = _pick(raw, "--baseline", source)
    model = raw.get("model_id") if isinstance(raw.get("model_id"), str) and raw.get("model_id") else None
    return Baseline(metrics=metrics, source=source, model=model, model_from="its model_id" if model else None)


def baseline_source(source: str) -> str:
    """Where a ``--baseline`` was read, as ``run.baseline.source`` records it: the file path, or ``mlflow:<run id>``."""
    run_id = run_id_of(source)
    return f"mlflow:{run_id}" if run_id else source


def _base_name(name: str) -> str:
    return name.rstrip("/").rsplit("/", 1)[-1].lower()


def same_model(measured: str, deployed: list[str], option: str | None) -> bool:
    """Whether a baseline measured with ``measured`` is of the deployment's model: its checkpoint name (the last
    path or hub component, case aside) is one of ``deployed``'s (the ``vllm serve`` positional, its
    ``--served-model-name``), or both are the same catalogue option (``option``: the deployment's; ``Qwen/Qwen3-8B``
    and ``/data/Qwen3-8B-FP8`` are ``qwen3_8b``)."""
    from ascendflow.importer.recipe import model_option

    if _base_name(measured) in {_base_name(d) for d in deployed if d}:
        return True
    if option in (None, "local"):
        return False
    try:
        return model_option(measured) == option
    except ConfigError:
        return False


def check_model(baseline: Baseline, given: str, deployed: list[str], option: str | None) -> None:
    """Refuse figures measured with another model than the deployment's (``deployed[0]``: the ``vllm serve``
    positional; ``option``: its model option). ``given``: the ``--baseline`` text, for the message.

    Raises:
        ConfigError: one line naming both models and the fix.
    """
    if baseline.model is None or same_model(baseline.model, deployed, option):
        return
    raise ConfigError("--baseline", given, f"was measured with {baseline.model} ({baseline.model_from}), not "
                                           f"{deployed[0]} (the imported deployment's model): another model's figures "
                                           f"are no baseline for it; fix: give a vllm bench serve result or MLflow "
                                           f"run of {deployed[0]}, or drop --baseline")


def _pick(raw: Any, key: str, source: str) -> dict[str, float]:
    if not isinstance(raw, dict):
        raise ConfigError(key, source, "holds no result object")
    out = {m: float(raw[m]) for m in METRICS if isinstance(raw.get(m), (int, float)) and not isinstance(raw[m], bool)}
    if not out:
        raise ConfigError(key, source, f"has none of {', '.join(METRICS[:4])}, ... (vllm bench serve result keys)")
    return out


def _run_record(run_id: str, tracking_uri: str | None) -> Baseline:
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    from ascendflow.compare import default_tracking_uri
    from ascendflow.schema.secrets import mask_credentials

    uri = tracking_uri or default_tracking_uri()
    client = MlflowClient(uri)
    try:
        run = client.get_run(run_id)
    except MlflowException:
        raise ConfigError("--baseline", run_id, "no such run in this MLflow store") from None
    params, tags = dict(run.data.params), dict(run.data.tags)
    key = next((k for k in MODEL_PARAMS if params.get(k) not in (None, "", "null")), None)
    hardware = params.get("hardware.name")
    contention = tags.get("measurement.contention")
    return Baseline(metrics=_pick(dict(run.data.metrics), "--baseline", run_id), source=f"mlflow:{run_id}",
                    model=params[key] if key else None, model_from=f"the run's param {key}" if key else None,
                    hardware=hardware if hardware not in (None, "", "null") else None,
                    tracking_uri=mask_credentials(uri),
                    contention=None if contention is None else contention == "true",
                    contention_reason=tags.get("measurement.contention_reason"))


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

"""The source deployment's measured figures a migrated plan carries (``run.baseline``; issue 30 "baseline first").

Written by ``python -m ascendflow.import ... --to hardware=... --baseline FILE|RUN_ID`` into the target recipe, logged
with the run's config (params ``run.baseline.*``) and set beside the run's own figures by ``python -m
ascendflow.compare``. The names are ``vllm bench serve --save-result``'s result keys (``vllm/benchmarks/serve.py``,
0.32.0), the ones ascendflow records a benchmark under.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator

from ascendflow.schema.base import Spec
from ascendflow.schema.bounds import MAX_LATENCY_MS

#: Figures a baseline keeps, in the order compare shows them: ms for ``*_ms``, requests/s and tokens/s for the
#: throughputs (``vllm bench serve`` result keys).
BASELINE_METRICS = ("median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms", "median_itl_ms", "p99_itl_ms",
                    "median_e2el_ms", "p99_e2el_ms", "output_throughput", "request_throughput",
                    "total_token_throughput")


class BaselineSpec(Spec):
    """Measured figures of the deployment a plan was migrated from.

    Attributes:
        source: where they were read (a ``vllm bench serve`` result file, or ``mlflow:<run id>``); ``None``: none.
        tracking_uri: the MLflow store of an ``mlflow:<run id>`` source, its password masked (``scheme://user:***@``).
        model: the model they were measured with (the result file's ``model_id``, the run's ``model.id``).
        hardware: the hardware option they were measured on (``nvidia_h200``...): an ascendflow run's
            ``hardware.name``, else the source side's option.
        contention: the source run's ``measurement.contention`` tag (``True``: the host was shared while it was
            measured, :mod:`ascendflow.runner.contention`); ``None``: not judged. ``contention_reason``: its reason.
        metrics: ``{name: value}`` of :data:`BASELINE_METRICS` (ms; requests/s; tokens/s), each in
            ``[0, MAX_LATENCY_MS]`` (1e7: ten thousand seconds, or ten million tokens/s).
    """

    source: str | None = None
    tracking_uri: str | None = None
    model: str | None = None
    hardware: str | None = None
    contention: bool | None = None
    contention_reason: str | None = None
    metrics: dict[str, Annotated[float, Field(ge=0, le=MAX_LATENCY_MS)]] = Field(default_factory=dict)

    @field_validator("metrics")
    @classmethod
    def _known(cls, value: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(value) - set(BASELINE_METRICS))
        if unknown:
            raise ValueError(f"has no figure {unknown[0]!r}; baseline figures are vllm bench serve result keys: "
                             f"{', '.join(BASELINE_METRICS)}")
        return value

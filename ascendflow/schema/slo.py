"""SLO option (``conf/slo/*.yaml``): the latency targets a capacity search (``run.mode=capacity``) holds."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ascendflow.schema.base import Spec
from ascendflow.schema.bounds import MAX_COUNT, MAX_LATENCY_MS, MIN_REQUEST_RATE


class SloSpec(Spec):
    """Latency service-level objective and how the capacity search varies the load.

    A load point meets the SLO when its p99 TTFT and p99 TPOT (ms, as vLLM's benchmark client reports them) are at or
    below the targets. The search finds the highest load that meets it, like ``vllm bench sweep serve_sla``
    (``vllm/benchmarks/sweep/serve_sla.py`` ``solve_sla``: the maximum first, then the minimum, then the root of a
    monotone PCHIP interpolation of the margin, bisection when it has none).

    Attributes:
        name: option name.
        p99_ttft_ms: p99 time to first token target (ms); ``None``: not part of the SLO.
        p99_tpot_ms: p99 time per output token target (ms); ``None``: not part of the SLO.
        variable: the load the search varies: ``max_concurrency`` (requests in flight, all sent at once) or
            ``request_rate`` (requests/s, Poisson arrivals, no concurrency cap).
        min_load: lowest load tried (concurrency, or req/s).
        max_load: highest load tried; ``None``: ``workload.num_prompts`` for concurrency (all prompts in flight),
            64 req/s for rates (vLLM's serve_sla tries 8192 as "infinite"; past the point where every prompt is sent
            before the first answers, more rate changes nothing).
        resolution: the search stops when the highest passing and lowest failing loads are this close (1 for
            concurrency, as serve_sla; a fraction of a req/s for rates).
        max_points: most load points measured per server config (each is one run of the benchmark client).
        measure_top: in a basic-sweeper capacity sweep (``-m +sweep=capacity ...``), measure only this many server
            configs: before any job runs, the performance model (:mod:`ascendflow.perfmodel`, the plan's
            ``performance.capacity``) predicts every config's capacity, and the k highest are measured; the others
            are FINISHED MLflow children tagged ``capacity.pruned=true`` with ``predicted_capacity_rps`` and the
            reason, and no engine start (:mod:`ascendflow.capacity.pruning`). Configs without a prediction are
            always measured. ``None``: measure all. Refused with an Optuna sweeper or outside ``run.mode=capacity``.
    """

    name: str = "default"
    p99_ttft_ms: float | None = Field(default=None, gt=0, le=MAX_LATENCY_MS)
    p99_tpot_ms: float | None = Field(default=None, gt=0, le=MAX_LATENCY_MS)
    variable: Literal["max_concurrency", "request_rate"] = "max_concurrency"
    min_load: float = Field(default=1, ge=MIN_REQUEST_RATE, le=MAX_COUNT)
    max_load: float | None = Field(default=None, ge=MIN_REQUEST_RATE, le=MAX_COUNT)
    resolution: float = Field(default=1, gt=0, le=MAX_COUNT)
    max_points: int = Field(default=6, ge=2, le=64)
    measure_top: int | None = Field(default=None, ge=1, le=MAX_COUNT)

    @property
    def targets(self) -> dict[str, float]:
        """``{"p99_ttft_ms": ms, "p99_tpot_ms": ms}`` for the targets that are set."""
        return {k: v for k, v in (("p99_ttft_ms", self.p99_ttft_ms), ("p99_tpot_ms", self.p99_tpot_ms))
                if v is not None}

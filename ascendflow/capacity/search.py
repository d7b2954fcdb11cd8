"""Which load to measure next, and what the measured points say about capacity. Pure: no I/O, no engine.

The search follows ``vllm bench sweep serve_sla`` (``vllm/benchmarks/sweep/serve_sla.py``, ``SLAHistory`` and
``solve_sla``): the margin of a load point is the largest ``measured / target - 1`` over the SLO's metrics (<= 0
meets the SLO); the first point is the maximum load, the second the minimum, then the root of a monotone PCHIP
interpolation of margin against load (scipy's ``PchipInterpolator``), bisection between the best passing and the
first failing load when the interpolation has no root, one step up when the root was already measured; it stops
when the best passing and first failing loads are one ``resolution`` apart. Two differences, both because a point
costs tens of seconds here: a ``max_points`` cap, and no further point once the minimum fails (nothing lower to
try) or the maximum passes (nothing higher).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from ascendflow.schema.errors import ConfigError
from ascendflow.schema.slo import SloSpec
from ascendflow.schema.workload import WorkloadSpec

#: Highest request rate tried when ``slo.max_load`` is unset (req/s); see :class:`ascendflow.schema.slo.SloSpec`.
DEFAULT_MAX_RATE = 64.0


@dataclass(frozen=True)
class LoadRange:
    """The loads the search may try: ``low``..``high`` on a grid of ``step`` (concurrency or req/s)."""

    variable: str
    low: float
    high: float
    step: float

    def snap(self, value: float) -> float:
        """``value`` on the grid (rounded down), clamped to ``low``..``high``."""
        snapped = self.low + math.floor(round((value - self.low) / self.step, 9)) * self.step
        return round(min(max(snapped, self.low), self.high), 6)


def load_range(slo: SloSpec, workload: WorkloadSpec) -> LoadRange:
    """The search range for ``slo`` on ``workload``.

    Raises:
        ConfigError: no target set; ``slo.max_load`` below ``slo.min_load``; a fractional concurrency grid; a
            concurrency above ``workload.num_prompts`` (more in flight than requests sent measures nothing new).
    """
    if not slo.targets:
        raise ConfigError("slo.p99_ttft_ms", None, "a capacity search needs a latency target: set slo.p99_ttft_ms "
                                                   "and/or slo.p99_tpot_ms (ms)")
    if slo.variable == "max_concurrency":
        if slo.min_load != int(slo.min_load) or slo.resolution != int(slo.resolution):
            raise ConfigError("slo.resolution", slo.resolution, "concurrency is a whole number of requests: use "
                                                                "whole slo.min_load and slo.resolution")
        high = slo.max_load if slo.max_load is not None else float(workload.num_prompts)
        if high > workload.num_prompts:
            raise ConfigError("slo.max_load", slo.max_load, f"exceeds workload.num_prompts "
                                                            f"({workload.num_prompts}): at most that many requests "
                                                            f"can be in flight; raise workload.num_prompts")
    else:
        high = slo.max_load if slo.max_load is not None else DEFAULT_MAX_RATE
    if high < slo.min_load:
        raise ConfigError("slo.max_load", high, f"must be at least slo.min_load ({slo.min_load})")
    return LoadRange(slo.variable, float(slo.min_load), float(high), float(slo.resolution))


def margin(point: Mapping[str, Any], targets: Mapping[str, float]) -> float:
    """Largest ``measured / target - 1`` over ``targets`` (``serve_sla``'s margin, relative); <= 0 meets the SLO.
    A point with no completed request has margin ``inf``."""
    if not point.get("completed"):
        return math.inf
    return max(float(point[k]) / t - 1 for k, t in targets.items())


@dataclass
class History:
    """Measured load points: load -> margin, and the benchmark results behind them."""

    loads: LoadRange
    margins: dict[float, float] = field(default_factory=dict)
    points: dict[float, dict[str, Any]] = field(default_factory=dict)

    def add(self, load: float, result: Mapping[str, Any], targets: Mapping[str, float]) -> float:
        """Record the benchmark result at ``load``; returns its margin."""
        self.points[load] = dict(result)
        self.margins[load] = margin(result, targets)
        return self.margins[load]

    def best_passing(self) -> float | None:
        """Highest load that met the SLO, ``None`` when none did."""
        return max((x for x, m in self.margins.items() if m <= 0), default=None)

    def first_failing(self) -> float | None:
        """Lowest load that missed the SLO, ``None`` when none did."""
        return min((x for x, m in self.margins.items() if m > 0), default=None)

    def next_load(self, max_points: int) -> float | None:
        """The next load to measure, or ``None`` when the search is done (see the module docstring)."""
        r = self.loads
        if len(self.margins) >= max_points:
            return None
        if not self.margins:
            return r.high
        if len(self.margins) == 1:
            return None if self.margins[r.high] <= 0 or r.low == r.high else r.low
        passing, failing = self.best_passing(), self.first_failing()
        if passing is None or failing is None or failing - passing <= r.step + 1e-9:
            return None
        value = self._root(passing, failing)
        value = r.snap(value)
        while value in self.margins and value < failing:
            value = round(value + r.step, 6)
        return value if passing < value < failing else None

    def _root(self, passing: float, failing: float) -> float:
        from scipy.interpolate import PchipInterpolator

        xs = sorted(x for x, m in self.margins.items() if math.isfinite(m))
        if len(xs) >= 2:
            roots = [x for x in PchipInterpolator(xs, [self.margins[x] for x in xs], extrapolate=False).solve(0.0)
                     if passing - 1e-9 <= x <= failing + 1e-9]
            if roots:
                return float(roots[0])
        return (passing + failing) / 2


def capacity_summary(history: History, devices: int) -> dict[str, Any]:
    """What a finished search found.

    Returns:
        ``slo_met`` (bool), ``capacity_load`` (the best passing concurrency or req/s; 0 when none),
        ``capacity_rps`` (requests/s measured at that load; 0 when none), ``capacity_rps_per_device``,
        ``capacity_goodput_rps`` (vLLM's ``request_goodput`` there: requests/s that met the SLO individually),
        ``capacity_output_throughput`` (tokens/s there), the p99 TTFT/TPOT there, ``load_points`` (number),
        ``capacity_at_range_max`` (the highest load tried met the SLO: the capacity is at least this).
    """
    best = history.best_passing()
    point = history.points.get(best, {}) if best is not None else {}
    rps = float(point.get("request_throughput", 0.0))
    return {
        "slo_met": best is not None,
        "capacity_load": best if best is not None else 0.0,
        "capacity_rps": rps,
        "capacity_rps_per_device": rps / max(devices, 1),
        "capacity_goodput_rps": float(point.get("request_goodput") or 0.0),
        "capacity_output_throughput": float(point.get("output_throughput", 0.0)),
        "capacity_p99_ttft_ms": float(point.get("p99_ttft_ms", 0.0)),
        "capacity_p99_tpot_ms": float(point.get("p99_tpot_ms", 0.0)),
        "load_points": len(history.margins),
        "capacity_at_range_max": best is not None and best >= history.loads.high,
    }

"""``run.mode=capacity``: serve once, then search the highest load that meets the SLO (:mod:`ascendflow.capacity`).

In a capacity sweep with ``slo.measure_top`` the sweep decided beforehand which configs are measured: a pruned
config ends FINISHED with its plan and prediction and never starts an engine.
"""

from __future__ import annotations

from ascendflow import console
from ascendflow.capacity.plot import plot_load_curve
from ascendflow.capacity.pruning import decision_entry
from ascendflow.capacity.search import load_range
from ascendflow.tracking.sweep_predictions import record_measured, record_pruned
from ascendflow.compiler import Plan
from ascendflow.modes.base import Job, Mode, Outcome
from ascendflow.runner.capacity_run import serve_and_search
from ascendflow.runner.contention import findings
from ascendflow.runner.versions import verify_installed
from ascendflow.schema import RunSpec


class CapacityMode(Mode):
    """Capacity search at the SLO (:func:`ascendflow.runner.capacity_run.serve_and_search`)."""

    name = "capacity"

    def check(self, spec: RunSpec) -> None:
        """A bad SLO is refused before anything starts.

        Raises:
            ConfigError: see :func:`ascendflow.capacity.search.load_range`.
        """
        load_range(spec.slo, spec.workload)
        super().check(spec)

    def run(self, plan: Plan, job: Job) -> Outcome:
        """Skip a config the sweep pruned (``result=None``); else search the capacity and plot its load curve
        (``capacity/load_curve.png``), tagged ``capacity.slo_met`` and ``capacity.variable``.

        Raises:
            VersionMismatchError, EngineStartError: see :func:`ascendflow.runner.versions.verify_installed` and
                :func:`ascendflow.runner.capacity_run.serve_and_search`.
        """
        entry = decision_entry(job.sweep, job.name)
        if entry is not None:
            if not entry["measure"]:  # slo.measure_top: the engine is never started
                record_pruned(job.tracked, entry, job.run_dir)
                return Outcome(plan, result=None, warnings=[
                    f"config not measured (slo.measure_top): {entry['reason'].removeprefix('pruned: ')}"])
            record_measured(job.tracked, entry)
        with job.tracked.system_metrics():
            verify_installed(plan.target.engine)
            with console.step("capacity search at the SLO (vLLM server, vLLM's benchmark client)") as update:
                result = serve_and_search(plan, job.spec, job.run_dir, update, job.secrets)
        capacity = result["capacity"]
        plot_load_curve(capacity, job.run_dir / "capacity" / "load_curve.png", f"{job.name} · {job.spec.model.id}")
        tags, warnings = findings(result, ((plan.performance or {}).get("capacity") or {}).get("capacity_rps")
                                  is not None)  # issue 25 row 9: a capacity measured on a shared host says so
        return Outcome(plan, result, tags={"capacity.slo_met": str(capacity["slo_met"]).lower(),
                                           "capacity.variable": capacity["variable"], **tags}, warnings=warnings)

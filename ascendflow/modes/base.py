"""The interface every run mode implements: what the job asks of a mode, and what a mode hands back to record.

The job (:mod:`ascendflow.app`) keeps the order of things — spec, tracked run, model, plan, mode, record, summary —
and asks the mode's handler at four points:

1. :meth:`Mode.check` before anything is recorded or loaded (a bad SLO for ``capacity``);
2. the class attributes while it records the spec and loads the model (``needs_weights``, ``runs_engine``...);
3. :meth:`Mode.prepare` with the compiled plan, before the plan is written (``rehearse`` refuses a single-node plan);
4. :meth:`Mode.run`, which runs the plan and returns an :class:`Outcome`: the job writes ``result.json`` from it,
   logs its metrics and tags, ends the MLflow run and prints the summary.

A new mode is one module subclassing :class:`Mode` and one entry in :data:`ascendflow.modes.MODES`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ascendflow.compiler import Plan
from ascendflow.runner.detect import compile_for_this_host
from ascendflow.schema import ConfigError, RunSpec
from ascendflow.tracking import TrackedRun


@dataclass(frozen=True)
class Job:
    """What a mode's handler may use of the job.

    Attributes:
        spec: the validated run spec.
        raw: the resolved config the spec was validated from (a rehearsal compiles its scaled-down spec from it).
        name: the job's name: the single run's ``model-hardware-<layout>``, or a sweep job's swept overrides (the key
            of its entry in a capacity sweep's pruning decision).
        recipe: the ``+recipe=`` choice, if any.
        run_dir: the Hydra job directory every file of the run is written to.
        sweep: the multirun's parent run (``ascendflow.tracking.sweep.read_sweep``), ``None`` for a single run.
        secrets: secret values of the job, ``{name: value}``: handed to the engine, never written.
        tracked: the job's MLflow run, for what must be recorded before the engine starts (it may fail).
    """

    spec: RunSpec
    raw: dict[str, Any]
    name: str
    recipe: str | None
    run_dir: Path
    sweep: dict[str, Any] | None
    secrets: dict[str, str]
    tracked: TrackedRun


@dataclass
class Outcome:
    """What a mode hands back for the job to record.

    Attributes:
        plan: the plan that was measured: the written plan, or another one (a rehearsal's scaled-down plan, whose
            predictions are then logged beside its measurements and the written plan's warnings say "target plan").
        result: the runner's outcome (``engine``, ``benchmark``, ``capacity``... as
            :func:`ascendflow.report.result_record` reads it); ``{}`` when nothing was measured (plan only);
            ``None`` when the mode decided not to run (a pruned capacity config): the run then ends FINISHED with
            what was recorded, no ``result.json`` and no summary.
        tags: MLflow tags to set once the result is recorded (e.g. ``capacity.slo_met``).
        warnings: lines printed after the summary (or alone when ``result`` is ``None``).
    """

    plan: Plan
    result: dict[str, Any] | None = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


class Mode(ABC):
    """One ``run.mode``: its handler.

    Attributes:
        name: the ``run.mode`` value (the ``run.mode`` tag, the summary's title).
        needs_hardware: runs on the plan's hardware, so it is refused when that hardware is not on this machine.
        needs_weights: the target model's weights are loaded here (else its config alone is resolved).
        runs_engine: starts an engine and measures it: the API key variable must be set, the run's system metrics
            are sampled, failed requests are checked and the sweep objective is scored from its metrics.
        predictions_prefix: prefix of the written plan's ``predicted_*`` metrics (``target_`` when the mode measures
            another plan, so no measured value sits beside a prediction for another model and device).
        supports_pd: runs a PD (prefill/decode) deployment; the others refuse it in :meth:`check` (per-role serving
            is not built yet, docs/pd.md).
    """

    name: ClassVar[str]
    needs_hardware: ClassVar[bool] = True
    needs_weights: ClassVar[bool] = True
    runs_engine: ClassVar[bool] = True
    predictions_prefix: ClassVar[str] = ""
    supports_pd: ClassVar[bool] = False

    def check(self, spec: RunSpec) -> None:
        """Refuse a spec this mode cannot run, before anything is recorded or loaded (default: a PD deployment in a
        mode without ``supports_pd``). A subclass that refuses more calls ``super().check(spec)`` after its own rules.

        Raises:
            ConfigError: the key, value, rule and fix.
        """
        if spec.pd.enabled and not self.supports_pd:
            raise ConfigError("run.mode", self.name,
                              f"pd.connector={spec.pd.connector}: a PD deployment is planned or rehearsed only "
                              f"(per-role serving is not built yet, docs/pd.md); use run.mode=plan or rehearse")

    def profile_warnings(self, spec: RunSpec) -> list[str]:
        """The warning for ``run.profile=true`` when this mode does not profile (only served runs are profiled)."""
        if not spec.run.profile:
            return []
        return [f"run.profile=true: this {self.name} run is not profiled here; only served runs are profiled"]

    def plan(self, spec: RunSpec, model: Any, job: Job) -> Plan:
        """The plan the job writes and runs (default: ``spec`` compiled for this host,
        :func:`ascendflow.runner.detect.compile_for_this_host`); ``run.mode=search`` returns its top pick.

        Raises:
            ConfigError: as :func:`ascendflow.compiler.compile_plan`.
        """
        return compile_for_this_host(spec, model)

    def prepare(self, plan: Plan, job: Job) -> None:
        """Refuse a compiled plan before it is written or anything started (default: nothing to refuse).

        Raises:
            ConfigError: the key, value, rule and fix.
        """

    @abstractmethod
    def run(self, plan: Plan, job: Job) -> Outcome:
        """Run the written ``plan`` and return what to record.

        Raises:
            ConfigError, EngineStartError, ModelNotFoundError, VersionMismatchError: recorded FAILED by the job.
        """

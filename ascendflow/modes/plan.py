"""``run.mode=plan``: write the plan and launch scripts, start nothing."""

from __future__ import annotations

from ascendflow.compiler import Plan
from ascendflow.modes.base import Job, Mode, Outcome
from ascendflow.platforms import platform_for
from ascendflow.schema import RunSpec


class PlanMode(Mode):
    """The plan alone: its files are written by the job; nothing runs and nothing is measured."""

    name = "plan"
    supports_pd = True  # a PD plan's roles are planned
    needs_hardware = False
    needs_weights = False
    runs_engine = False

    def profile_warnings(self, spec: RunSpec) -> list[str]:
        """On a device target the launch scripts carry vLLM's profiler switch: say where its traces go."""
        if not spec.run.profile or not platform_for(spec.hardware.kind).profiler_in_scripts:
            return super().profile_warnings(spec)
        return [f"run.profile=true: this {self.name} run is not profiled here; the launch scripts carry vLLM's "
                "profiler switch (traces in ./vllm_profile on the node between /start_profile and /stop_profile, "
                "e.g. vllm bench serve --profile)"]

    def run(self, plan: Plan, job: Job) -> Outcome:
        """Nothing to run: an empty result."""
        return Outcome(plan)

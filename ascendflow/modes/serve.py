"""``run.mode=serve``: start vLLM's server on the plan and benchmark it with vLLM's client."""

from __future__ import annotations

from ascendflow import console
from ascendflow.compiler import Plan
from ascendflow.modes.base import Job, Mode, Outcome
from ascendflow.runner.contention import findings
from ascendflow.runner.local import serve_and_benchmark
from ascendflow.runner.versions import verify_installed
from ascendflow.schema import RunSpec


class ServeMode(Mode):
    """Serve and benchmark (:func:`ascendflow.runner.local.serve_and_benchmark`); the only profiled mode."""

    name = "serve"

    def profile_warnings(self, spec: RunSpec) -> list[str]:
        """A served run is profiled (:mod:`ascendflow.profiling`): no warning."""
        return []

    def run(self, plan: Plan, job: Job) -> Outcome:
        """Check the installed engine, then serve and benchmark with the run's system metrics sampled.

        Raises:
            VersionMismatchError, EngineStartError: see :func:`ascendflow.runner.versions.verify_installed` and
                :func:`ascendflow.runner.local.serve_and_benchmark`.
        """
        with job.tracked.system_metrics():
            verify_installed(plan.target.engine)
            with console.step("serve + benchmark (vLLM server, vLLM's benchmark client)") as update:
                result = serve_and_benchmark(plan, job.spec, job.run_dir, update, job.secrets)
        outcome = Outcome(plan, result)
        # Issue 20 row 12l, issue 25 row 9: a measurement on a shared host says so; its prediction error is not
        # compared.
        tags, warnings = findings(result, bool((plan.performance or {}).get("predicted")))
        outcome.tags.update(tags)
        outcome.warnings.extend(warnings)
        return outcome

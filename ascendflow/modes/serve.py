"""``run.mode=serve``: start vLLM's server on the plan and benchmark it with vLLM's client."""

from __future__ import annotations

from ascendflow import console
from ascendflow.compiler import Plan
from ascendflow.modes.base import Job, Mode, Outcome
from ascendflow.runner.contention import contention_tags
from ascendflow.runner.local import serve_and_benchmark
from ascendflow.runner.neighbours import concurrency_warning
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
        contention = result.get("contention") or {}
        engines = len(contention.get("other_engines") or [])
        if others := result.get("concurrent_engines"):  # the machine was shared while it measured
            outcome.warnings.append(concurrency_warning(set(others)))
        if others or engines:  # ascendflow runs by their run directory; any user's vLLM engine by its command line
            outcome.tags["concurrent_engines"] = str(max(len(others or []), engines))
        if contention:  # issue 25 row 9: a contended measurement says so, and its prediction error is not compared
            outcome.tags.update(contention_tags(contention, bool((plan.performance or {}).get("predicted"))))
            if contention["contended"]:
                outcome.warnings.append(contention["line"])
        return outcome

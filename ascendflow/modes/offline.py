"""``run.mode=offline``: generate the workload with ``vllm.LLM`` in a worker process, no server."""

from __future__ import annotations

from ascendflow import console
from ascendflow.compiler import Plan
from ascendflow.modes.base import Job, Mode, Outcome
from ascendflow.runner.local import run_offline
from ascendflow.runner.versions import verify_installed


class OfflineMode(Mode):
    """Offline generation (:func:`ascendflow.runner.local.run_offline`)."""

    name = "offline"

    def run(self, plan: Plan, job: Job) -> Outcome:
        """Check the installed engine, then generate offline with the run's system metrics sampled.

        Raises:
            VersionMismatchError, EngineStartError: see :func:`ascendflow.runner.versions.verify_installed` and
                :func:`ascendflow.runner.local.run_offline`.
        """
        with job.tracked.system_metrics():
            verify_installed(plan.target.engine)
            with console.step("offline generation (vllm.LLM)") as update:
                return Outcome(plan, run_offline(plan, job.spec, job.run_dir, update, job.secrets))

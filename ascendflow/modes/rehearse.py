"""``run.mode=rehearse``: run a multi-node plan's own launch scripts here, scaled down to a tiny model on the CPU
engine (:mod:`ascendflow.rehearsal`). The rehearsal measures its scaled-down plan, so the target plan's predictions
are logged apart (``target_predicted_*``)."""

from __future__ import annotations

from ascendflow import console
from ascendflow.compiler import Plan
from ascendflow.modes.base import Job, Mode, Outcome
from ascendflow.rehearsal.job import check_rehearsable, rehearsal_plan
from ascendflow.rehearsal.nodes import argv_diff, rehearse
from ascendflow.rehearsal.pd_nodes import kv_store_dir, rehearse_pd
from ascendflow.rehearsal.pd_scale import swap_connector
from ascendflow.runner.artifacts import write_plan
from ascendflow.runner.versions import verify_installed


class RehearseMode(Mode):
    """Rehearse the plan's nodes on this machine, whatever the plan's hardware."""

    name = "rehearse"
    supports_pd = True  # a PD plan's roles are rehearsed
    needs_hardware = False  # runs on this machine's CPU engine
    needs_weights = False  # the rehearsal's tiny model is resolved by rehearsal_plan
    predictions_prefix = "target_"

    def prepare(self, plan: Plan, job: Job) -> None:
        """A plan that cannot be rehearsed here is refused before anything is written or started.

        Raises:
            ConfigError: see :func:`ascendflow.rehearsal.job.check_rehearsable`.
        """
        check_rehearsable(plan)

    def run(self, plan: Plan, job: Job) -> Outcome:
        """Compile the rehearsal of ``plan``, write it under ``rehearsal/`` with ``argv_diff.txt``, tag the run
        (``rehearsal_of``, ``rehearsal.recipe``, ``rehearsal.plan_hash``, ``rehearsal.launcher``) and run it; the
        outcome's plan is the rehearsed one. A PD plan's rehearsal runs its role scripts with the CPU engine's KV
        connector (:func:`~ascendflow.rehearsal.pd_scale.swap_connector`) and its proxy
        (:func:`~ascendflow.rehearsal.pd_nodes.rehearse_pd`).

        Raises:
            ConfigError, VersionMismatchError, EngineStartError: see :mod:`ascendflow.rehearsal`.
        """
        with job.tracked.system_metrics():
            with console.step("rehearsal plan (tiny model, CPU engine)") as update:
                rspec, rplan = rehearsal_plan(job.raw, plan, update)
            if rplan.roles is not None:  # PD: the CPU engine's KV connector in place of the plan's
                rplan = swap_connector(rplan, str(kv_store_dir(job.run_dir)))
            write_plan(rplan, job.run_dir / "rehearsal")
            (job.run_dir / "rehearsal" / "argv_diff.txt").write_text(argv_diff(plan, rplan))
            job.tracked.set_tags({"rehearsal_of": plan.plan_hash, "rehearsal.recipe": job.recipe or "",
                                  "rehearsal.plan_hash": rplan.plan_hash, "rehearsal.launcher": rplan.launcher})
            verify_installed(rplan.target.engine)
            if rplan.roles is not None:
                with console.step(f"PD rehearsal: {len(rplan.workers)} engine(s) on {rplan.target.nodes} node(s) "
                                  "and the proxy here, vLLM's benchmark client") as update:
                    return Outcome(rplan, rehearse_pd(rplan, rspec, job.run_dir, update))
            with console.step(f"rehearsal: {rplan.target.nodes} nodes ({rplan.launcher}) here, vLLM's benchmark "
                              "client") as update:
                return Outcome(rplan, rehearse(rplan, rspec, job.run_dir, update))

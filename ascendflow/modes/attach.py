"""``run.mode=attach``: measure a deployment already running at ``run.server_url`` (started by the plan's own launch
scripts on its nodes) with vLLM's client: one benchmark of the workload, or with ``run.attach_capacity=true`` the SLO
capacity search of ``run.mode=capacity``. The run is recorded like a local served run: the plan, its ``plan_hash``
tag, its predictions beside the measurements (docs/attach.md).
"""

from __future__ import annotations

from ascendflow import console
from ascendflow.capacity.plot import plot_load_curve
from ascendflow.capacity.search import load_range
from ascendflow.compiler import Plan
from ascendflow.modes.base import Job, Mode, Outcome
from ascendflow.runner.attach import attached, benchmark_attached, check_deployment
from ascendflow.runner.attach_config import check_cache_config, served_cache_config
from ascendflow.runner.capacity_run import search_capacity
from ascendflow.schema import ConfigError, RunSpec


class AttachMode(Mode):
    """Benchmark or capacity-search a running deployment (:mod:`ascendflow.runner.attach`); starts no engine."""

    name = "attach"
    needs_hardware = False  # the deployment runs on its own nodes
    needs_weights = False  # the client needs the tokenizer only (the plan's path when here, else the model's id)
    # runs_engine stays True: the API key variable must be set, failed requests are checked, the objective scored

    def check(self, spec: RunSpec) -> None:
        """Refuse a run without a server URL, or a capacity search with a bad SLO, before anything is recorded.

        Raises:
            ConfigError: ``run.server_url`` unset; a capacity search's bad SLO (see
                :func:`ascendflow.capacity.search.load_range`).
        """
        if not spec.run.server_url:
            raise ConfigError("run.server_url", None, "run.mode=attach measures a running deployment and needs its "
                                                      "URL; set run.server_url=http://<node0>:<port> (the launch "
                                                      f"scripts' port is run.launch_port={spec.run.launch_port})")
        if spec.run.attach_capacity:
            load_range(spec.slo, spec.workload)
        super().check(spec)

    def prepare(self, plan: Plan, job: Job) -> None:
        """The deployment answers, accepts the key and serves the plan's model: checked before the plan is written.

        Raises:
            ConfigError: see :func:`ascendflow.runner.attach.check_deployment`.
        """
        self._mismatch(plan, job.spec, check_deployment(plan, job.spec, self._key(job)), self._key(job))

    @staticmethod
    def _mismatch(plan: Plan, spec: RunSpec, url: str, key: str | None) -> list[str]:
        """The plan's KV cache knobs the server runs otherwise (``key=planned``), refused unless
        ``run.attach_allow_mismatch`` (:func:`ascendflow.runner.attach_config.check_cache_config`)."""
        return check_cache_config(url, plan.engine_args, served_cache_config(url, key), spec.run.attach_allow_mismatch)

    def run(self, plan: Plan, job: Job) -> Outcome:
        """One benchmark of the workload, or (``run.attach_capacity``) the SLO capacity search with its load curve
        (``capacity/load_curve.png``, tags ``capacity.slo_met`` and ``capacity.variable``); tagged
        ``attach.server_url``.

        Raises:
            EngineDiedError, EngineStartError: the deployment went down, or the client failed.
        """
        spec, key = job.spec, self._key(job)
        url = check_deployment(plan, spec, key)
        mismatch = self._mismatch(plan, spec, url, key)
        job.tracked.set_tags({"attach.server_url": url,
                              **({"ascendflow.attach_mismatch": ",".join(mismatch)} if mismatch else {})})
        warnings = [f"the server at {url} does not run the plan's {', '.join(mismatch)} (run.attach_allow_mismatch="
                    "true): recorded tagged ascendflow.attach_mismatch, not a measurement of this plan"] if mismatch else []
        if not spec.run.attach_capacity:
            with console.step(f"benchmark of the deployment at {url} (vLLM's benchmark client)") as update:
                return Outcome(plan, benchmark_attached(plan, spec, job.run_dir, update, url, key), warnings=warnings)
        with console.step(f"capacity search at the SLO of the deployment at {url} (vLLM's benchmark client)") as update:
            result = search_capacity(plan, spec, job.run_dir, update, attached(url, key, job.run_dir))
        capacity = result["capacity"]
        plot_load_curve(capacity, job.run_dir / "capacity" / "load_curve.png", f"{job.name} · {spec.model.id}")
        return Outcome(plan, {**result, "engine": {}},
                       tags={"capacity.slo_met": str(capacity["slo_met"]).lower(),
                             "capacity.variable": capacity["variable"]}, warnings=warnings)

    @staticmethod
    def _key(job: Job) -> str | None:
        """The API key's value (from the variable ``run.api_key_env`` names), never written."""
        return job.secrets.get(job.spec.run.api_key_env) if job.spec.run.api_key_env else None

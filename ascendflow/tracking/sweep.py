"""Sweeps in MLflow: one parent run per Hydra multirun, one nested child run per job.

:class:`MlflowSweepCallback` (a Hydra callback, configured in ``conf/config.yaml``) creates the experiment and the
parent run once, in the launching process, before any job starts, and writes its id to ``<sweep dir>/
mlflow_sweep.json``; jobs (in the same process, or in joblib workers) read it and nest their run under it
(``mlflow.parentRunId``). When the sweep returns, the parent records how many children finished and failed and ends
FINISHED; an interrupted sweep ends it KILLED (see :func:`end_parent`). A capacity sweep with ``slo.measure_top``
also predicts every job's capacity before any runs and hands the decision to the jobs in the same dict
(:mod:`ascendflow.capacity.pruning`).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from ascendflow.capacity.pruning import KEY as PRUNING_KEY
from ascendflow.schema.errors import ConfigError
from ascendflow.schema.tracking import TrackingSpec
from ascendflow.schema.secrets import mask_credentials, mask_uris, secret_values
from ascendflow.secret_logging import override_secrets
from ascendflow.tracking.capacity_ranking import record_on_parent
from ascendflow.tracking.cluster import (SWEEP_ENV, publish_sweep, published_sweep, refuse_local_store, start_server,
                                         stop_server)
from ascendflow.tracking.stale import end_stale_runs, process_tags
from ascendflow.interrupts import Terminated
from ascendflow.tracking.server import wants_server
from ascendflow.tracking.sweep_size import refuse_oversized_sweep
from ascendflow.tracking.store import (artifact_root, ensure_experiment, open_client, refuse_unusable_store,
                                       tracking_uri)
from ascendflow.tracking.sweep_predictions import predict_sweep
from ascendflow.tracking.versions import version_tags

SWEEP_FILE = "mlflow_sweep.json"


def read_sweep(sweep_dir: Path) -> dict[str, Any] | None:
    """``{"run_id", "experiment_id", "tracking_uri", "swept_keys"}`` of the sweep's parent run, or ``None`` outside a
    sweep (or when tracking is off): what the sweep callback handed to this job's process (``$ASCENDFLOW_SWEEP``,
    for jobs on other machines), else ``<sweep_dir>/mlflow_sweep.json``."""
    published = published_sweep()
    if published is not None:
        return published
    path = sweep_dir / SWEEP_FILE
    return json.loads(path.read_text()) if path.exists() else None


def swept_keys(config: DictConfig) -> list[str]:
    """Config keys a multirun varies: sweep overrides on the command line (``a=1,2``, ``range()``, ``glob()``...) and
    an Optuna sweeper's ``hydra.sweeper.params``."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    overrides = list(OmegaConf.select(config, "hydra.overrides.task", default=[]) or [])
    keys = [o.get_key_element().lstrip("+~") for o in OverridesParser.create().parse_overrides(overrides)
            if o.is_sweep_override()]
    params = OmegaConf.select(config, "hydra.sweeper.params", default=None)
    if params:
        keys += [k for k in params if k not in keys]
    return keys


def _client(uri: str):
    return open_client(uri)


#: The parent run opened by this process (``mlflow_sweep.json``'s content), until it is ended: ``python -m
#: ascendflow`` ends it KILLED or FAILED when the sweep is interrupted or raises (:func:`end_open_parent`).
ACTIVE: dict[str, Any] = {}


def end_open_parent(status: str) -> bool:
    """End the parent run this process opened, if still open, with ``status``; returns True when one was ended.
    Store errors are reported on one line, never raised (the process is exiting)."""
    sweep = ACTIVE.pop("sweep", None)
    try:
        if sweep is None:
            return False
        return end_parent(sweep, status)
    except (Exception, KeyboardInterrupt, Terminated) as exc:
        print(f"error: could not end the sweep's parent run {sweep['run_id']} ({type(exc).__name__}); it is ended "
              f"FAILED at the next start on this machine", file=sys.stderr)
        return False
    finally:
        stop_server()  # the sweep's own tracking server never outlives it


def sweep_counts(uri: str, experiment_id: str, parent_id: str) -> dict[str, int]:
    """Children of ``parent_id`` by status: ``{"FINISHED": n, "FAILED": m, ...}``."""
    runs = _client(uri).search_runs([experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent_id}'",
                                    max_results=10000)
    counts: dict[str, int] = {}
    for run in runs:
        counts[run.info.status] = counts.get(run.info.status, 0) + 1
    return counts


def end_running_children(sweep: dict[str, str], status: str) -> int:
    """End ``status`` (tag ``error``) the children of the sweep still RUNNING: a job in another process (a Ray
    worker) interrupted with the sweep ends its own run only after the sweep's server is gone (measured: a Ctrl-C'd
    Ray served sweep left job 0's run RUNNING, issue 20 row 12b), so the sweep ends it first. Returns how many."""
    client = _client(sweep["tracking_uri"])
    running = client.search_runs([sweep["experiment_id"]], max_results=10000,
                                 filter_string=f"tags.mlflow.parentRunId = '{sweep['run_id']}' and "
                                               f"attributes.status = 'RUNNING'")
    for run in running:
        client.set_tag(run.info.run_id, "error", "interrupted" if status == "KILLED" else f"the sweep ended {status}")
        client.set_terminated(run.info.run_id, status=status)
    return len(running)


def end_parent(sweep: dict[str, str], status: str) -> bool:
    """Log the children's counts on the parent run and end it with ``status`` (idempotent); returns True when this
    call ended it. Ending it KILLED or FAILED ends children still RUNNING the same way first
    (:func:`end_running_children`)."""
    client = _client(sweep["tracking_uri"])
    if client.get_run(sweep["run_id"]).info.status in ("FINISHED", "FAILED", "KILLED"):
        return False
    if status != "FINISHED":
        end_running_children(sweep, status)
    counts = sweep_counts(sweep["tracking_uri"], sweep["experiment_id"], sweep["run_id"])
    for name, key in (("jobs_finished", "FINISHED"), ("jobs_failed", "FAILED"), ("jobs_killed", "KILLED")):
        client.log_metric(sweep["run_id"], name, counts.get(key, 0))
    client.set_terminated(sweep["run_id"], status=status)
    return True


def refuse_parallel_engines(launcher: DictConfig | None, mode: str) -> None:
    """Jobs that start engines on this machine share its devices: a parallel launcher may only plan.

    Ray launchers are not refused: each job claims a whole node's devices (``ascendflow/tracking/cluster.py``
    ``ray_remote``), so Ray starts one engine per node at a time (docs/cluster.md).

    Raises:
        ConfigError: ``hydra/launcher=joblib`` with ``n_jobs != 1`` and a job that would serve or run offline.
    """
    target = str(OmegaConf.select(launcher, "_target_", default="")) if launcher is not None else ""
    n_jobs = OmegaConf.select(launcher, "n_jobs", default=1) if launcher is not None else 1
    if "joblib" in target and n_jobs != 1 and mode in ("serve", "offline", "capacity"):
        raise ConfigError("hydra.launcher.n_jobs", n_jobs,
                          "parallel jobs would start engines on the same devices at once; use run.mode=plan for "
                          "parallel sweeps, or hydra.launcher.n_jobs=1")


def _hardware_here(config: DictConfig) -> bool:
    """Whether the sweep's hardware option is on this machine (``auto`` jobs then serve)."""
    from ascendflow.runner.detect import hardware_present
    from ascendflow.schema.hardware import HardwareSpec

    try:
        return hardware_present(HardwareSpec.model_validate(OmegaConf.to_container(config.hardware, resolve=True)))
    except Exception:  # an invalid hardware option fails in every job with its own message
        return OmegaConf.select(config, "hardware.kind", default="cpu") == "cpu"


_ABSENT = object()


def refuse_bad_search_space(config: DictConfig) -> None:
    """A sweeper's search space must name existing config keys; a capacity search must vary at least one server
    knob and never the workload or the SLO (the search sets the load itself and holds the rest fixed).

    Raises:
        ConfigError: a swept key (command line or ``hydra.sweeper.params``) that is not in the config (Hydra would
            fail the first job with a multi-line error), an empty capacity search space, or a capacity search over
            ``workload.*``/``slo.*``.
    """
    choices = OmegaConf.select(config, "hydra.runtime.choices", default={}) or {}
    refuse_bad_group_options(config, choices)
    added = {o.split("=", 1)[0].lstrip("+") for o in OmegaConf.select(config, "hydra.overrides.task", default=[]) or []
             if o.startswith("+")}
    for name in swept_keys(config):
        if name in added or name in choices or name.split("/")[0] in choices:
            continue  # an added key (explicit) or a config group option (graph=eager,compiled)
        if OmegaConf.select(config, name, default=_ABSENT) is _ABSENT:
            given = {o.split("=", 1)[0].lstrip("+~"): o.split("=", 1)[-1]
                     for o in OmegaConf.select(config, "hydra.overrides.task", default=[]) or []}
            params = OmegaConf.select(config, "hydra.sweeper.params", default=None) or {}
            raise ConfigError(name, given.get(name, params.get(name)), "is not a config key, so no job could use it (check the spelling; "
                                               "`python -m ascendflow --cfg job` lists the keys)")
    if OmegaConf.select(config, "run.mode", default="auto") != "capacity":
        return
    keys = swept_keys(config)
    if not keys:
        raise ConfigError("hydra.sweeper.params", "{}", "a capacity sweep needs at least one server knob to vary; "
                                                        "sweep one on the command line, e.g. engine.max_num_seqs=4,16")
    held = [k for k in keys if k.split(".")[0] in ("workload", "slo")]
    if held:
        raise ConfigError(held[0], OmegaConf.select(config, held[0], default=None),
                          "a capacity search varies the load itself and holds the workload and SLO fixed; sweep "
                          "server knobs (engine.*, graph, parallel.*, quantization) and run one sweep per workload")


def refuse_bad_group_options(config: DictConfig, choices: Any) -> None:
    """Every option a command-line sweep gives a config group (``model=smolm2,smollm2_135m``) must exist: Hydra
    would fail the first job with its 25-line block and leave the other jobs unrun. The options are those of Hydra's
    config repository (the ``conf/`` search path and plugins), as ``refuse_bad_overrides`` lists them for a single
    run.

    Raises:
        ConfigError: the group, the option that does not exist, and the options there are.
    """
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if not GlobalHydra.instance().is_initialized():
        return
    loader = GlobalHydra.instance().config_loader()
    overrides = list(OmegaConf.select(config, "hydra.overrides.task", default=[]) or [])
    for o in OverridesParser.create().parse_overrides(overrides):
        group = o.get_key_element().lstrip("+~")
        if not o.is_sweep_override() or group not in choices or "@" in group:
            continue
        known = set(loader.get_group_options(group))
        if not known:
            continue
        for option in o.sweep_string_iterator():
            if option not in known:
                raise ConfigError(group, option, f"is not an option of the '{group}' group, so no job could use it; "
                                                 f"pick from: {', '.join(sorted(known))}")


def refuse_bad_shared_values(config: DictConfig) -> None:
    """Validate what every job of the sweep shares before any job starts: the spec (:func:`ascendflow.schema.load_spec`)
    of the sweep's config and, for a capacity sweep, its SLO against the workload
    (:func:`ascendflow.capacity.search.load_range`). A broken value that a sweep override replaces is left to the
    job (its swept values are validated there).

    Raises:
        ConfigError: a value outside the swept keys breaks a rule (e.g. ``slo.p99_ttft_ms=0``).
    """
    from ascendflow.capacity.search import load_range
    from ascendflow.schema import load_spec

    swept = set(swept_keys(config))
    try:
        raw = OmegaConf.to_container(OmegaConf.masked_copy(config, [k for k in config if k != "hydra"]), resolve=True,
                                     throw_on_missing=True)
    except Exception:  # an interpolation only a job can resolve: the jobs validate it
        return
    try:
        spec = load_spec(raw)
        if spec.run.mode == "capacity":
            load_range(spec.slo, spec.workload)
    except ConfigError as exc:
        if not any(exc.key == k or exc.key.startswith(f"{k}.") for k in swept):
            raise


def refuse_search_without_measurements(config: DictConfig, engines: bool) -> None:
    """An Optuna search needs a measured objective; plan-only jobs return none (Optuna then fails after the last
    trial: "No trials are completed yet").

    Raises:
        ConfigError: an Optuna sweeper with jobs that only plan (``run.mode=plan``, or ``auto`` on hardware that is
            not on this machine).
    """
    sweeper = str(OmegaConf.select(config, "hydra.sweeper._target_", default="") or "")
    if "optuna" not in sweeper.lower() or engines:
        return
    mode = OmegaConf.select(config, "run.mode", default="auto")
    raise ConfigError("run.mode", mode, f"an Optuna search needs measured jobs, and these only write plans "
                                        f"(hardware.kind={OmegaConf.select(config, 'hardware.kind')}); sweep them "
                                        f"with the basic sweeper (-m, without a sweep= preset), or serve on "
                                        f"hardware that is here")


def refuse_bad_measure_top(config: DictConfig, tracking_enabled: bool) -> int | None:
    """``slo.measure_top`` of a multirun: the number of capacity configs to measure, or ``None`` (measure all).

    Raises:
        ConfigError: not an integer ≥ 1, set outside ``run.mode=capacity``, with an Optuna sweeper (it picks its
            own trials), or with tracking off (pruned configs are recorded as MLflow runs).
    """
    top = OmegaConf.select(config, "slo.measure_top", default=None)
    if top is None:
        return None
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise ConfigError("slo.measure_top", top, "must be an integer ≥ 1 (configs to measure) or null (measure "
                                                  "all); e.g. slo.measure_top=2")
    if OmegaConf.select(config, "run.mode", default="auto") != "capacity":
        raise ConfigError("slo.measure_top", top, f"prunes a capacity sweep, and this is run.mode="
                                                  f"{OmegaConf.select(config, 'run.mode')}; add +sweep=capacity "
                                                  f"(or run.mode=capacity), or drop slo.measure_top")
    if "optuna" in str(OmegaConf.select(config, "hydra.sweeper._target_", default="") or "").lower():
        raise ConfigError("slo.measure_top", top, "prunes a basic-sweeper grid before any job runs, and an Optuna "
                                                  "sweeper picks its own trials; sweep with -m and the basic "
                                                  "sweeper, or drop slo.measure_top")
    if not tracking_enabled:
        raise ConfigError("slo.measure_top", top, "pruned configs are recorded as MLflow runs, and tracking is off; "
                                                  "set tracking.enabled=true or drop slo.measure_top")
    return top


def print_ranking(rows: list[dict[str, Any]]) -> None:
    """The capacity ranking as a table on the terminal (rich); pruned configs (``slo.measure_top``) last."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="capacity at the SLO, per server config")
    for col in ("rank", "config", "capacity req/s", "per device", "load", "p99 TTFT ms", "p99 TPOT ms", "Pareto"):
        # The config name is what the reader needs whole: it folds onto more lines instead of being cut ("engine.…").
        table.add_column(col, overflow="fold", min_width=24 if col == "config" else None)
    for r in rows:
        if r.get("pruned"):
            table.add_row("-", r["name"], f"pruned (predicted {r['predicted_capacity_rps']:.2f})", "", "", "", "",
                          "")
            continue
        table.add_row(str(r["rank"]), r["name"], f"{r['capacity_rps']:.2f}" if r["slo_met"] else "SLO not met",
                      f"{r['capacity_rps_per_device']:.2f}", f"{r['capacity_load']:g}",
                      f"{r['capacity_p99_ttft_ms']:.0f}", f"{r['capacity_p99_tpot_ms']:.1f}",
                      "yes" if r["pareto"] else "")
    Console(stderr=True).print(table)


def _pruning(config: DictConfig, measure_top: int) -> dict[str, Any]:
    """Predict every job's capacity, keep the top ``measure_top`` (:mod:`ascendflow.capacity.pruning`) and say so on
    one line; the result travels in the sweep dict to every job."""
    from ascendflow.capacity.pruning import decide

    configs = decide(predict_sweep(config, swept_keys(config)), measure_top)
    measured = [c for c in configs if c["measure"]]
    shown = "; ".join(f"{c['name']} ({c['predicted_capacity_rps']:.2f} req/s)" if c["predicted_capacity_rps"]
                      is not None else f"{c['name']} (not predicted)" for c in measured)
    print(f"capacity sweep: measuring {len(measured)} of {len(configs)} configs (slo.measure_top={measure_top}, by "
          f"predicted capacity): {shown}", file=sys.stderr)
    return {"measure_top": measure_top, "configs": configs}


class MlflowSweepCallback(Callback):
    """Hydra callback: the MLflow parent run of a multirun."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Refuse parallel engines and Optuna on plan-only jobs (exit 2, before any job); create the experiment and
        the parent run; write ``mlflow_sweep.json`` into the sweep directory. (Hydra turns callback exceptions into
        warnings, so refusals and store errors exit here with ``SystemExit`` and one line.)"""
        mode = OmegaConf.select(config, "run.mode", default="auto")
        engines = mode in ("serve", "offline", "capacity") or (mode == "auto" and _hardware_here(config))
        try:
            refuse_parallel_engines(OmegaConf.select(config, "hydra.launcher"), "serve" if engines else "plan")
            refuse_search_without_measurements(config, engines)
            refuse_oversized_sweep(config)
            refuse_bad_search_space(config)
            tracking = TrackingSpec.model_validate(OmegaConf.to_container(config.tracking, resolve=True))
            measure_top = refuse_bad_measure_top(config, tracking.enabled)
            refuse_bad_shared_values(config)
            if not tracking.enabled:
                return
            pruning = _pruning(config, measure_top) if measure_top is not None else None
            outputs = Path.cwd() / "outputs"
            # An unreachable tracking server fails in seconds instead of retrying for minutes (as TrackedRun does).
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
            server = wants_server(tracking)
            uri = None if server else tracking_uri(tracking, outputs)
            refuse_local_store(OmegaConf.select(config, "hydra.launcher"), tracking, uri)
            if uri is None:
                tracking = tracking.model_copy(update={"tracking_uri": start_server(tracking, outputs)})
            else:
                refuse_unusable_store(tracking, uri)
            self._open_parent(config, tracking, pruning)
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        except (KeyboardInterrupt, Terminated):
            end_open_parent("KILLED")
            raise
        except Exception as exc:  # the store cannot be used: nothing started
            stop_server()
            print(f"error: tracking.tracking_uri: the MLflow store cannot record the sweep ({type(exc).__name__}: "
                  f"{str(exc).splitlines()[0][:200] if str(exc) else ''}); nothing was run", file=sys.stderr)
            raise SystemExit(1) from None

    def _open_parent(self, config: DictConfig, tracking: TrackingSpec, pruning: dict[str, Any] | None) -> None:
        outputs = Path.cwd() / "outputs"
        uri = tracking_uri(tracking, outputs)
        client = _client(uri)
        choices = OmegaConf.select(config, "hydra.runtime.choices", default={}) or {}
        experiment = tracking.experiment_name or choices.get("recipe") or "ascendflow"
        experiment_id = ensure_experiment(client, experiment, artifact_root(tracking, outputs, uri))
        try:  # housekeeping of earlier runs never stops this sweep
            end_stale_runs(client)
        except Exception:
            pass
        sweep_dir = Path(str(config.hydra.sweep.dir)).resolve()
        env = OmegaConf.to_container(config.ascend.env, resolve=True) if OmegaConf.select(config, "ascend.env") \
            else {}
        marked = list(OmegaConf.select(config, "ascend.secret_env", default=[]) or [])
        task = list(OmegaConf.select(config, "hydra.overrides.task", default=[]) or [])
        secrets = [*secret_values(env, marked).values(), *override_secrets(task)]  # a swept secret: each choice
        overrides = mask_credentials(" ".join(task), secrets)
        run = client.create_run(experiment_id, run_name=f"sweep {sweep_dir.parent.name}/{sweep_dir.name}",
                                tags={**version_tags(), **process_tags(), "ascendflow.sweep": "parent",
                                      "sweep_dir": str(sweep_dir), "sweep.overrides": overrides[:5000],
                                      "sweep.keys": ",".join(swept_keys(config))[:5000],
                                      "sweeper": str(OmegaConf.select(config, "hydra.sweeper._target_", default=""))})
        sweep = {"run_id": run.info.run_id, "experiment_id": experiment_id, "tracking_uri": uri,
                 "swept_keys": swept_keys(config), **({PRUNING_KEY: pruning} if pruning else {})}
        if pruning:
            client.set_tag(run.info.run_id, "capacity.measure_top", str(pruning["measure_top"]))
        ACTIVE["sweep"] = sweep
        self.sweep = sweep  # pickled with the callback into every job's process (on_job_start)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        # The file is a record (jobs get the sweep from on_job_start): a URI's password is not written into it.
        (sweep_dir / SWEEP_FILE).write_text(json.dumps({**sweep, "tracking_uri": mask_uris(uri)}))

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        """In the job's own process (this one, a Ray worker, a submitit job): hand it the parent run
        (``$ASCENDFLOW_SWEEP``), so jobs on machines that cannot read the sweep directory still nest under it."""
        sweep = getattr(self, "sweep", None)
        if sweep is not None:  # set only by on_multirun_start
            publish_sweep(sweep)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """End the parent FINISHED with the children's counts (failed children do not fail the sweep)."""
        sweep = ACTIVE.get("sweep")  # the parent this process opened (None: tracking off, or already ended)
        os.environ.pop(SWEEP_ENV, None)
        if sweep is None:
            stop_server()
            return
        sweep_dir = Path(str(config.hydra.sweep.dir)).resolve()
        try:  # a capacity sweep's ranking and Pareto plot; never stops the parent from ending

            client = _client(sweep["tracking_uri"])
            children = client.search_runs([sweep["experiment_id"]], max_results=10000,
                                          filter_string=f"tags.mlflow.parentRunId = '{sweep['run_id']}' and "
                                                        f"attributes.status = 'FINISHED'")
            rows = record_on_parent(client, sweep["run_id"], children, sweep_dir, sweep.get(PRUNING_KEY))
            if rows:
                print_ranking(rows)
        except Exception as exc:
            print(f"warning: the capacity ranking was not recorded ({type(exc).__name__}: {exc})", file=sys.stderr)
        try:
            end_parent(sweep, "FINISHED")
            ACTIVE.pop("sweep", None)
            counts = sweep_counts(sweep["tracking_uri"], sweep["experiment_id"], sweep["run_id"])
            if counts and not counts.get("FINISHED"):
                print(f"error: no job of the sweep finished ({counts.get('FAILED', 0)} failed); see the FAILED child "
                      f"runs", file=sys.stderr)
                raise SystemExit(1)
        finally:
            ACTIVE.pop("sweep", None)
            stop_server()  # the sweep's own tracking server never outlives it

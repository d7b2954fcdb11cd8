"""Sweeps in MLflow: one parent run per Hydra multirun, one nested child run per job.

:class:`ascendflow.sweeps.callback.MlflowSweepCallback` (a Hydra callback, configured in ``conf/config.yaml``) creates the experiment and the
parent run once, in the launching process, before any job starts, and writes its id to ``<sweep dir>/
mlflow_sweep.json``; jobs (in the same process, or in joblib workers) read it and nest their run under it
(``mlflow.parentRunId``). When the sweep returns, the parent records how many children finished and failed and ends
FINISHED; an interrupted sweep ends it KILLED (see :func:`end_parent`).

This module is the MLflow side of a sweep (the parent run, its children's counts); what a sweep may be and the Hydra
callback that runs it live one layer up, in :mod:`ascendflow.sweeps`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ascendflow.capacity.pruning import KEY as PRUNING_KEY
from ascendflow.interrupts import Terminated
from ascendflow.schema.secrets import mask_credentials, mask_uris, secret_values
from ascendflow.schema.tracking import TrackingSpec
from ascendflow.secret_logging import override_secrets
from ascendflow.tracking.cluster import published_sweep, stop_server
from ascendflow.tracking.stale import end_stale_runs, process_tags
from ascendflow.tracking.store import artifact_root, ensure_experiment, open_client, tracking_uri
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



def open_parent(config: DictConfig, tracking: TrackingSpec, pruning: dict[str, Any] | None) -> dict[str, Any]:
    """Create the experiment and the sweep's parent run, write ``<sweep dir>/mlflow_sweep.json`` (the URI's password
    masked) and return the sweep dict every job nests under (kept in :data:`ACTIVE` until the parent ends)."""
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
    sweep_dir.mkdir(parents=True, exist_ok=True)
    # The file is a record (jobs get the sweep from on_job_start): a URI's password is not written into it.
    (sweep_dir / SWEEP_FILE).write_text(json.dumps({**sweep, "tracking_uri": mask_uris(uri)}))
    return sweep

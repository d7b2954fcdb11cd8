"""Sweeps whose jobs run elsewhere (Ray workers, Slurm or submitit processes): the parent run's identity travels with
the job, the store must be reachable from there, and a sweep's own tracking server lives as long as the sweep."""

from __future__ import annotations

import atexit
import json
import os
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ascendflow.platforms import platform_for
from ascendflow.schema.errors import ConfigError
from ascendflow.schema.tracking import TrackingSpec

#: Environment variable carrying the sweep's parent (``mlflow_sweep.json``'s content) into a job's process; set by
#: the sweep callback's ``on_job_start``, which Hydra runs in the job's own process (Ray worker, submitit job).
SWEEP_ENV = "ASCENDFLOW_SWEEP"

#: The tracking server this process started for its sweep (``TrackingServer``), until it is stopped.
SERVER: dict[str, Any] = {}


def remote_launcher(launcher: DictConfig | None) -> str | None:
    """``"ray"`` or ``"slurm"`` when the sweep's jobs run in processes that may be on other machines (the Ray
    launcher, submitit's Slurm executor); ``None`` for launchers on this machine (basic, joblib, submitit local)."""
    target = str(OmegaConf.select(launcher, "_target_", default="") or "") if launcher is not None else ""
    if "hydra_ray_launcher" in target:
        return "ray"
    if "hydra_submitit_launcher" in target and "SlurmLauncher" in target:
        return "slurm"
    return None


def refuse_local_store(launcher: DictConfig | None, tracking: TrackingSpec, uri: str | None) -> None:
    """Remote jobs cannot reach this machine's SQLite file (nor its ``file:`` artifacts).

    Args:
        launcher: ``hydra.launcher``.
        tracking: the tracking option.
        uri: the store URI the sweep would use (``None`` when it starts its own server).

    Raises:
        ConfigError: a Ray or Slurm sweep recording into a ``sqlite:``/``file:`` store or a path.
    """
    kind = remote_launcher(launcher)
    if kind is None or not tracking.enabled or uri is None or uri.startswith(("http://", "https://", "databricks")):
        return
    raise ConfigError("tracking.tracking_uri", uri,
                      f"{kind} jobs run in other processes and on other nodes that cannot write this machine's "
                      f"local store; use tracking=server (the sweep starts an MLflow server) or "
                      f"tracking=server tracking.tracking_uri=http://<host>:<port>")


def start_server(tracking: TrackingSpec, outputs_dir: Path) -> str:
    """Start the sweep's tracking server (:class:`~ascendflow.tracking.server.TrackingServer`) and return its URI;
    :func:`stop_server` (also run at exit) stops it."""
    from ascendflow.tracking.server import TrackingServer

    server = TrackingServer(tracking, outputs_dir)
    SERVER["server"] = server
    atexit.register(stop_server)
    return server.start()


def stop_server() -> bool:
    """Stop the sweep's tracking server if this process started one; returns True when one was stopped."""
    server = SERVER.pop("server", None)
    if server is None:
        return False
    server.stop()
    return True


def publish_sweep(sweep: dict[str, Any]) -> None:
    """Make the parent run known to jobs started by this process (:data:`SWEEP_ENV`)."""
    os.environ[SWEEP_ENV] = json.dumps(sweep)


def published_sweep() -> dict[str, Any] | None:
    """The parent run of :data:`SWEEP_ENV`, or ``None``."""
    text = os.environ.get(SWEEP_ENV)
    return json.loads(text) if text else None


def ray_remote(kind: str, devices_per_node: int) -> dict[str, Any]:
    """Ray task options of one sweep job (``hydra.launcher.ray.remote``): the whole node's devices, so Ray runs one
    engine per node.

    The platform's :meth:`~ascendflow.platforms.Platform.ray_task_options`: ``npu``: ``resources={"NPU":
    devices_per_node}`` (Ray detects Ascend NPUs as the ``NPU`` resource, ``ray/_private/accelerators/npu.py``, ray
    2.60.0); ``gpu``: ``num_gpus``; ``cpu``: the custom resource ``cpu_node: 1`` that ``hydra/launcher=ray_local``
    (and ``ray start --resources='{"cpu_node": 1}'``) gives each node, since a vLLM CPU engine binds a whole NUMA
    node. Every job also takes 1 CPU.

    Raises:
        ValueError: ``kind`` names no platform.
    """
    return platform_for(kind).ray_task_options(devices_per_node)


def register_resolvers() -> None:
    """``${ascendflow_ray_remote:${hardware.kind},${hardware.devices_per_node}}`` (:func:`ray_remote`)."""
    if not OmegaConf.has_resolver("ascendflow_ray_remote"):
        OmegaConf.register_new_resolver("ascendflow_ray_remote", ray_remote)

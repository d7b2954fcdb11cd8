"""Cluster launcher options: Ray task resources from the hardware option, and which stores remote jobs may use."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from ascendflow.schema.errors import ConfigError
from ascendflow.schema.tracking import TrackingSpec
from ascendflow.tracking.cluster import ray_remote, refuse_local_store, remote_launcher
from ascendflow.tracking.server import wants_server
from tests.conftest import compose_config


def test_ray_task_takes_a_whole_a2_node():
    hw = compose_config(["hardware=atlas_800i_a2"])["hardware"]
    assert ray_remote(hw["kind"], hw["devices_per_node"]) == {"num_cpus": 1, "resources": {"NPU": 8}}
    assert ray_remote("cpu", 1) == {"num_cpus": 1, "resources": {"cpu_node": 1}}


def test_slurm_launcher_is_remote_and_refuses_sqlite_but_submitit_local_does_not():
    slurm = OmegaConf.create({"_target_": "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"})
    local = OmegaConf.create({"_target_": "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher"})
    assert (remote_launcher(slurm), remote_launcher(local)) == ("slurm", None)
    with pytest.raises(ConfigError, match="use tracking=server"):
        refuse_local_store(slurm, TrackingSpec(), "sqlite:////x/mlflow.db")
    refuse_local_store(local, TrackingSpec(), "sqlite:////x/mlflow.db")
    refuse_local_store(slurm, TrackingSpec(), "http://head:5000")


def test_start_server_with_a_tracking_uri_is_refused():
    assert wants_server(TrackingSpec(start_server=None)) is True
    assert wants_server(TrackingSpec(start_server=None, tracking_uri="http://h:1")) is False
    with pytest.raises(ConfigError, match="tracking.start_server=True: starts a new server"):
        wants_server(TrackingSpec(start_server=True, tracking_uri="http://h:1"))

"""Tracking option (``conf/tracking/*.yaml``): where MLflow records runs."""

from __future__ import annotations

from pydantic import Field

from ascendflow.schema.base import Spec


class TrackingSpec(Spec):
    """MLflow settings.

    Attributes:
        enabled: record the run in MLflow.
        tracking_uri: MLflow tracking URI; ``None``: ``$MLFLOW_TRACKING_URI`` or
            ``sqlite:///<abs outputs>/mlflow/mlflow.db`` (file stores are refused by MLflow >= 3.13, DESIGN.md §4).
        artifact_location: artifact root for new experiments; ``None``: ``<abs outputs>/mlflow/artifacts``.
        experiment_name: ``None``: the recipe's name, or ``ascendflow`` without a recipe.
        start_server: start a local ``mlflow server`` for the run or sweep (``tracking=server``); ``None``: start one
            when ``tracking_uri`` is unset and the option is ``tracking=server`` (:mod:`ascendflow.tracking.server`).
        server_host: address the started server binds; ``127.0.0.1`` keeps it on this machine, ``0.0.0.0`` lets
            jobs on other nodes reach it (they are given this machine's host name).
        server_port: TCP port of the started server; ``None``: a free port.
    """

    enabled: bool = True
    tracking_uri: str | None = None
    artifact_location: str | None = None
    experiment_name: str | None = None
    start_server: bool | None = False
    server_host: str = "127.0.0.1"
    server_port: int | None = Field(default=None, ge=1, le=65535)

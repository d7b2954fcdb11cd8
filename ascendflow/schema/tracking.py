"""Tracking option (``conf/tracking/*.yaml``): where MLflow records runs."""

from __future__ import annotations

from ascendflow.schema.base import Spec


class TrackingSpec(Spec):
    """MLflow settings.

    Attributes:
        enabled: record the run in MLflow.
        tracking_uri: MLflow tracking URI; ``None``: ``$MLFLOW_TRACKING_URI`` or
            ``sqlite:///<abs outputs>/mlflow/mlflow.db`` (file stores are refused by MLflow >= 3.13, DESIGN.md §4).
        artifact_location: artifact root for new experiments; ``None``: ``<abs outputs>/mlflow/artifacts``.
        experiment_name: ``None``: the recipe's name, or ``ascendflow`` without a recipe.
    """

    enabled: bool = True
    tracking_uri: str | None = None
    artifact_location: str | None = None
    experiment_name: str | None = None

"""ascendflow's experiments open in the MLflow UI's runs table, not its GenAI view (issue 25 row 11)."""

from __future__ import annotations

from mlflow.tracking import MlflowClient

from ascendflow.tracking.store import ensure_experiment


def test_created_and_reused_experiments_carry_the_runs_table_kind(tmp_path):
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    created = ensure_experiment(client, "ascendflow", None)
    assert client.get_experiment(created).tags["mlflow.experimentKind"] == "custom_model_development"
    old = client.create_experiment("made-before")  # an experiment an older ascendflow created, without the tag
    assert ensure_experiment(client, "made-before", None) == old
    assert client.get_experiment(old).tags["mlflow.experimentKind"] == "custom_model_development"

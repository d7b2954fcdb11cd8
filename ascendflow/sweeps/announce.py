"""The sweep-level lines of a multirun: how many jobs at its start, and at its end the parent run, the children's
counts and the command that compares them (issue 25 row 8: a 200-job plan sweep printed nothing of its own before
job 0 and ended on job 199's summary)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from omegaconf import DictConfig

from ascendflow.schema.secrets import mask_uris
from ascendflow.sweeps.size import sweep_jobs


def _default_store(uri: str) -> bool:
    """Whether ``uri`` is the store ``python -m ascendflow.compare`` opens by default here (``outputs/mlflow``)."""
    return uri == f"sqlite:///{(Path.cwd() / 'outputs' / 'mlflow' / 'mlflow.db').resolve()}"


def compare_command(sweep: Mapping[str, Any]) -> str:
    """``python -m ascendflow.compare <parent id>``, with ``--tracking-uri`` (password masked) unless the sweep
    recorded into this directory's default store."""
    uri = sweep["tracking_uri"]
    store = "" if _default_store(uri) else f" --tracking-uri {mask_uris(uri)}"
    return f"python -m ascendflow.compare {sweep['run_id']}{store}"


def start_line(config: DictConfig, sweep_dir: Path, sweep: Mapping[str, Any] | None) -> str:
    """``sweep: 200 jobs (engine.max_num_seqs) in <dir>; MLflow parent run <id>`` (the parent only with tracking
    on; an Optuna sweep counts ``hydra.sweeper.n_trials``)."""
    jobs, key, _ = sweep_jobs(config)
    what = f"{jobs} job{'s' if jobs != 1 else ''}" + (f" ({key})" if key else "")
    parent = f"; MLflow parent run {sweep['run_id']} (experiment {sweep['experiment_id']})" if sweep else ""
    return f"sweep: {what} in {sweep_dir}{parent}"


def end_line(sweep: Mapping[str, Any], counts: Mapping[str, int]) -> str:
    """``sweep done: 3 jobs, 3 finished, 0 failed; MLflow parent run <id> FINISHED; compare them with: <command>``
    (other statuses, e.g. KILLED, are named when present)."""
    total = sum(counts.values())
    others = "".join(f", {n} {status.lower()}" for status, n in sorted(counts.items())
                     if status not in ("FINISHED", "FAILED") and n)
    return (f"sweep done: {total} job{'s' if total != 1 else ''}, {counts.get('FINISHED', 0)} finished, "
            f"{counts.get('FAILED', 0)} failed{others}; MLflow parent run {sweep['run_id']} FINISHED; compare them "
            f"with: {compare_command(sweep)}")

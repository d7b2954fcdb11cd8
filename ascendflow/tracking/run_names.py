"""Names of a sweep's child runs (pure): read by the sweep callback, the per-job predictions and each job's run."""

from __future__ import annotations


def job_run_name(task_overrides: list[str], keys: list[str]) -> str:
    """A child run's name: its values of the swept keys (``engine.max_num_seqs=16``), else all its overrides."""
    chosen = [o for o in task_overrides if o.split("=", 1)[0].lstrip("+~") in keys]
    return " ".join(chosen or task_overrides)[:250]

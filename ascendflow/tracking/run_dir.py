"""A run directory holds one run: what an earlier run left in a reused directory is set aside, never recorded again.

Scripts often fix ``hydra.run.dir`` (or ``hydra.sweep.dir``), so a job may start in a directory that already holds an
earlier run's ``plan.json``, ``result.json`` or ``error.txt``. The rule: when the job starts, before it writes
anything, every entry of the directory except what Hydra wrote for this job (its ``.hydra/`` copies and its job log,
which Hydra holds open) is moved into ``previous/<time the earlier run last wrote>/``. The directory then holds
only this run's files, which is what the summary's "run directory" points at, and ``previous/`` is never uploaded to
the MLflow run (:func:`upload_run_dir`): the earlier run's files were its own run's artifacts. Nothing is deleted: an
earlier run whose record is still pending (``mlflow_pending.json``) is uploaded with
``python -m ascendflow.sync <run dir>/previous/<time>``.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Iterable

#: Where a reused run directory keeps the earlier runs' files, one sub-directory per earlier run.
PREVIOUS_DIR = "previous"


def set_aside_earlier_outputs(run_dir: Path, keep: Iterable[str]) -> Path | None:
    """Move what an earlier run left in ``run_dir`` into ``run_dir/previous/<YYYY-mm-dd_HH-MM-SS-ffffff>`` (the
    local time of the newest entry moved, so earlier runs sort by age); call it before the job writes anything.

    Args:
        run_dir: the job's directory.
        keep: names of the entries this job's Hydra wrote (``.hydra``, ``<job name>.log``); ``previous`` is kept too.

    Returns:
        The directory the entries were moved to, or ``None`` when there was nothing to move, or when ``run_dir`` is
        (or holds) the working directory: its other entries are then the user's, not an earlier run's.
    """
    if Path.cwd().resolve().is_relative_to(run_dir.resolve()):
        return None
    keep = {*keep, PREVIOUS_DIR}
    earlier = sorted(p for p in run_dir.iterdir() if p.name not in keep) if run_dir.is_dir() else []
    if not earlier:
        return None
    newest = max(p.lstat().st_mtime for p in earlier)
    target = run_dir / PREVIOUS_DIR / datetime.datetime.fromtimestamp(newest).strftime("%Y-%m-%d_%H-%M-%S-%f")
    while target.exists():  # two earlier runs that last wrote within the same microsecond
        target = target.with_name(target.name + "_")
    target.mkdir(parents=True)
    for path in earlier:
        path.rename(target / path.name)
    return target


def upload_run_dir(client, run_id: str, run_dir: Path) -> None:
    """Upload ``run_dir`` as the run's artifacts, without ``previous/`` (the earlier runs' files).

    Args:
        client: an ``MlflowClient`` on the run's store.
        run_id: the MLflow run.
        run_dir: the job's directory.

    Raises:
        mlflow.exceptions.MlflowException, OSError: the artifact location refused a file.
    """
    if not (run_dir / PREVIOUS_DIR).exists():
        client.log_artifacts(run_id, str(run_dir))
        return
    for path in sorted(run_dir.iterdir()):
        if path.name == PREVIOUS_DIR:
            continue
        if path.is_dir():
            client.log_artifacts(run_id, str(path), artifact_path=path.name)
        else:
            client.log_artifact(run_id, str(path))


__all__ = ["PREVIOUS_DIR", "set_aside_earlier_outputs", "upload_run_dir"]

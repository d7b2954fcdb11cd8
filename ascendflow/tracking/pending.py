"""What a run could not record while its MLflow store was unreachable, kept in its run directory and uploaded later.

``<run_dir>/mlflow_pending.json`` holds the store URI, the run id and every params/metrics/tags call and the final
status that failed or came after the first failure. :func:`sync_run_dir` replays them, uploads the run directory as
the run's artifacts (without ``previous/``, :mod:`ascendflow.tracking.run_dir`), ends the run and renames the file
``mlflow_synced.json``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

from ascendflow.schema.secrets import MASK, URI_PASSWORD, mask_credentials, mask_text, mask_uris
from ascendflow.tracking.run_dir import upload_run_dir

#: :data:`~ascendflow.schema.secrets.URI_PASSWORD` on raw bytes (a quick test before a file is decoded).
URI_PASSWORD_BYTES = re.compile(URI_PASSWORD.pattern.encode())

PENDING_FILE, SYNCED_FILE = "mlflow_pending.json", "mlflow_synced.json"
#: Where run directories live under ``outputs/`` (single runs and sweep jobs, ``conf/config.yaml``).
RUN_DIR_GLOBS = ("runs/*/*", "multirun/*/*/*")


class PendingRecord:
    """The pending record of one run (written atomically after every addition)."""

    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self.path = path
        self.data = data

    @classmethod
    def start(cls, run_dir: Path | None, uri: str | None, run_id: str | None, reason: str) -> "PendingRecord":
        """A new record in ``run_dir`` (the current directory when unknown)."""
        path = (run_dir or Path.cwd()) / PENDING_FILE
        # A URI's password is not written (masked); sync_run_dir takes it from the environment again (store_uri).
        record = cls(path, {"tracking_uri": mask_uris(uri) if uri else uri, "run_id": run_id, "reason": reason, "params": {}, "metrics": {},
                            "tags": {}, "status": None})
        record._write()
        return record

    def add(self, kind: str, values: Mapping[str, Any]) -> None:
        """Keep a params/metrics/tags call, or the final status (``kind="end"``)."""
        if kind == "end":
            self.data["status"] = values["status"]
        else:
            self.data[kind].update(values)
        self._write()

    def _write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        tmp.write_text(json.dumps(self.data, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, self.path)


def scrub_dir(run_dir: Path, secrets: Iterable[str]) -> list[Path]:
    """Replace every secret value and every URI password (:func:`~ascendflow.schema.secrets.mask_credentials`) in
    every file under ``run_dir`` by the mask (``.hydra/`` copies, logs...).

    Returns:
        The files that were rewritten.
    """
    secrets = [s for s in secrets if s]
    changed = []
    for path in run_dir.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes()
        if not any(s.encode() in data for s in secrets) and not URI_PASSWORD_BYTES.search(data):
            continue
        text = data.decode("utf-8", errors="surrogateescape")
        masked = mask_credentials(text, secrets)
        if masked != text:
            path.write_bytes(masked.encode("utf-8", errors="surrogateescape"))
            changed.append(path)
    return changed


def store_uri(recorded: str) -> str:
    """The store URI of a pending record: as recorded, or, when its password was masked, ``$MLFLOW_TRACKING_URI``
    if that is the same URI with its password (the password is never written, so it comes from the environment).

    Raises:
        ValueError: a masked URI and no matching ``$MLFLOW_TRACKING_URI``.
    """
    if mask_uris(recorded) != recorded or MASK not in recorded:
        return recorded
    given = os.environ.get("MLFLOW_TRACKING_URI", "")
    if given and mask_uris(given) == recorded:
        return given
    raise ValueError(f"the run's store {recorded} needs its password: export MLFLOW_TRACKING_URI=<the URI with the "
                     f"password> and sync again")


def sync_run_dir(run_dir: Path, client=None) -> str:
    """Upload a run directory's pending record: params, metrics, tags, the directory as artifacts, the final status.

    Args:
        run_dir: a run directory holding ``mlflow_pending.json``.
        client: an ``MlflowClient`` on the record's store (opened from the record when ``None``).

    Returns:
        The run id.

    Raises:
        FileNotFoundError: no pending record in ``run_dir``.
        mlflow.exceptions.MlflowException, OSError: the store is still unreachable (the record is kept).
    """
    from mlflow.entities import Metric, Param, RunTag

    from ascendflow.tracking.store import open_client, with_retry

    path = run_dir / PENDING_FILE
    data = json.loads(path.read_text())
    client = client or open_client(store_uri(data["tracking_uri"]))
    run_id = data["run_id"]
    existing = client.get_run(run_id).data.params
    params = [Param(k, str(v)) for k, v in sorted(data["params"].items()) if k not in existing]
    for i in range(0, len(params), 100):
        with_retry(lambda: client.log_batch(run_id, params=params[i:i + 100]))
    metrics = [Metric(k, float(v), 0, 0) for k, v in sorted(data["metrics"].items())]
    for i in range(0, len(metrics), 500):
        with_retry(lambda: client.log_batch(run_id, metrics=metrics[i:i + 500]))
    tags = [RunTag(k, str(v)) for k, v in {**data["tags"], "ascendflow.synced_after_outage": data["reason"]}.items()]
    with_retry(lambda: client.log_batch(run_id, tags=tags))
    upload_run_dir(client, run_id, run_dir)
    with_retry(lambda: client.set_terminated(run_id, status=data["status"] or "FAILED"))
    path.rename(run_dir / SYNCED_FILE)
    return run_id


def pending_run_dirs(outputs_dir: Path) -> list[Path]:
    """Run directories under ``outputs_dir`` with a pending record."""
    return sorted({p.parent for g in RUN_DIR_GLOBS for p in outputs_dir.glob(f"{g}/{PENDING_FILE}")})


def sync_pending_under(outputs_dir: Path, uri: str, client) -> list[str]:
    """Upload the pending records under ``outputs_dir`` that belong to store ``uri`` (called when a run starts);
    failures are left for later. Returns the run ids uploaded."""
    done = []
    for run_dir in pending_run_dirs(outputs_dir):
        try:
            if json.loads((run_dir / PENDING_FILE).read_text()).get("tracking_uri") == uri:
                done.append(sync_run_dir(run_dir, client))
        except Exception:  # still unreachable or unreadable: `python -m ascendflow.sync` reports it
            continue
    return done


__all__ = ["PENDING_FILE", "PendingRecord", "mask_text", "scrub_dir", "sync_run_dir", "pending_run_dirs"]

"""The output directory guard: before Hydra writes anything, the directories a run writes to must exist or be
creatable, be writable, and have room for a plan and the local MLflow store.

Hydra creates the run directory (``hydra.run.dir``, or ``hydra.sweep.dir`` with ``-m``; ``outputs/runs/…`` and
``outputs/multirun/…`` in ``conf/config.yaml``) and writes ``.hydra/*.yaml`` into it before the task starts; on a
read-only ``outputs/`` that was a three-exception traceback, and on a full disk hundreds of lines of SQLAlchemy
tracebacks from the store (issue 20, rows 4 and 5). This guard answers with one line and exit 2 instead.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

#: Free bytes a run needs where it writes: a new MLflow SQLite store after MLflow's migrations (956 KiB measured
#: here, mlflow 3.17.2), the 1 MiB reserve beside it (:class:`ascendflow.tracking.store.DiskReserve`), a plan run's
#: directory (~40 KiB) and its artifact copy, with margin.
MIN_FREE_BYTES = 8 << 20

#: ``conf/config.yaml``'s ``hydra.run.dir`` / ``hydra.sweep.dir`` both live under this directory of the cwd.
DEFAULT_OUTPUTS = "outputs"


class OutputsError(OSError):
    """A directory the run writes to cannot be written (read-only, not a directory, or a full disk)."""


def _existing(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def free_bytes(path: Path) -> int:
    """Bytes an unprivileged writer may still use on the file system holding ``path`` (``statvfs``: ``f_bavail`` ×
    ``f_frsize``)."""
    st = os.statvfs(_existing(path))
    return st.f_bavail * st.f_frsize


def check_writable(path: Path, shown: str, need_bytes: int = MIN_FREE_BYTES) -> None:
    """Refuse a directory that cannot take a run's files.

    Args:
        path: the directory (it may not exist yet: its nearest existing ancestor is checked).
        shown: how the message names it (``outputs/``).
        need_bytes: free bytes required (:data:`MIN_FREE_BYTES`).

    Raises:
        OutputsError: one line naming ``shown``, why (read-only file system, permission, not a directory, disk full
            with the MiB free) at the real path, and the fix.
    """
    path = path.absolute()
    where = _existing(path)
    if not where.is_dir():
        raise OutputsError(f"{shown} is not writable ({where} is a file, not a directory); move it away or set "
                           f"hydra.run.dir=<another directory>")
    st = os.statvfs(where)
    if st.f_flag & os.ST_RDONLY:
        raise OutputsError(f"{shown} is not writable (read-only file system at {where}); remount it read-write or "
                           f"run from a writable directory (or set hydra.run.dir=<writable directory>)")
    if not os.access(where, os.W_OK | os.X_OK):
        raise OutputsError(f"{shown} is not writable (permission denied at {where}); fix its permissions or run from "
                           f"a writable directory (or set hydra.run.dir=<writable directory>)")
    free = st.f_bavail * st.f_frsize
    if free < need_bytes:
        raise OutputsError(f"{shown} is on a full disk: disk full ({free / (1 << 20):.1f} MiB free at {where}; a run "
                           f"needs {need_bytes >> 20} MiB); free space there or run from another disk")


def _dir_override(argv: Iterable[str], key: str) -> str | None:
    """The literal prefix of a ``hydra.run.dir=…`` / ``hydra.sweep.dir=…`` override (up to its first
    interpolation ``${…}``: a parent that must already be writable), or ``None`` when not given."""
    for arg in argv:
        name, sep, value = arg.partition("=")
        if sep and name.lstrip("+~") == key:
            value = value.strip("'\"").split("${", 1)[0]
            return value or "."
    return None


def output_dirs(argv: list[str], cwd: Path, environ: dict[str, str] | None = None) -> dict[str, Path]:
    """Where Hydra and the default store will write for this command line, ``{shown name: path}``: the run
    directory (``hydra.run.dir``, or ``hydra.sweep.dir`` with ``-m``/``--multirun``; else ``outputs/``) and
    ``outputs/`` itself when the local MLflow store is used (no ``tracking.tracking_uri`` override, no
    ``$MLFLOW_TRACKING_URI``, tracking not disabled)."""
    environ = dict(os.environ if environ is None else environ)
    multirun = any(a in ("-m", "--multirun") for a in argv)
    given = _dir_override(argv, "hydra.sweep.dir" if multirun else "hydra.run.dir")
    dirs = {f"{given.rstrip('/')}/" if given else f"{DEFAULT_OUTPUTS}/": cwd / (given or DEFAULT_OUTPUTS)}
    keys = {a.partition("=")[0].lstrip("+~"): a.partition("=")[2] for a in argv if "=" in a}
    local_store = ("tracking.tracking_uri" not in keys and not environ.get("MLFLOW_TRACKING_URI")
                   and keys.get("tracking.enabled", "true").lower() != "false")
    if local_store:
        dirs.setdefault(f"{DEFAULT_OUTPUTS}/", cwd / DEFAULT_OUTPUTS)
    return dirs


def refuse_unusable_outputs(argv: list[str]) -> None:
    """Run :func:`check_writable` on every :func:`output_dirs` entry of ``argv`` (``sys.argv[1:]``), before Hydra
    writes anything. ``--help``, ``--cfg``, ``--info`` and shell completion write nothing and are not checked.

    Raises:
        OutputsError: the first directory that cannot take the run.
    """
    if any(a in ("--help", "-h", "--hydra-help", "--info", "-i", "--cfg", "-c", "--shell-completion", "-sc")
           or a.startswith(("--cfg=", "--info=")) for a in argv):
        return
    for shown, path in output_dirs(argv, Path.cwd()).items():
        check_writable(path, shown)

"""Where converted models live, and how they are built without ever exposing a half-written folder.

A model folder ``<cache>/<name>/`` is only ever created by renaming a fully written sibling temp folder
``<name>.tmp-<pid>`` onto it, while holding the file lock ``<name>.lock``. A second process that wants the same
model waits on the lock, then sees the finished folder and builds nothing.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock

#: Name of the marker file written last into a finished model folder (JSON describing its source).
COMPLETE_MARKER = ".ascendflow-complete"

#: Environment variable that overrides the cache folder.
CACHE_ENV = "ASCENDFLOW_CACHE_DIR"


def model_cache_dir() -> Path:
    """Return the folder that holds converted models, creating it if needed.

    Returns:
        ``$ASCENDFLOW_CACHE_DIR`` if set and non-empty, else ``~/.cache/ascendflow/models``.
    """
    env = os.environ.get(CACHE_ENV)
    path = Path(env).expanduser() if env else Path.home() / ".cache" / "ascendflow" / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path


def read_marker(model_dir: Path) -> dict[str, Any] | None:
    """Return the JSON stored in ``model_dir/.ascendflow-complete``, or None if absent or unreadable."""
    try:
        data = json.loads((model_dir / COMPLETE_MARKER).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_marker(model_dir: Path, info: dict[str, Any]) -> None:
    """Write ``info`` as the completeness marker; call it last, after every other file is written."""
    (model_dir / COMPLETE_MARKER).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")


def marker_matches(model_dir: Path, expected: dict[str, Any]) -> bool:
    """True if ``model_dir`` has a marker whose keys in ``expected`` all hold the expected values."""
    found = read_marker(model_dir)
    return found is not None and all(found.get(k) == v for k, v in expected.items())


@contextmanager
def atomic_model_dir(
    final: Path, is_complete: Callable[[Path], bool] | None = None, timeout: float = -1
) -> Iterator[Path | None]:
    """Build a model folder atomically, under a cross-process file lock.

    Holds ``final.with_name(final.name + ".lock")`` for the whole block. If ``is_complete(final)`` is true once
    the lock is held (another process finished it meanwhile), yields None and changes nothing. Otherwise it
    yields a fresh empty temp folder ``final.name + ".tmp-<pid>"`` beside ``final``; when the block exits
    normally the temp folder replaces ``final`` (any stale, incomplete ``final`` is deleted first), and when it
    raises the temp folder is deleted and the exception propagates. Leftover temp folders of crashed builders
    are removed, since no other builder can be running while the lock is held.

    Args:
        final: The model folder to produce.
        is_complete: Test for an already finished ``final``; defaults to "has a completeness marker".
        timeout: Seconds to wait for the lock; negative waits forever.

    Yields:
        The temp folder to write into, or None if ``final`` is already complete.

    Raises:
        filelock.Timeout: the lock was not acquired within ``timeout`` seconds.
    """
    check = is_complete or (lambda p: read_marker(p) is not None)
    final.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(final.with_name(final.name + ".lock")), timeout=timeout):
        if check(final):
            yield None
            return
        for stale in final.parent.glob(final.name + ".tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)
        tmp = final.with_name(f"{final.name}.tmp-{os.getpid()}")
        tmp.mkdir()
        try:
            yield tmp
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)

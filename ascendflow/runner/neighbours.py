"""Other ascendflow engines live on this host: two served runs at once each measure part of the machine.

Every engine process carries ``ASCENDFLOW_RUN_DIR=<its run directory>`` (:data:`ascendflow.runner.server.RUN_DIR_ENV`);
vLLM's engine core and workers overwrite what ``/proc/<pid>/environ`` shows (setproctitle), but the API server and the
benchmark client keep it, so one live run directory is seen per running engine. Measured here (issue 20, row 12l):
two served runs started at once made 43 and 58 output tok/s where one alone makes ~99, and nothing said so.
"""

from __future__ import annotations

from pathlib import Path

import psutil

from ascendflow.runner.server import RUN_DIR_ENV


def other_engine_runs(run_dir: Path) -> set[str]:
    """Run directories, other than ``run_dir``, of live processes carrying ``ASCENDFLOW_RUN_DIR`` (processes of
    other users, whose environment cannot be read, are not seen)."""
    found = set()
    for proc in psutil.process_iter():
        try:
            value = proc.environ().get(RUN_DIR_ENV)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            continue
        if value and value != str(run_dir):
            found.add(value)
    return found


def concurrency_warning(others: set[str]) -> str:
    """The one warning line for ``others`` (see :func:`other_engine_runs`)."""
    return (f"{len(others)} other ascendflow engine(s) ran on this host during the benchmark ({', '.join(sorted(others))}"
            f"): the machine was shared, so the measured throughput and latencies are not this configuration's alone "
            f"(MLflow tag concurrent_engines={len(others)})")

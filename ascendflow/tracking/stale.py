"""Runs left RUNNING by a runner that died (SIGKILL, power loss): found by the ``host``/``pid`` tags every run carries
and ended FAILED at the next start on the same machine."""

from __future__ import annotations

import os
import socket

#: Tags every run (single, sweep parent, sweep child) carries to find its process later.
HOST_TAG, PID_TAG, PID_START_TAG = "ascendflow.host", "ascendflow.pid", "ascendflow.pid_start"
#: Tag set on a run ended by :func:`end_stale_runs`.
STALE_TAG = "ascendflow.stale"


def process_start(pid: int) -> str | None:
    """Start time of process ``pid`` in clock ticks since boot (``/proc/<pid>/stat`` field 22, proc(5)), as a
    string, or ``None`` when the process does not exist. Together with the pid it names one process (pids are
    reused)."""
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def process_tags() -> dict[str, str]:
    """``ascendflow.host``, ``ascendflow.pid`` and ``ascendflow.pid_start`` of this process."""
    pid = os.getpid()
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(pid), PID_START_TAG: process_start(pid) or ""}


def _alive(pid: str, start: str) -> bool:
    if not pid.isdigit():
        return True  # not ours to judge
    now = process_start(int(pid))
    return now is not None and (not start or now == start)


def end_stale_runs(client) -> list[str]:
    """End FAILED every RUNNING run of this host whose recorded process is gone (or is another process with the same
    pid), with tags ``ascendflow.stale`` and ``error`` saying why.

    Returns:
        The ids of the runs ended.
    """
    host = socket.gethostname()
    experiments = [e.experiment_id for e in client.search_experiments()]
    if not experiments:
        return []
    runs = client.search_runs(experiments, filter_string=f"attributes.status = 'RUNNING' and tags.`{HOST_TAG}` = "
                                                         f"'{host}'", max_results=1000)
    ended = []
    for run in runs:
        tags = run.data.tags
        pid = tags.get(PID_TAG, "")
        if _alive(pid, tags.get(PID_START_TAG, "")):
            continue
        reason = f"runner process {pid} on {host} is gone (killed?); ended at the next start"
        client.set_tag(run.info.run_id, STALE_TAG, reason)
        client.set_tag(run.info.run_id, "error", f"stale: {reason}")
        client.set_terminated(run.info.run_id, status="FAILED")
        ended.append(run.info.run_id)
    return ended

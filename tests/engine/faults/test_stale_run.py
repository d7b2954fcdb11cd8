"""A SIGKILLed runner's RUNNING run (a real served run) is ended FAILED, tagged stale, at the next start.

Split from ``tests/faults/test_tracking_faults.py`` (issue 24 item 4), whose other faults start no engine.
"""

from __future__ import annotations

import os
import signal

from tests.conftest import run_ascendflow
from tests.faults.test_tracking_faults import _popen
from tests.helpers import descendants, mlflow_runs, still_alive, wait_for


def _running(uri: str) -> list:
    try:
        return [r for r in mlflow_runs(uri) if r.info.status == "RUNNING"]
    except Exception:  # the store is being created by the runner
        return []


def test_a_sigkilled_runner_s_run_is_ended_failed_at_the_next_start(tmp_path, mlflow_uri):
    from ascendflow.tracking.store import open_client

    open_client(mlflow_uri)  # the store exists before this test polls it
    proc = _popen(["run.mode=serve"], tmp_path, mlflow_uri)
    try:
        (stale,) = wait_for(lambda: _running(mlflow_uri), 120, "the RUNNING run", poll_s=0.2)
        tree = descendants(proc.pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert stale.data.tags["ascendflow.pid"] == str(proc.pid)
    assert stale.data.tags["ascendflow.host"] == os.uname().nodename
    wait_for(lambda: not still_alive(tree), 60, "the killed runner's children to stop", poll_s=0.2)
    nxt = run_ascendflow(["run.mode=plan"], cwd=tmp_path, env={"MLFLOW_TRACKING_URI": mlflow_uri})
    assert nxt.returncode == 0, nxt.stderr[-2000:]
    runs = {r.info.run_id: r for r in mlflow_runs(mlflow_uri)}
    ended = runs[stale.info.run_id]
    assert ended.info.status == "FAILED"
    assert ended.data.tags["ascendflow.stale"] == (f"runner process {proc.pid} on {os.uname().nodename} is gone "
                                                   f"(killed?); ended at the next start")
    assert sorted(r.info.status for r in runs.values()) == ["FAILED", "FINISHED"]

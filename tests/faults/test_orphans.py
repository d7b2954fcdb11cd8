"""The runner SIGKILLed while its engine starts or serves (an OOM kill, a closed SSH session): the engine must die
with it in every window (issue 20, row 12k). Real ``python -m ascendflow`` processes, real vLLM engines."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.e2e.helpers import descendants, http_status, leftover_engine_processes, still_alive, wait_for

pytestmark = pytest.mark.e2e

#: Seconds after the runner's death within which nothing of its engine may be left: the watchdog's poll (0.25 s),
#: SIGTERM, its grace before SIGKILL (3 s), and a loaded 2-core machine's slack.
GONE_WITHIN_S = 10


def _engine_log(run_dir: Path) -> str:
    path = run_dir / "engine.log"
    return path.read_text(errors="replace") if path.exists() else ""


def _kill_runner_when(tmp_path: Path, ready, what: str) -> tuple[float, list[str], list[str], int]:
    """Start a served run, SIGKILL the runner once ``ready(run_dir, port)`` holds; returns (seconds until nothing of
    the run was left, processes of the run still alive then, the engine's process group members alive, port
    status)."""
    cwd = tmp_path / what.replace(" ", "_")
    cwd.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "ascendflow", "run.mode=serve", "tracking=none",
                             "workload.num_prompts=200"], cwd=cwd, env=dict(os.environ),
                            stdout=open(cwd / "stdout.txt", "w"), stderr=open(cwd / "stderr.txt", "w"))
    try:
        run_dir = wait_for(lambda: next(iter(cwd.glob("outputs/runs/*/*")), None), 120, "the run directory", 0.1)
        argv = wait_for(lambda: (run_dir / "serve_command.txt").exists() and
                        (run_dir / "serve_command.txt").read_text().split(), 300, "the serve command", 0.1)
        port = int(argv[argv.index("--port") + 1])
        wait_for(lambda: ready(run_dir, port), 400, what, 0.1)
        tree = descendants(proc.pid)
        engine_pgids = {os.getpgid(p.pid) for p in tree if _pgid_or_none(p) not in (None, os.getpgid(proc.pid))}
        proc.kill()
        proc.wait(timeout=10)
        killed = time.monotonic()
    finally:
        if proc.poll() is None:
            proc.kill()
    health = f"http://127.0.0.1:{port}/health"

    def gone() -> bool:
        return (not still_alive(tree) and not leftover_engine_processes(run_dir) and http_status(health) == 0
                and not _group_members(engine_pgids))

    try:
        wait_for(gone, GONE_WITHIN_S, f"nothing of the run left after the runner was killed {what}", 0.2)
    except AssertionError:
        pass
    took = time.monotonic() - killed
    left = still_alive(tree) + leftover_engine_processes(run_dir)
    group = _group_members(engine_pgids)
    for pid in group:  # leave nothing behind for the next test, whatever the outcome
        _kill(pid)
    return took, left, group, http_status(health)


def _pgid_or_none(proc: psutil.Process) -> int | None:
    try:
        return os.getpgid(proc.pid)
    except ProcessLookupError:
        return None


def _group_members(pgids: set[int]) -> list[int]:
    """Live (not zombie) processes whose process group is one of ``pgids``."""
    found = []
    for p in psutil.process_iter(["status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(p.pid) in pgids:
                found.append(p.pid)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return found


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_the_engine_dies_with_its_sigkilled_runner_in_every_window(tmp_path):
    windows = {
        # vLLM's API server importing (started: a process carries the run's ASCENDFLOW_RUN_DIR; no model yet)
        "during the engine's imports": lambda run_dir, port: bool(leftover_engine_processes(run_dir)),
        # the engine core loading the weights (vllm/v1/worker/*_model_runner.py "Starting to load model")
        "while the model loads": lambda run_dir, port: "Starting to load model" in _engine_log(run_dir),
        # serving: /health answers 200
        "once the engine is healthy": lambda run_dir, port: http_status(f"http://127.0.0.1:{port}/health") == 200,
    }
    results = {what: _kill_runner_when(tmp_path, ready, what) for what, ready in windows.items()}
    for what, (took, left, group, health) in results.items():
        assert (left, group, health) == ([], [], 0), f"runner killed {what}: {results}"
        assert took < GONE_WITHIN_S, results

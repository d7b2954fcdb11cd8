"""The runner SIGKILLed while its engine starts or serves (an OOM kill, a closed SSH session): the engine must die
with it in every window (issue 20, row 12k). Real ``python -m ascendflow`` processes, real vLLM engines."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from tests.helpers import descendants, http_status, leftover_engine_processes, still_alive


#: Seconds after the runner's death within which nothing of its engine may be left: the watchdog's poll (0.25 s),
#: SIGTERM, its grace before SIGKILL (3 s), and a loaded 2-core machine's slack.
GONE_WITHIN_S = 10


#: The sweep's ``run.shutdown_grace_s``: the Ray worker interrupted with the sweep stops its engine itself (SIGTERM,
#: SIGKILL after this), unless Ray kills the worker first (then the watchdog does, SIGKILL after 3 s).
GRACE_S = 4
#: Seconds after the sweep's exit within which nothing of the job may be left.
SWEEP_GONE_WITHIN_S = GRACE_S + GONE_WITHIN_S


def _engine_log(run_dir: Path) -> str:
    path = run_dir / "engine.log"
    return path.read_text(errors="replace") if path.exists() else ""


def _start(cwd: Path) -> subprocess.Popen:
    cwd.mkdir()
    return subprocess.Popen([sys.executable, "-m", "ascendflow", "run.mode=serve", "tracking=none",
                             "workload.num_prompts=200"], cwd=cwd, env=dict(os.environ),
                            stdout=open(cwd / "stdout.txt", "w"), stderr=open(cwd / "stderr.txt", "w"))


def _port(run_dir: Path | None) -> int | None:
    """The engine's port from ``serve_command.txt`` (written just before the engine starts), else ``None``."""
    path = run_dir / "serve_command.txt" if run_dir else None
    argv = path.read_text().split() if path and path.exists() else []
    return int(argv[argv.index("--port") + 1]) if "--port" in argv else None


def _gone(run_dir: Path, port: int, tree: list[psutil.Process], pgids: set[int]) -> bool:
    """Nothing of the run is left: no process of the runner's tree, none carrying its ``ASCENDFLOW_RUN_DIR``, none
    in the engine's process groups, and nothing answers on the engine's port."""
    return (not still_alive(tree) and not leftover_engine_processes(run_dir) and not _group_members(pgids)
            and http_status(f"http://127.0.0.1:{port}/health") == 0)


def _kill_runners_when(tmp_path: Path, windows: dict) -> dict[str, tuple]:
    """Start one served run per window at once; SIGKILL each runner once its ``ready(run_dir, port)`` holds. Returns
    per window: (seconds from the kill until nothing of the run was left, or ``None`` when something still was
    after :data:`GONE_WITHIN_S`; what was left then)."""
    dirs = {what: tmp_path / what.replace(" ", "_").replace("'", "") for what in windows}
    procs = {what: _start(cwd) for what, cwd in dirs.items()}
    killed: dict[str, tuple] = {}
    results: dict[str, tuple] = {}
    deadline = time.monotonic() + 600
    try:
        while len(results) < len(procs) and time.monotonic() < deadline:
            for what, proc in procs.items():
                if what in results:
                    continue
                if what in killed:
                    at, run_dir, port, tree, pgids = killed[what]
                    if _gone(run_dir, port, tree, pgids):
                        results[what] = (round(time.monotonic() - at, 1), [])
                    elif time.monotonic() - at > GONE_WITHIN_S:
                        left = still_alive(tree) + leftover_engine_processes(run_dir) + _group_members(pgids)
                        results[what] = (None, left)
                    continue
                assert proc.poll() is None, (what, (dirs[what] / "stderr.txt").read_text()[-2000:])
                run_dir = next(iter(dirs[what].glob("outputs/runs/*/*")), None)
                port = _port(run_dir)
                if port is None or not windows[what](run_dir, port):
                    continue
                tree = descendants(proc.pid)
                pgids = {g for p in tree if (g := _pgid_or_none(p)) not in (None, os.getpgid(proc.pid))}
                proc.kill()
                proc.wait(timeout=10)
                killed[what] = (time.monotonic(), run_dir, port, tree, pgids)
            time.sleep(0.1)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
        for _, _, _, tree, pgids in killed.values():  # leave nothing behind, whatever the outcome
            for pid in _group_members(pgids):
                _kill(pid)
            for member in tree:
                with contextlib.suppress(psutil.NoSuchProcess):
                    if member.is_running():  # psutil checks the start time: never a reused pid
                        member.kill()
    return results


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
    results = _kill_runners_when(tmp_path, windows)
    print(results)
    assert set(results) == set(windows), f"not every window was reached: {results}"
    assert all(took is not None for took, _ in results.values()), results


def test_ctrl_c_to_a_ray_served_sweep_while_job_0_loads_leaves_no_engine_and_no_running_run(tmp_path):
    """Issue 20 rows 12j and 12b: the README's Ray served sweep, Ctrl-C (SIGINT to its whole process group, as a
    terminal sends it) while job 0's engine loads the model."""
    from ascendflow.schema.tracking import TrackingSpec
    from ascendflow.tracking.server import TrackingServer
    from tests.engine.test_cluster_sweeps import cluster_processes
    from tests.helpers import mlflow_runs

    before = cluster_processes(tmp_path)
    args = ["-m", "hydra/launcher=ray_local", "tracking=server", "run.mode=serve", "workload.num_prompts=4",
            f"run.shutdown_grace_s={GRACE_S}", "engine.seed=0,1"]
    sweep = subprocess.Popen([sys.executable, "-m", "ascendflow", *args], cwd=tmp_path, env=dict(os.environ),
                             stdout=open(tmp_path / "out.txt", "w"), stderr=open(tmp_path / "err.txt", "w"),
                             start_new_session=True)
    try:
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline and sweep.poll() is None and not any(
                "Starting to load model" in log.read_text(errors="replace")
                for log in tmp_path.glob("outputs/multirun/*/*/*/engine.log")):
            time.sleep(0.2)
        assert sweep.poll() is None, (tmp_path / "err.txt").read_text()[-3000:]
        tree = descendants(sweep.pid)
        assert any("EngineCore" in " ".join(p.cmdline()) + p.name() for p in tree if p.is_running()), tree
        os.killpg(sweep.pid, signal.SIGINT)
        code = sweep.wait(timeout=120)
        exited = time.monotonic()
        deadline = exited + SWEEP_GONE_WITHIN_S
        while still_alive(tree) and time.monotonic() < deadline:
            time.sleep(0.2)
        left, took = still_alive(tree), time.monotonic() - exited
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
    for member in tree:  # leave nothing behind, whatever the outcome
        with contextlib.suppress(psutil.NoSuchProcess):
            if member.is_running():
                member.kill()
    err = (tmp_path / "err.txt").read_text()
    print(f"sweep exited {code}; its processes gone {took:.1f} s later")
    assert code == 130, err[-3000:]
    assert left == [], "\n".join(left)
    assert cluster_processes(tmp_path) == before
    with TrackingServer(TrackingSpec(), tmp_path / "outputs") as server:
        runs = mlflow_runs(server.uri)
    assert sorted((r.data.tags.get("ascendflow.sweep", r.info.run_name), r.info.status) for r in runs) == [
        ("engine.seed=0", "KILLED"), ("parent", "KILLED")], [(r.info.run_name, r.info.status) for r in runs]

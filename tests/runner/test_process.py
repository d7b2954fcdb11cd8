"""ManagedProcess stops whole process groups, even children that ignore SIGTERM (real processes)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil

from ascendflow.runner.process import ManagedProcess

# A parent that spawns a child ignoring SIGTERM, then both sleep: the shape of vLLM's server + engine core.
STUBBORN = """
import signal, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('child', flush=True); time.sleep(600)"])
print("parent", child.pid, flush=True)
time.sleep(600)
"""


def _wait_for(predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_stop_kills_the_group_including_a_child_that_ignores_sigterm(tmp_path):
    log = tmp_path / "proc.log"
    with ManagedProcess([sys.executable, "-c", STUBBORN], {}, log, grace_s=1.0) as proc:
        assert _wait_for(lambda: "child" in log.read_text() and "parent" in log.read_text())
        child_pid = int(log.read_text().split("parent ")[1].split()[0])
        parent_pid = proc.proc.pid
        assert psutil.pid_exists(child_pid)
    assert proc.returncode is not None
    assert _wait_for(lambda: not psutil.pid_exists(child_pid)
                     or psutil.Process(child_pid).status() == psutil.STATUS_ZOMBIE)
    assert not psutil.pid_exists(parent_pid) or psutil.Process(parent_pid).status() == psutil.STATUS_ZOMBIE


def test_stop_on_exception_inside_the_block(tmp_path):
    log = tmp_path / "proc.log"
    try:
        with ManagedProcess([sys.executable, "-c", "import time; time.sleep(600)"], {}, log, grace_s=1.0) as proc:
            pid = proc.proc.pid
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert proc.returncode is not None and not psutil.pid_exists(pid)


RUNNER = """
import sys, time
from pathlib import Path
from ascendflow.runner.process import ManagedProcess
with ManagedProcess([sys.executable, "-c", "import time; time.sleep(600)"], {}, Path(sys.argv[1]), grace_s=1) as p:
    print(p.proc.pid, flush=True)
    time.sleep(600)
"""


def test_the_engine_dies_with_a_runner_killed_by_sigkill(tmp_path):
    runner = subprocess.Popen([sys.executable, "-c", RUNNER, str(tmp_path / "child.log")], stdout=subprocess.PIPE,
                              text=True)
    child_pid = int(runner.stdout.readline())
    assert psutil.pid_exists(child_pid)
    runner.kill()
    runner.wait(timeout=10)
    assert _wait_for(lambda: not psutil.pid_exists(child_pid)
                     or psutil.Process(child_pid).status() == psutil.STATUS_ZOMBIE)


STUBBORN_RUNNER = """
import sys, time
from pathlib import Path
from ascendflow.runner.process import ManagedProcess
with ManagedProcess([sys.executable, "-c", sys.argv[2]], {}, Path(sys.argv[1]), grace_s=1) as p:
    print(p.proc.pid, flush=True)
    time.sleep(600)
"""


def test_a_child_of_the_engine_that_ignores_sigterm_dies_with_a_sigkilled_runner(tmp_path):
    """The shape of issue 20 rows 12k/12j: vLLM's engine core is the server's child (no parent-death signal of the
    runner reaches it) and ignores SIGTERM while it starts; the watchdog stops the whole group, SIGKILL after 3 s."""
    log = tmp_path / "child.log"
    runner = subprocess.Popen([sys.executable, "-c", STUBBORN_RUNNER, str(log), STUBBORN], stdout=subprocess.PIPE,
                              text=True)
    leader = int(runner.stdout.readline())
    assert _wait_for(lambda: "child" in log.read_text() and "parent" in log.read_text())
    child = int(log.read_text().split("parent ")[1].split()[0])
    runner.kill()
    runner.wait(timeout=10)
    killed = time.monotonic()

    def gone(pid: int) -> bool:
        return not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE

    assert _wait_for(lambda: gone(leader) and gone(child), timeout=10)
    assert time.monotonic() - killed < 6  # poll 0.25 s + 3 s grace, on a loaded machine


def test_a_dead_engine_process_is_described_by_its_real_exit(tmp_path):
    """engine_down on real processes: killed by a signal, exited 0 (what vLLM's server does on SIGTERM) and 3."""
    from ascendflow.runner.server import engine_down

    url = "http://127.0.0.1:9/health"  # never reached: the process has already exited
    said = []
    for i, code in enumerate((None, 0, 3)):
        script = "import time; time.sleep(600)" if code is None else f"import sys; sys.exit({code})"
        with ManagedProcess([sys.executable, "-c", script], dict(os.environ), tmp_path / f"p{i}.log") as proc:
            if code is None:
                proc.proc.kill()
            proc.wait(timeout=20)
            said.append(engine_down(proc, url))
    assert said == ["engine process was killed by SIGKILL (code -9)",
                    "engine process exited with code 0 (vLLM's server does so on SIGTERM or SIGINT: something other "
                    "than ascendflow stopped it)", "engine process exited with code 3"]

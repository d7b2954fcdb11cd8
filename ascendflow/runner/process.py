"""A child process group that is always stopped: SIGTERM to the whole group, then SIGKILL after a grace period."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

from ascendflow.interrupts import spawning
from ascendflow.runner.watchdog import ORPHAN_GRACE_S, group_alive


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Ask the kernel to send SIGTERM to this child when its parent dies (Linux ``prctl(PR_SET_PDEATHSIG)``)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except OSError:
        pass


class ManagedProcess:
    """Starts ``argv`` in its own session (process group) with stdout+stderr to ``log_path``.

    Use as a context manager: on exit (normal, exception or Ctrl-C) the leader gets SIGTERM first (vLLM's server then
    shuts its engine core down in order), the rest of the group gets SIGTERM once the leader is gone or after half the
    grace period, and SIGKILL after ``grace_s`` seconds if any member is still alive, so vLLM's engine-core children
    never outlive the run. If this process dies, even by SIGKILL, the whole group is stopped too: the leader gets
    SIGTERM from the kernel (Linux ``PR_SET_PDEATHSIG``) and a watchdog process (:mod:`ascendflow.runner.watchdog`,
    started beside the group) sends the group SIGTERM, then SIGKILL after ``ORPHAN_GRACE_S`` (3 s): vLLM's engine
    core and workers are the leader's children, which no parent-death signal of ours reaches.

    Args:
        argv: command line.
        env: full environment of the child.
        log_path: file receiving the child's output.
        grace_s: seconds between SIGTERM and SIGKILL.
    """

    def __init__(self, argv: Sequence[str], env: dict[str, str], log_path: Path, grace_s: float = 20) -> None:
        self.argv = list(argv)
        self.env = env
        self.log_path = log_path
        self.grace_s = grace_s
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "ManagedProcess":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            # The group and its watchdog start together: a signal is raised only once both run (interrupts.spawning)
            with spawning(), open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(self.argv, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, start_new_session=True,
                                             preexec_fn=_die_with_parent)
                start_watchdog(self.proc.pid)
        except BaseException:
            self.stop()  # a `with` whose __enter__ raised never calls __exit__
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def returncode(self) -> int | None:
        """Exit code of the leader, ``None`` while it runs."""
        return None if self.proc is None else self.proc.poll()

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the leader to exit and return its code (raises ``subprocess.TimeoutExpired``)."""
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stop(self) -> None:
        """Stop the whole process group: SIGTERM, wait up to ``grace_s``, then SIGKILL. Idempotent."""
        if self.proc is None:
            return
        pgid = self.proc.pid
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        start = time.monotonic()
        deadline = start + self.grace_s
        group_signalled = False
        while time.monotonic() < deadline:
            leader_done = self.proc.poll() is not None
            if not group_signalled and (leader_done or time.monotonic() > start + self.grace_s / 2):
                try:
                    os.killpg(pgid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                group_signalled = True
            if leader_done and not group_alive(pgid):
                break
            time.sleep(0.2)
        else:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
            pass
        # Reap stragglers of the group that were killed after the leader exited.
        while group_alive(pgid) and time.monotonic() < deadline + 10:
            time.sleep(0.2)


#: The watchdog script, run by path with ``python -I`` so that it imports no package (about 20 ms to start).
_WATCHDOG = Path(__file__).with_name("watchdog.py")


def start_watchdog(pgid: int) -> None:
    """Start :mod:`ascendflow.runner.watchdog` for process group ``pgid``, watching this process, in a session of its
    own, and wait for it to detach (its first process exits once it holds this process's pidfd; ~50 ms here). It has no
    environment of the run (it carries no ``ASCENDFLOW_RUN_DIR``, so it is never taken for an engine process) and
    exits by itself once the group is gone."""
    subprocess.run([sys.executable, "-I", str(_WATCHDOG), str(os.getpid()), str(pgid), str(ORPHAN_GRACE_S)],
                   env={"PATH": os.environ.get("PATH", "")}, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, start_new_session=True, timeout=30, check=False)

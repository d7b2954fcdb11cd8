"""A child process group that is always stopped: SIGTERM to the whole group, then SIGKILL after a grace period."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

from ascendflow.interrupts import spawning, stopping
from ascendflow.runner.watchdog import ORPHAN_GRACE_S, group_alive


#: Seconds between SIGTERMs to a leader that has not exited after an interrupt (see :class:`ManagedProcess`).
RESEND_S = 1.0


#: Seconds a leader may outlive the rest of its group after an interrupt before it is killed: vLLM's API server, its
#: engine core gone, waits for the benchmark client's streaming connections to close ("Waiting for connections to
#: close") and held them until SIGKILL at the grace (measured 2026-12-03: 20 s; the client's partial result waited
#: on it). The engine core, which holds the device, has exited by then.
LEADER_ALONE_S = 2.0


def _others(pgid: int) -> bool:
    """Whether an engine core or worker of group ``pgid`` still lives: a member other than the leader, not a zombie,
    named by vLLM's process title (``VLLM::EngineCore``, ``VLLM::Worker``...: ``/proc/<pid>/stat``). Other members
    (the API server's multiprocessing resource tracker: it stayed as long as the leader, measured) hold no device."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == pgid:
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                name, _, rest = f.read().partition(b" (")[2].rpartition(b")")
        except OSError:
            continue
        fields = rest.split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z" and name.startswith(b"VLLM::"):
            return True
    return False


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

    After SIGTERM or Ctrl-C reached this process (:func:`ascendflow.interrupts.stopping`) the whole group gets
    SIGTERM at once, leader included: while vLLM's API server starts, its main thread waits in ZMQ polls for the
    engine core's handshake and ready message (``vllm/v1/engine/utils.py`` ``wait_for_engine_startup``,
    ``STARTUP_POLL_PERIOD_MS`` 10 s; ``core_client.py`` ``MPClient.__init__``) and did not act on its SIGTERM; the
    engine core got its SIGTERM from the half-grace group signal, 10 s after Ctrl-C (measured, vLLM 0.32.0 CPU,
    2026-12-03: 18.5 s from Ctrl-C to the exit line). The engine core and its workers shut down on SIGTERM within the
    second (engine.log: "EngineCore: trigger received signal=SIGTERM", "all workers exited gracefully"); SIGKILL
    after ``grace_s`` and the watchdog still guard against anything left, so no orphan risk is added. The first
    interrupted stop of a run with an engine prints one line at once: ``interrupted: stopping the engine (up to N
    s)…``.

    Args:
        argv: command line.
        env: full environment of the child.
        log_path: file receiving the child's output.
        grace_s: seconds between SIGTERM and SIGKILL.
        what: what the group is, for the interrupt line (``"the engine"``); ``None``: not named.
    """

    #: Groups started and not yet stopped, in start order (the interrupt line names the engine among them).
    live: list["ManagedProcess"] = []
    #: The interrupt line was printed (once per process).
    announced = False

    def __init__(self, argv: Sequence[str], env: dict[str, str], log_path: Path, grace_s: float = 20,
                 what: str | None = None) -> None:
        self.argv = list(argv)
        self.env = env
        self.log_path = log_path
        self.grace_s = grace_s
        self.what = what
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
                ManagedProcess.live.append(self)
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
        interrupted = stopping()
        if interrupted:
            _announce()
        pgid = self.proc.pid
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        start = time.monotonic()
        deadline = start + self.grace_s
        group_signalled = False
        resend, alone_since = start + RESEND_S, None
        if interrupted:  # the whole group at once (see the class docstring)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGTERM)
            group_signalled = True
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
            if interrupted and not leader_done:  # see the class docstring
                now = time.monotonic()
                if now >= resend:
                    with contextlib.suppress(ProcessLookupError):
                        self.proc.send_signal(signal.SIGTERM)
                    resend = now + RESEND_S
                alone_since = (alone_since or now) if not _others(pgid) else None
                if alone_since is not None and now - alone_since >= LEADER_ALONE_S:
                    break  # the engine core and workers are gone: the leader alone is killed (below)
            time.sleep(0.2)
        if self.proc.poll() is None or group_alive(pgid):  # past the grace, or a leader left alone after an interrupt
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
        if self in ManagedProcess.live:
            ManagedProcess.live.remove(self)


def _announce() -> None:
    """Print ``interrupted: stopping the engine (up to N s)…`` once, when a named group still runs."""
    if ManagedProcess.announced:
        return
    running = [p for p in ManagedProcess.live if p.what and p.proc is not None and p.proc.poll() is None]
    if running:
        ManagedProcess.announced = True
        print(f"interrupted: stopping {running[0].what} (up to {running[0].grace_s:g} s)…", file=sys.stderr,
              flush=True)


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

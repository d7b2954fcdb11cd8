"""The watchdog that stops a child process group when the process that started it dies (even by SIGKILL).

Why it is needed: ``PR_SET_PDEATHSIG`` on the group leader (vLLM's API server) reaches only the leader, and vLLM's
API server turns SIGTERM into ``KeyboardInterrupt`` while it starts (``vllm/entrypoints/openai/api_server.py``
``run_server``), which the start-up path can swallow: a runner SIGKILLed while vLLM loaded the model left a server that
finished starting and answered ``/health`` until killed by hand (issue 20, row 12k). vLLM's engine core and workers are
children of the API server, so a parent-death signal set by the runner never reaches them, and they ignore SIGTERM
while they start (row 12j: found 45 minutes later, re-parented to init).

The watchdog is started by the runner in a session of its own and detaches at once (it forks and its first process
exits, so it is adopted by init): a Ctrl-C on the terminal, a kill of the runner's group, or Ray's raylet killing the
direct children of a dead worker (``kill_child_processes_on_worker_exit``: it SIGKILLed the API server and a watchdog
that was the worker's child, leaving the engine core and worker behind) do not reach it. It holds a pidfd of the
runner (``os.pidfd_open``, Linux >= 5.3, opened while the runner is its parent, so never a reused pid): once the
runner is gone, even by SIGKILL, it sends SIGTERM to the whole group, SIGKILL after :data:`ORPHAN_GRACE_S`, and exits.
It exits by itself as soon as the group is gone (a normal end). It imports only the standard library and runs as a
script (``python -I watchdog.py``: ~20 ms to start, no package import).
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

#: Seconds between two looks at the parent and the group (how late a dead runner is noticed).
POLL_S = 0.25
#: Seconds an orphaned group gets between SIGTERM and SIGKILL: nobody waits for its orderly shutdown any more, and
#: vLLM's engine core and workers ignore SIGTERM while they start.
ORPHAN_GRACE_S = 3.0


def group_alive(pgid: int) -> bool:
    """True while any process of process group ``pgid`` exists (zombies included)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_group(pgid: int, grace_s: float = ORPHAN_GRACE_S) -> None:
    """SIGTERM to the whole group ``pgid``, then SIGKILL to what is left after ``grace_s`` seconds."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not group_alive(pgid):
            return
        time.sleep(0.1)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def watch(runner_fd: int, pgid: int, grace_s: float = ORPHAN_GRACE_S) -> int:
    """Wait until the runner (``runner_fd``: its pidfd, readable once it exited) is gone, then stop group ``pgid``
    (:func:`kill_group`), or until the group is gone.

    Returns:
        0 when the group ended by itself, 1 when the watchdog stopped it.
    """
    while True:
        readable, _, _ = select.select([runner_fd], [], [], POLL_S)
        if readable:
            kill_group(pgid, grace_s)
            return 1
        if not group_alive(pgid):
            return 0


def main(runner_pid: int, pgid: int, grace_s: float) -> int:  # pragma: no cover - runs in the watchdog process
    """Open the runner's pidfd while it is this process's parent, detach (fork; the first process exits), watch."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    runner_fd = os.pidfd_open(runner_pid)
    if os.getppid() != runner_pid:  # the runner died before its pid could be pinned
        kill_group(pgid, grace_s)
        return 1
    if os.fork() > 0:
        os._exit(0)  # the runner reaps this first process at once; the watchdog goes on, adopted by init
    return watch(runner_fd, pgid, grace_s)


if __name__ == "__main__":  # pragma: no cover - run as a separate process by ManagedProcess
    sys.exit(main(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])))

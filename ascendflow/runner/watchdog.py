"""The watchdog that stops a child process group when the process that started it dies (even by SIGKILL).

Why it is needed: ``PR_SET_PDEATHSIG`` on the group leader (vLLM's API server) reaches only the leader, and vLLM's
API server turns SIGTERM into ``KeyboardInterrupt`` while it starts (``vllm/entrypoints/openai/api_server.py``
``run_server``), which the start-up path can swallow: a runner SIGKILLed while vLLM loaded the model left a server that
finished starting and answered ``/health`` until killed by hand (issue 20, row 12k). vLLM's engine core and workers are
children of the API server, so a parent-death signal set by the runner never reaches them, and they ignore SIGTERM
while they start (row 12j: found 45 minutes later, re-parented to init).

The watchdog is a child of the runner in a session of its own (a Ctrl-C on the terminal or a kill of the runner's
group does not reach it). It polls its parent: once the parent is gone (``os.getppid()`` changes when the kernel
re-parents an orphan; thread-independent, unlike ``PR_SET_PDEATHSIG``) it sends SIGTERM to the whole group, SIGKILL
after :data:`ORPHAN_GRACE_S`, and exits. It exits by itself as soon as the group is gone (a normal end). It imports
only the standard library and runs as a script (``python -I watchdog.py``: ~20 ms to start, no package import).
"""

from __future__ import annotations

import os
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


def watch(parent_pid: int, pgid: int, grace_s: float = ORPHAN_GRACE_S) -> int:
    """Wait until ``parent_pid`` is gone (then stop group ``pgid``: :func:`kill_group`) or the group is gone.

    Returns:
        0 when the group ended by itself, 1 when the watchdog stopped it.
    """
    while True:
        if os.getppid() != parent_pid:
            kill_group(pgid, grace_s)
            return 1
        if not group_alive(pgid):
            return 0
        time.sleep(POLL_S)


if __name__ == "__main__":  # pragma: no cover - run as a separate process by ManagedProcess
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(watch(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])))

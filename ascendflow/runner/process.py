"""A child process group that is always stopped: SIGTERM to the whole group, then SIGKILL after a grace period."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Sequence


class ManagedProcess:
    """Starts ``argv`` in its own session (process group) with stdout+stderr to ``log_path``.

    Use as a context manager: on exit (normal, exception or Ctrl-C) the whole group gets SIGTERM, and SIGKILL
    after ``grace_s`` seconds if any member is still alive, so vLLM's engine-core children never outlive the run.

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
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
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

    @staticmethod
    def _group_alive(pgid: int) -> bool:
        """True while any process of the group exists (the leader must be reaped first: ``proc.poll()``)."""
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def stop(self) -> None:
        """Stop the whole process group: SIGTERM, wait up to ``grace_s``, then SIGKILL. Idempotent."""
        if self.proc is None:
            return
        pgid = self.proc.pid
        try:
            os.killpg(pgid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + self.grace_s
        while time.monotonic() < deadline:
            self.proc.poll()
            if not self._group_alive(pgid):
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
        while self._group_alive(pgid) and time.monotonic() < deadline + 10:
            time.sleep(0.2)

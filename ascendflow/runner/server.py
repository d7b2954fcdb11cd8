"""Serves a plan locally: the plan's server argv on 127.0.0.1 and a free port, waiting for ``/health``."""

from __future__ import annotations

import os
import socket
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable

from ascendflow.compiler import Plan
from ascendflow.runner.engine_log import failure_cause, log_tail
from ascendflow.runner.process import ManagedProcess

#: Variables that would silently override the plan (vllm/platforms/cpu.py reads VLLM_CPU_KVCACHE_SPACE as a
#: KV budget in GiB that replaces kv_cache_memory_bytes).
OVERRIDING_ENV = ("VLLM_CPU_KVCACHE_SPACE",)


class EngineStartError(RuntimeError):
    """The engine exited or did not become healthy in time; the message ends with the log's last lines."""


def engine_failure(summary: str, log_path: Path) -> str:
    """One line: ``summary``, the cause found in the engine log, and where the log is; then the log's tail."""
    text = log_path.read_text(errors="replace") if log_path.exists() else ""
    cause = failure_cause(text)
    head = f"{summary}: {cause} (log: {log_path})" if cause else f"{summary} (log: {log_path})"
    tail = log_tail(log_path)
    return head + ("\n" + tail if tail else "")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` now (bound to port 0 and released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def local_argv(plan: Plan, host: str, port: int) -> list[str]:
    """The plan's ``serve_command`` for this machine: this interpreter for ``python``, ``--host``/``--port``
    replaced by ``host``/``port``."""
    argv = list(plan.serve_command)
    if argv[0] == "python":
        argv[0] = sys.executable
    for flag, value in (("--host", host), ("--port", str(port))):
        argv[argv.index(flag) + 1] = value
    return argv


#: Set in every engine process's environment (inherited by vLLM's workers) to find strays of a run.
RUN_DIR_ENV = "ASCENDFLOW_RUN_DIR"


def engine_env(plan: Plan, run_dir: Path) -> dict[str, str]:
    """This process's environment plus the plan's common and node-0 worker environment, without overriders, and
    ``ASCENDFLOW_RUN_DIR=<run_dir>`` so every process of the run can be found by its environment."""
    env = {k: v for k, v in os.environ.items() if k not in OVERRIDING_ENV}
    env.update(plan.env)
    env.update(plan.workers[0].env)
    env[RUN_DIR_ENV] = str(run_dir)
    return env


def wait_healthy(server: ManagedProcess, url: str, timeout_s: float,
                 tick: Callable[[float], None] | None = None) -> float:
    """Poll ``url`` (``/health``) until it answers 200.

    Returns:
        Seconds from the call to the first healthy answer.

    Raises:
        EngineStartError: the server exited, or ``timeout_s`` passed.
    """
    start = time.monotonic()
    while True:
        elapsed = time.monotonic() - start
        if server.returncode is not None:
            raise EngineStartError(engine_failure(f"engine exited with code {server.returncode} before it was healthy",
                                                  server.log_path))
        if elapsed > timeout_s:
            raise EngineStartError(engine_failure(f"engine not healthy after {timeout_s:.0f} s "
                                                  "(raise run.health_timeout_s)", server.log_path))
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return elapsed
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            pass
        if tick:
            tick(elapsed)
        time.sleep(1)

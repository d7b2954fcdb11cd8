"""A tracking server that stops answering during a run: its reason in a few words, and no retry warnings.

MLflow's REST client (requests/urllib3) logs ``urllib3.connectionpool`` "Retrying (Retry(total=0, …)) after
connection broken by 'NewConnectionError(…)'" for every attempt of every call, and its system-metrics thread logs
"Failed to get mlflow run: API request to … failed with exception …": measured with a real ``mlflow server`` stopped
while the engine started (issue 25 row 12), nine such lines went to the terminal. The run keeps what it could not
record on disk (:mod:`ascendflow.tracking.pending`) and says so in one line, so these records are dropped.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import urlsplit

#: Loggers that report a tracking server's failed calls: urllib3's pool (each retry) and MLflow's system-metrics
#: thread (``mlflow/system_metrics/system_metrics_monitor.py``, MLflow 3.x).
NOISY_LOGGERS = ("urllib3.connectionpool", "mlflow.system_metrics.system_metrics_monitor")

#: The OS error inside urllib3's message (``[Errno 111] Connection refused``) and urllib3's timeouts.
_ERRNO = re.compile(r"\[Errno -?\d+\] ([^\"')]+)")
_TIMEOUT = re.compile(r"(Read timed out|Connect timeout|timed out)")


class ServerOutageFilter(logging.Filter):
    """Drops log records about the tracking server at ``uri`` (its ``host``/``port`` in urllib3's words, or the URI
    in MLflow's); records about any other host pass.

    Args:
        uri: the tracking server's ``http(s)://host:port`` address.
    """

    def __init__(self, uri: str) -> None:
        super().__init__()
        parts = urlsplit(uri)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        self.uri = uri
        self.marks = (f"host='{parts.hostname}', port={port}", f"{parts.hostname}:{port}")

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(mark in message for mark in self.marks)


def quiet_server_outage(uri: str | None) -> None:
    """Install :class:`ServerOutageFilter` for ``uri`` on :data:`NOISY_LOGGERS` once (no-op for a store that is not
    an HTTP server)."""
    if not uri or not uri.startswith(("http://", "https://")):
        return
    for name in NOISY_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, ServerOutageFilter) and f.uri == uri for f in logger.filters):
            logger.addFilter(ServerOutageFilter(uri))


def outage_reason(message: str) -> str:
    """A few words for why a tracking server did not answer: the OS error (``Connection refused``), a timeout
    (``Read timed out``), else the first line of ``message`` (at most 200 characters)."""
    if m := _ERRNO.search(message):
        return m.group(1).strip()
    if m := _TIMEOUT.search(message):
        return m.group(1)
    return message.splitlines()[0][:200] if message else "no answer"


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` is a tracking server not answering (refused, reset, timed out, name not resolved): MLflow
    already retried the call (``MLFLOW_HTTP_REQUEST_MAX_RETRIES``), so :func:`ascendflow.tracking.store.with_retry`
    does not try it again."""
    text = str(exc)
    return "Max retries exceeded" in text or bool(_TIMEOUT.search(text))

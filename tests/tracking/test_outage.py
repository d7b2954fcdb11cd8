"""The words and the log filter for a tracking server that stops answering (issue 25 row 12); the real server
stopped mid-run is ``tests/engine/faults/test_store_outage.py``."""

from __future__ import annotations

import logging

from ascendflow.tracking.outage import ServerOutageFilter, outage_reason, quiet_server_outage, unreachable

#: MLflow 3.17's message for a refused connection (measured with a stopped ``mlflow server``).
REFUSED = ("API request to http://127.0.0.1:48655/api/2.0/mlflow/runs/log-batch failed with exception "
           "HTTPConnectionPool(host='127.0.0.1', port=48655): Max retries exceeded with url: "
           "/api/2.0/mlflow/runs/log-batch (Caused by NewConnectionError(\"HTTPConnection(host='127.0.0.1', "
           "port=48655): Failed to establish a new connection: [Errno 111] Connection refused\"))")


def test_the_reason_is_the_os_error_or_the_timeout():
    assert outage_reason(REFUSED) == "Connection refused"
    assert outage_reason("HTTPConnectionPool(host='h', port=5000): Read timed out. (read timeout=10)") == \
        "Read timed out"
    assert outage_reason("INTERNAL_ERROR: the store broke\nmore") == "INTERNAL_ERROR: the store broke"
    assert unreachable(Exception(REFUSED)) and not unreachable(Exception("database is locked"))


def _record(name: str, msg: str, *args) -> logging.LogRecord:
    return logging.LogRecord(name, logging.WARNING, __file__, 1, msg, args, None)


def _warnings_of_a_refused_request(port: int) -> list[logging.LogRecord]:
    """The records urllib3 itself logs for a request to a refused port with one retry (as MLflow's client does)."""
    import urllib3

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("urllib3.connectionpool")
    logger.addHandler(handler)
    try:
        urllib3.PoolManager().request("GET", f"http://127.0.0.1:{port}/api/2.0/mlflow/runs/get",
                                      retries=urllib3.Retry(total=1, backoff_factor=0))
    except urllib3.exceptions.MaxRetryError:
        pass
    finally:
        logger.removeHandler(handler)
    return records


def test_retry_warnings_about_the_tracking_server_are_dropped_and_others_pass():
    from ascendflow.runner.server import free_port

    port, other_port = free_port(), free_port()
    (retry,) = _warnings_of_a_refused_request(port)
    (other,) = _warnings_of_a_refused_request(other_port)
    assert retry.getMessage().startswith("Retrying (Retry(total=0")
    metrics = _record("mlflow.system_metrics.system_metrics_monitor", "Failed to get mlflow run: %s",
                      REFUSED.replace("48655", str(port)))
    drop = ServerOutageFilter(f"http://127.0.0.1:{port}")
    assert [drop.filter(r) for r in (retry, metrics, other)] == [False, False, True]


def test_the_filter_is_installed_once_and_only_for_a_server():
    logger = logging.getLogger("urllib3.connectionpool")
    before = list(logger.filters)
    try:
        quiet_server_outage("sqlite:////tmp/x.db")
        assert logger.filters == before
        quiet_server_outage("http://127.0.0.1:5999")
        quiet_server_outage("http://127.0.0.1:5999")
        assert [f.uri for f in logger.filters if isinstance(f, ServerOutageFilter)] == ["http://127.0.0.1:5999"]
    finally:
        logger.filters[:] = before

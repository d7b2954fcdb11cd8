"""A tracking server whose store cannot be opened: one line quoting the real error (issue 20, row 12a). Real MLflow,
real SQLite; the server is never started for a store that does not open."""

from __future__ import annotations

import pytest

from ascendflow.schema.tracking import TrackingSpec
from ascendflow.tracking.server import ServerStartError, TrackingServer, error_line


def test_a_store_that_does_not_open_is_one_line_with_the_real_error(tmp_path):
    server = TrackingServer(TrackingSpec(enabled=True), tmp_path / "outputs")
    server.root.mkdir(parents=True)
    (server.root / "mlflow.db").write_bytes(b"not a database, but a full disk's half-written page" * 100)
    with pytest.raises(ServerStartError) as err:
        server.start()
    message = str(err.value)
    assert "\n" not in message and "file is not a database" in message, message
    assert "Background on this error" not in message and str(server.root / "mlflow.db") in message
    assert server.process is None and not server.root.joinpath("logs").exists()  # no server was started


def test_error_line_takes_the_exception_line_and_not_sqlalchemy_s_footer():
    log = ("Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
           "sqlalchemy.exc.OperationalError: (sqlite3.OperationalError) table _alembic_tmp_experiments already exists\n"
           "[SQL: CREATE TABLE _alembic_tmp_experiments (...)]\n"
           "(Background on this error at: https://sqlalche.me/e/20/e3q8)\n")
    assert error_line(log) == ("sqlalchemy.exc.OperationalError: (sqlite3.OperationalError) table "
                               "_alembic_tmp_experiments already exists")
    assert error_line("") == "(empty log)"

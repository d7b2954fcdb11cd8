"""Credentials (issue 20 rows 1, 2, 3, 10): a URI's userinfo password, secret ``ascend.env`` values and the API key
are masked in every line printed and every file written (run directory, sweep directory, MLflow store); a tracking
server behind HTTP basic auth records the run; a bad override is named alone; a store error names where its URI
came from. Every case runs ``python -m ascendflow`` as a real process; row 2 against a real ``mlflow server
--app-name basic-auth`` on loopback."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import run_ascendflow

URI_PASSWORD = "pw_Secret123_uri"
TOKEN = "hf_CredTokenValue_987654"
API_KEY = "sk-cred-test-key-77"
ADMIN = ("admin", "hunter2_Adm1nPass")


def leaks(values: list[str], roots: list[Path], texts: dict[str, str]) -> list[str]:
    """Where any of ``values`` appears: every file under ``roots`` (run and sweep directories, SQLite stores,
    artifact copies, server logs) and every captured terminal stream in ``texts`` (``{"stderr": ...}``)."""
    found = [name for name, text in texts.items() if any(v in text for v in values)]
    for root in roots:
        if root.is_file():
            files = [root]
        else:
            files = [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
        found += [str(p) for p in files if any(v.encode() in p.read_bytes() for v in values)]
    return found


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def test_uri_passwords_and_tokens_are_masked_on_the_terminal_and_in_every_file(tmp_path):
    # Row 1: the password of MLFLOW_TRACKING_URI / tracking.tracking_uri; row 10: the variable is named as the source.
    env = {"MLFLOW_TRACKING_URI": f"postgresql://u:{URI_PASSWORD}@127.0.0.1:1/db", "AF_CRED_KEY": API_KEY}
    proc = run_ascendflow(["run.mode=plan", f"+ascend.env.HF_TOKEN={TOKEN}", "run.api_key_env=AF_CRED_KEY"],
                          cwd=tmp_path, env=env, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = _error_lines(proc.stderr)
    assert line.startswith("error: MLFLOW_TRACKING_URI='postgresql://u:***@127.0.0.1:1/db': cannot be used as an "
                           "MLflow store"), line
    assert "unset MLFLOW_TRACKING_URI" in line
    assert "***" in next(tmp_path.rglob("error.txt")).read_text()
    assert leaks([URI_PASSWORD, TOKEN, API_KEY], [tmp_path], {"stdout": proc.stdout, "stderr": proc.stderr}) == []

    # The same URI given in the config: named as tracking.tracking_uri, masked in .hydra/*.yaml and error.txt too.
    other = tmp_path / "config"
    other.mkdir()
    proc = run_ascendflow(["run.mode=plan", f"tracking.tracking_uri=http://admin:{URI_PASSWORD}@127.0.0.1:9"],
                          cwd=other, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = _error_lines(proc.stderr)
    assert line.startswith("error: tracking.tracking_uri='http://admin:***@127.0.0.1:9': no MLflow server answers"), \
        line
    assert "http://admin:***@127.0.0.1:9" in next(other.rglob("overrides.yaml")).read_text()
    assert leaks([URI_PASSWORD], [other], {"stdout": proc.stdout, "stderr": proc.stderr}) == []


def test_databricks_from_the_environment_names_the_variable(tmp_path):
    # Row 10: the value came from MLFLOW_TRACKING_URI, not from tracking.tracking_uri.
    # Without Databricks credentials it is one line at once: MLflow printed 8 SDK warnings over ~40 s of retries first.
    proc = run_ascendflow(["run.mode=plan"], cwd=tmp_path, timeout=300, env={
        "MLFLOW_TRACKING_URI": "databricks", "DATABRICKS_CONFIG_FILE": str(tmp_path / "no.databrickscfg")})
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: MLFLOW_TRACKING_URI='databricks': is a Databricks store, and "), line
    assert "tracking.tracking_uri=" not in line and "unset MLFLOW_TRACKING_URI" in line


def test_an_override_that_does_not_parse_is_named_alone_and_secrets_stay_masked(tmp_path):
    # Row 3: Hydra's own message repeated every override, the token in clear.
    proc = run_ascendflow(["run.mode=plan", f"+ascend.env.HF_TOKEN={TOKEN}", "engine.max_num_seqs=(1"],
                          cwd=tmp_path, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: engine.max_num_seqs='(1': cannot be parsed (extraneous input '(' expecting {<EOF>, ':', BRACKET_OPEN, "
        "BRACE_OPEN, FLOAT, INT, BOOL, NULL, UNQUOTED_CHAR, ID, ESC, WS, QUOTED_VALUE, INTERPOLATION}); quote the "
        "value (key='value') or close its brackets"]
    # The secret override itself unparsable: Hydra's reason quotes it; masked there too. Sweeps are checked alike.
    proc = run_ascendflow(["-m", "run.mode=plan", f"+ascend.env.HF_TOKEN={TOKEN}(x"], cwd=tmp_path, timeout=300)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: ascend.env.HF_TOKEN='***': cannot be parsed ("), line
    assert leaks([TOKEN], [tmp_path], {"stdout": proc.stdout, "stderr": proc.stderr}) == []
    assert not (tmp_path / "outputs").exists()  # refused before Hydra wrote anything


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def basic_auth_server(tmp_path_factory):
    """A real ``mlflow server --app-name basic-auth`` on 127.0.0.1 (its users in their own SQLite database, the
    admin from ``MLFLOW_AUTH_CONFIG_PATH``, mlflow/server/auth/basic_auth.ini); yields ``(host:port, root)``."""
    pytest.importorskip("flask_wtf", reason="MLflow's basic-auth app needs Flask-WTF (the test extra installs it)")
    root = tmp_path_factory.mktemp("auth_server")
    (root / "auth.ini").write_text(
        "[mlflow]\ndefault_permission = READ\n"
        f"database_uri = sqlite:///{root / 'users.db'}\n"
        f"admin_username = {ADMIN[0]}\nadmin_password = {ADMIN[1]}\n"
        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n")
    port = _free_port()
    env = {**os.environ, "MLFLOW_AUTH_CONFIG_PATH": str(root / "auth.ini"),
           "MLFLOW_FLASK_SERVER_SECRET_KEY": "ascendflow-test-only",
           # no job-runner/huey consumers (7 processes here): faster to start and stop, not used by these tests
           "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    env.pop("MLFLOW_TRACKING_URI", None)
    log = open(root / "server.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--app-name", "basic-auth",
                             "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}", "--serve-artifacts",
                             "--artifacts-destination", str(root / "artifacts"), "--host", "127.0.0.1", "--port",
                             str(port), "--workers", "1"], env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.monotonic() + 240
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                os.killpg(proc.pid, 9) if proc.poll() is None else None
                pytest.fail(f"the basic-auth MLflow server did not start: {(root / 'server.log').read_text()[-2000:]}")
            time.sleep(1)
    yield f"127.0.0.1:{port}", root
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    log.close()


def test_a_tracking_server_behind_basic_auth_records_the_run_and_no_password_is_written(tmp_path, basic_auth_server):
    # Row 2: the /health probe handed user:pass@host to urlopen as the host name ("gaierror").
    address, root = basic_auth_server
    from mlflow.tracking import MlflowClient

    runs = []
    for i, how in enumerate(("env", "config")):
        work = tmp_path / how
        work.mkdir()
        uri = f"http://{ADMIN[0]}:{ADMIN[1]}@{address}"
        args, env = ["run.mode=plan", f"+ascend.env.HF_TOKEN={TOKEN}", "run.api_key_env=AF_CRED_KEY"], \
            {"AF_CRED_KEY": API_KEY}
        if how == "env":
            env["MLFLOW_TRACKING_URI"] = uri
        else:
            args.append(f"tracking.tracking_uri={uri}")
        proc = run_ascendflow(args, cwd=work, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert f"open http://{ADMIN[0]}:***@{address}/#/experiments/" in proc.stdout
        assert leaks([ADMIN[1], TOKEN, API_KEY], [work], {"stdout": proc.stdout, "stderr": proc.stderr}) == []
        runs.append(proc.stdout.split("MLflow run ")[1].split()[0])

    # Without credentials the server refuses (401): the run above was recorded as the admin.
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"http://{address}/api/2.0/mlflow/experiments/search?max_results=1", timeout=10)
    assert refused.value.code == 401
    os.environ["MLFLOW_TRACKING_USERNAME"], os.environ["MLFLOW_TRACKING_PASSWORD"] = ADMIN
    try:
        client = MlflowClient(tracking_uri=f"http://{address}")
        recorded = [client.get_run(r) for r in runs]
    finally:
        os.environ.pop("MLFLOW_TRACKING_USERNAME")
        os.environ.pop("MLFLOW_TRACKING_PASSWORD")
    assert [r.info.status for r in recorded] == ["FINISHED", "FINISHED"]
    assert recorded[1].data.params["tracking.tracking_uri"] == f"http://{ADMIN[0]}:***@{address}"
    assert recorded[0].data.params["ascend.env.HF_TOKEN"] == "***"
    # The server's store, its artifacts (the run directories uploaded) and its log: no credential.
    assert leaks([TOKEN, API_KEY], [root], {}) == []
    assert leaks([ADMIN[1]], [root / "mlflow.db", root / "artifacts"], {}) == []


def test_a_wrong_password_is_one_line(tmp_path, basic_auth_server):
    address, _ = basic_auth_server
    proc = run_ascendflow(["run.mode=plan"], cwd=tmp_path,
                          env={"MLFLOW_TRACKING_URI": f"http://{ADMIN[0]}:wrong_Passw0rd@{address}"}, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = _error_lines(proc.stderr)
    assert line.startswith(f"error: MLFLOW_TRACKING_URI='http://{ADMIN[0]}:***@{address}': cannot be used as an "
                           "MLflow store"), line
    assert leaks(["wrong_Passw0rd"], [tmp_path], {"stdout": proc.stdout, "stderr": proc.stderr}) == []


def test_one_masker_for_uris_values_and_the_health_probe():
    from ascendflow.schema.secrets import mask_credentials, mask_uris, uri_password
    from ascendflow.secret_logging import MaskedStream, process_secrets
    from ascendflow.tracking.store import health_request

    assert mask_uris("a postgresql://u:pw_x1@127.0.0.1:1/db and http://admin:hunter2@h:5000/x") == \
        "a postgresql://u:***@127.0.0.1:1/db and http://admin:***@h:5000/x"
    assert mask_uris("http://h:5000 sqlite:////tmp/a.db user@host") == "http://h:5000 sqlite:////tmp/a.db user@host"
    assert uri_password("http://admin:hunter2@h:5000") == "hunter2" and uri_password("http://h:1") is None
    assert mask_credentials("k=hf_abcdef u=redis://:pw_only9@h", ["hf_abcdef"]) == "k=*** u=redis://:***@h"
    assert process_secrets(["tracking.tracking_uri=http://a:pw_cfg123@h:1", "run.api_key_env=AF_K"],
                           {"MLFLOW_TRACKING_URI": "http://b:pw_env456@h:2", "AF_K": "sk-key-1"}) == [
        "pw_cfg123", "pw_env456", "sk-key-1"]
    request = health_request("http://admin:p%40ss@127.0.0.1:5000/")
    assert request.full_url == "http://127.0.0.1:5000/health"
    assert request.get_header("Authorization") == "Basic YWRtaW46cEBzcw=="  # base64("admin:p@ss"), RFC 7617
    written: list[str] = []

    class Sink:
        def write(self, text):
            written.append(text)

    MaskedStream(Sink()).write("uri http://u:pw_stream1@h:1 ok")
    assert written == ["uri http://u:***@h:1 ok"]


def test_a_sweep_on_a_basic_auth_server_writes_no_password(tmp_path, basic_auth_server):
    # The sweep directory (multirun.yaml, mlflow_sweep.json, each job's .hydra/ and log), the parent run's tags and
    # the jobs' runs: the URI shows user:***@ everywhere, and every job records.
    address, root = basic_auth_server
    uri = f"http://{ADMIN[0]}:{ADMIN[1]}@{address}"
    proc = run_ascendflow(["-m", "run.mode=plan", f"tracking.tracking_uri={uri}", "engine.seed=0,1",
                           f"+ascend.env.HF_TOKEN={TOKEN}"], cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (sweep_file,) = tmp_path.rglob("mlflow_sweep.json")
    assert f"http://{ADMIN[0]}:***@{address}" in sweep_file.read_text()
    assert leaks([ADMIN[1], TOKEN], [tmp_path], {"stdout": proc.stdout, "stderr": proc.stderr}) == []
    from mlflow.tracking import MlflowClient

    os.environ["MLFLOW_TRACKING_USERNAME"], os.environ["MLFLOW_TRACKING_PASSWORD"] = ADMIN
    try:
        client = MlflowClient(tracking_uri=f"http://{address}")
        parent_id = json.loads(sweep_file.read_text())["run_id"]
        parent = client.get_run(parent_id)
        children = client.search_runs([parent.info.experiment_id],
                                      filter_string=f"tags.mlflow.parentRunId = '{parent_id}'")
    finally:
        os.environ.pop("MLFLOW_TRACKING_USERNAME")
        os.environ.pop("MLFLOW_TRACKING_PASSWORD")
    assert parent.info.status == "FINISHED"
    assert f"tracking.tracking_uri=http://{ADMIN[0]}:***@{address}" in parent.data.tags["sweep.overrides"]
    assert sorted(c.info.status for c in children) == ["FINISHED", "FINISHED"]
    assert leaks([ADMIN[1], TOKEN], [root / "mlflow.db", root / "artifacts"], {}) == []

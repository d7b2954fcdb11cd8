"""Issue 25 row 5: ``scripts/ingest_release.py`` offline is one line, exit 2; deprecated keys are kept and marked.

Before: offline, a 30-line ``URLError`` traceback and exit 1; its draft for 0.30.0rc2 listed
``recompute_scheduler_enable``, ``short_request_first_config`` and ``batch_job_sched_config`` as removed, where the
release still accepts them with a deprecation warning (``ascend_config.py`` ``SchedulerConfig`` ``_resolve``).
The fixture ``tests/data/releases/0.30.0rc2`` was cut from the PyPI sdist with ``--cut-fixture``.
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "ingest_release.py"
DATA = ROOT / "ascendflow" / "compiler" / "rules" / "data"
FIXTURE = ROOT / "tests" / "data" / "releases" / "0.30.0rc2"
DEPRECATED = ["enable_balance_scheduling", "recompute_scheduler_enable", "short_request_first_config",
              "profiling_chunk_config", "batch_job_sched_config"]


@pytest.fixture(scope="module")
def ingest():
    spec = importlib.util.spec_from_file_location("ingest_release", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_deprecated_keys_stay_in_the_key_set_and_are_marked_not_removed(ingest):
    source = ingest.DirSource(FIXTURE)
    committed = yaml.safe_load((DATA / "additional_config_keys.yaml").read_text())
    assert sorted(ingest.extract_keys(source)) == sorted(committed["0.30.0rc2"])
    assert ingest.deprecated_keys(source) == DEPRECATED
    d = ingest.draft("0.30.0rc2", source, None, "0.30.0rc1")
    assert d["keys_removed"] == [] and d["keys_added"] == []
    assert d["deprecated_keys"] == DEPRECATED
    text = ingest.render(d)
    assert ("# deprecated_keys (kept above: accepted with a deprecation warning): ['enable_balance_scheduling', "
            "'recompute_scheduler_enable', 'short_request_first_config', 'profiling_chunk_config', "
            "'batch_job_sched_config']") in text.splitlines()
    assert "- [ ] additional_config keys vs 0.30.0rc1: added none, removed none" in text.splitlines()
    matrix = yaml.safe_load((DATA / "version_matrix.yaml").read_text())["vllm-ascend-0.30.0rc2"]
    pins, _ = ingest.extract_pins(source, "0.30.0rc2")
    assert pins == {k: None if v is None else str(v) for k, v in matrix.items()}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_an_unreachable_index_is_one_line_and_exit_2(tmp_path):
    port = _free_port()  # nothing listens there: connection refused, as offline
    res = _run("0.30.0rc2", "--cache", str(tmp_path / "cache"), "--index-url", f"http://127.0.0.1:{port}",
               cwd=tmp_path)
    assert res.returncode == 2
    assert res.stdout == ""
    assert res.stderr.splitlines() == [
        f"error: cannot reach http://127.0.0.1:{port}/vllm-ascend/json (ConnectionRefusedError: [Errno 111] "
        f"Connection refused); connect to the network, or give --index-url URL of a mirror with PyPI's JSON API, or "
        f"put the sdist (vllm_ascend-<version>.tar.gz) in --cache DIR"]
    assert not (tmp_path / "cache").exists()  # nothing half-written


def test_an_index_without_the_package_or_not_json_is_one_line(tmp_path):
    served = tmp_path / "served"
    (served / "other" / "vllm-ascend").mkdir(parents=True)
    (served / "other" / "vllm-ascend" / "json").write_text("<html>not an API</html>")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        missing = _run("0.30.0rc2", "--cache", str(tmp_path / "c"), "--index-url", f"{base}/pypi", cwd=tmp_path)
        not_json = _run("0.30.0rc2", "--cache", str(tmp_path / "c"), "--index-url", f"{base}/other", cwd=tmp_path)
    finally:
        server.shutdown()
        server.server_close()
    assert missing.returncode == 2
    assert missing.stderr.splitlines() == [f"error: {base}/pypi/vllm-ascend/json answered HTTP 404 (File not found)"]
    assert not_json.returncode == 2
    assert not_json.stderr.splitlines() == [
        f"error: {base}/other/vllm-ascend/json is not PyPI's JSON API (its answer is not JSON); give --index-url of "
        f"one"]

"""End to end: a sweep is visible in the real MLflow UI (``mlflow ui``, as the README tells users to start it),
rendered by a real headless Chromium.

A 2-job plan-mode sweep writes one parent run and two nested child runs to a fresh SQLite store; ``mlflow ui`` serves
that store; Chromium loads three pages of the UI's single-page app and dumps the DOM it rendered (and screenshots):

* the experiment's runs table, sorted by run name (a sort other than by date makes the UI list child runs flat instead
  of collapsed under their parent): the parent and both children are listed, "3 matching runs";
* the compare-runs page of the two children: their names, the ``predicted_kv_cache_tokens`` metric and its value;
* a child's run page: "Parent run" links to the sweep's parent run.

Screenshots of the first two pages are kept in ``outputs/test-artifacts/`` (git-ignored) for a human to look at.
Needs ``chromium`` on PATH (``scripts/setup.sh`` installs Debian's package).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest

from tests.conftest import REPO, run_ascendflow
from tests.helpers import mlflow_runs

pytestmark = pytest.mark.no_vllm  # tracking server and UI, no vLLM engine

ARTIFACTS = REPO / "outputs" / "test-artifacts"
CHILD_NAMES = ("engine.max_num_seqs=4", "engine.max_num_seqs=16")
METRIC = "predicted_kv_cache_tokens"
UI_START_TIMEOUT_S = 90
CHROMIUM_TIMEOUT_S = 120
# Virtual time the SPA gets to load its bundles, query the server and render. Chromium does not advance virtual time
# while network fetches are pending, so a slow server delays the dump instead of truncating it.
VIRTUAL_TIME_BUDGET_MS = 20000


def _chromium() -> str:
    path = shutil.which("chromium")
    if path is None:  # scripts/setup.sh installs Debian's chromium; without a browser this test cannot prove anything
        pytest.fail("chromium is not installed: it is optional for users but this test needs it (CI has it); install "
                    "it with `sudo apt-get install chromium` or scripts/install_browser.sh as root")
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _stop_group(proc: subprocess.Popen, grace_s: float = 15) -> None:
    """SIGTERM the process group ``proc`` leads, wait up to ``grace_s``, then SIGKILL whatever is left of it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    with contextlib.suppress(ProcessLookupError):  # stragglers (uvicorn workers, huey job consumers)
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


@contextlib.contextmanager
def _mlflow_ui(backend_store_uri: str, workdir: Path) -> Iterator[str]:
    """``mlflow ui --backend-store-uri URI --host 127.0.0.1 --port PORT`` in its own process group; yields its base
    URL once it answers, and always stops it."""
    port = _free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / "mlflow_ui.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", backend_store_uri,
                                 "--host", "127.0.0.1", "--port", str(port)],
                                cwd=workdir, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + UI_START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"mlflow ui exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=5) as resp:
                    if resp.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"mlflow ui did not answer /health within {UI_START_TIMEOUT_S} s:\n"
                            f"{log_path.read_text()[-3000:]}")
            time.sleep(0.5)
        yield base
    finally:
        _stop_group(proc)


class _TextOf(HTMLParser):
    """The text a page shows: every text node outside <script>/<style>, whitespace-normalized."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self._skip += 1

    def handle_endtag(self, tag):
        if tag in ("script", "style") and self._skip:
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.parts.append(data)

    @classmethod
    def of(cls, html: str) -> str:
        parser = cls()
        parser.feed(html)
        return " ".join(" ".join(parser.parts).split())


def _render(url: str, profile: Path, screenshot: Path | None = None) -> str:
    """Load ``url`` in a fresh headless Chromium profile and return the DOM it rendered (optionally also saving a
    1600x1000 screenshot)."""
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
           f"--virtual-time-budget={VIRTUAL_TIME_BUDGET_MS}", "--window-size=1600,1000"]
    if screenshot is not None:
        cmd.append(f"--screenshot={screenshot}")
    cmd += ["--dump-dom", url]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=CHROMIUM_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"chromium did not finish {url} within {CHROMIUM_TIMEOUT_S} s")
    finally:
        _stop_group(proc, grace_s=5)  # also reaps helpers (crashpad) left in its group
    assert proc.returncode == 0, f"chromium exited with {proc.returncode} on {url}:\n{err[-3000:]}"
    assert "<html" in out, f"chromium dumped no DOM for {url}:\n{err[-3000:]}"
    return out


def _shows(text: str, phrase: str) -> bool:
    """``phrase`` appears in ``text`` as whole words (``engine.max_num_seqs=4`` does not match ``...=16``)."""
    return f" {phrase} " in f" {text} "


def _assert_png(path: Path) -> None:
    assert path.exists(), f"no screenshot at {path}"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert path.stat().st_size > 10_000, f"{path} is only {path.stat().st_size} bytes"


@pytest.mark.timeout(600)
def test_sweep_parent_and_children_are_listed_in_the_mlflow_ui(tmp_path, mlflow_uri):
    _chromium()  # fail/skip before the slow parts

    # A real 2-job sweep, in plan mode (no engine): one parent run, two nested children.
    proc = run_ascendflow(["-m", "engine.max_num_seqs=4,16", "run.mode=plan"], cwd=tmp_path,
                          env={"MLFLOW_TRACKING_URI": mlflow_uri}, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = mlflow_runs(mlflow_uri)
    (parent,) = [r for r in runs if r.data.tags.get("ascendflow.sweep") == "parent"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert sorted(r.info.run_name for r in children) == sorted(CHILD_NAMES)
    assert all(r.info.status == "FINISHED" and METRIC in r.data.metrics for r in children)
    experiment_id = parent.info.experiment_id
    kv_tokens = {str(int(r.data.metrics[METRIC])) for r in children}

    runs_png = ARTIFACTS / "mlflow_ui_sweep.png"
    compare_png = ARTIFACTS / "mlflow_ui_sweep_compare.png"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for png in (runs_png, compare_png):
        png.unlink(missing_ok=True)

    with _mlflow_ui(mlflow_uri, tmp_path / "ui") as base:
        # 1. The experiment's runs table. Sorted by date (the default) the UI nests children under a collapsed
        # parent; sorted by run name it lists every run flat.
        runs_url = f"{base}/#/experiments/{experiment_id}/runs?" + urlencode(
            {"orderByKey": "tags.`mlflow.runName`", "orderByAsc": "true"}, quote_via=quote)
        text = _TextOf.of(_render(runs_url, tmp_path / "chromium-runs", screenshot=runs_png))
        for name in (*CHILD_NAMES, parent.info.run_name):
            assert _shows(text, name), f"{name!r} not listed at {runs_url}:\n{text}"
        assert "3 matching runs" in text, text
        _assert_png(runs_png)

        # 2. The compare-runs page of the two children: names, the metric and its value, rendered by the UI.
        compare_url = f"{base}/#/compare-runs?" + urlencode(
            {"runs": json.dumps([r.info.run_id for r in children]), "experiments": json.dumps([experiment_id])},
            quote_via=quote)
        text = _TextOf.of(_render(compare_url, tmp_path / "chromium-compare", screenshot=compare_png))
        assert f"Comparing {len(children)} Runs" in text, text
        for name in CHILD_NAMES:
            assert _shows(text, name), f"{name!r} not on {compare_url}:\n{text}"
        assert METRIC in text, text
        for value in kv_tokens:
            assert _shows(text, value), f"{METRIC} value {value} not on {compare_url}:\n{text}"
        _assert_png(compare_png)

        # 3. A child's run page links to the sweep's parent run.
        child = children[0]
        run_url = f"{base}/#/experiments/{experiment_id}/runs/{child.info.run_id}"
        html = _render(run_url, tmp_path / "chromium-run")
        text = _TextOf.of(html)
        assert _shows(text, child.info.run_name), text
        assert f"Parent run {parent.info.run_name}" in text, text
        assert f'href="#/experiments/{experiment_id}/runs/{parent.info.run_id}"' in html

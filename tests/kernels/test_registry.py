"""Backend choice by device, override, and the import guard of the NPU binding."""

from __future__ import annotations

import importlib.util

import pytest

from ascendflow.kernels import OPS, available_backends, get_op
from ascendflow.kernels.registry import BACKEND_ENV, backend_for

HAS_TORCH_NPU = importlib.util.find_spec("torch_npu") is not None


def test_choice_by_device() -> None:
    both = ["reference", "npu"]
    assert [backend_for(d, installed=both) for d in ("cpu", None, "cuda:0", "npu", "npu:3")] == [
        "reference", "reference", "reference", "npu", "npu"]
    assert [backend_for(d, installed=["reference"]) for d in ("cpu", "npu:0")] == ["reference", "reference"]


def test_override_argument_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert backend_for("npu:0", backend="reference", installed=["reference", "npu"]) == "reference"
    monkeypatch.setenv(BACKEND_ENV, "reference")
    assert backend_for("npu:0", installed=["reference", "npu"]) == "reference"
    monkeypatch.setenv(BACKEND_ENV, "cuda")
    with pytest.raises(ValueError, match=r"^kernel backend=cuda: not one of \['reference', 'npu'\]"):
        backend_for("cpu")


@pytest.mark.skipif(HAS_TORCH_NPU, reason="torch_npu is installed here")
def test_npu_backend_refused_without_torch_npu() -> None:
    assert available_backends() == ["reference"]
    with pytest.raises(ValueError,
                       match="^kernel backend=npu: torch_npu is not installed here; use backend=reference$"):
        get_op("w8a8_dynamic_linear", "cpu", backend="npu")


def test_cpu_gets_the_reference_of_every_op() -> None:
    assert sorted(OPS) == ["dynamic_quant", "quant_matmul", "static_quant", "w8a8_dynamic_linear",
                           "w8a8_static_linear"]
    assert all(get_op(name, "cpu") is OPS[name] for name in OPS)
    with pytest.raises(KeyError):
        get_op("gemm", "cpu")

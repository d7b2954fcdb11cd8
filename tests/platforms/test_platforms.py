"""The platform registry: one platform per ``hardware.kind``, found by :func:`platform_for`, and what the runner
looks for on a host of each kind (pure lookups; the one real probe is this machine, which has no Ascend device)."""

from __future__ import annotations

import typing

import pytest

from ascendflow.platforms import PLATFORMS, CpuPlatform, CudaPlatform, NpuPlatform, platform_for
from ascendflow.runner.detect import hardware_present
from ascendflow.schema import load_spec
from ascendflow.schema.hardware import HardwareSpec
from tests.conftest import compose_config


def test_every_hardware_kind_has_exactly_one_platform():
    kinds = typing.get_args(HardwareSpec.model_fields["kind"].annotation)
    assert sorted(PLATFORMS) == sorted(kinds) == ["cpu", "gpu", "npu"]
    assert [type(platform_for(k)) for k in ("cpu", "npu", "gpu")] == [CpuPlatform, NpuPlatform, CudaPlatform]
    assert [platform_for(k).device_type for k in ("cpu", "npu", "gpu")] == ["cpu", "npu", "cuda"]


def test_an_unknown_kind_is_refused_with_the_kinds_named():
    with pytest.raises(ValueError) as error:
        platform_for("tpu")
    assert str(error.value) == "hardware.kind='tpu': no such platform; use one of ['cpu', 'gpu', 'npu']"


def test_what_a_host_must_have_per_kind():
    assert [(p.device_glob, p.device_tool, p.engine_module, p.always_present) for p in PLATFORMS.values()] == [
        (None, None, None, True), ("/dev/davinci[0-9]*", None, "torch_npu", False), (None, "nvidia-smi", "vllm", False)]
    raw = compose_config(["hardware=cpu"])
    raw.pop("hydra", None)
    assert hardware_present(load_spec(raw).hardware) is True
    raw = compose_config(["hardware=atlas_800i_a2", "model=qwen3_8b"])
    raw.pop("hydra", None)
    assert hardware_present(load_spec(raw).hardware) is False  # no /dev/davinci* and no torch_npu here

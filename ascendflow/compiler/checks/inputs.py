"""Refusals of the engine's inputs before any memory is planned (pure): a
model dtype the device does not compute in, an ``--kv-cache-dtype`` vllm-ascend ignores, unknown device memory."""

from __future__ import annotations

from ascendflow.schema.errors import ConfigError
from ascendflow.schema.spec import RunSpec
from ascendflow.platforms import platform_for


def check_dtype(spec: RunSpec, dtype: str) -> None:
    """Raises ConfigError: ``engine.dtype`` resolving to a dtype the device does not support."""
    hw = spec.hardware
    if dtype not in hw.dtypes:
        raise ConfigError("engine.dtype", spec.engine.dtype,
                          f"resolves to {dtype}, which {hw.device_name} does not support; use one of {list(hw.dtypes)}")


def check_kv_cache_dtype(spec: RunSpec) -> None:
    """Raises ConfigError: ``quantization.kv_cache_dtype`` other than ``auto`` on NPU (vllm-ascend takes int8 KV from
    the checkpoint's ``kv_cache_type``, reference §5)."""
    quant = spec.quantization
    if not platform_for(spec.hardware.kind).kv_cache_dtype_flag and quant.kv_cache_dtype != "auto":
        raise ConfigError("quantization.kv_cache_dtype", quant.kv_cache_dtype,
                          "vllm-ascend takes an int8 KV cache (C8) from the checkpoint's kv_cache_type, not from "
                          "--kv-cache-dtype; keep auto (reference §5)")


def device_memory(spec: RunSpec, host_memory_bytes: int | None) -> int:
    """Bytes of one device: the hardware's ``device_memory_bytes``, else ``host_memory_bytes`` (CPU: a NUMA node).

    Raises:
        ConfigError: neither is known.
    """
    total = spec.hardware.device_memory_bytes or host_memory_bytes
    if total is None:
        raise ConfigError("hardware.device_memory_bytes", None, "unknown: give the device memory in bytes")
    return total

"""Bytes per element of the dtypes the compiler meets."""

from __future__ import annotations

DTYPE_BYTES: dict[str, int] = {
    "float32": 4,
    "bfloat16": 2,
    "float16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "int8": 1,
}

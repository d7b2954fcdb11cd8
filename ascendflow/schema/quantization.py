"""Quantization option (``conf/quantization/*.yaml``)."""

from __future__ import annotations

from typing import Literal

from ascendflow.schema.base import Spec


class QuantizationSpec(Spec):
    """Weight and KV-cache quantization.

    Attributes:
        method: vLLM's ``--quantization`` value; ``None`` serves the checkpoint's own dtype (or lets vLLM detect the
            checkpoint's quantization config).
        kv_cache_dtype: vLLM's ``--kv-cache-dtype``; ``auto`` stores KV in the model dtype.
    """

    method: Literal["ascend", "fp8", "compressed-tensors"] | None = None
    kv_cache_dtype: Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16", "float16"] = "auto"

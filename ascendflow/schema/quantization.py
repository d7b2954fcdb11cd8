"""Quantization option (``conf/quantization/*.yaml``)."""

from __future__ import annotations

from typing import Literal

from ascendflow.schema.base import Spec

Scheme = Literal["W8A8", "W8A8_DYNAMIC", "W8A16", "W4A8_DYNAMIC", "W4A16"]


class QuantizationSpec(Spec):
    """Weight and KV-cache quantization.

    Attributes:
        name: option name.
        method: vLLM's ``--quantization`` value; ``None`` serves the checkpoint's own dtype (or lets vLLM detect the
            checkpoint's quantization config). ``ascend`` (msModelSlim checkpoints) is passed on the command line
            only to vllm-ascend before v0.17.0rc1; later versions detect it from ``quant_model_description.json``.
        linear_scheme: msModelSlim scheme of attention and dense-MLP projections (``W8A8``, ``W8A8_DYNAMIC``...);
            ``None``: model dtype. Used for weight bytes when no local description file is given.
        expert_scheme: msModelSlim scheme of MoE experts; ``None``: model dtype.
        kv_cache_dtype: vLLM's ``--kv-cache-dtype``; ``auto`` stores KV in the model dtype.
    """

    name: str = "none"
    method: Literal["ascend", "fp8", "compressed-tensors"] | None = None
    linear_scheme: Scheme | None = None
    expert_scheme: Scheme | None = None
    kv_cache_dtype: Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16", "float16"] = "auto"

"""A linear layer of an msModelSlim W8A8_DYNAMIC checkpoint: per-token dynamic int8 activations, per-channel int8
weights with ``weight_scale`` (``weight_offset`` is all zero and unused: symmetric).

Reproduces vllm-ascend v0.23.0 ``vllm_ascend/quantization/methods/w8a8_dynamic.py``
``AscendW8A8DynamicLinearMethod.apply``: ``npu_dynamic_quant`` then ``npu_quant_matmul`` with ``pertoken_scale``.
"""

from __future__ import annotations

import torch

from .dynamic_quant import dynamic_quant
from .quant_matmul import quant_matmul


def w8a8_dynamic_linear(
    x: torch.Tensor, weight_kn: torch.Tensor, weight_scale: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """``y = x @ dequant(W)^T`` with the activations quantized per token on the fly.

    Args:
        x: ``[..., K]`` float activations (the output has their dtype).
        weight_kn: int8 ``[K, N]`` (the checkpoint's ``[N, K]`` transposed, as vllm-ascend stores it).
        weight_scale: float ``[N]`` per output channel.
        bias: optional float ``[N]``.

    Returns:
        ``[..., N]`` in ``x.dtype``.

    Raises:
        ValueError: shapes or dtypes do not match.
    """
    qx, s_t = dynamic_quant(x)
    return quant_matmul(qx, weight_kn, weight_scale, pertoken_scale=s_t, bias=bias, output_dtype=x.dtype)

"""A linear layer of an msModelSlim W8A8 (static) checkpoint: per-tensor calibrated activation scale/offset,
per-channel int8 weights, int32 ``quant_bias`` and float ``deq_scale``.

Reproduces vllm-ascend v0.23.0 ``vllm_ascend/quantization/methods/w8a8_static.py`` ``AscendW8A8LinearMethod.apply``:
``torch.ops.vllm.quantize`` (``npu_quantize``) then ``npu_quant_matmul(x, weight, deq_scale, bias=quant_bias)``.
``deq_scale`` must be float32 here (msModelSlim keeps it float32 for bf16 models and stores the float32 bit pattern
as int64 for fp16 models, ``format/common/deqscale.py``; :func:`deq_scale_from_int64` undoes the latter).
"""

from __future__ import annotations

import torch

from .quant_matmul import quant_matmul
from .static_quant import static_quant


def deq_scale_from_int64(deq_scale: torch.Tensor) -> torch.Tensor:
    """Recover float32 ``deq_scale`` from msModelSlim's int64 storage (the low 32 bits are the float32 bits).

    Raises:
        ValueError: ``deq_scale`` is not int64.
    """
    if deq_scale.dtype != torch.int64:
        raise ValueError(f"deq_scale_from_int64 needs int64, got {deq_scale.dtype}")
    return deq_scale.to(torch.int32).view(torch.float32)


def w8a8_static_linear(
    x: torch.Tensor,
    weight_kn: torch.Tensor,
    input_scale: torch.Tensor,
    input_offset: torch.Tensor,
    quant_bias: torch.Tensor,
    deq_scale: torch.Tensor,
    output_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """``y = (static_quant(x) @ W + quant_bias) * deq_scale``.

    Args:
        x: ``[..., K]`` float activations.
        weight_kn: int8 ``[K, N]``.
        input_scale: float ``[1]`` calibrated activation scale.
        input_offset: ``[1]`` activation zero point.
        quant_bias: int32 ``[N]``.
        deq_scale: float32 ``[N]`` (= input_scale * weight_scale), or its int64 storage.
        output_dtype: result dtype (vllm-ascend: the layer's params_dtype); default ``x.dtype``.

    Returns:
        ``[..., N]``.

    Raises:
        ValueError: shapes or dtypes do not match, or ``input_scale`` is not positive.
    """
    if deq_scale.dtype == torch.int64:
        deq_scale = deq_scale_from_int64(deq_scale)
    qx = static_quant(x, input_scale, input_offset)
    return quant_matmul(qx, weight_kn, deq_scale, bias=quant_bias.to(torch.int32), output_dtype=output_dtype or x.dtype)

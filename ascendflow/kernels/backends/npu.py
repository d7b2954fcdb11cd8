"""Ascend NPU binding of the ops: the torch_npu calls vllm-ascend v0.23.0 makes, with the same signatures as the
references in :mod:`ascendflow.kernels.ops`.

UNEXERCISED HERE: this machine has no NPU and no torch_npu; nothing in the test suite runs these functions. The
calls and argument orders are copied from vllm-ascend v0.23.0 (``vllm_ascend/quantization/methods/w8a8_dynamic.py``
``AscendW8A8DynamicLinearMethod.apply``; ``w8a8_static.py`` ``AscendW8A8LinearMethod.apply``;
``vllm_ascend/ops/register_custom_ops.py`` ``_quantize_impl``). torch_npu is imported only when this module is
imported, which :mod:`ascendflow.kernels.registry` does only when ``torch_npu`` is installed.
"""

from __future__ import annotations

import torch
import torch_npu  # noqa: F401  (import-guarded by the registry: only imported where torch_npu exists)


def dynamic_quant(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch_npu.npu_dynamic_quant(x, dst_type=torch.int8)``: int8 ``[..., K]`` and per-token scale ``[...]``."""
    return torch_npu.npu_dynamic_quant(x, dst_type=torch.int8)


def static_quant(x: torch.Tensor, input_scale: torch.Tensor, input_offset: torch.Tensor) -> torch.Tensor:
    """``torch_npu.npu_quantize(x, 1/scale, offset, torch.qint8, -1, False)`` with scale/offset repeated over K."""
    k = x.shape[-1]
    scale = input_scale.to(x.dtype).reshape(-1).expand(k) if input_scale.numel() == 1 else input_scale.to(x.dtype)
    offset = input_offset.to(x.dtype).reshape(-1).expand(k) if input_offset.numel() == 1 else input_offset.to(x.dtype)
    return torch_npu.npu_quantize(x, 1 / scale, offset, torch.qint8, -1, False)


def quant_matmul(qx, qw_kn, scale, *, pertoken_scale=None, bias=None, output_dtype=torch.bfloat16):
    """``torch_npu.npu_quant_matmul(qx, qw_kn, scale, pertoken_scale=..., bias=..., output_dtype=...)``."""
    return torch_npu.npu_quant_matmul(qx, qw_kn, scale, pertoken_scale=pertoken_scale, bias=bias,
                                      output_dtype=output_dtype)


def w8a8_dynamic_linear(x, weight_kn, weight_scale, bias=None):
    """W8A8_DYNAMIC linear exactly as ``AscendW8A8DynamicLinearMethod.apply`` (no chunking)."""
    qx, s_t = dynamic_quant(x)
    return quant_matmul(qx, weight_kn, weight_scale.reshape(-1), pertoken_scale=s_t.reshape(-1), bias=bias,
                        output_dtype=x.dtype)


def w8a8_static_linear(x, weight_kn, input_scale, input_offset, quant_bias, deq_scale, output_dtype=None):
    """W8A8 static linear exactly as ``AscendW8A8LinearMethod.apply`` (tp_rank 0: quant_bias applied)."""
    qx = static_quant(x, input_scale, input_offset)
    return quant_matmul(qx, weight_kn, deq_scale, bias=quant_bias, output_dtype=output_dtype or x.dtype)

"""int8 x int8 matmul with int32 accumulation and dequantization: the reference of ``torch_npu.npu_quant_matmul``.

Two forms are used by vllm-ascend v0.23.0 (``vllm_ascend/quantization/methods/``):

* W8A8_DYNAMIC (``w8a8_dynamic.py`` ``AscendW8A8DynamicLinearMethod.apply``):
  ``npu_quant_matmul(qx, weight, weight_scale, pertoken_scale=s_t, bias=bias, output_dtype=x.dtype)``, i.e.
  ``out[t, n] = acc[t, n] * weight_scale[n] * s_t[t] + bias[n]`` (bias in the output dtype, added after scaling);
* W8A8 static (``w8a8_static.py`` ``AscendW8A8LinearMethod.apply``):
  ``npu_quant_matmul(qx, weight, deq_scale, bias=quant_bias, output_dtype=params_dtype)``, i.e.
  ``out[t, n] = (acc[t, n] + quant_bias[n]) * deq_scale[n]`` (int32 bias added before scaling; msModelSlim writes
  ``quant_bias = round(bias / deq_scale - input_offset * sum_k w[n, k])`` and ``deq_scale = input_scale *
  weight_scale``, ``ascendv1.py`` ``on_w8a8_static``).

``acc = qx @ weight`` is exact in int32 (``torch._int_mm``, as the NPU cube unit accumulates int8 in int32); the
scaling is done in float32 and the result cast to ``output_dtype`` once. ``weight`` is ``[K, N]``: vllm-ascend
transposes the checkpoint's ``[N, K]`` in ``process_weights_after_loading``.
"""

from __future__ import annotations

import torch


def int8_matmul(qx: torch.Tensor, qw_kn: torch.Tensor) -> torch.Tensor:
    """Return the exact int32 product of int8 ``qx [M, K]`` and int8 ``qw_kn [K, N]``.

    Raises:
        ValueError: the operands are not int8 2-D tensors with matching K.
    """
    if qx.dtype != torch.int8 or qw_kn.dtype != torch.int8 or qx.dim() != 2 or qw_kn.dim() != 2:
        raise ValueError(f"int8_matmul needs int8 [M,K] x [K,N], got {qx.dtype}{tuple(qx.shape)} x "
                         f"{qw_kn.dtype}{tuple(qw_kn.shape)}")
    if qx.shape[1] != qw_kn.shape[0]:
        raise ValueError(f"int8_matmul: K differs, {qx.shape[1]} vs {qw_kn.shape[0]}")
    try:
        return torch._int_mm(qx.contiguous(), qw_kn.contiguous())
    except RuntimeError:
        # Shapes _int_mm refuses on some builds: float64 holds every int32 sum of K <= 2**37 / 127**2 terms exactly.
        return (qx.double() @ qw_kn.double()).to(torch.int32)


def quant_matmul(
    qx: torch.Tensor,
    qw_kn: torch.Tensor,
    scale: torch.Tensor,
    *,
    pertoken_scale: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    output_dtype: torch.dtype = torch.bfloat16,
) -> torch.Tensor:
    """Multiply int8 activations by int8 weights and dequantize, as ``npu_quant_matmul`` does.

    Args:
        qx: int8 ``[..., K]``.
        qw_kn: int8 ``[K, N]``.
        scale: float ``[N]`` (``weight_scale`` for W8A8_DYNAMIC, ``deq_scale`` for static W8A8).
        pertoken_scale: float32 ``[...]`` per-token scale from :func:`dynamic_quant`, or None (static).
        bias: int32 ``[N]`` added to the accumulator before scaling (static ``quant_bias``), or a float ``[N]``
            added after scaling (dynamic).
        output_dtype: dtype of the result.

    Returns:
        ``[..., N]`` in ``output_dtype``.

    Raises:
        ValueError: operand dtypes or shapes do not match.
    """
    lead = qx.shape[:-1]
    acc = int8_matmul(qx.reshape(-1, qx.shape[-1]), qw_kn)
    if bias is not None and bias.dtype == torch.int32:
        acc = acc + bias
        bias = None
    out = acc.float() * scale.float().reshape(1, -1)
    if pertoken_scale is not None:
        out = out * pertoken_scale.float().reshape(-1, 1)
    if bias is not None:
        out = out + bias.float()
    return out.to(output_dtype).reshape(*lead, qw_kn.shape[1])

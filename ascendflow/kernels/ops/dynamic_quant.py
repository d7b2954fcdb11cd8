"""Per-token dynamic int8 quantization: the reference of ``torch_npu.npu_dynamic_quant``.

vllm-ascend v0.23.0 ``vllm_ascend/quantization/methods/w8a8_dynamic.py`` ``AscendW8A8DynamicLinearMethod.apply``
calls ``torch_npu.npu_dynamic_quant(x, dst_type=torch.int8)`` and passes the returned per-token scale to
``npu_quant_matmul(..., pertoken_scale=...)``. The arithmetic is symmetric per row (one scale per token, no offset),
as msModelSlim's ``default-w8a8`` recipe declares it (``act: scope: per_token, symmetric: True``, see
``ascendflow/models/msmodelslim_w8a8.py``):

    scale[t] = max_k |x[t, k]| / 127,   q[t, k] = clamp(round(x[t, k] / scale[t]), -128, 127)

computed in float32 whatever ``x``'s dtype. Rounding is round-half-to-even (``torch.round``); the NPU's rounding of
exact halves is not documented for this op (an *estimate*: at most one int8 step on exact ties, which do not occur
with real activations in practice).
"""

from __future__ import annotations

import torch

#: Largest int8 magnitude used by the symmetric scale (msModelSlim symmetric int8, range [-127, 127] in practice).
INT8_MAX = 127.0


def dynamic_quant(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize each row (token) of ``x`` to int8 with its own symmetric scale.

    Args:
        x: Activations ``[..., K]`` in any float dtype.

    Returns:
        ``(q, scale)``: ``q`` int8 ``[..., K]``; ``scale`` float32 ``[...]`` (one per token), so that
        ``q * scale[..., None]`` approximates ``x``. An all-zero row gets scale 0 and q 0.

    Raises:
        ValueError: ``x`` is not a floating-point tensor or has no last dimension.
    """
    if not x.dtype.is_floating_point or x.dim() < 1:
        raise ValueError(f"dynamic_quant needs a float tensor [..., K], got {x.dtype} {tuple(x.shape)}")
    xf = x.float()
    scale = xf.abs().amax(dim=-1) / INT8_MAX
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    q = torch.clamp(torch.round(xf / safe.unsqueeze(-1)), -128, 127).to(torch.int8)
    return q, scale

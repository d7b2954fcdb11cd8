"""Per-tensor static int8 quantization with offset: the reference of ``torch_npu.npu_quantize``.

vllm-ascend v0.23.0 ``vllm_ascend/ops/register_custom_ops.py`` ``_quantize_impl`` calls
``torch_npu.npu_quantize(x, input_scale_reciprocal, input_offset, torch.qint8, -1, False)`` (``div_mode=False``:
multiply by the reciprocal), with the checkpoint's ``input_scale`` / ``input_offset`` repeated over the K channels
(``w8a8_static.py`` ``AscendW8A8LinearMethod.process_weights_after_loading``). msModelSlim 26.1.0 writes both as
float32 ``[1]`` (``core/quant_service/modelslim_v1/save/ascendv1.py`` ``on_w8a8_static``):

    q = clamp(round(x * (1 / input_scale) + input_offset), -128, 127)

in float32. Rounding half-to-even (``torch.round``), an *estimate* for exact ties as in ``dynamic_quant``.
"""

from __future__ import annotations

import torch


def static_quant(x: torch.Tensor, input_scale: torch.Tensor, input_offset: torch.Tensor) -> torch.Tensor:
    """Quantize ``x`` to int8 with one calibrated scale and offset for the whole tensor.

    Args:
        x: Activations ``[..., K]`` in any float dtype.
        input_scale: Float ``[1]`` (or ``[K]``, the per-channel repeat vllm-ascend builds), > 0.
        input_offset: ``[1]`` (or ``[K]``), an integer value stored as float or int8.

    Returns:
        int8 tensor shaped like ``x``.

    Raises:
        ValueError: ``x`` is not floating point, or a scale is not positive.
    """
    if not x.dtype.is_floating_point:
        raise ValueError(f"static_quant needs a float tensor, got {x.dtype}")
    scale = input_scale.float()
    if bool((scale <= 0).any()):
        raise ValueError(f"static_quant needs input_scale > 0, got min {scale.min().item()}")
    q = torch.round(x.float() * (1.0 / scale) + input_offset.float())
    return torch.clamp(q, -128, 127).to(torch.int8)

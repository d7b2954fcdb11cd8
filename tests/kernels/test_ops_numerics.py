"""Numerics of the Ascend quantization ops' references against float math, with stated tolerances.

Tolerances: int8 rounding bounds each element's error by half a quantization step (exact bound, asserted as such);
whole-layer outputs are compared by relative Frobenius error against the float32 layer, bounded at 2 % (measured
here with these seeds: 1.1 % dynamic, 0.9 % static; per-token/per-channel int8 with K=576 gives about 1 %).
"""

from __future__ import annotations

import torch

from ascendflow.kernels.ops.dynamic_quant import dynamic_quant
from ascendflow.kernels.ops.quant_matmul import int8_matmul, quant_matmul
from ascendflow.kernels.ops.static_quant import static_quant
from ascendflow.kernels.ops.w8a8_dynamic_linear import w8a8_dynamic_linear
from ascendflow.kernels.ops.w8a8_static_linear import deq_scale_from_int64, w8a8_static_linear

REL_TOL = 0.02


def _per_channel_int8(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """msModelSlim's symmetric per-channel minmax int8 weight (scale = max|w| / 127 per output row)."""
    scale = w.abs().amax(dim=1) / 127
    return torch.round(w / scale[:, None]).clamp(-128, 127).to(torch.int8), scale


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


def test_dynamic_quant_values_and_bound() -> None:
    x = torch.tensor([[1.0, -2.0, 0.5, 0.0], [0.0, 0.0, 0.0, 0.0], [-127.0, 63.5, 1.0, 254.0]])
    q, s = dynamic_quant(x)
    assert s.tolist() == torch.tensor([2.0 / 127, 0.0, 2.0], dtype=torch.float32).tolist()
    assert q.tolist() == [[64, -127, 32, 0], [0, 0, 0, 0], [-64, 32, 0, 127]]
    g = torch.Generator().manual_seed(0)
    xr = torch.randn(64, 576, generator=g, dtype=torch.float32)
    qr, sr = dynamic_quant(xr)
    assert bool(((qr.float() * sr[:, None] - xr).abs() <= sr[:, None] / 2 + 1e-7).all())


def test_static_quant_values() -> None:
    x = torch.tensor([0.0, 0.26, -1.0, 100.0, -100.0, 0.74])
    q = static_quant(x, torch.tensor([0.5]), torch.tensor([3.0]))
    assert q.tolist() == [3, 4, 1, 127, -128, 4]


def test_int8_matmul_is_exact() -> None:
    g = torch.Generator().manual_seed(1)
    a = torch.randint(-128, 128, (7, 1536), generator=g, dtype=torch.int8)
    b = torch.randint(-128, 128, (1536, 96), generator=g, dtype=torch.int8)
    assert torch.equal(int8_matmul(a, b).long(), a.long() @ b.long())


def test_quant_matmul_int32_bias_before_scale() -> None:
    qx = torch.tensor([[1, 2], [3, -4]], dtype=torch.int8)
    qw = torch.tensor([[1, 0, 2], [0, 1, -1]], dtype=torch.int8)
    out = quant_matmul(qx, qw, torch.tensor([0.5, 2.0, 1.0]), bias=torch.tensor([1, -1, 0], dtype=torch.int32),
                       output_dtype=torch.float32)
    assert out.tolist() == [[1.0, 2.0, 0.0], [2.0, -10.0, 10.0]]


def test_w8a8_dynamic_linear_matches_float_layer() -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(16, 576, generator=g)
    w = torch.randn(1536, 576, generator=g) * 0.05
    b = torch.randn(1536, generator=g) * 0.1
    qw, ws = _per_channel_int8(w)
    ref = x @ w.t() + b
    out = w8a8_dynamic_linear(x, qw.t().contiguous(), ws, bias=b)
    assert out.dtype == torch.float32 and out.shape == (16, 1536)
    assert _rel(out, ref) < REL_TOL
    out_bf16 = w8a8_dynamic_linear(x.bfloat16(), qw.t().contiguous(), ws, bias=b)
    assert out_bf16.dtype == torch.bfloat16 and _rel(out_bf16, ref) < REL_TOL


def test_w8a8_static_linear_matches_float_layer_with_msmodelslim_bias() -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(16, 576, generator=g) + 0.7  # asymmetric activations: the offset matters
    w = torch.randn(1536, 576, generator=g) * 0.05
    b = torch.randn(1536, generator=g) * 0.1
    qw, ws = _per_channel_int8(w)
    lo, hi = x.min(), x.max()
    input_scale = ((hi - lo) / 255).reshape(1)
    input_offset = torch.round(-128 - lo / input_scale).reshape(1)
    # msModelSlim 26.1.0 core/quant_service/modelslim_v1/save/ascendv1.py on_w8a8_static
    deq = (input_scale * ws).float()
    quant_bias = torch.round(b / deq - qw.float().sum(dim=1) * input_offset).to(torch.int32)
    out = w8a8_static_linear(x, qw.t().contiguous(), input_scale, input_offset, quant_bias, deq)
    assert _rel(out, x @ w.t() + b) < REL_TOL
    # fp16 checkpoints store deq_scale's float32 bits as int64 (msmodelslim format/common/deqscale.py)
    as_int64 = torch.frombuffer(bytearray(deq.numpy().tobytes()), dtype=torch.int32).long()
    assert torch.equal(deq_scale_from_int64(as_int64), deq)
    assert torch.equal(w8a8_static_linear(x, qw.t().contiguous(), input_scale, input_offset, quant_bias, as_int64),
                       out)

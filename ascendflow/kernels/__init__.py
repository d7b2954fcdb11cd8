"""Operator kernels for Ascend quantized checkpoints, shaped like Liger-Kernel (STYLE.md): one op per module.

``ops/`` holds the PyTorch reference of each op, written to reproduce the arithmetic vllm-ascend v0.23.0 asks of
torch_npu; ``backends/npu.py`` binds the same ops to torch_npu (imported only where torch_npu exists, never exercised
on this CPU-only machine); :mod:`ascendflow.kernels.registry` picks a backend by device, with an override.
``kernels/benchmark/bench_ops.py`` (repository root) times each op and writes ``outputs/bench/kernels.json``.
"""

from .registry import BACKEND_ENV, OPS, available_backends, get_op

__all__ = ["BACKEND_ENV", "OPS", "available_backends", "get_op"]

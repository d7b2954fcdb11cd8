"""Memory pass: per PP stage, the weights (with what the release does to them after loading), activation, graph and
non-torch memory, and the KV budget the release's rule leaves (``EngineRules``; the 310P's own halved rule)."""

from __future__ import annotations

from dataclasses import dataclass

from ascendflow.compiler.checks.limits import Limits
from ascendflow.compiler.checks.memory import check_startup_memory, explicit_kv
from ascendflow.compiler.memory.checkpoint_weights import checkpoint_bytes
from ascendflow.compiler.memory.draft_weights import eagle_draft_bytes
from ascendflow.compiler.memory.dtypes import DTYPE_BYTES
from ascendflow.compiler.memory.mla_weights import mlapo_frees_originals
from ascendflow.compiler.memory.overheads import (KV_PIN_MARGIN_BYTES, activation_bytes, graph_bytes,
                                                 moe_dispatch_bytes, non_torch_bytes, p310_cleared_non_torch_bytes,
                                                 runtime_non_torch_bytes)
from ascendflow.compiler.checks.extra_args import mm_kwargs_max_pixels, runner_option
from ascendflow.compiler.memory.vision_profile import DEFAULT_MAX_PIXELS, encoder_extra_bytes, vl_load_buffer_bytes
from ascendflow.compiler.memory.vision_weights import VISION_MODEL_TYPES, vision_weight_bytes
from ascendflow.compiler.memory.weights import EngineWeightRules, Layout, pp_partition, weight_bytes
from ascendflow.compiler.passes.inputs import EngineInputs
from ascendflow.compiler.plan import GraphPlan, MemoryPlan
from ascendflow.compiler.rules.engine_rules import EngineRules
from ascendflow.schema.architecture import ModelArchitecture
from ascendflow.schema.checkpoint import CheckpointInventory
from ascendflow.schema.spec import RunSpec
from ascendflow.schema.speculative import DRAFT_MODEL_METHODS, MTP_METHODS
from ascendflow.platforms import platform_for


@dataclass(frozen=True)
class StageMemory:
    """One PP stage's layers and its device's memory (``kv_cache_bytes``: the budget before any KV-group scaling)."""

    index: int
    layers: range
    memory: MemoryPlan


@dataclass(frozen=True)
class MemoryPass:
    """Every stage's memory (the last stage's weights include a separate EAGLE draft's), the KV budget the engine
    takes as given (``None``: the utilisation rule) and the MTP draft layers that cache KV on the last stage."""

    stages: list[StageMemory]
    explicit_kv: int | None
    mtp_kv_layers: int


def memory_pass(spec: RunSpec, arch: ModelArchitecture, rules: EngineRules, inputs: EngineInputs, graph: GraphPlan,
                checkpoint: CheckpointInventory | None, role: str | None) -> tuple[MemoryPass, list[str]]:
    """Plan every PP stage's device memory.

    Returns:
        The :class:`MemoryPass`, and warnings: MLAPO copies on the 950 not counted, the vision encoder's share.

    Raises:
        ConfigError: the start-up free-memory check and an ignored ``--kv-cache-memory``
            (:mod:`ascendflow.compiler.checks.memory`).
    """
    hw, eng, par, quant = spec.hardware, spec.engine, spec.parallel, spec.quantization
    dtype, limits, device_total = inputs.dtype, inputs.limits, inputs.device_total
    requested = int(device_total * eng.gpu_memory_utilization)
    check_startup_memory(spec, rules, device_total, requested)
    ep = par.tensor_parallel_size * par.data_parallel_size if par.enable_expert_parallel else 1
    non_torch = non_torch_bytes(runtime_non_torch_bytes(hw, rules.profile_non_torch), par, spec.ascend.hccl_buffsize_mb,
                                per_group=rules.hccl_buffers == "per_group", reuse=rules.hccl_reuse_same_ranks)
    explicit = explicit_kv(spec, rules)
    sc = eng.speculative_config
    mtp_kv_layers = arch.mtp_layer_count if sc is not None and sc.method in MTP_METHODS else 0
    draft = _draft_bytes(spec, arch, inputs.draft, DTYPE_BYTES[dtype])
    weight_rules = _weight_rules(spec, rules, mtp_kv_layers, role, limits.max_num_batched_tokens)
    vision, vision_warnings = _vision_bytes(spec, arch, par.tensor_parallel_size, DTYPE_BYTES[dtype])
    tower = vision > 0  # the tower is built (its weights counted)
    if arch.vision_config and arch.outer_model_type in VISION_MODEL_TYPES:  # M-RoPE, vision rotary, deepstack
        vision += vl_load_buffer_bytes(arch, rules, max_num_batched_tokens=limits.max_num_batched_tokens,
                                       dtype_bytes=DTYPE_BYTES[dtype], tower=tower)
    stages, partition = [], pp_partition(arch.num_hidden_layers, par.pipeline_parallel_size)
    for index, layers in enumerate(partition):
        layout = Layout(tp=par.tensor_parallel_size, ep=ep, first_stage=index == 0,
                        last_stage=index == len(partition) - 1, layers=layers,
                        pp=par.pipeline_parallel_size, dp=par.data_parallel_size)
        weights = checkpoint_bytes(checkpoint, arch, layout, dtype, weight_rules) if checkpoint else weight_bytes(
            arch, layout, dtype=dtype, linear_scheme=quant.linear_scheme, expert_scheme=quant.expert_scheme,
            rules=weight_rules) + vision
        weights += draft if layout.last_stage else 0
        activation = activation_bytes(arch, layout, max_num_batched_tokens=limits.max_num_batched_tokens,
                                      max_num_seqs=limits.max_num_seqs, dtype_bytes=DTYPE_BYTES[dtype],
                                      pooling=runner_option(eng.extra_args) == "pooling",
                                      logits_model_dtype=rules.profile_logits != "sampler_fp32",
                                      logits_after_forward=rules.profile_logits == "model_dtype_after_forward",
                                      swiglu_fp32=rules.p310_swiglu_fp32 and hw.soc == "310p")
        if tower:  # the encoder's dummy images in the profile run (vision_profile.py; None: family not planned)
            activation += _encoder_extra(spec, arch, limits, activation, DTYPE_BYTES[dtype]) or 0
        if platform_for(hw.kind).ascend_config:  # the NPU MoE dispatcher's rows (fitted copies, overheads.py)
            activation += moe_dispatch_bytes(arch, layout, max_num_batched_tokens=limits.max_num_batched_tokens,
                                             dtype_bytes=DTYPE_BYTES[dtype], soc=hw.soc)
        graph_mem = graph_bytes(arch, layout, mode=graph.cudagraph_mode, capture_sizes=graph.capture_sizes,
                                dtype_bytes=DTYPE_BYTES[dtype], profiled=rules.graph_memory_profiled)
        if explicit is not None:
            kv_bytes = explicit
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
        stages.append(StageMemory(index, layers, MemoryPlan(
            device_total_bytes=device_total, requested_bytes=requested, weights_bytes=weights,
            activation_bytes=activation, non_torch_bytes=non_torch, graph_bytes=graph_mem, kv_cache_bytes=kv_bytes,
            draft_weights_bytes=(draft if layout.last_stage else 0) if draft else None)))
    return (MemoryPass(stages, explicit, mtp_kv_layers),
            _mlapo_950_warnings(spec, rules, arch, quant.linear_scheme) + vision_warnings)


def _draft_bytes(spec: RunSpec, arch: ModelArchitecture, draft: ModelArchitecture | None, dtype_bytes: int) -> int:
    """The EAGLE / EAGLE-3 draft's weights on each rank of the last stage
    (:mod:`ascendflow.compiler.memory.draft_weights`), at its TP (``draft_tensor_parallel_size``, default the
    target's); 0 without a separate draft model."""
    sc, par = spec.engine.speculative_config, spec.parallel
    if sc is None or sc.method not in DRAFT_MODEL_METHODS or draft is None:
        return 0
    return eagle_draft_bytes(sc.method, arch, draft, tp=sc.draft_tensor_parallel_size or par.tensor_parallel_size,
                             pp=par.pipeline_parallel_size, dtype_bytes=dtype_bytes)


def _vision_bytes(spec: RunSpec, arch: ModelArchitecture, tp: int, dtype_bytes: int) -> tuple[int, list[str]]:
    """Vision-encoder weights on each rank of every PP stage (vLLM builds the tower on every stage;
    :mod:`ascendflow.compiler.memory.vision_weights`), 0 for text models and when ``model.limit_mm_per_prompt`` gives
    0 images and 0 videos (vLLM 0.32.0 ``interfaces.py`` ``_mark_tower_model``: the tower becomes a
    ``StageMissingLayer``; read in 0.23.0 too, assumed on every row). The encoder's share of the profile run needs
    the processor's ``max_pixels`` (not in ``config.json``): planned for Qwen3-VL at the checkpoint's
    ``preprocessor_config.json`` value (``ModelArchitecture.processor_max_pixels``), else its public default
    (:mod:`ascendflow.compiler.memory.vision_profile`), said in a warning for the others; so is the multimodal
    processor cache, host memory (vLLM ``config/multimodal.py``: ``mm_processor_cache_gb × (api_server_count +
    data_parallel_size)``, default 4 GiB)."""
    model = spec.model
    if not arch.vision_config:
        keys = [k for k in ("limit_mm_per_prompt", "mm_processor_cache_gb", "mm_encoder_tp_mode")
                if getattr(model, k) is not None]
        return 0, [f"model.{k} is ignored: {arch.model_type or 'this model'} is a text model (vLLM builds no "
                   f"multimodal config for it)" for k in keys]
    if arch.outer_model_type not in VISION_MODEL_TYPES:
        return 0, [f"vision encoder of model_type={arch.outer_model_type!r} not counted (planned for "
                   f"{sorted(VISION_MODEL_TYPES)}): weights and KV are the language model's"]
    limits = model.limit_mm_per_prompt or {}
    if limits.get("image") == 0 and limits.get("video") == 0:
        return 0, []
    warnings = [] if arch.outer_model_type in DEFAULT_MAX_PIXELS else [
        "the vision encoder's share of vLLM's profile run (dummy images at max_pixels) is not in the activation "
        "estimate: set --limit-mm-per-prompt / mm_processor_kwargs on the node and calibrate"]
    if (cache_gb := model.mm_processor_cache_gb) is not None:
        dp = spec.parallel.data_parallel_size  # one API server (ascendflow starts no more) + one engine core per rank
        warnings.append(f"model.mm_processor_cache_gb={cache_gb:g}: {cache_gb:g} GiB of host memory per process × "
                        f"{1 + dp} (API server + {dp} engine core(s)) = {cache_gb * (1 + dp):g} GiB, not device memory")
    return vision_weight_bytes(arch.vision_config, arch.outer_model_type, tp=tp, dtype_bytes=dtype_bytes,
                               mm_encoder_tp_mode=model.mm_encoder_tp_mode or "weights"), warnings


def _encoder_extra(spec: RunSpec, arch: ModelArchitecture, limits: Limits, text_activation: int,
                   dtype_bytes: int) -> int | None:
    """The vision encoder's share of the profile run (:func:`~ascendflow.compiler.memory.vision_profile.
    encoder_extra_bytes`, an estimate) at vLLM's default 999 images per prompt unless ``model.limit_mm_per_prompt``
    says otherwise; ``None`` for families whose largest image is not known here, and with no images allowed."""
    image_limit = (spec.model.limit_mm_per_prompt or {}).get("image", 999)
    if not isinstance(image_limit, int) or image_limit == 0:
        return None
    return encoder_extra_bytes(arch, text_activation_bytes=text_activation,
                               max_num_batched_tokens=limits.max_num_batched_tokens, max_num_seqs=limits.max_num_seqs,
                               max_model_len=limits.max_model_len, image_limit=image_limit,
                               enable_chunked_prefill=spec.engine.enable_chunked_prefill is not False,
                               dtype_bytes=dtype_bytes, tp=spec.parallel.tensor_parallel_size,
                               mm_kwargs_pixels=mm_kwargs_max_pixels(spec.engine.extra_args))


def _mlapo_switch(spec: RunSpec, rules: EngineRules) -> bool:
    """The MLAPO switch: ``VLLM_ASCEND_ENABLE_MLAPO`` in ``ascend.env``, ``additional_config.other.enable_mlapo``, else
    the release default (``EngineRules.mlapo_default``)."""
    switch = rules.mlapo_default
    if "VLLM_ASCEND_ENABLE_MLAPO" in spec.ascend.env:
        switch = spec.ascend.env["VLLM_ASCEND_ENABLE_MLAPO"] not in ("0", "false", "False")
    if "enable_mlapo" in spec.ascend.additional_config.other:
        switch = bool(spec.ascend.additional_config.other["enable_mlapo"])
    return switch


def _mlapo_950_warnings(spec: RunSpec, rules: EngineRules, arch: ModelArchitecture, linear_scheme: str) -> list[str]:
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
        return []
    quantized = linear_scheme == "W8A8"
    if not (quantized or rules.mlapo_native_weights_950):
        return []
    kind = "W8A8" if quantized else "unquantized"
    return [f"{hw.software} on {hw.device_name}: MLAPO is on for co-located MLA layers (the switch alone decides on "
            f"the 950, attention/utils.py enabling_mlapo) and its A5 copies of the {kind} MLA weights (mla_v1.py "
            f"_process_weights_for_fused_mlapo_a5) are not in the weight estimate; set "
            f"ascend.env.VLLM_ASCEND_ENABLE_MLAPO=0 to turn it off, or calibrate"]


def _weight_rules(spec: RunSpec, rules: EngineRules, mtp_layers: int, role: str | None,
                  max_num_batched_tokens: int) -> EngineWeightRules:
    """What the release does to the weights after loading (``EngineRules`` weight fields).

    MLAPO: the switch (``VLLM_ASCEND_ENABLE_MLAPO`` in ``ascend.env``, or ``additional_config.other.enable_mlapo``
    where the release reads it, else the release default) turns it on at v0.11/v0.13; from v0.18
    (``mlapo_gating=decode_only``, ``mla_v1.py``) it acts only on PD decode nodes (KV consumers, ``role="decode"``)
    of A2/A3; from v0.19.1rc1 (``decode_only_a2a3``, ``attention/utils.py`` ``enabling_mlapo``) the same on A2/A3,
    while on the 950 the switch alone decides and its A5 copies are not counted (:func:`_mlapo_950_warnings` says
    so). On a KV consumer with ``max_num_batched_tokens <= 1024`` MLAPO frees the originals where the release
    does (``mlapo_frees_originals``, ``mla_v1.py`` from v0.13.0).
    """
    switch = _mlapo_switch(spec, rules)
    npu = platform_for(spec.hardware.kind).ascend_config
    decode_node = role == "decode" and spec.hardware.soc in ("910b", "910c")
    gated = rules.mlapo_gating == "switch" or (rules.mlapo_gating in ("decode_only", "decode_only_a2a3")
                                               and decode_node)
    mlapo = npu and switch and gated
    return EngineWeightRules(mla_absorb_copies=npu and rules.mla_absorb_copies, mlapo=mlapo,
                             mlapo_frees_originals=mlapo and rules.mlapo_frees_originals and mlapo_frees_originals(
                                 kv_consumer=role == "decode", max_num_batched_tokens=max_num_batched_tokens),
                             mtp_layers=mtp_layers, mtp_shares_vocab=rules.mtp_shares_vocab)

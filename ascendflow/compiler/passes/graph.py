"""Graph pass: sequence parallelism as the release decides it, then graph capture
(:func:`~ascendflow.compiler.graph.capture.graph_plan`)."""

from __future__ import annotations

from ascendflow.compiler.checks.startup import check_torchair, torchair_enabled
from ascendflow.compiler.graph.capture import GraphContext, graph_plan
from ascendflow.compiler.passes.inputs import EngineInputs
from ascendflow.compiler.plan import GraphPlan
from ascendflow.compiler.rules.engine_rules import EngineRules
from ascendflow.schema.architecture import ModelArchitecture
from ascendflow.schema.spec import RunSpec
from ascendflow.platforms import platform_for


def graph_pass(spec: RunSpec, arch: ModelArchitecture, rules: EngineRules,
               inputs: EngineInputs) -> tuple[GraphPlan, list[str]]:
    """Graph capture mode and sizes for the target release.

    Sequence parallelism (vllm-ascend ``utils.py`` ``enable_sp()``): flashcomm1 (config key from v0.20.2rc1, or the
    env), shared-expert DP, and the PassConfig key at v0.11/v0.13; vLLM itself filters the capture sizes whenever the
    PassConfig key is set.

    Returns:
        The :class:`GraphPlan`, and the graph pass's warnings plus one when ``engine.enforce_eager`` overrides the
        graph option.

    Raises:
        ConfigError: torchair on an unsupported model or with eager mode
            (:func:`~ascendflow.compiler.checks.startup.check_torchair`), and the refusals of
            :func:`~ascendflow.compiler.graph.capture.graph_plan`.
    """
    hw, eng, par, asc = spec.hardware, spec.engine, spec.parallel, spec.ascend.additional_config
    check_torchair(spec, arch)
    shared_expert_sp = (bool(asc.enable_shared_expert_dp) and rules.shared_expert_dp_enables_sp
                        and par.enable_expert_parallel and par.tensor_parallel_size > 1)
    explicit_sp = spec.ascend.enable_sequence_parallelism
    ascend_sp = bool(shared_expert_sp or inputs.extra_config.get("enable_flashcomm1")
                     or spec.ascend.env.get("VLLM_ASCEND_ENABLE_FLASHCOMM1") == "1"
                     or (explicit_sp and rules.pass_config_sp_in_ascend))
    limits = inputs.limits
    graph, warnings = graph_plan(spec.graph, GraphContext(
        arch=arch, parallel=par, hardware=hw, rules=rules, max_num_seqs=limits.max_num_seqs,
        max_num_batched_tokens=limits.max_num_batched_tokens,
        num_speculative_tokens=eng.num_speculative_tokens, enforce_eager=eng.enforce_eager,
        sequence_parallel=explicit_sp or ascend_sp, ascend_sp=ascend_sp,
        aiv=platform_for(hw.kind).hccl_env and spec.ascend.hccl_op_expansion_mode_aiv,
        multistream_overlap_shared_expert=bool(asc.multistream_overlap_shared_expert),
        torchair=torchair_enabled(spec),
        draft_layers=inputs.draft.num_hidden_layers if inputs.draft is not None else None))
    if eng.enforce_eager and not spec.graph.enforce_eager:
        warnings = [*warnings, f"engine.enforce_eager=true overrides graph={spec.graph.name}: no graph capture, "
                               f"no compile"]
    return graph, warnings

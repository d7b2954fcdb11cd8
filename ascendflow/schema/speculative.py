"""Speculative decoding (``engine.speculative_config``): vLLM's ``SpeculativeConfig`` fields that change the plan,
written as ``--speculative-config '<json>'`` (vLLM 0.32.0 ``vllm/config/speculative.py``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ascendflow.schema.base import Spec
from ascendflow.schema.bounds import MAX_SPECULATIVE_TOKENS, MAX_WIDTH

#: The methods ascendflow plans, under vLLM's own names (``SpeculativeMethod`` / ``MTPModelTypes``). vLLM >= 0.13
#: maps every ``*_mtp`` name to ``mtp`` with a deprecation warning (``SpeculativeConfig.__post_init__``).
SpeculativeMethod = Literal["mtp", "deepseek_mtp", "qwen3_next_mtp", "qwen3_5_mtp", "eagle", "eagle3", "ngram",
                            "suffix"]
#: Methods whose draft is the target checkpoint's own MTP layers (``hf_config_override``).
MTP_METHODS = frozenset({"mtp", "deepseek_mtp", "qwen3_next_mtp", "qwen3_5_mtp"})
#: Methods whose draft is a separate small model (``model``: its directory or hub id, with its own config.json).
DRAFT_MODEL_METHODS = frozenset({"eagle", "eagle3"})
#: Methods without draft weights or KV cache (the proposer looks the tokens up).
LOOKUP_METHODS = frozenset({"ngram", "suffix"})


class SpeculativeConfigSpec(Spec):
    """``--speculative-config`` (vLLM ``SpeculativeConfig``); ``None`` fields are left out of the JSON.

    Attributes:
        method: proposer (``mtp`` and its model-named aliases, ``eagle``, ``eagle3``, ``ngram``, ``suffix``).
        num_speculative_tokens: draft tokens per step (>= 1).
        model: the draft's directory or hub id (``eagle`` / ``eagle3`` only; its ``config.json`` is read to plan
            the draft's weights and KV cache).
        draft_tensor_parallel_size: TP of the draft; vLLM accepts 1 or the target's TP (``None``: the target's).
        enforce_eager: run the draft without graph capture (``None``: the target's setting).
        prompt_lookup_min: ``ngram`` only: shortest n-gram matched (vLLM default 5 with both unset).
        prompt_lookup_max: ``ngram`` only: longest n-gram matched.
    """

    method: SpeculativeMethod
    num_speculative_tokens: int = Field(ge=1, le=MAX_SPECULATIVE_TOKENS)
    model: str | None = Field(default=None, min_length=1)
    draft_tensor_parallel_size: int | None = Field(default=None, ge=1, le=MAX_WIDTH)
    enforce_eager: bool | None = None
    prompt_lookup_min: int | None = Field(default=None, ge=1, le=MAX_SPECULATIVE_TOKENS)
    prompt_lookup_max: int | None = Field(default=None, ge=1, le=MAX_SPECULATIVE_TOKENS)

    @model_validator(mode="after")
    def _draft_model_matches_method(self) -> "SpeculativeConfigSpec":
        """A draft ``model`` exactly for the methods that load one; n-gram windows only for ``ngram``."""
        if self.method in DRAFT_MODEL_METHODS and self.model is None:
            raise ValueError(f"method={self.method} needs the draft model: set engine.speculative_config.model="
                             f"<draft directory or hub id>")
        if self.method not in DRAFT_MODEL_METHODS and self.model is not None:
            raise ValueError(f"method={self.method} takes no draft model (MTP drafts from the target's own layers, "
                             f"ngram/suffix need none): drop engine.speculative_config.model")
        if self.method != "ngram" and (self.prompt_lookup_min or self.prompt_lookup_max):
            raise ValueError("prompt_lookup_min/max apply to method=ngram only")
        low, high = self.prompt_lookup_min, self.prompt_lookup_max
        if low is not None and high is not None and low > high:  # vLLM 0.32.0 config/speculative.py __post_init__
            raise ValueError(f"prompt_lookup_min={low} must be <= prompt_lookup_max={high} (vLLM SpeculativeConfig "
                             f"refuses it at start): swap them, or set one only (vLLM uses it for both)")
        return self

    def as_engine_arg(self) -> dict:
        """The ``--speculative-config`` value: ``method`` and ``num_speculative_tokens`` first, set fields after."""
        return self.model_dump(exclude_none=True)

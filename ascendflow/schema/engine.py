"""Engine option (``conf/engine/*.yaml``): vLLM engine knobs under vLLM's own ``EngineArgs`` names."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BeforeValidator, Field, model_validator
from typing_extensions import Annotated

from ascendflow.schema.base import Spec
from ascendflow.schema.bounds import MAX_BLOCK_SIZE, MAX_BYTES, MAX_NUM_SEQS, MAX_SEED, MAX_SPECULATIVE_TOKENS, MAX_TOKENS
from ascendflow.schema.speculative import SpeculativeConfigSpec, SpeculativeMethod


def _token(value: object) -> str:
    """One argv token: numbers (Hydra reads ``5`` as an int) as text; lists and dicts refused."""
    if isinstance(value, (list, tuple, dict)):
        raise ValueError("must be one argv token (a string or number); give a JSON value as one quoted string")
    return str(value).lower() if isinstance(value, bool) else str(value)


#: One ``engine.extra_args`` token.
Token = Annotated[str, BeforeValidator(_token)]


class EngineSpec(Spec):
    """vLLM engine arguments (``vllm/engine/arg_utils.py`` ``EngineArgs``); ``None`` leaves vLLM's default.

    Attributes:
        max_model_len: context length in tokens; ``None``: the model's ``max_position_embeddings``.
        max_num_seqs: most sequences scheduled in one step.
        max_num_batched_tokens: most tokens scheduled in one step.
        gpu_memory_utilization: fraction of device memory the engine may use, in (0, 1].
        kv_cache_memory_bytes: explicit KV-cache budget per device in bytes (bypasses the utilisation rule).
        enable_prefix_caching: automatic prefix caching.
        enable_chunked_prefill: chunked prefill.
        block_size: KV block size in tokens; ``None``: the hardware's default.
        dtype: model dtype; ``auto`` takes the checkpoint's ``torch_dtype``.
        seed: engine random seed.
        enforce_eager: run without graph capture or ``torch.compile`` (same effect as ``graph=eager``).
        speculative_config: speculative decoding (:class:`~ascendflow.schema.speculative.SpeculativeConfigSpec`,
            ``--speculative-config``); ``None``: off.
        num_speculative_tokens: older key, kept as an alias: ``k > 0`` means ``speculative_config`` with
            ``method=speculative_method or deepseek_mtp`` and ``k`` tokens; always equal to
            ``speculative_config.num_speculative_tokens`` (0 without it).
        speculative_method: older key, kept as an alias of ``speculative_config.method``.
        async_scheduling: ``--async-scheduling`` / ``--no-async-scheduling``; ``None``: the release's default
            (per-release rules: ``EngineRules.async_scheduling``).
        pin_kv_cache_memory: emit ``kv_cache_memory_bytes`` = requested − weights − activation − non-torch − graph
            − 150 MiB margin, so graph memory is reserved explicitly (vllm-ascend PR #8289's suggested value).
        extra_args: further ``vllm serve`` flags ascendflow does not model, appended to every node's engine argv:
            argv tokens (``["--enable-log-requests", "--max-logprobs", "5"]``) or ``{flag: value}`` (``true``:
            the flag alone, ``false``: ``--no-<flag>``, a list or dict: JSON). Checked by
            :mod:`ascendflow.compiler.checks.extra_args` (a flag the plan sets is refused with its key) and against
            the pinned vLLM's own parser (:mod:`ascendflow.runner.serve_flags`: an unknown flag is refused).
            ``None``: none (the default is ``null`` so that either form can be given, Hydra merging no dict into a
            list).
    """

    max_model_len: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    max_num_seqs: int | None = Field(default=None, ge=1, le=MAX_NUM_SEQS)
    max_num_batched_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    gpu_memory_utilization: float = Field(default=0.9, gt=0, le=1)
    kv_cache_memory_bytes: int | None = Field(default=None, gt=0, le=MAX_BYTES)
    enable_prefix_caching: bool | None = None
    enable_chunked_prefill: bool | None = None
    block_size: int | None = Field(default=None, ge=1, le=MAX_BLOCK_SIZE)
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    enforce_eager: bool = False
    num_speculative_tokens: int = Field(default=0, ge=0, le=MAX_SPECULATIVE_TOKENS)
    speculative_method: SpeculativeMethod | None = None
    speculative_config: SpeculativeConfigSpec | None = None
    async_scheduling: bool | None = None
    pin_kv_cache_memory: bool = False
    extra_args: list[Token] | dict[str, Any] | None = Field(default=None, max_length=256)

    @model_validator(mode="before")
    @classmethod
    def _speculative_aliases(cls, data: Any) -> Any:
        """Map the older ``num_speculative_tokens`` / ``speculative_method`` keys into ``speculative_config`` (and
        back), so both spellings describe one setting; refuse the two when they disagree."""
        if not isinstance(data, dict):
            return data
        return speculative_aliases(data)


def speculative_aliases(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (engine keys) with ``speculative_config``, ``num_speculative_tokens`` and ``speculative_method``
    made consistent.

    Raises:
        ValueError: ``num_speculative_tokens`` or ``speculative_method`` disagreeing with ``speculative_config``.
    """
    data = dict(data)
    k, method, config = data.get("num_speculative_tokens") or 0, data.get("speculative_method"), data.get(
        "speculative_config")
    if config is None:
        if k:
            data["speculative_config"] = {"method": method or "deepseek_mtp", "num_speculative_tokens": k}
        return data
    config = config.model_dump(exclude_none=True) if isinstance(config, SpeculativeConfigSpec) else dict(config)
    if k and k != config.get("num_speculative_tokens"):
        raise ValueError(f"num_speculative_tokens={k} disagrees with speculative_config.num_speculative_tokens="
                         f"{config.get('num_speculative_tokens')}: set speculative_config only")
    if method and method != config.get("method"):
        raise ValueError(f"speculative_method={method} disagrees with speculative_config.method="
                         f"{config.get('method')}: set speculative_config only")
    data["num_speculative_tokens"] = config.get("num_speculative_tokens") or 0
    data["speculative_method"] = config.get("method")
    return data


def with_speculative_tokens(engine: EngineSpec, k: int) -> EngineSpec:
    """``engine`` with ``k`` draft tokens (a PD role's override): the same method and draft, ``k == 0`` off."""
    data = engine.model_dump(exclude={"speculative_config", "num_speculative_tokens"})
    if k and engine.speculative_config is not None:
        data["speculative_config"] = {**engine.speculative_config.model_dump(exclude_none=True),
                                      "num_speculative_tokens": k}
    elif k:
        data["num_speculative_tokens"] = k
    else:
        data["speculative_method"] = None
    return EngineSpec.model_validate(data)

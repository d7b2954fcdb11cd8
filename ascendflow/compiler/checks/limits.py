"""Scheduler limits and KV block size with the target release's defaults applied (pure).

``max_model_len``, ``max_num_seqs``, ``max_num_batched_tokens`` (vLLM ``EngineArgs``
``_set_default_max_num_seqs_and_batched_tokens_args`` and ``get_batch_defaults``) and the KV block size
(vllm-ascend ``refresh_block_size`` / v0.11.0 ``platform.py``; vllm-cpu ``platforms/cpu.py``), each by the row's
:class:`~ascendflow.compiler.rules.engine_rules.EngineRules`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ascendflow.compiler.checks.model_len import check_rope_spelling, derived_max_len
from ascendflow.compiler.rules.engine_rules import EngineRules
from ascendflow.platforms import platform_for
from ascendflow.schema.architecture import ModelArchitecture
from ascendflow.schema.errors import ConfigError
from ascendflow.schema.spec import RunSpec

GIB = 1 << 30
#: Upper bound on a shipped chat prompt with the chat template applied, tokens (longest prompt: about 60 tokens).
CHAT_PROMPT_TOKENS = 256
#: vLLM's CPU branch of ``get_batch_defaults`` for the OpenAI server, per device of TP × PP (vLLM 0.32.0).
CPU_SERVER_BATCHED_TOKENS, CPU_SERVER_SEQS = 2048, 128


@dataclass(frozen=True)
class Limits:
    """Resolved scheduler limits (tokens, sequences) and KV block size (tokens)."""

    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    block_size: int


def server_batch_defaults(rules: EngineRules, device_bytes: int, world_size: int) -> tuple[int, int]:
    """vLLM's defaults for the OpenAI server: ``(max_num_batched_tokens, max_num_seqs)``.

    ``memory_tiers``: the first tier of ``rules.server_batch_tiers`` whose threshold (GiB) ``device_bytes``
    reaches; ``fallback``: the platform reports no device memory to ``get_batch_defaults`` (it catches the error
    and uses 0), i.e. the last tier; ``cpu_world_size``: 2048 / 128 × ``world_size`` (TP × PP).
    """
    if rules.batch_defaults == "cpu_world_size":
        return CPU_SERVER_BATCHED_TOKENS * world_size, CPU_SERVER_SEQS * world_size
    memory = device_bytes if rules.batch_defaults == "memory_tiers" else 0
    for min_gib, tokens, seqs in rules.server_batch_tiers:
        if memory >= min_gib * GIB:
            return tokens, seqs
    return rules.server_batch_tiers[-1][1:]


def resolve_limits(spec: RunSpec, arch: ModelArchitecture, rules: EngineRules, device_bytes: int,
                   host_amx: bool = True) -> tuple[Limits, list[str]]:
    """Apply the release's defaults and checks to the engine's limits; returns them and the warnings (a block size
    the release replaces).

    Raises:
        ConfigError: a context beyond the model's derived length
            (:func:`~ascendflow.compiler.checks.model_len.derived_max_len`) or a rope override the release never
            reads, ``max_num_batched_tokens`` below ``max_num_seqs`` or (chunked prefill
            off, explicit value) below ``max_model_len``, a workload longer than the context, a block size the device
            does not support.
    """
    eng, par = spec.engine, spec.parallel
    check_rope_spelling(rules, spec.model.hf_overrides)
    limit, formula = derived_max_len(arch, rules)
    max_model_len = eng.max_model_len or limit
    if max_model_len > limit:
        raise ConfigError("engine.max_model_len", max_model_len,
                          f"exceeds the model's maximum length {limit} = {formula} (vLLM _get_and_verify_max_len "
                          f"refuses it at start); lower it, or lengthen the model with model.hf_overrides (rope "
                          f"scaling, max_position_embeddings), written as --hf-overrides")
    world = par.tensor_parallel_size * par.pipeline_parallel_size  # vLLM: pipeline × tensor, not DP
    default_tokens, default_seqs = server_batch_defaults(rules, device_bytes, world)
    max_num_seqs = eng.max_num_seqs or default_seqs
    max_num_batched_tokens = eng.max_num_batched_tokens
    if max_num_batched_tokens is None:
        max_num_batched_tokens = default_tokens
        if eng.enable_chunked_prefill is False:  # vLLM: the whole prompt in one step
            max_num_batched_tokens = (max_model_len if rules.chunked_off_batched_tokens == "max_model_len"
                                      else max(max_model_len, max_num_batched_tokens))
        if rules.default_batched_tokens_capped:  # vLLM >= 0.13: within the model limit
            max_num_batched_tokens = min(max_num_seqs * max_model_len, max_num_batched_tokens)
    elif eng.enable_chunked_prefill is False and max_num_batched_tokens < max_model_len:
        raise ConfigError("engine.max_num_batched_tokens", max_num_batched_tokens,
                          f"must be >= engine.max_model_len ({max_model_len}) when chunked prefill is off (vLLM "
                          f"SchedulerConfig); raise it, or leave it unset (vLLM then uses max_model_len)")
    if eng.max_num_seqs is None:  # vLLM: a defaulted max_num_seqs never exceeds max_num_batched_tokens
        max_num_seqs = min(max_num_seqs, max_num_batched_tokens)
    if max_num_batched_tokens < max_num_seqs:
        raise ConfigError("engine.max_num_batched_tokens", max_num_batched_tokens,
                          f"must be >= engine.max_num_seqs ({max_num_seqs}) (vLLM SchedulerConfig)")
    _check_workload(spec, max_model_len)
    block_size, warnings = _block_size(spec, arch, rules, host_amx)
    return Limits(max_model_len, max_num_seqs, max_num_batched_tokens, block_size), warnings


def _check_workload(spec: RunSpec, max_model_len: int) -> None:
    w = spec.workload
    if w.dataset == "chat" and w.max_output_tokens + CHAT_PROMPT_TOKENS > max_model_len:
        raise ConfigError("workload.max_output_tokens", w.max_output_tokens,
                          f"plus up to {CHAT_PROMPT_TOKENS} prompt tokens (chat template included) exceeds "
                          f"engine.max_model_len={max_model_len}")
    if w.dataset != "chat":
        longest = w.random_input_len + (w.prefix_suffix_len if w.dataset == "prefix_repetition" else 0)
        if longest + w.random_output_len > max_model_len:
            raise ConfigError("workload.random_input_len", w.random_input_len,
                              f"requests of {longest} input + {w.random_output_len} output tokens exceed "
                              f"engine.max_model_len={max_model_len}; vLLM would reject every one")


def _block_size(spec: RunSpec, arch: ModelArchitecture, rules: EngineRules, host_amx: bool) -> tuple[int, list[str]]:
    """The KV block size in tokens, and a warning for each value the release or the CPU MLA backend replaces."""
    hw, eng = spec.hardware, spec.engine
    warnings: list[str] = []
    block_size = eng.block_size or hw.kv_block_size
    if block_size % hw.kv_block_size_multiple:
        raise ConfigError("engine.block_size", eng.block_size,
                          f"{hw.device_name} needs a multiple of {hw.kv_block_size_multiple} tokens")
    if rules.block_size_rule == "prefix_or_chunked":
        forced = eng.enable_prefix_caching is not False or eng.enable_chunked_prefill is not False
        why = "while prefix caching or chunked prefill is on (vllm_ascend/utils.py refresh_block_size)"
    elif rules.block_size_rule == "unless_ascend_scheduler":
        scheduler = spec.ascend.additional_config.other.get("ascend_scheduler_config") or {}
        scheduler = scheduler if isinstance(scheduler, dict) else {}
        forced = (eng.enable_prefix_caching is not False or not scheduler.get("enabled")
                  or bool(scheduler.get("enable_chunked_prefill")))
        why = ("unless the ascend scheduler is on with chunked prefill and prefix caching off (vllm_ascend/platform.py "
               "check_and_update_config, v0.11.0)")
    else:
        forced = False
        why = ""
    if forced and block_size != 128:
        if eng.block_size:
            warnings.append(f"engine.block_size={eng.block_size} is replaced by 128 on {hw.software} {why}")
        block_size = 128
    forced_mla = platform_for(hw.kind).mla_block_size_without_amx
    if forced_mla is not None and arch.is_mla and not host_amx:
        if eng.block_size not in (None, forced_mla):
            warnings.append(f"engine.block_size={eng.block_size} is replaced by {forced_mla}: vLLM's CPU MLA backend "
                            f"(no AMX on this host) supports only {forced_mla}-token blocks")
        block_size = forced_mla
    return block_size, warnings

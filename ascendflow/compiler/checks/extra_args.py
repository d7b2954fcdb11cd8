"""``engine.extra_args`` (pure): the further ``vllm serve`` flags as argv tokens, and the refusal of a flag the plan
itself sets. Whether a flag exists in the pinned vLLM is checked outside the compiler, against that vLLM's own
parser (:mod:`ascendflow.runner.serve_flags`), since the compiler never imports vLLM."""

from __future__ import annotations

import json
from typing import Any

from ascendflow.schema.errors import ConfigError

KEY = "engine.extra_args"

#: vLLM argument names the launcher writes per node or per run: ``dest -> (key, why a command's value is not
#: carried)``. One table for two messages: ``engine.extra_args`` refuses the flag naming the key (:data:`PLANNED`),
#: and ``python -m ascendflow.import`` names the flag with the reason (``ascendflow/importer/recipe.py``
#: ``NOT_CARRIED``).
LAUNCHER_WRITTEN: dict[str, tuple[str, str]] = {
    "host": ("the launcher (0.0.0.0)",
             "the launcher binds 0.0.0.0 (ascendflow/compiler/launch); the address clients use is run.host"),
    "api_key": ("run.api_key_env", "a secret is never written into a recipe: export it and set run.api_key_env=NAME"),
    "distributed_executor_backend": ("parallel (the launcher picks it)",
                                     "one node: vLLM's own choice (mp); ascendflow writes it for multi-node "
                                     "launches only (parallel.distributed_executor_backend)"),
    "profiler_config": ("run.profile", "profiling is run.profile=true (ascendflow writes its own --profiler-config)"),
    "data_parallel_rank": ("pd.<role>.dp_launch (the launcher writes it)", "the launcher writes it per DP rank"),
    "data_parallel_size_local": ("parallel.nodes (the launcher writes it)", "the launcher writes it"),
    "data_parallel_start_rank": ("parallel.nodes (the launcher writes it)", "the launcher writes it per node"),
    "headless": ("parallel.nodes (the launcher writes it)", "the launcher writes it per node"),
    "data_parallel_address": ("parallel.node_addresses",
                              "node 0's address: parallel.node_addresses or ASCENDFLOW_NODE0_IP at launch"),
    "data_parallel_rpc_port": ("parallel.data_parallel_rpc_port",
                               "parallel.data_parallel_rpc_port (ascendflow's own port, 13389 by default)"),
    "nnodes": ("parallel.nodes", "parallel.nodes (one command per node)"),
    "node_rank": ("parallel.nodes", "the launcher writes it per node"),
    "master_addr": ("parallel.node_addresses",
                    "node 0's address: parallel.node_addresses or ASCENDFLOW_NODE0_IP at launch"),
    "master_port": ("parallel.master_port", "parallel.master_port"),
}
#: vLLM argument names (``EngineArgs`` / server ``dest``) that ascendflow plans, with the key that sets each. Every
#: name in a plan's ``engine_args`` is refused too (the plan sets it), with ``docs/configuration.md`` as the pointer.
PLANNED: dict[str, str] = {
    "model": "model.path (or model.id)", "model_tag": "model.path (or model.id)",
    "served_model_name": "model.served_model_name", "trust_remote_code": "model.trust_remote_code",
    "tensor_parallel_size": "parallel.tensor_parallel_size", "pipeline_parallel_size": "parallel.pipeline_parallel_size",
    "data_parallel_size": "parallel.data_parallel_size", "enable_expert_parallel": "parallel.enable_expert_parallel",
    "dtype": "engine.dtype", "max_model_len": "engine.max_model_len", "max_num_seqs": "engine.max_num_seqs",
    "max_num_batched_tokens": "engine.max_num_batched_tokens",
    "gpu_memory_utilization": "engine.gpu_memory_utilization", "kv_cache_memory_bytes": "engine.kv_cache_memory_bytes",
    "block_size": "engine.block_size", "enable_prefix_caching": "engine.enable_prefix_caching",
    "enable_chunked_prefill": "engine.enable_chunked_prefill", "seed": "engine.seed",
    "enforce_eager": "engine.enforce_eager (or graph=eager)",
    "speculative_config": "engine.speculative_config", "async_scheduling": "engine.async_scheduling",
    "hf_overrides": "model.hf_overrides", "limit_mm_per_prompt": "model.limit_mm_per_prompt",
    "mm_processor_cache_gb": "model.mm_processor_cache_gb", "mm_encoder_tp_mode": "model.mm_encoder_tp_mode",
    "compilation_config": "graph=<option> (graph.cudagraph_mode, graph.cudagraph_capture_sizes)",
    "kv_cache_dtype": "quantization.kv_cache_dtype", "quantization": "quantization=<option>",
    "additional_config": "ascend.additional_config", "kv_transfer_config": "pd=<option>",
    "port": "run.launch_port (pd.<role>.api_port)",
    **{dest: key for dest, (key, _) in LAUNCHER_WRITTEN.items()},
}


def extra_argv(extra: list[str] | dict[str, Any] | None) -> list[str]:
    """``engine.extra_args`` as argv tokens: ``None`` none; a list as given; a dict ``{flag: value}`` flag by flag (``flag`` with or
    without ``--``, ``_`` or ``-``): ``true`` → ``--flag``, ``false`` → ``--no-flag`` (vLLM's
    ``BooleanOptionalAction``), ``null`` → left out (removes a recipe's entry), a list or dict → JSON, else the text."""
    if extra is None:
        return []
    if isinstance(extra, list):
        return [str(t) for t in extra]
    argv: list[str] = []
    for key, value in extra.items():
        name = str(key).lstrip("-").replace("_", "-")
        if value is None:
            continue
        if value is True:
            argv.append(f"--{name}")
        elif value is False:
            argv.append(f"--no-{name}")
        elif isinstance(value, (list, dict)):
            argv += [f"--{name}", json.dumps(value, separators=(",", ":"))]
        else:
            argv += [f"--{name}", str(value)]
    return argv


def flag_tokens(argv: list[str]) -> list[str]:
    """The flags among ``argv`` (``--name`` or ``-x``, ``=value`` cut off; negative numbers are values)."""
    flags = []
    for token in argv:
        if token.startswith("-") and not token.lstrip("-").replace(".", "", 1).isdigit() and token != "-":
            flags.append(token.split("=", 1)[0])
    return flags


def planned_key(dest: str, engine_args: dict[str, Any]) -> str | None:
    """The ascendflow key of vLLM argument ``dest`` when the plan sets it (:data:`PLANNED` or ``engine_args``)."""
    if dest in PLANNED:
        return PLANNED[dest]
    if dest in engine_args:
        return f"its ascendflow key (the plan sets engine_args.{dest}; docs/configuration.md)"
    return None


def check_extra_args(argv: list[str], engine_args: dict[str, Any]) -> None:
    """Refuse an ``engine.extra_args`` flag the plan sets itself (long form, ``--no-`` form included; short aliases
    are resolved against vLLM's parser by :mod:`ascendflow.runner.serve_flags`), and a first token that is no flag.

    Raises:
        ConfigError: ``engine.extra_args`` naming the flag and the key to use instead.
    """
    if argv and not argv[0].startswith("-"):
        raise ConfigError(KEY, argv[0], "must start with a flag (--name), e.g. [--enable-log-requests]")
    for flag in flag_tokens(argv):
        if not flag.startswith("--"):
            continue
        dest = flag[2:].replace("-", "_")
        key = planned_key(dest, engine_args)
        if key is None and dest.startswith("no_"):
            key = planned_key(dest[3:], engine_args)
        if key is not None:
            raise ConfigError(KEY, flag, f"is planned by ascendflow; set {key} instead")


_MM_FLAG = "--mm-processor-kwargs"


def mm_kwargs_max_pixels(extra_args: list[str] | dict[str, Any] | None) -> int | None:
    """``max_pixels`` (or ``size.longest_edge``) of a ``--mm-processor-kwargs`` JSON in ``engine.extra_args`` (vLLM
    ``MultiModalConfig.mm_processor_kwargs``, passed to the HF processor over ``preprocessor_config.json``); ``None``
    when not given.

    Raises:
        ConfigError: the value is not JSON, or the pixel count is not a positive integer.
    """
    argv = extra_argv(extra_args)
    text = next((argv[i + 1] for i, t in enumerate(argv[:-1]) if t == _MM_FLAG), None)
    text = next((t.split("=", 1)[1] for t in argv if t.startswith(_MM_FLAG + "=")), text)
    if text is None:
        return None
    try:
        kwargs = json.loads(text)
    except json.JSONDecodeError:
        raise ConfigError("engine.extra_args", f"{_MM_FLAG} {text}", "is not JSON: give a JSON object, e.g. "
                          '{"max_pixels": 4194304}') from None
    size = kwargs.get("size") if isinstance(kwargs, dict) else None
    value = size.get("longest_edge") if isinstance(size, dict) and "longest_edge" in size else (
        kwargs.get("max_pixels") if isinstance(kwargs, dict) else None)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ConfigError("engine.extra_args", f"{_MM_FLAG} {text}", "max_pixels / size.longest_edge must be a "
                          "positive pixel count: fix the JSON")
    return value


_RUNNER_FLAG = "--runner"


def runner_option(extra_args: list[str] | dict[str, Any] | None) -> str | None:
    """The ``--runner`` value in ``engine.extra_args`` (vLLM ``config/model.py`` ``ModelConfig.runner``:
    ``auto``, ``generate``, ``pooling`` or ``draft``; read at vLLM 0.32.0), ``None`` when not given. ``auto`` is not
    resolved here (vLLM picks pooling from the architecture's suffix or a Sentence-Transformers layout): the plan then
    takes the generate runner."""
    argv = extra_argv(extra_args)
    value = next((argv[i + 1] for i, t in enumerate(argv[:-1]) if t == _RUNNER_FLAG), None)
    return next((t.split("=", 1)[1] for t in argv if t.startswith(_RUNNER_FLAG + "=")), value)

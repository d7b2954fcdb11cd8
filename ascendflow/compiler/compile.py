"""``compile_plan``: validates a RunSpec against the model, hardware and software row, and builds the Plan."""

from __future__ import annotations

from typing import Any

from ascendflow.compiler.additional_config import additional_config
from ascendflow.compiler.checkpoint_weights import checkpoint_bytes
from ascendflow.compiler.dtypes import DTYPE_BYTES
from ascendflow.compiler.environment import common_env, node_address, worker_env
from ascendflow.compiler.graph import GraphContext, graph_plan
from ascendflow.compiler.kv_budget import kv_cache_plan
from ascendflow.compiler.launch import node_argv
from ascendflow.compiler.memory import GIB, KV_PIN_MARGIN_BYTES, activation_bytes, graph_bytes, non_torch_bytes
from ascendflow.compiler.plan import MemoryPlan, Plan, StagePlan, TargetPlan, WorkerPlan, plan_hash
from ascendflow.compiler.software import software_row, version_at_least
from ascendflow.compiler.topology import check_parallel, place_nodes
from ascendflow.compiler.weights import Layout, pp_partition, weight_bytes
from ascendflow.schema.architecture import ModelArchitecture
from ascendflow.schema.checkpoint import CheckpointInventory
from ascendflow.schema.errors import ConfigError
from ascendflow.schema.spec import RunSpec

#: Launch-time reference for the weights of a quantized plan compiled from inline architecture values.
MODEL_PATH_REF = "${ASCENDFLOW_MODEL_PATH}"

#: Upper bound on a shipped chat prompt with the chat template applied, tokens (longest prompt: about 60 tokens).
CHAT_PROMPT_TOKENS = 256


def _resolve_limits(spec: RunSpec, arch: ModelArchitecture) -> tuple[int, int, int, int]:
    """``max_model_len``, ``max_num_seqs``, ``max_num_batched_tokens`` and ``block_size`` with defaults applied."""
    hw, eng = spec.hardware, spec.engine
    # get_batch_defaults scales the CPU defaults by the world size; other platforms use them as they are.
    world = spec.parallel.world_size if hw.kind == "cpu" else 1
    max_model_len = eng.max_model_len or arch.max_position_embeddings
    if max_model_len > arch.max_position_embeddings:
        raise ConfigError("engine.max_model_len", max_model_len,
                          f"exceeds the model's max_position_embeddings ({arch.max_position_embeddings})")
    max_num_seqs = eng.max_num_seqs or hw.default_max_num_seqs * world
    max_num_batched_tokens = eng.max_num_batched_tokens or hw.default_max_num_batched_tokens * world
    if max_num_batched_tokens < max_num_seqs:
        raise ConfigError("engine.max_num_batched_tokens", max_num_batched_tokens,
                          f"must be >= engine.max_num_seqs ({max_num_seqs}) (vLLM SchedulerConfig)")
    if eng.enable_chunked_prefill is False and max_num_batched_tokens < max_model_len:
        raise ConfigError("engine.max_num_batched_tokens", max_num_batched_tokens,
                          f"must be >= engine.max_model_len ({max_model_len}) when chunked prefill is off")
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
    block_size = eng.block_size or hw.kv_block_size
    if block_size % hw.kv_block_size_multiple:
        raise ConfigError("engine.block_size", eng.block_size,
                          f"{hw.device_name} needs a multiple of {hw.kv_block_size_multiple} tokens")
    return max_model_len, max_num_seqs, max_num_batched_tokens, block_size


def _fixes(spec: RunSpec, *, context_len: bool) -> str:
    """The nearest fixes for a KV shortfall; ``context_len``: the shortfall is for one ``max_model_len`` request."""
    hints = ["lower engine.max_model_len"] if context_len else []
    if spec.engine.kv_cache_memory_bytes or spec.hardware.default_kv_cache_memory_bytes:
        return "; ".join(hints + ["raise engine.kv_cache_memory_bytes"])
    if spec.engine.gpu_memory_utilization < 0.95:
        hints.append("raise engine.gpu_memory_utilization")
    hints.append("raise parallel.tensor_parallel_size (or expert parallel / more nodes for MoE)")
    if spec.quantization.linear_scheme is None and spec.hardware.kind == "npu":
        hints.append("quantize (quantization=w8a8_ascend)")
    return "; ".join(hints)


def _check_quantization(spec: RunSpec, checkpoint: CheckpointInventory | None) -> None:
    """The quantization option must fit the hardware and the checkpoint's msModelSlim description."""
    quant, hw = spec.quantization, spec.hardware
    if quant.method == "ascend" and hw.kind != "npu":
        raise ConfigError("quantization.method", "ascend", f"msModelSlim checkpoints run on vllm-ascend only, not "
                                                           f"hardware={hw.name} ({hw.kind})")
    stored = checkpoint.quant_type if checkpoint else None
    if stored and quant.method != "ascend":
        raise ConfigError("quantization.method", quant.method, f"the checkpoint is msModelSlim {stored} "
                                                               f"(quant_model_description.json); use "
                                                               f"quantization=w8a8_ascend or w8a8_dynamic_ascend")
    if checkpoint and quant.method == "ascend" and not stored:
        raise ConfigError("quantization.method", "ascend", "the local checkpoint has no "
                                                           "quant_model_description.json (not an msModelSlim export)")


def compile_plan(spec: RunSpec, arch: ModelArchitecture, *, model_path: str,
                 host_memory_bytes: int | None = None, host_amx: bool = True,
                 checkpoint: CheckpointInventory | None = None) -> Plan:
    """Compile a validated spec into a plan.

    Args:
        spec: the validated run spec.
        arch: the model's architecture (from its ``config.json`` or the model option's inline values).
        model_path: what the engine loads (local directory or hub id); not hashed.
        host_memory_bytes: device memory for hardware whose catalogue leaves it unset (CPU: the NUMA node's memory).
        host_amx: the CPU host has AMX tiles. Without AMX, vLLM's reference CPU MLA backend forces 16-token blocks
            (``vllm/platforms/cpu.py`` ``check_and_update_config``); with AMX the AMX MLA backend keeps the default.
        checkpoint: the local checkpoint's tensor inventory; weights are then counted from it, not estimated.

    Returns:
        The frozen :class:`Plan`; memory and KV figures are those of the bottleneck device (the PP stage with the
        fewest KV blocks; vLLM takes the minimum over workers).

    Raises:
        ConfigError: a value vLLM or vllm-ascend would refuse, or a plan whose KV cache cannot hold one
            ``max_model_len`` request (with the shortfall and the nearest fixes).
    """
    hw, eng, par, quant = spec.hardware, spec.engine, spec.parallel, spec.quantization
    row = software_row(hw)
    check_parallel(par, hw, arch)
    if eng.num_speculative_tokens and not arch.num_nextn_predict_layers:
        raise ConfigError("engine.num_speculative_tokens", eng.num_speculative_tokens,
                          "the model has no MTP layers (num_nextn_predict_layers = 0)")
    warnings: list[str] = []
    _check_quantization(spec, checkpoint)
    if quant.method == "ascend" and checkpoint is None and spec.model.path is None:
        # The hub id names the original (bf16/FP8) weights: a W8A8 plan must serve an msModelSlim export.
        model_path = MODEL_PATH_REF
        warnings.append("quantization=ascend needs an msModelSlim checkpoint: set model.path=<dir on the nodes>, or "
                        "export ASCENDFLOW_MODEL_PATH there before launch (the scripts refuse to start without it)")

    dtype = arch.torch_dtype if eng.dtype == "auto" else eng.dtype
    if dtype not in hw.dtypes:
        raise ConfigError("engine.dtype", eng.dtype,
                          f"resolves to {dtype}, which {hw.device_name} does not support; use one of {list(hw.dtypes)}")
    if hw.kind == "npu" and quant.kv_cache_dtype != "auto":
        raise ConfigError("quantization.kv_cache_dtype", quant.kv_cache_dtype,
                          "vllm-ascend takes an int8 KV cache (C8) from the checkpoint's kv_cache_type, not from "
                          "--kv-cache-dtype; keep auto (reference §5)")
    kv_dtype = dtype if quant.kv_cache_dtype == "auto" else quant.kv_cache_dtype
    max_model_len, max_num_seqs, max_num_batched_tokens, block_size = _resolve_limits(spec, arch)
    if hw.kind == "npu" and block_size != 128 and (eng.enable_prefix_caching is not False
                                                   or eng.enable_chunked_prefill is not False):
        # vllm_ascend/utils.py refresh_block_size: 128 whenever prefix caching or chunked prefill is on (the
        # default); other sizes only with both explicitly off.
        warnings.append(f"engine.block_size={block_size} is replaced by 128 on Ascend while prefix caching or "
                        "chunked prefill is on")
        block_size = 128
    if hw.kind == "cpu" and arch.is_mla and not host_amx:
        if eng.block_size not in (None, 16):
            warnings.append(f"engine.block_size={eng.block_size} is replaced by 16: vLLM's CPU MLA backend "
                            "(no AMX on this host) supports only 16-token blocks")
        block_size = 16

    asc = spec.ascend.additional_config
    extra_config = additional_config(spec, row["vllm_ascend"]) if hw.kind == "npu" else {}
    graph, graph_warnings = graph_plan(spec.graph, GraphContext(
        arch=arch, parallel=par, hardware=hw, vllm_ascend=row["vllm_ascend"], max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        num_speculative_tokens=eng.num_speculative_tokens, enforce_eager=eng.enforce_eager,
        tp_aligned=bool(spec.ascend.enable_sequence_parallelism or asc.enable_shared_expert_dp
                        or extra_config.get("enable_dsa_cp") or extra_config.get("enable_flashcomm1")),
        aiv=hw.kind == "npu" and spec.ascend.hccl_op_expansion_mode_aiv,
        multistream_overlap_shared_expert=bool(asc.multistream_overlap_shared_expert)))
    warnings += graph_warnings
    if eng.enforce_eager and not spec.graph.enforce_eager:
        warnings.append(f"engine.enforce_eager=true overrides graph={spec.graph.name}: no graph capture, no compile")
    if spec.model.trust_remote_code:
        warnings.append("model.trust_remote_code=true: vLLM runs the model repository's own Python code on every node")

    device_total = hw.device_memory_bytes or host_memory_bytes
    if device_total is None:
        raise ConfigError("hardware.device_memory_bytes", None, "unknown: give the device memory in bytes")
    requested = int(device_total * eng.gpu_memory_utilization)
    ep = par.tensor_parallel_size * par.data_parallel_size if par.enable_expert_parallel else 1
    non_torch = non_torch_bytes(hw.non_torch_bytes, par, spec.ascend.hccl_buffsize_mb) if hw.kind == "npu" else (
        hw.non_torch_bytes)
    explicit_kv = eng.kv_cache_memory_bytes or hw.default_kv_cache_memory_bytes

    stages = pp_partition(arch.num_hidden_layers, par.pipeline_parallel_size)
    best = None
    stage_plans = []
    for index, layers in enumerate(stages):
        layout = Layout(tp=par.tensor_parallel_size, ep=ep, first_stage=index == 0,
                        last_stage=index == len(stages) - 1, layers=layers, pp=par.pipeline_parallel_size)
        weights = checkpoint_bytes(checkpoint, arch, layout, dtype) if checkpoint else weight_bytes(
            arch, layout, dtype=dtype, linear_scheme=quant.linear_scheme, expert_scheme=quant.expert_scheme)
        activation = activation_bytes(arch, layout, max_num_batched_tokens=max_num_batched_tokens,
                                      max_num_seqs=max_num_seqs, dtype_bytes=DTYPE_BYTES[dtype])
        graph_mem = graph_bytes(arch, layout, mode=graph.cudagraph_mode, capture_sizes=graph.capture_sizes,
                                dtype_bytes=DTYPE_BYTES[dtype])
        if explicit_kv is not None:
            kv_bytes = explicit_kv
        else:
            kv_bytes = requested - weights - activation - non_torch
            if eng.pin_kv_cache_memory:
                kv_bytes -= graph_mem + KV_PIN_MARGIN_BYTES
        kv = kv_cache_plan(arch, kv_cache_bytes=kv_bytes, layers_on_device=len(layers),
                           tensor_parallel_size=par.tensor_parallel_size, kv_dtype=kv_dtype, block_size=block_size,
                           max_model_len=max_model_len)
        memory = MemoryPlan(device_total_bytes=device_total, requested_bytes=requested, weights_bytes=weights,
                            activation_bytes=activation, non_torch_bytes=non_torch, graph_bytes=graph_mem,
                            kv_cache_bytes=kv_bytes)
        stage_plans.append(StagePlan(stage=index, first_layer=layers.start, num_layers=len(layers),
                                     weights_bytes=weights, activation_bytes=activation, kv_cache_bytes=kv_bytes,
                                     num_blocks=kv.num_blocks))
        if best is None or kv.num_blocks < best[1].num_blocks:
            best = (memory, kv)
    memory, kv = best

    resident = memory.weights_bytes + memory.kv_cache_bytes + memory.activation_bytes + memory.non_torch_bytes
    if explicit_kv is not None and resident > device_total:
        key = "engine.kv_cache_memory_bytes" if eng.kv_cache_memory_bytes else "hardware.default_kv_cache_memory_bytes"
        raise ConfigError(key, explicit_kv,
                          f"weights {memory.weights_bytes / GIB:.2f} GiB + KV {explicit_kv / GIB:.2f} GiB + activation "
                          f"{memory.activation_bytes / GIB:.2f} GiB exceed the device's {device_total / GIB:.2f} GiB; "
                          f"lower it")
    if memory.kv_cache_bytes <= 0:
        raise ConfigError(
            "engine.gpu_memory_utilization", eng.gpu_memory_utilization,
            f"leaves a negative KV budget on the bottleneck device: requested {requested / GIB:.2f} GiB − weights "
            f"{memory.weights_bytes / GIB:.2f} − activation {memory.activation_bytes / GIB:.2f} − non-torch "
            f"{non_torch / GIB:.2f} = {memory.kv_cache_bytes / GIB:.2f} GiB; fixes: {_fixes(spec, context_len=False)}")
    capacity = kv.num_blocks * block_size
    if capacity < max_model_len:
        need = -(-max_model_len // block_size) * block_size * kv.bytes_per_token
        raise ConfigError(
            "engine.max_model_len", max_model_len,
            f"exceeds the KV capacity of the plan ({capacity} tokens = {kv.num_blocks} blocks × {block_size}; "
            f"short by {max_model_len - capacity} tokens, needs >= {need} KV bytes per device); fixes: "
            f"{_fixes(spec, context_len=True)}")
    if kv.max_concurrency < max_num_seqs:
        warnings.append(f"KV cache holds {kv.max_concurrency:.1f} requests of max_model_len={max_model_len} tokens, "
                        f"fewer than max_num_seqs={max_num_seqs}: long requests will queue or be preempted")

    engine_args = _engine_args(spec, arch, row, model_path=model_path, dtype=dtype, max_model_len=max_model_len,
                               max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                               block_size=block_size, graph=graph, extra_config=extra_config,
                               pinned_kv=memory.kv_cache_bytes if eng.pin_kv_cache_memory and not explicit_kv
                               else explicit_kv)
    env = common_env(spec, graphs_on=graph.cudagraph_mode != "NONE")
    workers = []
    for node, first, local, devices in place_nodes(par, hw):
        argv = node_argv(hw.kind, engine_args, host="0.0.0.0", port=spec.run.launch_port, node=node,
                         nodes=par.nodes, dp_local=local, dp_start=first, dp_address=node_address(spec, 0),
                         dp_rpc_port=par.data_parallel_rpc_port)
        workers.append(WorkerPlan(node_rank=node, dp_rank=first, devices=devices,
                                  env=worker_env(spec, node, devices), command=argv))

    target = TargetPlan(hardware=hw.name, kind=hw.kind, device_name=hw.device_name, nodes=par.nodes,
                        devices_per_node=hw.devices_per_node, engine=row)
    model = {"name": spec.model.name, "id": spec.model.id, "architecture": arch.model_dump(exclude_none=True)}
    semantic = {
        "target": target.model_dump(), "model": model,
        "engine_args": {k: v for k, v in engine_args.items() if k != "model"},
        "env": env, "workers": [(w.node_rank, w.dp_rank, w.devices, w.env) for w in workers],
        # Memory read from this machine (CPU "device" = NUMA node) is a measurement, not configuration.
        "memory": memory.model_dump(exclude={"device_total_bytes", "requested_bytes"} if hw.device_memory_bytes is None
                                    else set()),
        "kv_cache": kv.model_dump(), "graph": graph.model_dump(),
    }
    return Plan(plan_hash=plan_hash(semantic), target=target, model=model, engine_args=engine_args,
                serve_command=workers[0].command, env=env, workers=workers, memory=memory, kv_cache=kv, graph=graph,
                stages=stage_plans, warnings=warnings)


def _engine_args(spec: RunSpec, arch: ModelArchitecture, row: dict, *, model_path: str, dtype: str,
                 max_model_len: int, max_num_seqs: int, max_num_batched_tokens: int, block_size: int, graph,
                 extra_config: dict[str, Any], pinned_kv: int | None) -> dict[str, Any]:
    """Engine arguments in vLLM ``EngineArgs`` names; ``None`` values are dropped."""
    eng, par, quant, hw = spec.engine, spec.parallel, spec.quantization, spec.hardware
    quantization = quant.method
    if quantization == "ascend" and version_at_least(row["vllm_ascend"], "0.17.0rc1"):
        quantization = None  # detected from quant_model_description.json from v0.17.0rc1 (reference §5)
    args: dict[str, Any] = {
        "model": model_path,
        "served_model_name": spec.model.id,
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
    }
    if eng.num_speculative_tokens:
        args["speculative_config"] = {"method": eng.speculative_method or "deepseek_mtp",
                                      "num_speculative_tokens": eng.num_speculative_tokens}
    if not graph.enforce_eager and hw.kind != "cpu":
        compilation: dict[str, Any] = {"cudagraph_mode": graph.cudagraph_mode}
        if graph.capture_sizes:
            compilation["cudagraph_capture_sizes"] = graph.capture_sizes
        if spec.ascend.enable_sequence_parallelism and hw.kind == "npu":
            compilation["pass_config"] = {"enable_sp": True}
        args["compilation_config"] = compilation
    if extra_config:
        args["additional_config"] = extra_config
    return {k: v for k, v in args.items() if v is not None}

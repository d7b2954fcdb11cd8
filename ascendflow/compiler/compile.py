"""``compile_plan``: validates a RunSpec against the model and hardware and builds the Plan."""

from __future__ import annotations

from typing import Any

from ascendflow.compiler.dtypes import DTYPE_BYTES
from ascendflow.compiler.graph import graph_plan
from ascendflow.compiler.kv_budget import kv_cache_plan
from ascendflow.compiler.launch import BASE_ENV, serve_command
from ascendflow.compiler.plan import MemoryPlan, Plan, TargetPlan, WorkerPlan, plan_hash
from ascendflow.compiler.topology import check_parallel, place_nodes
from ascendflow.compiler.weights import weight_bytes_per_device
from ascendflow.schema.architecture import ModelArchitecture
from ascendflow.schema.errors import ConfigError
from ascendflow.schema.spec import RunSpec

#: Non-torch memory per device (communication buffers, runtime), bytes. First-order constant: vLLM measures it at
#: start-up; refined per hardware in the Ascend compiler issue.
NON_TORCH_BYTES = {"cpu": 0, "npu": 1 << 30, "gpu": 1 << 30}


def _activation_bytes(arch: ModelArchitecture, max_num_batched_tokens: int, max_num_seqs: int, tp: int,
                      dtype_bytes: int) -> int:
    """Peak activation of vLLM's profiling run, first-order model.

    The dummy forward at ``max_num_batched_tokens`` holds about four hidden-size tensors and the gate/up output of
    the widest MLP per token; the sampler pass holds fp32 logits for ``max_num_seqs`` rows
    (``shared/reference/vllm_ascend.md`` §3). Bytes.
    """
    inter = max(arch.intermediate_size or 0, (arch.moe_intermediate_size or 0) * (arch.num_experts_per_tok or 0))
    per_token = (4 * arch.hidden_size + 2 * inter // tp) * dtype_bytes
    logits = max_num_seqs * arch.vocab_size * 4
    return max_num_batched_tokens * per_token + logits


def compile_plan(spec: RunSpec, arch: ModelArchitecture, *, model_path: str,
                 host_memory_bytes: int | None = None, host_amx: bool = True) -> Plan:
    """Compile a validated spec into a plan.

    Args:
        spec: the validated run spec.
        arch: the model's architecture (from its ``config.json``).
        model_path: where the engine loads the model from (not hashed).
        host_memory_bytes: device memory for hardware whose catalogue leaves it unset (CPU: the machine's memory).
        host_amx: the CPU host has AMX tiles. Without AMX, vLLM's reference CPU MLA backend forces 16-token blocks
            (``vllm/platforms/cpu.py`` ``check_and_update_config``); with AMX the AMX MLA backend keeps the default.

    Returns:
        The frozen :class:`Plan`.

    Raises:
        ConfigError: a value vLLM would refuse (TP vs heads, devices, dtype, context length vs KV capacity...).
    """
    hw, eng, par = spec.hardware, spec.engine, spec.parallel
    check_parallel(par, hw, arch)
    warnings: list[str] = []

    dtype = arch.torch_dtype if eng.dtype == "auto" else eng.dtype
    if dtype not in hw.dtypes:
        raise ConfigError("engine.dtype", eng.dtype,
                          f"resolves to {dtype}, which {hw.device_name} does not support; use one of {list(hw.dtypes)}")
    kv_dtype = dtype if spec.quantization.kv_cache_dtype == "auto" else spec.quantization.kv_cache_dtype

    max_model_len = eng.max_model_len or arch.max_position_embeddings
    if max_model_len > arch.max_position_embeddings:
        raise ConfigError("engine.max_model_len", max_model_len,
                          f"exceeds the model's max_position_embeddings ({arch.max_position_embeddings})")
    world = par.world_size
    max_num_seqs = eng.max_num_seqs or hw.default_max_num_seqs * world
    max_num_batched_tokens = eng.max_num_batched_tokens or hw.default_max_num_batched_tokens * world
    if max_num_batched_tokens < max_num_seqs:
        raise ConfigError("engine.max_num_batched_tokens", max_num_batched_tokens,
                          f"must be >= engine.max_num_seqs ({max_num_seqs}) (vLLM SchedulerConfig)")
    if eng.enable_chunked_prefill is False and max_num_batched_tokens < max_model_len:
        raise ConfigError("engine.max_num_batched_tokens", max_num_batched_tokens,
                          f"must be >= engine.max_model_len ({max_model_len}) when chunked prefill is off")
    block_size = eng.block_size or hw.kv_block_size
    if hw.kind == "cpu" and arch.is_mla and not host_amx:
        if eng.block_size not in (None, 16):
            warnings.append(f"engine.block_size={eng.block_size} is replaced by 16: vLLM's CPU MLA backend "
                            "(no AMX on this host) supports only 16-token blocks")
        block_size = 16
    elif block_size % hw.kv_block_size_multiple:
        raise ConfigError("engine.block_size", eng.block_size,
                          f"{hw.device_name} needs a multiple of {hw.kv_block_size_multiple} tokens")

    # Memory at the bottleneck device.
    device_total = hw.device_memory_bytes or host_memory_bytes
    if device_total is None:
        raise ConfigError("hardware.device_memory_bytes", None, "unknown: give the device memory in bytes")
    ep = par.tensor_parallel_size * (par.data_parallel_size if par.enable_expert_parallel else 1)
    weights = weight_bytes_per_device(arch, dtype=dtype, tensor_parallel_size=par.tensor_parallel_size,
                                      pipeline_parallel_size=par.pipeline_parallel_size, expert_parallel_size=ep)
    activation = _activation_bytes(arch, max_num_batched_tokens, max_num_seqs, par.tensor_parallel_size,
                                   DTYPE_BYTES[dtype])
    non_torch = NON_TORCH_BYTES[hw.kind]
    requested = int(device_total * eng.gpu_memory_utilization)
    kv_bytes = eng.kv_cache_memory_bytes or hw.default_kv_cache_memory_bytes
    if kv_bytes is None:
        kv_bytes = requested - weights - activation - non_torch
        if kv_bytes <= 0:
            raise ConfigError(
                "engine.gpu_memory_utilization", eng.gpu_memory_utilization,
                f"leaves no KV cache: requested {requested / 2**30:.2f} GiB − weights {weights / 2**30:.2f} − "
                f"activation {activation / 2**30:.2f} − non-torch {non_torch / 2**30:.2f} = "
                f"{kv_bytes / 2**30:.2f} GiB; raise it, add TP, or quantize")
    graph = graph_plan(spec.graph, hw, enforce_eager=eng.enforce_eager, max_num_seqs=max_num_seqs)

    layers_on_device = -(-arch.num_hidden_layers // par.pipeline_parallel_size)
    kv = kv_cache_plan(arch, kv_cache_bytes=kv_bytes, layers_on_device=layers_on_device,
                       tensor_parallel_size=par.tensor_parallel_size, kv_dtype=kv_dtype, block_size=block_size,
                       max_model_len=max_model_len)
    capacity = kv.num_blocks * block_size
    if capacity < max_model_len:
        raise ConfigError(
            "engine.max_model_len", max_model_len,
            f"exceeds the KV capacity of the plan ({capacity} tokens = {kv.num_blocks} blocks × {block_size}; "
            f"short by {max_model_len - capacity} tokens): lower it, or raise engine.kv_cache_memory_bytes "
            f"(needs >= {-(-max_model_len // block_size) * block_size * kv.bytes_per_token} bytes)")
    if kv.max_concurrency < max_num_seqs:
        warnings.append(f"KV cache holds {kv.max_concurrency:.1f} requests of max_model_len={max_model_len} tokens, "
                        f"fewer than max_num_seqs={max_num_seqs}: long requests will queue or be preempted")

    engine_args: dict[str, Any] = {
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
        "kv_cache_memory_bytes": eng.kv_cache_memory_bytes or hw.default_kv_cache_memory_bytes,
        "block_size": block_size,
        "enable_prefix_caching": eng.enable_prefix_caching,
        "enable_chunked_prefill": eng.enable_chunked_prefill,
        "kv_cache_dtype": spec.quantization.kv_cache_dtype if spec.quantization.kv_cache_dtype != "auto" else None,
        "quantization": spec.quantization.method,
        "seed": eng.seed,
        "enforce_eager": graph.enforce_eager or None,
    }
    if not graph.enforce_eager and hw.kind != "cpu":
        engine_args["compilation_config"] = {"cudagraph_mode": graph.cudagraph_mode,
                                             "cudagraph_capture_sizes": graph.capture_sizes}
    engine_args = {k: v for k, v in engine_args.items() if v is not None}

    argv = serve_command(hw.kind, engine_args, "0.0.0.0", spec.run.launch_port)
    env = dict(BASE_ENV[hw.kind])
    workers = [
        WorkerPlan(node_rank=node, dp_rank=first, devices=devices,
                   env={hw.visible_devices_env: ",".join(map(str, devices))} if hw.visible_devices_env else {},
                   command=argv)
        for node, first, _local, devices in place_nodes(par, hw)
    ]
    memory = MemoryPlan(device_total_bytes=device_total, requested_bytes=requested, weights_bytes=weights,
                        activation_bytes=activation, non_torch_bytes=non_torch, graph_bytes=0,
                        kv_cache_bytes=kv_bytes)
    target = TargetPlan(hardware=hw.name, kind=hw.kind, device_name=hw.device_name, nodes=par.nodes,
                        devices_per_node=hw.devices_per_node, engine=hw.engine.model_dump())
    model = {"name": spec.model.name, "id": spec.model.id, "architecture": arch.model_dump(exclude_none=True)}
    semantic = {
        "target": target.model_dump(), "model": model,
        "engine_args": {k: v for k, v in engine_args.items() if k != "model"},
        "env": env, "workers": [(w.node_rank, w.dp_rank, w.devices, w.env) for w in workers],
        "memory": memory.model_dump(), "kv_cache": kv.model_dump(), "graph": graph.model_dump(),
    }
    return Plan(plan_hash=plan_hash(semantic), target=target, model=model, engine_args=engine_args,
                serve_command=argv, env=env, workers=workers, memory=memory, kv_cache=kv, graph=graph,
                warnings=warnings)

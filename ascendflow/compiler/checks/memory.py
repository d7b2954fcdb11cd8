"""Memory refusals (pure): the start-up free-memory check, a ``--kv-cache-memory`` the release ignores, and a KV cache
that cannot hold one ``max_model_len`` request (with the shortfall and the nearest fixes)."""

from __future__ import annotations

import math

from ascendflow.compiler.memory.overheads import GIB
from ascendflow.compiler.plan import KVCachePlan, MemoryPlan
from ascendflow.compiler.rules.engine_rules import EngineRules
from ascendflow.schema.errors import ConfigError
from ascendflow.schema.spec import RunSpec
from ascendflow.platforms import platform_for


def fixes(spec: RunSpec, *, context_len: bool, weights_exceed: bool = False,
          min_utilization: float | None = None) -> str:
    """The nearest fixes for a KV shortfall; ``context_len``: the shortfall is for one ``max_model_len`` request;
    ``weights_exceed``: the weights alone do not fit the device's free memory (more utilisation cannot help);
    ``min_utilization``: the smallest utilisation that holds the non-KV memory and one request (named first, and
    then the only fix, when it is within the device's free memory)."""
    hints = ["lower engine.max_model_len"] if context_len else []
    if spec.engine.kv_cache_memory_bytes or spec.hardware.default_kv_cache_memory_bytes:
        return "; ".join(hints + ["raise engine.kv_cache_memory_bytes"])
    if min_utilization is not None and min_utilization > spec.engine.gpu_memory_utilization and not weights_exceed:
        return f"raise engine.gpu_memory_utilization to {min_utilization} or more (the weights fit the device)"
    if spec.engine.gpu_memory_utilization < 0.95 and not weights_exceed:
        hints.append("raise engine.gpu_memory_utilization (within the start-up free-memory check)")
    hints.append("raise parallel.tensor_parallel_size or pipeline_parallel_size (or expert parallel / more nodes "
                 "for MoE)")
    hint = platform_for(spec.hardware.kind).quantize_hint
    if spec.quantization.linear_scheme is None and hint:
        hints.append(hint)
    return "; ".join(hints)


def check_startup_memory(spec: RunSpec, rules: EngineRules, device_total: int, requested: int) -> None:
    """vLLM/vllm-ascend worker start-up check: free memory must cover ``total × gpu_memory_utilization``
    (``EngineRules.startup_free_memory_check``); free = total − runtime reserve − memory other processes hold.

    Raises:
        ConfigError: ``hardware.occupied_bytes`` beyond the device, or a utilisation above the free memory.
    """
    hw, eng = spec.hardware, spec.engine
    if hw.occupied_bytes and hw.occupied_bytes + hw.runtime_reserved_bytes >= device_total:
        raise ConfigError("hardware.occupied_bytes", hw.occupied_bytes,
                          f"is more than the device holds: {device_total / GIB:.2f} GiB less the runtime reserve "
                          f"{hw.runtime_reserved_bytes / GIB:.2f} GiB leaves "
                          f"{(device_total - hw.runtime_reserved_bytes) / GIB:.2f} GiB; give the bytes other "
                          f"processes hold on one device (npu-smi info), below "
                          f"{device_total - hw.runtime_reserved_bytes}")
    if not rules.startup_free_memory_check or not platform_for(hw.kind).checks_free_memory_at_start:
        return
    free = device_total - hw.runtime_reserved_bytes - hw.occupied_bytes
    if free < requested:
        best = int(free / device_total * 100) / 100
        if best < 0.01:
            raise ConfigError("hardware.occupied_bytes", hw.occupied_bytes,
                              f"leaves {free / GIB:.2f} of {device_total / GIB:.2f} GiB free at start, below 1 % of "
                              f"the device ({hw.software} refuses to start); free the device's memory first")
        raise ConfigError("engine.gpu_memory_utilization", eng.gpu_memory_utilization,
                          f"requests {requested / GIB:.2f} GiB per device but only {free / GIB:.2f} of "
                          f"{device_total / GIB:.2f} GiB are free at start (runtime reserve "
                          f"{hw.runtime_reserved_bytes / GIB:.2f} GiB + other processes "
                          f"{hw.occupied_bytes / GIB:.2f} GiB); {hw.software} refuses to start "
                          f"(free memory < total × gpu_memory_utilization); use engine.gpu_memory_utilization<="
                          f"{best}")


def explicit_kv(spec: RunSpec, rules: EngineRules) -> int | None:
    """The KV budget the engine takes as given (``engine.kv_cache_memory_bytes``, else the hardware default), or
    ``None`` when the utilisation rule applies.

    Raises:
        ConfigError: ``kv_cache_memory_bytes`` or pinning on a release (or 310P) that ignores it.
    """
    hw, eng = spec.hardware, spec.engine
    explicit = eng.kv_cache_memory_bytes or hw.default_kv_cache_memory_bytes
    honoured = rules.kv_cache_memory_bytes and not (rules.p310_kv_halved and hw.soc == "310p")
    if (explicit or eng.pin_kv_cache_memory) and not honoured:
        key = "engine.kv_cache_memory_bytes" if explicit else "engine.pin_kv_cache_memory"
        raise ConfigError(key, explicit or True,
                          f"{hw.software} on {hw.device_name} ignores --kv-cache-memory (honoured from "
                          f"vllm-ascend v0.19.1rc1, never on 310P): the KV cache would follow "
                          f"gpu_memory_utilization instead; drop it, or target hardware.software=vllm-ascend-0.19.1rc1 "
                          f"or later")
    return explicit


def smallest_split(spec: RunSpec, weights: int, other: int, usable: int) -> int | None:
    """The smallest ``tensor_parallel_size × pipeline_parallel_size`` (a power-of-two multiple of today's, at most
    :data:`ascendflow.schema.parallel.MAX_PARALLEL`) at which ``weights`` (bytes on the bottleneck device today),
    split evenly, plus ``other`` (activation, non-torch, one request) fit ``usable`` bytes. ESTIMATE: the even split
    leaves out what every device keeps whole (norms, and embeddings where they are not vocab-parallel): measured
    against the compiled plan, DeepSeek-R1 BF16 on an A3 die at TP32 is 39.12 GiB estimated, 40.98 GiB planned (4.5 %
    under); the plan of that layout is the check. ``None`` when no split up to the limit fits."""
    from ascendflow.schema.parallel import MAX_PARALLEL

    now = spec.parallel.tensor_parallel_size * spec.parallel.pipeline_parallel_size
    n = now
    while n <= MAX_PARALLEL:
        if weights * now / n + other <= usable:
            return n
        n *= 2
    return None


def weights_refusal(spec: RunSpec, memory: MemoryPlan, need: int, usable: int, moe: bool,
                    total_need: int) -> ConfigError:
    """The refusal when the weights (with non-torch memory and one request: ``need`` bytes) exceed the device's
    usable memory at any ``gpu_memory_utilization`` (new-user trial of 2026-12-03: the line named
    ``engine.gpu_memory_utilization``, which cannot help): it names the layout's keys and the smallest
    TP × PP that fits with the activation of today's knobs too (``total_need``, :func:`smallest_split`)."""
    par, hw = spec.parallel, spec.hardware
    split = smallest_split(spec, memory.weights_bytes, total_need - memory.weights_bytes, usable)
    now = par.tensor_parallel_size * par.pipeline_parallel_size
    ep = f", enable_expert_parallel={str(par.enable_expert_parallel).lower()}" if moe else ""
    if split is None:
        first = "no TP × PP split fits: quantize, or a model that fits"
    else:
        # TP × PP × DP must fit nodes × devices_per_node (placement/topology.py): a split beyond one node names the nodes
        # it needs too (new-user trial of 2026-12-03: TP32 was suggested for a 16-device A3 node and then refused).
        nodes = -(-split * par.data_parallel_size // hw.devices_per_node)
        more = f" parallel.nodes={nodes}" if nodes > par.nodes else ""
        first = (f"parallel.tensor_parallel_size={split * par.tensor_parallel_size // now}{more} (or tensor × "
                 f"pipeline parallel = {split}: weights split evenly, about "
                 f"{memory.weights_bytes * now / split / GIB:.2f} GiB per device, an estimate; plan it to check)")
    rest = fixes(spec, context_len=False, weights_exceed=True).split("; ", 1)
    return ConfigError(
        "parallel.tensor_parallel_size", par.tensor_parallel_size,
        f"with pipeline_parallel_size={par.pipeline_parallel_size}{ep}, the weights take "
        f"{memory.weights_bytes / GIB:.2f} GiB of the bottleneck device (with non-torch "
        f"{memory.non_torch_bytes / GIB:.2f} and one request: {need / GIB:.2f} GiB), which exceeds the device's "
        f"usable {usable / GIB:.2f} GiB (total "
        f"{memory.device_total_bytes / GIB:.2f} − runtime reserve {hw.runtime_reserved_bytes / GIB:.2f} − other "
        f"processes {hw.occupied_bytes / GIB:.2f}) at any engine.gpu_memory_utilization; fixes: {first}"
        + (f"; {rest[1]}" if len(rest) > 1 else ""))


def check_kv_fits(spec: RunSpec, rules: EngineRules, memory: MemoryPlan, kv: KVCachePlan, explicit: int | None,
                  max_model_len: int, max_num_seqs: int, moe: bool = False) -> list[str]:
    """The bottleneck device's KV cache against the device and one ``max_model_len`` request (vLLM 0.32.0
    ``get_kv_cache_configs`` / ``_check_enough_kv_cache_memory``: one request must fit in the pool less the null
    block). Returns the warning when fewer than ``engine.max_num_seqs`` such requests fit (not for vLLM's default,
    which the config did not choose).

    Raises:
        ConfigError: an explicit KV budget that overflows the device or is below two blocks, a negative KV budget
            (naming the smallest utilisation that serves when the weights fit; naming the parallel layout and the
            smallest TP × PP that fits when they do not, :func:`weights_refusal`), a context that does not fit.
    """
    hw, eng = spec.hardware, spec.engine
    device_total, requested = memory.device_total_bytes, memory.requested_bytes
    resident = memory.weights_bytes + memory.kv_cache_bytes + memory.activation_bytes + memory.non_torch_bytes
    explicit_key = ("engine.kv_cache_memory_bytes" if eng.kv_cache_memory_bytes
                    else "hardware.default_kv_cache_memory_bytes")
    if explicit is not None and resident > device_total:
        raise ConfigError(explicit_key, explicit,
                          f"weights {memory.weights_bytes / GIB:.2f} GiB + KV {explicit / GIB:.2f} GiB + activation "
                          f"{memory.activation_bytes / GIB:.2f} GiB exceed the device's {device_total / GIB:.2f} GiB; "
                          f"lower it")
    if memory.kv_cache_bytes <= 0:
        # Not KV: what the engine holds besides the cache; with it and one request (plus the null block) within the
        # device's free memory, a higher utilisation is the fix (a 1 GiB model at utilisation 0.0001 on 61 GiB).
        need = requested - memory.kv_cache_bytes + kv.needed_bytes + kv.bytes_per_block
        min_utilization = math.ceil(need / device_total * 100) / 100
        usable = device_total - hw.runtime_reserved_bytes - hw.occupied_bytes
        # What the layout decides (the activation follows max_num_batched_tokens, a knob, so it is left out): when
        # it alone exceeds the device, no utilisation helps and the layout is the fix.
        fixed = memory.weights_bytes + memory.non_torch_bytes + kv.needed_bytes + kv.bytes_per_block
        if fixed > usable:
            raise weights_refusal(spec, memory, fixed, usable, moe, need)
        weights_exceed = need > usable or min_utilization > 1
        graph = " − graph %.2f" % (memory.graph_bytes / GIB) if rules.graph_memory_profiled else ""
        raise ConfigError(
            "engine.gpu_memory_utilization", eng.gpu_memory_utilization,
            f"leaves a negative KV budget on the bottleneck device: requested {requested / GIB:.2f} GiB − weights "
            f"{memory.weights_bytes / GIB:.2f} − activation {memory.activation_bytes / GIB:.2f} − non-torch "
            f"{memory.non_torch_bytes / GIB:.2f}{graph} = {memory.kv_cache_bytes / GIB:.2f} GiB; fixes: "
            f"{fixes(spec, context_len=False, weights_exceed=weights_exceed, min_utilization=min_utilization)}")
    if not kv.fits:
        estimate = (f"vLLM's estimated maximum model length is {kv.estimated_max_model_len}"
                    if kv.estimated_max_model_len else "not even 1 token fits")
        if explicit is not None and explicit < 2 * kv.bytes_per_block:
            # Not one block after the null block: the budget itself is the error; name the smallest that serves.
            minimum = kv.needed_bytes + kv.bytes_per_block  # one request plus vLLM's null block
            raise ConfigError(explicit_key, explicit,
                              f"is below two KV blocks of {kv.bytes_per_block} B (vLLM keeps one back as the null "
                              f"block); one request of max_model_len={max_model_len} needs {minimum} B; set "
                              f"{explicit_key} to {minimum} or more")
        raise ConfigError(
            "engine.max_model_len", max_model_len,
            f"needs {kv.needed_bytes} KV bytes per device for one request ({kv.blocks_per_request} blocks × "
            f"{kv.bytes_per_block} B) but the plan has {max(0, memory.kv_cache_bytes - kv.bytes_per_block)} after the "
            f"null block; {estimate}; fixes: {fixes(spec, context_len=True)}")
    if kv.max_concurrency < max_num_seqs and eng.max_num_seqs is not None:  # vLLM's default: no choice to revisit
        return [f"KV cache holds {kv.max_concurrency:.1f} requests of max_model_len={max_model_len} tokens, fewer "
                f"than max_num_seqs={max_num_seqs}: long requests will queue or be preempted"]
    return []


#: Measured error of the plan's non-KV memory (weights + activation + non-torch) against public start-up logs, per
#: model class, bytes: the largest miss on a log not used to fit it (docs/kv_layouts.md, "Memory terms and their
#: measured error"). dense: vllm-ascend #3479 (v0.11.0rc0, 300I Duo, Qwen3-4B: 0.71 GiB under; 1.21 before the
#: v0.11.0 profile-run rules, EngineRules.profile_logits / p310_swiglu_fp32, and rc0's batched tokens); moe: #5876
#: (v0.13.0, Qwen3-235B-A22B TP16 + EP, gmu assumed 0.9: 0.33 GiB under); hybrid: #5020 (v0.12.0rc1, Qwen3-Next-80B TP4:
#: 0.12 GiB over). ESTIMATE: a band, not a bound.
NON_KV_ERROR_BYTES = {"dense": int(0.71 * GIB), "moe": int(0.33 * GIB), "hybrid": int(0.12 * GIB)}
#: Where each band was measured (the log the plan.json label and the warning name).
NON_KV_ERROR_SOURCE = {"dense": "vllm-ascend #3479", "moe": "vllm-ascend #5876", "hybrid": "vllm-ascend #5020"}


def model_class(kv: KVCachePlan, moe: bool) -> str:
    """``hybrid`` (attention + Mamba / Gated-DeltaNet KV groups), ``moe`` (routed experts) or ``dense``."""
    if any(g.get("kind") == "mamba" for g in kv.groups):
        return "hybrid"
    return "moe" if moe else "dense"


def kv_tensor_copies(rules: EngineRules, kv: KVCachePlan, npu: bool) -> int:
    """How many times the KV budget the NPU runner allocates (``EngineRules.hybrid_kv_tensors``).

    vllm-ascend ``worker/model_runner_v1.py`` ``_allocate_kv_cache_tensors``: each of vLLM's KV cache tensors is shared
    by one layer of every KV group; where the runner does not share it between attention and linear-attention
    (Gated-DeltaNet / Mamba) layers it allocates ``per_linear_layer`` (v0.11.0): one tensor per linear-attention
    group + the attention's K and V = ``mamba groups + 1``; ``attn_and_linear`` (v0.12.0rc1 .. v0.15.0rc1): 2;
    ``shared`` (from v0.16.0rc1) and every model without both kinds: 1.
    """
    kinds = [g.get("kind") for g in kv.groups]
    if not npu or "mamba" not in kinds or len(set(kinds)) < 2 or rules.hybrid_kv_tensors == "shared":
        return 1
    if rules.hybrid_kv_tensors == "attn_and_linear":
        return 2
    return kinds.count("mamba") + 1


def check_kv_allocation(spec: RunSpec, rules: EngineRules, memory: MemoryPlan, kv: KVCachePlan,
                        moe: bool, explicit: bool = False) -> list[str]:
    """The KV tensors the NPU runner allocates after profiling against the device, and the margins near the boundary.

    After ``determine_available_memory`` the worker frees the profile's activations (``empty_cache``) and allocates
    ``kv_tensor_copies × num_blocks × bytes_per_block`` (:func:`kv_tensor_copies`) beside the weights, the non-torch
    memory, the idle runtime reserve and other processes' memory (``hardware.runtime_reserved_bytes``,
    ``hardware.occupied_bytes``). More than the device holds is the start-up out-of-memory of vllm-ascend #5020
    (v0.12.0rc1, Qwen3-Next TP4 at gpu_memory_utilization 0.85; 0.75 starts) and #6572 (Qwen3-Coder-Next TP8).

    NPU rows only (the error bands come from vllm-ascend logs).

    Returns:
        Warnings (one line each) where a margin is within the non-KV estimate's measured error
        (:data:`NON_KV_ERROR_BYTES`): the one-request KV check (not with an explicit KV budget, ``explicit``), and
        the KV allocation where it is doubled; each names
        both numbers, the term and the utilisation that would be safe.

    Raises:
        ConfigError: the KV allocation exceeds the device by more than the measured error (``engine.gpu_memory_utilization``,
            with the largest utilisation that fits).
    """
    hw, eng = spec.hardware, spec.engine
    npu = platform_for(hw.kind).ascend_config
    if not npu or memory.kv_cache_bytes <= 0:  # the bands were measured on vllm-ascend logs only
        return []
    cls = model_class(kv, moe)
    band, source = NON_KV_ERROR_BYTES[cls], NON_KV_ERROR_SOURCE[cls]
    total, requested = memory.device_total_bytes, memory.requested_bytes
    non_kv = requested - memory.kv_cache_bytes
    notes = []
    copies = kv_tensor_copies(rules, kv, npu)
    if copies > 1:
        resident = memory.weights_bytes + memory.non_torch_bytes + hw.runtime_reserved_bytes + hw.occupied_bytes
        allocated = copies * kv.num_blocks * kv.bytes_per_block
        margin = total - resident - allocated
        # largest utilisation whose KV allocation fits: copies × (u × total − non_kv) <= total − resident
        safe = math.floor(((total - resident - copies * band) / copies + non_kv) / total * 100) / 100
        term = (f"{hw.software} allocates the KV cache {copies} × on this hybrid model (attention and linear-attention "
                f"layers get separate tensors, model_runner_v1.py _allocate_kv_cache_tensors)")
        if margin < -band:
            raise ConfigError(
                "engine.gpu_memory_utilization", eng.gpu_memory_utilization,
                f"{term}: weights {memory.weights_bytes / GIB:.2f} GiB + non-torch and runtime "
                f"{(resident - memory.weights_bytes) / GIB:.2f} + KV {copies} × {kv.num_blocks * kv.bytes_per_block / GIB:.2f}"
                f" ({kv.tokens:,} tokens, {kv.max_concurrency:.2f}x)"
                f" = {(resident + allocated) / GIB:.2f} GiB exceed the device's {total / GIB:.2f} GiB: the engine runs "
                f"out of memory at start (initialize_from_config); use engine.gpu_memory_utilization<={safe:.2f}")
        if margin < band:
            notes.append(f"near the boundary: {term}, {(resident + allocated) / GIB:.2f} GiB of the device's "
                         f"{total / GIB:.2f} GiB (margin {margin / GIB:+.2f} GiB, within the non-KV estimate's measured "
                         f"error of {band / GIB:.2f} GiB, {source}); engine.gpu_memory_utilization<={safe:.2f} is safe")
    one_request = memory.kv_cache_bytes - kv.bytes_per_block - kv.needed_bytes  # after vLLM's null block
    if kv.fits and not explicit and one_request < band:  # an explicit budget is exact: nothing to be unsure of
        safe = math.ceil((non_kv + kv.needed_bytes + kv.bytes_per_block + band) / total * 100) / 100
        notes.append(f"near the boundary: one max_model_len={kv.needed_bytes // max(1, kv.bytes_per_token)} request "
                     f"needs {kv.needed_bytes / GIB:.2f} GiB of KV cache per device and the plan leaves "
                     f"{(memory.kv_cache_bytes - kv.bytes_per_block) / GIB:.2f} GiB (margin {one_request / GIB:.2f} "
                     f"GiB, within the activation + non-torch estimate's measured error of {band / GIB:.2f} GiB, "
                     f"{source}): the engine may refuse to start (KV cache too small for max_model_len); "
                     f"engine.gpu_memory_utilization>={safe:.2f} is safe")
    return notes

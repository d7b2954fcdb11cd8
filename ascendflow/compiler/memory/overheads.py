"""Memory pass: activation, non-torch and graph estimates, and the KV budget per device.

vLLM worker semantics (``shared/reference/vllm_ascend.md`` §3, vLLM ``gpu_worker.determine_available_memory``):
``requested = device_total × gpu_memory_utilization`` and
``kv_cache_bytes = requested − (weights + peak activation + non-torch)``; graph memory is captured afterwards and is
not subtracted (vllm-ascend), unless the plan pins ``kv_cache_memory_bytes`` to reserve it.
"""

from __future__ import annotations

from ascendflow.compiler.memory.weights import Layout
from ascendflow.schema.architecture import ModelArchitecture
from ascendflow.schema.hardware import HardwareSpec
from ascendflow.schema.parallel import ParallelSpec

MIB = 1 << 20
GIB = 1 << 30
#: Margin vllm-ascend adds to its suggested ``--kv-cache-memory`` (PR #8289, reference §3).
KV_PIN_MARGIN_BYTES = 150 * MIB
#: Fixed memory per captured graph (task and stream bookkeeping), ESTIMATE calibrated on vllm-ascend #4807 (see
#: :func:`graph_bytes`).
GRAPH_OVERHEAD_BYTES = 128 * 1024


def activation_bytes(a: ModelArchitecture, layout: Layout, *, max_num_batched_tokens: int, max_num_seqs: int,
                     dtype_bytes: int, pooling: bool = False, logits_model_dtype: bool = False,
                     logits_after_forward: bool = False, swiglu_fp32: bool = False) -> int:
    """Peak activation of vLLM's profiling run (dummy forward at ``max_num_batched_tokens``, then the sampler at
    ``max_num_seqs``), first-order model.

    ``pooling``: the pooling runner (``--runner pooling``). vLLM 0.32.0 ``v1/worker/gpu_model_runner.py``
    ``profile_run`` then calls ``_dummy_pooler_run`` (the pooler over the dummy run's hidden states, no
    ``compute_logits``) instead of ``_dummy_sampler_run``, so no logits are planned; vllm-ascend v0.20.2rc1
    ``worker/model_runner_v1.py`` ``NPUModelRunner.profile_run`` calls that ``super().profile_run()``. The same branch
    in the vLLM 0.20.2 that release pairs with is assumed, not read (no vLLM mirror here). Checked on N-04
    (``tests/calibrate/public_logs.py``: Qwen3-Embedding-0.6B at 8,192 tokens, 0.2188 GiB planned against the logged
    ``0.22 GiB for peak activation``; 0.3634 GiB with the logits). W3-01 (the generate runner, same model and batch,
    same release) logs the same 0.22 GiB: vllm-ascend v0.20.2rc1 ``_dummy_sampler_run`` computes model-dtype logits
    only, after the forward's intermediates are freed, so they do not raise the peak there either; the generate
    runner's fp32 logits sum is left as it is where the release runs vLLM's sampler.

    Per token: the residual and hidden states (4 × hidden), the QKV output of this rank, and the widest MLP
    intermediate (dense: 2 × intermediate / TP; MoE: top-k routed copies of 2 × moe_intermediate, split by TP × DP
    without expert parallel (``FusedMoEParallelConfig.make``); an upper bound, as if every copy ran on this rank). Sampler: logits over the full
    vocabulary for ``max_num_seqs`` rows, on the last PP stage, 4 B each (vLLM's dummy sampler run casts them to
    float32). ``logits_model_dtype`` (``EngineRules.profile_logits == "model_dtype"``, vllm-ascend v0.11.0): the
    profile run only computes them, in the model dtype, and at TP > 1 the rank's vocabulary shard of the LM head
    output lives beside the all-gathered logits (vLLM 0.11 ``LogitsProcessor._gather_logits``: all-gather on NPU,
    ``NPUPlatform.use_all_gather``): ``rows × (vocab + vocab / TP) × dtype``. ``swiglu_fp32``
    (``EngineRules.p310_swiglu_fp32`` on a 310P): the dense MLP's SwiGLU input is copied to float32 and its output is
    float32 (vllm-ascend v0.11.0 ``ops/activation.py`` ``AscendSiluAndMul.forward_oot``), + ``12 × intermediate / TP``
    bytes per token (the 310P's MoE experts, ``moe_mlp.py``, do the same and are not counted).
    ``logits_after_forward`` (``EngineRules.profile_logits == "model_dtype_after_forward"``, vllm-ascend v0.18.0 …
    v0.25.1rc1 ``worker/model_runner_v1.py`` ``NPUModelRunner._dummy_sampler_run``: the same model-dtype logits, no
    sampler, computed after ``_dummy_run`` returned): the forward's intermediates are freed by then, so the peak is
    ``max(forward, tokens × hidden × dtype + logits)`` (the forward's output hidden states beside the logits), not
    the sum. Checked: W3-01 (#9606, v0.20.2rc1, Qwen3-0.6B, 8,192 tokens) 0.2188 GiB planned against the logged
    ``0.22 GiB for peak activation`` (0.3636 with fp32 logits summed). Bytes.
    """
    tp = layout.tp
    heads = a.num_attention_heads // tp
    qkv = heads * ((a.qk_nope_head_dim or 0) + (a.qk_rope_head_dim or 0)) if a.is_mla else (
        (heads + 2 * max(1, a.kv_heads // tp)) * a.attention_head_dim)
    dense = 2 * (a.dense_intermediate_size or 0) // tp
    moe = 0
    if a.routed_experts:  # upper bound: every routed copy of the token computed on this rank
        inter = (a.moe_intermediate_size or 0) // (1 if layout.ep > 1 else tp * layout.dp)  # TP × DP without EP
        moe = (a.num_experts_per_tok or 1) * 2 * inter
    per_token = (4 * a.hidden_size + qkv + max(dense, moe)) * dtype_bytes
    if swiglu_fp32 and dense:  # float32 copy of the [2 × I] input (8 I B) + float32 [I] output (4 I B)
        per_token += 6 * dense
    if logits_model_dtype:
        logits = max_num_seqs * (a.vocab_size + (a.vocab_size // tp if tp > 1 else 0)) * dtype_bytes
    else:
        logits = max_num_seqs * a.vocab_size * 4
    logits = logits if layout.last_stage and not pooling else 0
    if logits_model_dtype and logits_after_forward:
        return max(max_num_batched_tokens * per_token, max_num_batched_tokens * a.hidden_size * dtype_bytes + logits)
    return max_num_batched_tokens * per_token + logits


#: Live copies of the MoE dispatcher's expanded rows (``tokens × top_k × hidden`` in the model dtype) at the profile
#: run's peak, ESTIMATE fitted on vllm-ascend #6250 (v0.13.0rc2, Qwen3-Next-80B-A3B TP4, 4,096 batched tokens: 1.23 GB
#: of non-KV memory the other terms miss = 7.32 copies); held out: #5020 (v0.12.0rc1, same model, 2,048 tokens,
#: -1.1 % KV tokens) and #5876 (v0.13.0, Qwen3-235B-A22B TP16 + EP on 2 nodes, +1.4 %). See :func:`moe_dispatch_bytes`.
MOE_DISPATCH_COPIES = 7.3


def moe_dispatch_bytes(a: ModelArchitecture, layout: Layout, *, max_num_batched_tokens: int, dtype_bytes: int,
                       soc: str = "910b") -> int:
    """The MoE layer's dispatch/combine buffers in the profile run on an NPU, bytes (ESTIMATE: the form from source,
    the constant fitted).

    Form: vllm-ascend v0.13.0rc2 ``ops/fused_moe/token_dispatcher.py`` ``TokenDispatcherWithAllGather.token_dispatch``
    calls ``npu_moe_init_routing_custom(..., active_num=num_tokens * top_k)``: the expanded hidden states are
    ``[tokens × top_k, hidden]`` whatever the expert split (EP only narrows ``active_expert_range``), and
    ``token_combine`` / ``moe_mlp.py`` ``unified_apply_mlp`` keep same-shaped outputs until ``npu_moe_finalize_routing``.
    ``worker/model_runner_v1.py`` ``profile_run`` runs ``max_num_tokens`` through the method
    ``ascend_forward_context.py`` ``select_moe_comm_method`` picks for it: all-gather without EP, and on A2 with EP
    above the MC2 capacity (its prepare step gathers every DP rank's tokens, ``prepare_finalize.py``: rows
    ``max_num_batched_tokens × DP × top_k``); all-to-all on A3 (``soc`` ``910c``) with EP, whose prepare step
    (``prepare_finalize.py`` ``PrepareAndFinalizeWithAll2All.prepare``: ``torch.tensor_split(hidden_states, tp_size)``)
    keeps each rank's own share of its tokens: ``ceil(max_num_batched_tokens / TP) × top_k`` (audit of 2026-12-03;
    the exception, ``enable_shared_expert_dp`` / ``replace_allreduce`` skipping the split, is not modelled). How many such buffers are live at the peak (fp32 routing scratch, the grouped
    matmul's workspace) is CANN's: :data:`MOE_DISPATCH_COPIES`, fitted on Qwen3-Next and checked on Qwen3-MoE, so the
    term is planned for MoE models with GQA attention only; MLA MoE models (DeepSeek, GLM-5: their own MLA prolog
    and MoE paths, no public log with pinned inputs here) get 0, as do dense models and stages without MoE layers.
    """
    if not a.routed_experts or a.is_mla or not any(a.is_moe_layer(i) for i in layout.layers):
        return 0
    gathered = layout.ep == 1 or soc != "910c"  # all-gather (A2 / no EP) vs all-to-all (A3 with EP)
    tokens = max_num_batched_tokens * layout.dp if gathered else -(-max_num_batched_tokens // layout.tp)
    rows = tokens * (a.num_experts_per_tok or 1)
    return int(MOE_DISPATCH_COPIES * rows * a.hidden_size * dtype_bytes)


#: Default HCCL buffer of a communication group, MB (vllm-ascend ``hccl_buffer_size`` default; reference §3).
HCCL_GROUP_BUFFER_MB = 200
#: Floor of the DP group's buffer, MB (vllm-ascend: ``max(ceil((dp + 1) × 4 B / MiB), 50)``; reference §3).
HCCL_DP_BUFFER_FLOOR_MB = 50


def hccl_buffers_mb(parallel: ParallelSpec, hccl_buffsize_mb: int, reuse: bool = False) -> dict[str, int]:
    """HCCL buffer per communication group a rank belongs to, MB (``EngineRules.hccl_buffers == "per_group"``).

    Groups larger than one device: vLLM's world group (DP × TP × PP), TP, PP and EP (TP × DP with expert parallel)
    take the default 200 MB (``hccl_buffer_size``: vllm-ascend ``utils.py`` ``get_hccl_config_for_pg_options`` gives
    every group but ``dp``, ``dynamic_eplb`` and ``mc2`` the default); the DP group
    ``max(ceil((dp + 1) × 4 B / MiB), 50)`` MB; the MC2 group (DP × TP, created whenever it spans more than one
    device) gets no buffer option and takes ``HCCL_BUFFSIZE``. ``reuse`` (``EngineRules.hccl_reuse_same_ranks``):
    default-option groups over the same ranks share one communicator (counted once, under the first name).
    """
    tp, pp, dp = parallel.tensor_parallel_size, parallel.pipeline_parallel_size, parallel.data_parallel_size
    sizes = {"tp": tp, "pp": pp, "dp": dp}
    default_groups = {"world": ("dp", "tp", "pp"), "tp": ("tp",), "pp": ("pp",)}
    if parallel.enable_expert_parallel:
        default_groups["ep"] = ("dp", "tp")
    groups: dict[str, int] = {}
    seen: set[frozenset[str]] = set()
    for name, dims in default_groups.items():
        ranks = frozenset(d for d in dims if sizes[d] > 1)  # the dimensions the group really spans
        if not ranks or (reuse and ranks in seen):
            continue
        seen.add(ranks)
        groups[name] = HCCL_GROUP_BUFFER_MB
    if dp > 1:
        groups["dp"] = max(-(-((dp + 1) * 4) // MIB), HCCL_DP_BUFFER_FLOOR_MB)
    if tp * dp > 1:
        groups["mc2"] = hccl_buffsize_mb
    return groups


def runtime_non_torch_bytes(hardware: HardwareSpec, profile_non_torch: str) -> int:
    """The runtime part of the non-torch memory the KV budget subtracts, bytes (ESTIMATE, the hardware catalogue's).

    ``profile_non_torch`` (``EngineRules.profile_non_torch``): ``absolute`` (vllm-ascend v0.11.0 / v0.13.0
    ``determine_available_memory`` subtracts every non-torch byte in use): ``hardware.non_torch_bytes``.
    ``since_set_device`` (v0.18.0 … v0.25.1rc1: vLLM's ``non_torch_increase`` from the snapshot
    ``NPUWorker._init_device`` takes after ``torch.npu.set_device``): ``hardware.non_torch_since_set_device_bytes``,
    where the catalogue gives one (A2 / A3: 0.03 GiB, the increase W3-01 and N-04 log at TP1, v0.20.2rc1), else the
    whole ``non_torch_bytes`` (the 310P: #14274's "Total non KV cache memory: 1.65GiB" at v0.22.1rc1 holds about
    0.49 GiB beyond weights and activation, so its runtime memory appears after ``set_device``).
    """
    since = hardware.non_torch_since_set_device_bytes
    if profile_non_torch == "since_set_device" and since is not None:
        return since
    return hardware.non_torch_bytes


def non_torch_bytes(runtime_bytes: int, parallel: ParallelSpec, hccl_buffsize_mb: int, per_group: bool,
                    reuse: bool = False) -> int:
    """Runtime memory outside torch (:func:`runtime_non_torch_bytes`) plus the HCCL buffers of the rank's
    communication groups (:func:`hccl_buffers_mb`; none on CPU/GPU rows). Bytes."""
    hccl = sum(hccl_buffers_mb(parallel, hccl_buffsize_mb, reuse).values()) if per_group else 0
    return runtime_bytes + hccl * MIB


def p310_cleared_non_torch_bytes(hardware: HardwareSpec) -> int:
    """``non_torch_memory_cleared_by_empty_cache`` of the 310P worker, bytes (ESTIMATE).

    vllm-ascend ``_310p/worker_310p.py`` ``determine_available_memory`` (v0.18.0 … v0.30.0rc2) subtracts
    ``(total − free − torch reserved)`` read inside the profile run less vLLM's ``non_torch_increase``: the device's
    non-torch memory at the start snapshot, i.e. the idle runtime reserve and other processes' memory
    (``hardware.runtime_reserved_bytes + hardware.occupied_bytes``). Engine-side non-torch memory that ``empty_cache``
    frees is not modelled (0).
    """
    return hardware.runtime_reserved_bytes + hardware.occupied_bytes


def graph_bytes(a: ModelArchitecture, layout: Layout, *, mode: str, capture_sizes: list[int], dtype_bytes: int,
                profiled: bool = False) -> int:
    """Graph memory ESTIMATE, bytes: what capture really takes, or what a profiling release subtracts.

    Captured graphs share one memory pool (vLLM ``graph_pool``), so capture takes the buffers of the largest size
    once: ``pieces × 2 × max(size) × hidden × dtype_bytes`` (piecewise modes: one input/output pair per piece, i.e.
    layers + 1; full modes: one pair) plus :data:`GRAPH_OVERHEAD_BYTES` per captured graph (sizes × pieces; full
    modes one graph per size). Calibrated on vllm-ascend #4807 (v0.11.0, Qwen3-30B-A3B TP2 + EP, PIECEWISE, 11 sizes
    up to 512: logged "took 0.26 GiB"; this model 0.257 GiB, −1 %).

    ``profiled``: the releases that subtract graph memory before sizing the KV cache (v0.21.0rc1, v0.22.1rc1:
    ``profile_cudagraph_memory``) estimate it per size without the pool's sharing, i.e. the sum over sizes of
    ``pieces × 2 × size × hidden × dtype_bytes`` plus the per-graph overhead. Checked on vllm-ascend #11990
    (v0.22.1rc1, Qwen3-Coder-30B-A3B TP4 + EP, PIECEWISE, 35 sizes to 256: "--gpu-memory-utilization=0.9200 is
    equivalent to ... 0.8847", i.e. 2.16 GiB of a 61.28 GiB die; this model 1.79 GiB, −17 %).
    """
    if mode == "NONE" or not capture_sizes:
        return 0
    layer_pieces = len(layout.layers) + 1
    pieces = layer_pieces if "PIECEWISE" in mode else 1
    graphs = len(capture_sizes) * {"PIECEWISE": layer_pieces, "FULL_AND_PIECEWISE": layer_pieces + 1}.get(mode, 1)
    sizes = sum(capture_sizes) if profiled else max(capture_sizes)
    return pieces * 2 * sizes * a.hidden_size * dtype_bytes + graphs * GRAPH_OVERHEAD_BYTES

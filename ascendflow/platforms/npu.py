"""``hardware.kind=npu``: vllm-ascend on Ascend NPUs (``shared/reference/vllm_ascend.md``)."""

from __future__ import annotations

from ascendflow.platforms.interface import Platform


class NpuPlatform(Platform):
    """vllm-ascend: ACL graphs, HCCL, ``--additional-config``, msModelSlim checkpoints."""

    kind = "npu"
    device_type = "npu"
    engine = "vllm-ascend"
    checked_distributions = (("vllm", ("vllm",)), ("vllm_ascend", ("vllm-ascend",)), ("torch", ("torch",)),
                             ("torch_npu", ("torch-npu",)))
    device_glob = "/dev/davinci[0-9]*"
    engine_module = "torch_npu"
    #: Ray detects Ascend NPUs as the ``NPU`` resource (``ray/_private/accelerators/npu.py``, ray 2.60.0;
    #: vllm-ascend ``platform.py`` ``ray_device_key``).
    ray_device_key = "NPU"
    #: vllm-ascend v0.23.0 ``docs/source/tutorials/features/ray.md``; ``platform.py`` ``ray_noset_device_env_vars``.
    ray_noset_devices_env = "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES"
    acl_graphs = True
    hccl_env = True
    ascend_config = True
    ascend_quantization = "native"
    kv_cache_dtype_flag = False
    quantize_hint = "quantize (quantization=w8a8_ascend)"
    device_preflight = True
    k8s_manifests = True
    checks_mla_heads_per_rank = True
    step_calibration = True

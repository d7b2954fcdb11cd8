"""vLLM general plugin: serve msModelSlim (Ascend) W8A8 checkpoints on the CPU engine as they ship.

Entry point ``vllm.general_plugins: ascendflow_msmodelslim = ascendflow.vllm_plugin:register`` (pyproject.toml).
vLLM 0.32.0 calls every general plugin in every process it starts (API server, engine core, workers:
``vllm/plugins/__init__.py`` ``load_general_plugins``, "plugins can be loaded for multiple times in different
processes"), so :func:`register` is idempotent and cheap. It registers the quantization method ``ascend`` (the name
vllm-ascend v0.23.0 gives msModelSlim checkpoints, ``vllm_ascend/quantization/modelslim_config.py``
``AscendModelSlimConfig``) through ``register_quantization_config``, only on the CPU platform and only when no
``ascend`` method exists yet: on an NPU host vllm-ascend's own registration is left alone.
"""

from __future__ import annotations

from ascendflow.vllm_plugin.names import METHOD


def register() -> None:
    """Register the ``ascend`` quantization method with vLLM (CPU platform only) unless one is registered already.

    Raises:
        ImportError: vLLM is not installed in this interpreter.
    """
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS
    from vllm.platforms import current_platform

    if METHOD in QUANTIZATION_METHODS or not current_platform.is_cpu():
        return
    from .config import register_config

    register_config()

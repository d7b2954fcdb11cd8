"""Names the plugin registers with vLLM (kept apart so :mod:`ascendflow.vllm_plugin` and :mod:`.config` both read
them without importing each other)."""

#: The vLLM quantization method name (``--quantization ascend``), as vllm-ascend names it.
METHOD = "ascend"

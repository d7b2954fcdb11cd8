"""Checkpoints derived for the precision tests: corrupted scales, a different tokenizer."""

from __future__ import annotations

import json
from pathlib import Path

#: The corruption: every down_proj's per-channel weight_scale multiplied by this (a broken export).
SCALE_FACTOR = 4.0


def corrupt_scales(source: Path, dest: Path) -> Path:
    """Copy the msModelSlim checkpoint ``source`` to ``dest`` with every ``down_proj.weight_scale`` × SCALE_FACTOR
    (other files symlinked); return ``dest``."""
    import torch
    from safetensors.torch import load_file, save_file

    dest.mkdir(parents=True)
    for path in source.iterdir():
        if path.suffix != ".safetensors":
            (dest / path.name).symlink_to(path)
            continue
        tensors = load_file(str(path))
        for name in tensors:
            if name.endswith("down_proj.weight_scale"):
                tensors[name] = (tensors[name].to(torch.float32) * SCALE_FACTOR).contiguous()
        save_file(tensors, str(dest / path.name), metadata={"format": "pt"})
    return dest


def other_tokenizer(source: Path, dest: Path) -> Path:
    """Copy the float checkpoint ``source`` to ``dest`` (weights symlinked) with one added special token (a vocabulary
    of 49153 entries instead of 49152)."""
    dest.mkdir(parents=True)
    for path in source.iterdir():
        if path.name != "tokenizer.json":
            (dest / path.name).symlink_to(path)
    tok = json.loads((source / "tokenizer.json").read_text())
    tok["added_tokens"].append({"id": len(tok["model"]["vocab"]), "content": "<|ascendflow_extra|>",
                                "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
                                "special": True})
    (dest / "tokenizer.json").write_text(json.dumps(tok))
    return dest

"""Reads a local checkpoint's inventory: safetensors headers (8-byte little-endian length, then JSON) and the
msModelSlim ``quant_model_description.json``. Only headers are read, never the weights."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from ascendflow.schema.checkpoint import CheckpointInventory, TensorInfo

QUANT_DESCRIPTION = "quant_model_description.json"


def read_inventory(model_dir: Path) -> CheckpointInventory | None:
    """The inventory of ``model_dir``'s ``*.safetensors`` files, or ``None`` when it has none."""
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        return None
    tensors: dict[str, TensorInfo] = {}
    for path in files:
        with open(path, "rb") as f:
            header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
        for name, info in header.items():
            if name != "__metadata__":
                tensors[name] = TensorInfo(dtype=info["dtype"], shape=tuple(info["shape"]))
    description = model_dir / QUANT_DESCRIPTION
    quant = json.loads(description.read_text()) if description.is_file() else None
    return CheckpointInventory(tensors=tensors, quant_description=quant)

"""Reads a local checkpoint's inventory: safetensors headers (8-byte little-endian length, then JSON) and the
msModelSlim ``quant_model_description.json``. Only headers are read, never the weights."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from ascendflow.models.cache import read_marker
from ascendflow.schema.checkpoint import CheckpointInventory, TensorInfo
from ascendflow.schema.errors import ConfigError

QUANT_DESCRIPTION = "quant_model_description.json"


def float_source(model_dir: Path) -> tuple[Path, str] | None:
    """The float checkpoint ascendflow quantized ``model_dir`` from, when ascendflow built it.

    ascendflow's builders (:func:`ascendflow.models.msmodelslim_w8a8.ensure_smollm2_w8a8`) record the source in the
    folder's completeness marker: ``source`` (the source folder's name in the same model cache), ``source_sha256``
    (the source's own marker value, so a rebuilt source of other weights does not count) and ``source_model_option``
    (its ``conf/model`` option, from 2026-12; older markers name the folder only).

    Returns:
        ``(source folder, name to show)``, or ``None`` for a checkpoint ascendflow did not build, or whose source is
        gone or differs from the one recorded.
    """
    marker = read_marker(Path(model_dir)) or {}
    name = marker.get("source")
    if not isinstance(name, str) or not name or "/" in name:
        return None
    source = Path(model_dir).resolve().parent / name
    recorded = marker.get("source_sha256")
    if not (source / "config.json").is_file() or (recorded and (read_marker(source) or {}).get("source_sha256")
                                                  != recorded):
        return None
    return source, str(marker.get("source_model_option") or name)


def read_inventory(model_dir: Path) -> CheckpointInventory | None:
    """The inventory of ``model_dir``'s ``*.safetensors`` files, or ``None`` when it has none.

    Raises:
        ConfigError: a file whose safetensors header cannot be read (empty, truncated, not safetensors).
    """
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        return None
    tensors: dict[str, TensorInfo] = {}
    for path in files:
        try:
            with open(path, "rb") as f:
                header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
        except (struct.error, ValueError, OverflowError, MemoryError) as exc:
            raise ConfigError("model.path", str(model_dir), f"{path.name} is not a readable safetensors file "
                                                            f"({type(exc).__name__}: {exc}); copy it again") from None
        for name, info in header.items():
            if name != "__metadata__":
                tensors[name] = TensorInfo(dtype=info["dtype"], shape=tuple(info["shape"]))
    description = model_dir / QUANT_DESCRIPTION
    quant = json.loads(description.read_text()) if description.is_file() else None
    return CheckpointInventory(tensors=tensors, quant_description=quant)

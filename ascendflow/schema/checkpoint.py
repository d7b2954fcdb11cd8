"""Inventory of a local checkpoint: every tensor's dtype and shape (from safetensors headers), and the msModelSlim
``quant_model_description.json`` when present. Read before compiling (I/O in :mod:`ascendflow.models.checkpoint`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

#: Bytes per element of safetensors dtypes (safetensors format specification).
SAFETENSORS_DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
                           "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}


class TensorInfo(BaseModel):
    """One stored tensor: safetensors dtype name (``BF16``, ``I8``...) and shape."""

    model_config = ConfigDict(frozen=True)

    dtype: str
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        """Bytes of the tensor."""
        n = 1
        for d in self.shape:
            n *= d
        return n * SAFETENSORS_DTYPE_BYTES[self.dtype]


class CheckpointInventory(BaseModel):
    """Tensors of a local checkpoint by name, and its msModelSlim description (``None`` if not quantized that way)."""

    model_config = ConfigDict(frozen=True)

    tensors: dict[str, TensorInfo]
    quant_description: dict[str, Any] | None = None

    @property
    def total_bytes(self) -> int:
        """Bytes of every tensor."""
        return sum(t.nbytes for t in self.tensors.values())

    @property
    def quant_type(self) -> str | None:
        """``model_quant_type`` of the msModelSlim description (``W8A8``, ``W8A8_DYNAMIC``...), if any."""
        return (self.quant_description or {}).get("model_quant_type")

"""Base class of every schema model: frozen, unknown keys rejected."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Spec(BaseModel):
    """Frozen pydantic model that rejects unknown keys (``extra="forbid"``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

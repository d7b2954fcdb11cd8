"""Flattening of nested configs into MLflow params, and of results into MLflow metrics."""

from __future__ import annotations

import math
from typing import Any, Mapping

#: MLflow rejects param values longer than this (mlflow/utils/validation.py MAX_PARAM_VAL_LENGTH).
MAX_PARAM_CHARS = 6000
#: Lists longer than this go to artifacts (the full config is logged as ``.hydra/``), not params.
MAX_LIST_ITEMS = 16


def flatten_params(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Dotted ``key → str(value)`` for every leaf; long lists are left out (they are in the artifacts)."""
    out: dict[str, str] = {}
    for key, value in config.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            out.update(flatten_params(value, dotted))
        elif isinstance(value, (list, tuple)) and len(value) > MAX_LIST_ITEMS:
            continue
        else:
            text = "null" if value is None else str(value)
            if len(text) <= MAX_PARAM_CHARS:
                out[dotted] = text
    return out


def numeric_metrics(values: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """Finite numbers of ``values`` (bools excluded) as ``{prefix + key: float}``."""
    return {prefix + k: float(v) for k, v in values.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}

"""``--additional-config`` for vllm-ascend, checked against the key set of the target version.

vllm-ascend reads known keys and silently ignores the rest (``vllm_ascend/ascend_config.py``), so a misspelt or
out-of-version key would change nothing on the cluster. Key sets per release: ``data/additional_config_keys.yaml``.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from ascendflow.schema.errors import ConfigError
from ascendflow.schema.spec import RunSpec


@lru_cache(maxsize=1)
def keys_by_version() -> dict[str, frozenset[str]]:
    """Accepted top-level keys per vllm-ascend version (package data, read once)."""
    text = resources.files("ascendflow.compiler.rules").joinpath("data/additional_config_keys.yaml").read_text()
    return {str(v): frozenset(keys) for v, keys in yaml.safe_load(text).items()}


def additional_config(spec: RunSpec, vllm_ascend: str | None) -> dict[str, Any]:
    """The ``additional_config`` dict for the plan.

    Raises:
        ConfigError: a key the target vllm-ascend version does not read, naming the versions that do.
    """
    config = spec.ascend.additional_config.as_dict()
    table = keys_by_version()
    known = table.get(vllm_ascend or "")
    if known is None:
        return config
    for key, value in config.items():
        if key not in known:
            having = sorted(v for v, keys in table.items() if key in keys)
            where = f"it exists in vllm-ascend {having}" if having else "no vllm-ascend release reads it"
            where_set = "other." if key in spec.ascend.additional_config.other else ""
            raise ConfigError(f"ascend.additional_config.{where_set}{key}", value,
                              f"unknown to vllm-ascend {vllm_ascend}, which would silently ignore it; {where}")
    return config

